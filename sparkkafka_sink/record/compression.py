"""The five record batch codecs, in the exact container formats Kafka's Java client writes.

* gzip: a gzip member (``GZIPOutputStream``), via zlib.
* snappy: xerial framing (``SnappyOutputStream``): a 16-byte header then big-endian
  length-prefixed raw snappy blocks of at most 32 KiB input each.  Reading also accepts raw
  snappy, which some non-Java clients write.
* lz4: an LZ4 frame with independent 64 KiB blocks, no content size, no checksums and a correct
  header checksum (KIP-57; Kafka >= 0.10 for magic >= 1).
* zstd: a zstd frame.

``level`` is Kafka's level of the codec (KIP-390: ``compression.gzip.level``,
``compression.lz4.level``, ``compression.zstd.level``), with Kafka's defaults and ranges
(``LEVELS``); None is the default.

The whole records section of a batch is compressed in one call, so per-call overhead matters
little; the zstd contexts, which are costly to create, are cached per thread.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

import cramjam
import lz4.frame
import zstandard

from sparkkafka_sink.errors import ConfigError, Message, ProtocolError, Setting

__all__ = ["CompressionType", "from_name", "compress", "decompress", "LEVELS", "level_setting"]


class CompressionType(IntEnum):
    """Codec ids, as stored in the low 3 bits of the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def from_name(name: str | CompressionType) -> CompressionType:
    """``compression.type`` config value ("none", "gzip", "snappy", "lz4", "zstd") to the enum."""
    if isinstance(name, CompressionType):
        return name
    try:
        return CompressionType[str(name).strip().upper()]
    except KeyError:
        raise ConfigError(Message("{} must be one of none, gzip, snappy, lz4, zstd; got {!r}",
                                  Setting("compression.type"), name)) from None


# --------------------------------------------------------------------------------------- gzip

GZIP_DEFAULT_LEVEL = 6  # what zlib makes of Deflater.DEFAULT_COMPRESSION (-1), Kafka's default


def _gzip_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    c = zlib.compressobj(GZIP_DEFAULT_LEVEL if level is None or level == -1 else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: bytes | bytearray | memoryview) -> bytes:
    d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
    out = d.decompress(data)
    if not d.eof:
        raise ProtocolError("truncated gzip data")
    return out


# ------------------------------------------------------------------------------------- snappy

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)  # magic, version 1, compatible 1
XERIAL_BLOCK = 32 * 1024
_BE_INT = struct.Struct(">i")


def _snappy_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    mv = memoryview(data).cast("B")
    parts = [XERIAL_HEADER]
    for start in range(0, len(mv), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[start : start + XERIAL_BLOCK]))
        parts.append(_BE_INT.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data).cast("B")
    if bytes(mv[:8]) != XERIAL_HEADER[:8]:
        return bytes(cramjam.snappy.decompress_raw(mv))
    pos, end, out = 16, len(mv), []
    while pos < end:
        if pos + 4 > end:
            raise ProtocolError("truncated xerial snappy block length")
        (n,) = _BE_INT.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise ProtocolError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + n])))
        pos += n
    return b"".join(out)


# ---------------------------------------------------------------------------------------- lz4

#: Kafka's default lz4 level: it selects lz4-java's fastCompressor (liblz4's fast mode, level 0
#: here); any other level its highCompressor(level), liblz4's HC mode
LZ4_DEFAULT_LEVEL = 9


def _lz4_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    return lz4.frame.compress(
        data,
        compression_level=0 if level is None or level == LZ4_DEFAULT_LEVEL else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


def _lz4_decompress(data: bytes | bytearray | memoryview) -> bytes:
    return lz4.frame.decompress(data)


# --------------------------------------------------------------------------------------- zstd

ZSTD_DEFAULT_LEVEL = 3
_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_local, "zstd_c", None)
    if cache is None:
        cache = _local.zstd_c = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = zstandard.ZstdCompressor(level=level)
    return c


def _zstd_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    return _zstd_compressor(ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)


def _zstd_decompress(data: bytes | bytearray | memoryview) -> bytes:
    d = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = zstandard.ZstdDecompressor()
    # decompressobj copes with frames that do not record their content size (Java streams).
    obj = d.decompressobj()
    out = obj.decompress(data)
    if not obj.eof:
        raise ProtocolError("truncated zstd frame")
    return out


# ------------------------------------------------------------------------------------ dispatch

#: Kafka's level settings (KIP-390): codec -> (config key, default, lowest, highest); gzip also
#: takes -1 (zlib's default)
LEVELS: dict[int, tuple[str, int, int, int]] = {
    CompressionType.GZIP: ("compression.gzip.level", -1, 1, 9),
    CompressionType.LZ4: ("compression.lz4.level", LZ4_DEFAULT_LEVEL, 1, 17),
    CompressionType.ZSTD: ("compression.zstd.level", ZSTD_DEFAULT_LEVEL, -131072, 22),
}


def level_setting(ctype: CompressionType | int, config: Mapping[str, Any]) -> int | None:
    """The level ``config`` (a mapping with Kafka's key names) sets for ``ctype``; None for a
    codec without levels (none, snappy)."""
    entry = LEVELS.get(ctype)
    return None if entry is None else config[entry[0]]


#: by ``CompressionType``; typed by ``int``, as a batch's attributes carry it
_COMPRESS: dict[int, Callable[[Any, int | None], bytes]] = {
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}
_DECOMPRESS: dict[int, Callable[[Any], bytes]] = {
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: _zstd_decompress,
}


def compress(ctype: CompressionType | int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` (bytes-like) into ``ctype``'s Kafka container; NONE returns it as bytes."""
    if ctype == CompressionType.NONE:
        return data if isinstance(data, bytes) else bytes(data)
    try:
        fn = _COMPRESS[ctype]
    except KeyError:
        raise ValueError(f"unknown compression type {ctype!r}") from None
    return fn(data, level)


def decompress(ctype: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    """Inverse of :func:`compress`; corrupt or truncated input raises ``ProtocolError``."""
    if ctype == CompressionType.NONE:
        return data if isinstance(data, bytes) else bytes(data)
    fn = _DECOMPRESS.get(ctype)
    if fn is None:
        raise ProtocolError(f"unknown compression type {ctype}")
    try:
        return fn(data)
    except ProtocolError:
        raise
    except Exception as exc:  # zlib.error, RuntimeError from lz4, cramjam/zstd errors ...
        raise ProtocolError(f"corrupt {CompressionType(ctype).name.lower()} data: {exc}") from exc
