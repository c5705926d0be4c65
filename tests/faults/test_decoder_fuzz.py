"""Fuzzing of the decoders tests/unit/test_protocol_fuzz.py does not reach: the record batch
decoder (with CRCs fixed after mutating, so the record parser and the decompressors are hit, not
only the CRC check), the response header decoder, the frame splitter, and the network client's
whole frame path (header + body dispatch, including the KIP-511 ApiVersions fallback).  Only
``ProtocolError`` may come out."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import SUPPORTED_VERSIONS, ApiKey
from sparkkafka_sink.protocol.framing import FrameReader
from sparkkafka_sink.protocol.header import decode_response_header
from sparkkafka_sink.record.batch import ATTRIBUTES_OFFSET, BATCH_OVERHEAD, RecordBatchBuilder, decode_batches
from sparkkafka_sink.record.compression import CompressionType, compress
from sparkkafka_sink.record.crc import crc32c

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ok_or_protocol_error(fn, *args):
    try:
        return fn(*args)
    except ProtocolError:
        return None


def fix_crc(batch: bytes) -> bytes:
    """Recompute the CRC of every batch whose header is intact enough to find its end."""
    out = bytearray(batch)
    pos = 0
    while pos + BATCH_OVERHEAD <= len(out):
        length = struct.unpack_from(">i", out, pos + 8)[0]
        end = pos + 12 + length
        if length < BATCH_OVERHEAD - 12 or end > len(out):
            break
        struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + ATTRIBUTES_OFFSET:end])))
        pos = end
    return bytes(out)


records = st.lists(st.tuples(
    st.integers(0, 2**41), st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=40),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2)), min_size=1, max_size=6)


@st.composite
def batches(draw):
    ctype = draw(st.sampled_from(list(CompressionType)))
    builder = RecordBatchBuilder(ctype, 1 << 20)
    for ts, k, v, h in draw(records):
        builder.try_append(ts, k, v, h)
    return builder.build(draw(st.integers(-1, 2**40)), draw(st.integers(-1, 100)), draw(st.integers(-1, 2**20)))


@st.composite
def mutated(draw, raw: bytes) -> bytes:
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "set", "insert", "delete"]))
        i = draw(st.integers(0, max(len(raw) - 1, 0)))
        if kind == "truncate":
            raw = raw[:i]
        elif kind == "insert":
            raw = raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:]
        elif raw and kind == "delete":
            raw = raw[:i] + raw[i + draw(st.integers(1, 8)):]
        elif raw:
            value = (draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF])) if kind == "set"
                     else raw[i] ^ (1 << draw(st.integers(0, 7))))
            raw = raw[:i] + bytes([value]) + raw[i + 1:]
    return raw


def test_decode_batches_round_trips_every_codec():
    for ctype in CompressionType:
        b = RecordBatchBuilder(ctype, 1 << 20)
        b.try_append(1, b"k", b"v", [("h", b"x")])
        b.try_append(2, None, None, None)
        (got,) = decode_batches(b.build(7, 1, 3))
        assert [(r.key, r.value) for r in got.records] == [(b"k", b"v"), (None, None)]


@FUZZ
@given(data=st.binary(max_size=300))
def test_decode_batches_random_bytes(data):
    ok_or_protocol_error(decode_batches, data)


@FUZZ
@given(data=st.data())
def test_decode_batches_mutated_with_crc_fixed(data):
    raw = data.draw(batches(), label="batch")
    if data.draw(st.booleans(), label="two batches"):
        raw += data.draw(batches(), label="second batch")
    ok_or_protocol_error(decode_batches, fix_crc(data.draw(mutated(raw), label="mutated")))


@FUZZ
@given(data=st.data())
def test_decode_batches_mutated_with_stale_crc_never_yields_different_records(data):
    raw = data.draw(batches(), label="batch")
    (original,) = decode_batches(raw)
    bad = data.draw(mutated(raw), label="mutated")
    got = ok_or_protocol_error(decode_batches, bad)
    if got:  # the CRC protects the records: decoding may only give back the very same ones
        assert got[0].records == original.records


@FUZZ
@given(ctype=st.sampled_from([c for c in CompressionType if c != CompressionType.NONE]),
       payload=st.binary(max_size=200), count=st.integers(-3, 5), compressed=st.booleans())
def test_decode_batches_garbage_inside_a_valid_compressed_batch(ctype, payload, count, compressed):
    """Valid header and CRC, but the compressed section is garbage (or compresses garbage)."""
    body = compress(ctype, payload) if compressed else payload
    attributes = int(ctype)
    tail = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    head = struct.pack(">qiib", 0, BATCH_OVERHEAD - 12 + len(body), -1, 2)
    raw = head + struct.pack(">I", crc32c(tail + body)) + tail + body
    ok_or_protocol_error(decode_batches, raw)


@FUZZ
@given(data=st.data())
def test_decode_response_header_random_bytes(data):
    api_key = data.draw(st.sampled_from(list(SUPPORTED_VERSIONS)), label="api")
    lo, hi = SUPPORTED_VERSIONS[api_key]
    version = data.draw(st.integers(lo, hi), label="version")
    ok_or_protocol_error(decode_response_header, memoryview(data.draw(st.binary(max_size=12))), api_key, version)


@FUZZ
@given(chunks=st.lists(st.binary(max_size=40), max_size=8), limit=st.integers(0, 64))
def test_frame_reader_random_chunks(chunks, limit):
    reader = FrameReader(limit)
    try:
        for c in chunks:
            for frame in reader.feed(c):
                assert len(frame) <= limit
    except ProtocolError:
        pass


@FUZZ
@given(data=st.data())
def test_broker_protocol_only_raises_protocol_error(data):
    """The client's own frame handling (correlation check, header, body dispatch, the KIP-511
    ApiVersions fallback: ``BrokerProtocol.receive``) on random bodies for whichever request
    is awaiting its answer, fed in random chunks."""
    from sparkkafka_sink.protocol import messages
    from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol
    from sparkkafka_sink.protocol.produce import ProduceRequest

    requests = {ApiKey.API_VERSIONS: messages.ApiVersionsRequest(), ApiKey.METADATA: messages.metadata_request(None),
                ApiKey.PRODUCE: ProduceRequest(None, -1, 1000, []),
                ApiKey.INIT_PRODUCER_ID: messages.InitProducerIdRequest()}
    api_key = data.draw(st.sampled_from(list(requests)), label="api")
    lo, hi = SUPPORTED_VERSIONS[api_key]
    version = data.draw(st.integers(lo, hi), label="version")
    body = data.draw(st.binary(max_size=80), label="body")
    proto = BrokerProtocol("fuzz")
    pending, _ = proto.send(requests[api_key], version)
    correlation = data.draw(st.sampled_from([pending.correlation_id, pending.correlation_id - 1, -1]),
                            label="correlation")
    frame = struct.pack(">i", correlation) + body
    stream = struct.pack(">i", len(frame)) + frame
    cut = data.draw(st.integers(0, len(stream)), label="cut")
    for chunk in (stream[:cut], stream[cut:]):
        ok_or_protocol_error(proto.receive, chunk)


@pytest.mark.parametrize("api_key", [ApiKey.PRODUCE, ApiKey.METADATA])
def test_truncated_header_of_a_flexible_response_is_a_protocol_error(api_key):
    hi = SUPPORTED_VERSIONS[api_key][1]
    with pytest.raises(ProtocolError):
        decode_response_header(memoryview(b"\x00\x00\x00\x01"), api_key, hi)  # tags missing
