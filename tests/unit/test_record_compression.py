"""Codecs: round trips, Kafka container details, and interop with kafka-python's codecs."""

import os
import struct

import pytest

from sparkkafka_sink.errors import ConfigError, ProtocolError
from sparkkafka_sink.record.compression import (
    XERIAL_HEADER,
    CompressionType,
    compress,
    decompress,
    from_name,
)

codec = pytest.importorskip("kafka.codec")

ALL = list(CompressionType)
PAYLOADS = {
    "empty": b"",
    "small": b"hello kafka",
    "repetitive": b"abcdefgh" * 50_000,  # > 64 KiB: several lz4 blocks, several xerial blocks
    "random": os.urandom(200_000),  # incompressible: lz4 stores raw blocks
}


@pytest.mark.parametrize("ctype", ALL, ids=lambda c: c.name)
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(ctype, name):
    data = PAYLOADS[name]
    out = compress(ctype, data)
    assert isinstance(out, bytes)
    assert decompress(ctype, out) == data
    assert decompress(ctype, memoryview(bytearray(out))) == data
    assert compress(ctype, bytearray(data)) == out or ctype == CompressionType.GZIP


def test_from_name():
    assert from_name("none") is CompressionType.NONE
    assert from_name("GZIP") is CompressionType.GZIP
    assert from_name("snappy") is CompressionType.SNAPPY
    assert from_name("lz4") is CompressionType.LZ4
    assert from_name("zstd") is CompressionType.ZSTD
    assert from_name(CompressionType.LZ4) is CompressionType.LZ4
    with pytest.raises(ConfigError):
        from_name("brotli")


def _xxh32(data: bytes, seed: int = 0) -> int:
    """Reference XXH32 for inputs shorter than 16 bytes (enough for an LZ4 frame descriptor)."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = (rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4) & m
        i += 4
    for b in data[i:]:
        h = (rotl((h + b * p5) & m, 11) * p1) & m
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


def test_lz4_frame_header_is_kafkas():
    out = compress(CompressionType.LZ4, PAYLOADS["repetitive"])
    assert out[:4] == struct.pack("<I", 0x184D2204)
    flg, bd, hc = out[4], out[5], out[6]
    assert flg == 0b0110_0000  # version 01, independent blocks, no checksums, no content size
    assert bd == 4 << 4  # 64 KiB max block
    assert hc == (_xxh32(bytes([flg, bd])) >> 8) & 0xFF  # correct (post-KIP-57) checksum
    assert out[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    # Every block holds at most 64 KiB; walk them.
    pos, total = 7, 0
    while True:
        (size,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if size == 0:
            break
        n = size & 0x7FFFFFFF
        assert n <= 64 * 1024
        pos += n
        total += 1
    assert pos == len(out) and total >= 7


def test_lz4_stores_incompressible_blocks_raw():
    out = compress(CompressionType.LZ4, os.urandom(1000))
    (size,) = struct.unpack_from("<I", out, 7)
    assert size & 0x80000000 and size & 0x7FFFFFFF == 1000


def test_snappy_xerial_framing():
    data = PAYLOADS["repetitive"]
    out = compress(CompressionType.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 == XERIAL_HEADER
    import cramjam

    pos, blocks, parts = 16, 0, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        parts.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        assert len(parts[-1]) <= 32 * 1024
        pos += 4 + n
        blocks += 1
    assert pos == len(out)
    assert b"".join(parts) == data
    assert blocks == -(-len(data) // (32 * 1024))


def test_snappy_reads_raw_snappy():
    import cramjam

    data = PAYLOADS["small"] * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data


def test_gzip_is_a_gzip_member():
    import gzip

    out = compress(CompressionType.GZIP, b"x" * 1000)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == b"x" * 1000


THEIRS = {
    CompressionType.GZIP: (codec.gzip_encode, codec.gzip_decode),
    CompressionType.SNAPPY: (codec.snappy_encode, codec.snappy_decode),
    CompressionType.LZ4: (codec.lz4_encode, codec.lz4_decode),
    CompressionType.ZSTD: (codec.zstd_encode, codec.zstd_decode),
}


@pytest.mark.parametrize("ctype", list(THEIRS), ids=lambda c: c.name)
@pytest.mark.parametrize("name", ["small", "repetitive", "random"])
def test_interop_with_kafka_python(ctype, name):
    if ctype == CompressionType.SNAPPY and not codec.has_snappy():
        pytest.skip("kafka-python's snappy needs python-snappy")
    encode, decode = THEIRS[ctype]
    data = PAYLOADS[name]
    assert decode(compress(ctype, data)) == data
    assert decompress(ctype, encode(data)) == data


@pytest.mark.parametrize("ctype", ALL[1:], ids=lambda c: c.name)
def test_corrupt_input_raises_protocol_error(ctype):
    good = compress(ctype, PAYLOADS["repetitive"])
    with pytest.raises(ProtocolError):
        decompress(ctype, good[: len(good) // 2])
    with pytest.raises(ProtocolError):
        decompress(ctype, b"\x00garbage" * 3)


def test_unknown_codec():
    with pytest.raises(ProtocolError):
        decompress(7, b"")
    with pytest.raises(ValueError):
        compress(7, b"")
