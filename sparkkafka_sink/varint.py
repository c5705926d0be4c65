"""Protobuf-style varints: Kafka's compact lengths and tags (unsigned) and record fields (zigzag).

The one scalar varint codec of the package, at the bottom beside ``errors``: the protocol layer
(compact strings, arrays and tagged fields) and the record layer (record batch v2, whose column
encoders in ``varint_columns`` build on it) both use it.  Signed values use zigzag encoding, so
small negatives (``-1`` for a null key) stay one byte.  Decoders raise
:class:`~sparkkafka_sink.errors.ProtocolError` on truncated or overlong input, never
``IndexError``.
"""

from __future__ import annotations

from sparkkafka_sink.errors import ProtocolError

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def zigzag(n: int) -> int:
    """Map a signed int to an unsigned one: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ..."""
    return (n << 1) if n >= 0 else ((-n) << 1) - 1


def unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_unsigned_varint(u: int) -> bytes:
    if u < 0:
        raise ValueError(f"unsigned varint cannot encode {u}")
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zigzag varint of a signed 32-bit int."""
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    return encode_unsigned_varint(zigzag(n))


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of a signed 64-bit int."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    return encode_unsigned_varint(zigzag(n))


def decode_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int = 10) -> tuple[int, int]:
    """Return ``(value, next_pos)``; at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit)."""
    result = 0
    shift = 0
    end = len(buf)
    limit = pos + max_bytes
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        if pos >= limit:
            raise ProtocolError(f"varint longer than {max_bytes} bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Zigzag varint (int32): ``(value, next_pos)``."""
    u, pos = decode_unsigned_varint(buf, pos, 5)
    if u > 0xFFFFFFFF:
        raise ProtocolError("varint exceeds 32 bits")
    return (u >> 1) ^ -(u & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Zigzag varint (int64): ``(value, next_pos)``."""
    u, pos = decode_unsigned_varint(buf, pos, 10)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolError("varlong exceeds 64 bits")
    return (u >> 1) ^ -(u & 1), pos


def size_of_unsigned_varint(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varint(n: int) -> int:
    """Encoded size of a zigzag varint (same rule for varint and varlong)."""
    return size_of_unsigned_varint(zigzag(n))


size_of_varlong = size_of_varint


#: Zigzag varints of every ``-SMALL_LIMIT <= n < SMALL_LIMIT``, indexed by ``n`` itself: a Python
#: list indexes negatives from its end, so entries n and -k both hold their own encodings.  The
#: row path looks up lengths, offset deltas and timestamp deltas here (check the range first).
SMALL_LIMIT = 1 << 13  # zigzag fits two bytes
SMALL_VARINTS: list[bytes] = [encode_unsigned_varint(zigzag(i)) for i in range(SMALL_LIMIT)] + [
    encode_unsigned_varint(zigzag(i)) for i in range(-SMALL_LIMIT, 0)
]


def varint_bytes(n: int) -> bytes:
    """Zigzag varint bytes of any int64; table-backed for small values (hot path, no checks)."""
    if -SMALL_LIMIT <= n < SMALL_LIMIT:
        return SMALL_VARINTS[n]
    return encode_unsigned_varint((n << 1) if n >= 0 else ((-n) << 1) - 1)
