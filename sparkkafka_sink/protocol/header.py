"""Request and response headers, and the 4-byte size prefix of every frame.

The header is the only part of a request this module builds; the body parts are passed through
untouched so that record batches reach ``socket.sendmsg`` without being copied.
"""

from __future__ import annotations

import struct
from typing import Any

from sparkkafka_sink.errors import ProtocolError, UnsupportedVersionError
from sparkkafka_sink.protocol.api import ApiKey, is_flexible
from sparkkafka_sink.protocol.primitives import Reader

_PREFIX = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id
_I32 = struct.Struct(">i")
_NULL_CLIENT_ID = b"\xff\xff"


def request_header_version(api_key: int, version: int) -> int:
    """Request header v2 for flexible API versions, v1 otherwise."""
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """Response header v1 for flexible API versions, v0 otherwise; ApiVersions is always v0
    (KIP-511: a client must be able to read it before it knows what the broker speaks)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


def _nbytes(part: Any) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   body_parts: list) -> list:
    """The complete frame as buffers: ``[size prefix + header, *body_parts]``.

    The client id always uses the int16-length string, even in header v2 (see RequestHeader.json).
    """
    if client_id is None:
        client = _NULL_CLIENT_ID
    else:
        raw = client_id.encode("utf-8")
        client = len(raw).to_bytes(2, "big") + raw
    tags = b"\x00" if is_flexible(api_key, version) else b""
    header_len = 8 + len(client) + len(tags)
    size = header_len + sum(map(_nbytes, body_parts))
    head = _PREFIX.pack(size, api_key, version, correlation_id) + client + tags
    return [head, *body_parts]


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int, str | None, int]:
    """``(api_key, version, correlation_id, client_id, body_offset)`` of a request frame
    (without size prefix).  For fake brokers in tests."""
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


def decode_response_header(frame: memoryview, api_key: int, version: int) -> tuple[int, int]:
    """``(correlation_id, body_offset)`` of a response frame (without size prefix)."""
    r = Reader(frame)
    correlation_id = r.int32()
    if response_header_version(api_key, version) == 1:
        r.skip_tagged_fields()
    return correlation_id, r.pos


def encode_response_header(api_key: int, version: int, correlation_id: int,
                           body_parts: list) -> list:
    """A complete response frame ``[size prefix + header, *body_parts]`` (fake brokers)."""
    head = _I32.pack(correlation_id)
    if response_header_version(api_key, version) == 1:
        head += b"\x00"
    size = len(head) + sum(map(_nbytes, body_parts))
    return [_I32.pack(size) + head, *body_parts]
