"""Request and response headers, and the 4-byte size prefix of every frame.

The client's side: the header is the only part of a request this module builds (the body parts
are passed through untouched, so that record batches reach ``socket.sendmsg`` without being
copied), and the only part of a response it reads.
"""

from __future__ import annotations

import struct
from typing import Any

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


def decode_response_header(frame: memoryview, api_key: int, version: int) -> tuple[int, int]:
    """``(correlation_id, body_offset)`` of a response frame (without size prefix)."""
    r = Reader(frame)
    correlation_id = r.int32()
    if response_header_version(api_key, version) == 1:
        r.skip_tagged_fields()
    return correlation_id, r.pos

