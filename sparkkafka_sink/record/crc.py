"""CRC-32C (Castagnoli), the checksum of record batch v2.

The batch CRC covers the bytes from the attributes field (offset 21) to the end of the batch, so
the base offset, length and partition leader epoch can be rewritten by the broker without
invalidating it.  The ``crc32c`` package uses SSE4.2/ARMv8 instructions where available.
"""

from __future__ import annotations

from crc32c import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of a bytes-like object; pass a previous result as ``value`` to continue it."""
    return _crc32c(data, value)
