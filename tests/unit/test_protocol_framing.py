"""FrameReader: frames come out whole however the stream is chopped."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import FrameReader

PAYLOADS = [b"first", b"", b"x" * 300, b"\x00\x00\x00\x01", b"last frame"]
STREAM = b"".join(struct.pack(">i", len(p)) + p for p in PAYLOADS)


def feed_all(reader: FrameReader, chunks) -> list[bytes]:
    return [bytes(f) for chunk in chunks for f in reader.feed(chunk)]


def test_whole_stream_in_one_chunk():
    assert feed_all(FrameReader(), [STREAM]) == PAYLOADS


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_every_single_split_point(kind):
    for i in range(len(STREAM) + 1):
        reader = FrameReader()
        assert feed_all(reader, [kind(STREAM[:i]), kind(STREAM[i:])]) == PAYLOADS, i
        assert reader.buffered_bytes == 0


def test_every_pair_of_split_points():
    n = len(STREAM)
    for i in range(0, n + 1, 3):
        for j in range(i, n + 1, 5):
            assert feed_all(FrameReader(), [STREAM[:i], STREAM[i:j], STREAM[j:]]) == PAYLOADS


def test_one_byte_at_a_time():
    reader = FrameReader()
    out = feed_all(reader, [STREAM[i:i + 1] for i in range(len(STREAM))])
    assert out == PAYLOADS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 400), max_size=30))
def test_random_chunking(sizes):
    chunks, pos = [], 0
    for size in sizes:
        chunks.append(STREAM[pos:pos + size])
        pos += size
    chunks.append(STREAM[pos:])
    assert feed_all(FrameReader(), chunks) == PAYLOADS


def test_partial_state_is_reported():
    reader = FrameReader()
    assert reader.feed(STREAM[:2]) == []
    assert reader.buffered_bytes == 2
    assert reader.feed(STREAM[2:7]) == []
    assert reader.buffered_bytes == 3


def test_mutable_input_is_copied_bytes_are_sliced():
    buf = bytearray(struct.pack(">i", 3) + b"abc")
    (frame,) = FrameReader().feed(buf)
    buf[4:7] = b"zzz"
    assert bytes(frame) == b"abc"
    data = struct.pack(">i", 3) + b"abc"
    (frame,) = FrameReader().feed(data)
    assert frame.obj is data  # zero copy for immutable input


def test_large_frame_in_many_chunks_is_assembled_once():
    payload = bytes(range(256)) * 4096  # 1 MiB
    data = struct.pack(">i", len(payload)) + payload
    reader = FrameReader()
    frames = []
    for i in range(0, len(data), 65536):
        frames += reader.feed(data[i:i + 65536])
    assert len(frames) == 1 and frames[0] == payload


@pytest.mark.parametrize("prefix", [b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", struct.pack(">i", 1001)])
def test_bad_sizes_raise(prefix):
    with pytest.raises(ProtocolError):
        FrameReader(max_frame_bytes=1000).feed(prefix)
    reader = FrameReader(max_frame_bytes=1000)
    reader.feed(prefix[:1])
    with pytest.raises(ProtocolError):
        reader.feed(prefix[1:])


def test_max_frame_size_is_inclusive():
    data = struct.pack(">i", 1000) + b"a" * 1000
    assert len(FrameReader(max_frame_bytes=1000).feed(data)) == 1
