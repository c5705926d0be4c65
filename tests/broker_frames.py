"""The broker's side of the frame headers, for tests that play a broker's bytes (the sans-IO
protocol tests, ``unit/fake_broker.py``): the sink itself only writes requests and reads
responses (``sparkkafka_sink.protocol.header``)."""

from __future__ import annotations

import struct

from sparkkafka_sink.errors import ProtocolError, UnsupportedVersionError
from sparkkafka_sink.protocol.api import is_flexible
from sparkkafka_sink.protocol.header import response_header_version
from sparkkafka_sink.protocol.primitives import Reader

_I32 = struct.Struct(">i")


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int, str | None, int]:
    """``(api_key, version, correlation_id, client_id, body_offset)`` of a request frame
    (without size prefix)."""
    r = Reader(frame)
    api_key, version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.nullable_string()
    try:
        flexible = is_flexible(api_key, version)
    except UnsupportedVersionError:
        raise ProtocolError(f"request for unknown api key {api_key}") from None
    if flexible:
        r.skip_tagged_fields()
    return api_key, version, correlation_id, client_id, r.pos


def encode_response_header(api_key: int, version: int, correlation_id: int, body_parts: list) -> list:
    """A complete response frame ``[size prefix + header, *body_parts]``."""
    head = _I32.pack(correlation_id)
    if response_header_version(api_key, version) == 1:
        head += b"\x00"
    size = len(head) + sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in body_parts)
    return [_I32.pack(size) + head, *body_parts]
