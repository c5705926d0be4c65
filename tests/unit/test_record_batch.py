"""Record batch v2: hand-derived golden bytes, CRC coverage, builder limits, kafka-python reads."""

import os
import random
import struct

import pytest

from sparkkafka_sink.errors import InvalidRecordError, ProtocolError
from sparkkafka_sink.record.batch import (
    BATCH_OVERHEAD,
    RecordBatchBuilder,
    decode_batches,
    encode_record,
    estimate_batch_size_upper_bound,
    estimate_record_size,
    set_producer_state,
)
from sparkkafka_sink.record.compression import CompressionType

TS = 1_700_000_000_000


def _crc32c_reference(data: bytes) -> int:
    """Bitwise CRC-32C (reflected Castagnoli polynomial), independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc_reference_check_value():
    assert _crc32c_reference(b"123456789") == 0xE3069283


def test_single_record_golden_bytes():
    b = RecordBatchBuilder(CompressionType.NONE, 1 << 20)
    assert b.try_append(TS, b"k", b"v1", [("h", b"x")])
    out = b.build()
    # Record, field by field: attributes 0, timestampDelta 0, offsetDelta 0, keyLength 1 -> zz 2,
    # "k", valueLength 2 -> zz 4, "v1", 1 header -> zz 2, its key length 1 -> 2, "h",
    # value length 1 -> 2, "x".  Body is 13 bytes -> length varint zz(13) = 26 = 0x1a.
    record = bytes.fromhex("1a" "00" "00" "00" "02" "6b" "04" "7631" "02" "02" "68" "02" "78")
    tail = (
        bytes.fromhex("0000")  # attributes: no compression, create time, not transactional
        + bytes.fromhex("00000000")  # lastOffsetDelta
        + struct.pack(">q", TS)  # baseTimestamp
        + struct.pack(">q", TS)  # maxTimestamp
        + bytes.fromhex("ffffffffffffffff")  # producerId -1
        + bytes.fromhex("ffff")  # producerEpoch -1
        + bytes.fromhex("ffffffff")  # baseSequence -1
        + bytes.fromhex("00000001")  # record count
        + record
    )
    expected = (
        bytes(8)  # baseOffset
        + struct.pack(">i", 49 + len(record))  # batchLength: everything after this field
        + bytes.fromhex("ffffffff")  # partitionLeaderEpoch -1
        + b"\x02"  # magic
        + struct.pack(">I", _crc32c_reference(tail))
        + tail
    )
    assert len(expected) == BATCH_OVERHEAD + 14
    assert out == expected
    assert b.estimated_size == len(out)


def test_decode_round_trip_fields():
    b = RecordBatchBuilder(CompressionType.NONE, 1 << 20)
    b.try_append(TS + 5, None, b"a", None)
    b.try_append(TS, b"k", None, [("h1", None), ("h\u00e9", b"")])
    b.try_append(TS + 20_000_000, b"", b"", ())
    out = b.build(producer_id=77, producer_epoch=3, base_sequence=1000, is_transactional=True)
    (batch,) = decode_batches(out)
    assert (batch.base_offset, batch.magic, batch.partition_leader_epoch) == (0, 2, -1)
    assert batch.last_offset_delta == 2 and batch.record_count == 3
    assert batch.base_timestamp == TS + 5 and batch.max_timestamp == TS + 20_000_000
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 1000)
    assert batch.is_transactional and batch.attributes == 0x10
    assert batch.batch_length == len(out) - 12
    r0, r1, r2 = batch.records
    assert (r0.offset_delta, r0.timestamp_delta, r0.key, r0.value, r0.headers) == (0, 0, None, b"a", [])
    assert (r1.offset_delta, r1.timestamp_delta, r1.timestamp) == (1, -5, TS)
    assert (r1.key, r1.value, r1.headers) == (b"k", None, [("h1", None), ("h\u00e9", b"")])
    assert (r2.timestamp, r2.key, r2.value) == (TS + 20_000_000, b"", b"")


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_crc_covers_attributes_to_end(ctype):
    b = RecordBatchBuilder(ctype, 1 << 20)
    for i in range(3):
        b.try_append(TS + i, b"key%d" % i, b"value" * 10, [("h", b"v")])
    out = b.build(producer_id=1, producer_epoch=0, base_sequence=0)
    decode_batches(out)
    for i in range(21, len(out)):
        bad = bytearray(out)
        bad[i] ^= 0x01
        with pytest.raises(ProtocolError):
            decode_batches(bytes(bad))
    for i in list(range(0, 8)) + list(range(12, 16)):  # base offset, leader epoch: not covered
        ok = bytearray(out)
        ok[i] ^= 0x5A
        decode_batches(bytes(ok))


def test_truncation_raises_protocol_error():
    b = RecordBatchBuilder(CompressionType.NONE, 1 << 20)
    b.try_append(TS, b"k", b"v", None)
    out = b.build()
    for n in (1, 12, 60, len(out) - 1):
        with pytest.raises(ProtocolError):
            decode_batches(out[:n])
    assert decode_batches(b"") == []
    assert len(decode_batches(out + out)) == 2


def test_set_producer_state_matches_fresh_build():
    b = RecordBatchBuilder(CompressionType.LZ4, 1 << 20)
    for i in range(10):
        b.try_append(TS + i, b"k", os.urandom(30), None)
    plain = b.build()
    stamped = set_producer_state(plain, 4242, 7, 123456)
    assert stamped == b.build(producer_id=4242, producer_epoch=7, base_sequence=123456)
    (batch,) = decode_batches(stamped)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 123456)
    with pytest.raises(ValueError):
        set_producer_state(b"\x00" * 10, 1, 1, 1)


def test_set_producer_state_stamps_writable_buffers_in_place():
    b = RecordBatchBuilder(CompressionType.NONE, 1 << 20)
    b.try_append(TS, b"k", b"v" * 50, None)
    plain = b.build()
    expected = b.build(producer_id=9, producer_epoch=2, base_sequence=77)
    backing = bytearray(b"xx" + plain + b"yy")
    view = memoryview(backing)[2:-2]
    assert set_producer_state(view, 9, 2, 77) is view
    assert backing == b"xx" + expected + b"yy"  # its neighbours untouched
    ba = bytearray(plain)
    assert set_producer_state(ba, 9, 2, 77) is ba and ba == expected
    copy = set_producer_state(plain, 9, 2, 77)  # read-only input: one copy
    assert copy == expected and plain == b.build()


def test_write_limit_respected_and_first_record_always_accepted():
    limit = 1000
    b = RecordBatchBuilder(CompressionType.NONE, limit)
    assert b.try_append(TS, b"k", b"x" * 5000, None)  # alone above the limit: accepted
    assert not b.try_append(TS, b"k", b"", None)
    assert b.record_count == 1 and len(b.build()) == b.estimated_size > limit

    b = RecordBatchBuilder(CompressionType.NONE, limit)
    n = 0
    while b.try_append(TS + n, b"key", b"v" * 37, [("a", b"b")]):
        n += 1
        assert b.estimated_size <= limit
    size_before = b.estimated_size
    assert not b.try_append(TS, b"key", b"v" * 37, None)  # refusal leaves state untouched
    assert b.record_count == n and b.estimated_size == size_before
    out = b.build()
    assert len(out) == size_before and size_before + 53 > limit  # the next one did not fit
    assert [r.offset_delta for r in decode_batches(out)[0].records] == list(range(n))


def test_invalid_values_raise_and_leave_builder_untouched():
    b = RecordBatchBuilder(CompressionType.NONE, 1 << 20)
    b.try_append(TS, b"k", b"v", None)
    size = b.estimated_size
    for key, value, headers in [
        ("str key", b"v", None),
        (b"k", 12, None),
        (b"k", b"v", [(b"bytes-key", b"v")]),
        (b"k", b"v", [("k", "str value")]),
    ]:
        with pytest.raises(InvalidRecordError):
            b.try_append(TS, key, value, headers)
    with pytest.raises(InvalidRecordError):
        b.try_append(None, b"k", b"v", None)
    assert b.record_count == 1 and b.estimated_size == size
    assert len(decode_batches(b.build())[0].records) == 1


def test_empty_builder_builds_an_empty_batch():
    (batch,) = decode_batches(RecordBatchBuilder(CompressionType.NONE, 100).build())
    assert batch.records == [] and batch.last_offset_delta == -1


def test_rejects_other_magic():
    with pytest.raises(ValueError):
        RecordBatchBuilder(CompressionType.NONE, 100, magic=1)


@pytest.mark.parametrize("klen", [None, 0, 1, 63, 64, 10_000])
@pytest.mark.parametrize("vlen", [None, 0, 100, 8191, 8192, 1 << 20])
def test_estimate_is_an_upper_bound(klen, vlen):
    headers = [("trace-id", b"x" * 16), ("n", None)]
    key = None if klen is None else b"k" * klen
    value = None if vlen is None else b"v" * vlen
    bound = estimate_record_size(klen, vlen, headers)
    for od, tsd in [(0, 0), (2**31 - 1, 2**62), (5000, -(2**40))]:
        assert len(encode_record(od, tsd, key, value, headers)) <= bound
    worst = encode_record(2**31 - 1, -(2**63), key, value, headers)
    assert bound - len(worst) <= 4  # tight but for the length prefix (bounded at 5 bytes)
    assert estimate_batch_size_upper_bound(klen, vlen, headers) == bound + BATCH_OVERHEAD


# ------------------------------------------------------------------ independent decoder


def _random_records(rng, n):
    out = []
    for _i in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 40))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 3000))
        headers = [
            (f"h{j}-\u00fc", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)))
            for j in range(rng.randint(0, 3))
        ]
        out.append((TS + rng.randint(-10_000, 10_000), key, value, headers))
    return out


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_kafka_python_reads_our_batches(ctype):
    default_records = pytest.importorskip("kafka.record.default_records")
    from kafka import codec

    if ctype == CompressionType.SNAPPY and not codec.has_snappy():
        pytest.skip("kafka-python's snappy needs python-snappy")
    rng = random.Random(int(ctype))
    records = _random_records(rng, 200)
    b = RecordBatchBuilder(ctype, 1 << 30)
    for r in records:
        assert b.try_append(*r)
    out = b.build(producer_id=9, producer_epoch=1, base_sequence=5)

    theirs = default_records.DefaultRecordBatch(out)
    assert theirs.validate_crc()
    assert theirs.compression_type == int(ctype)
    assert theirs.records_count == len(records)
    assert theirs.first_timestamp == records[0][0]
    assert theirs.max_timestamp == max(r[0] for r in records)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 1, 5)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]


@pytest.mark.parametrize("ctype", list(CompressionType), ids=lambda c: c.name)
def test_we_read_kafka_pythons_batches(ctype):
    default_records = pytest.importorskip("kafka.record.default_records")
    from kafka import codec

    if ctype == CompressionType.SNAPPY and not codec.has_snappy():
        pytest.skip("kafka-python's snappy needs python-snappy")
    records = _random_records(random.Random(99), 50)
    theirs = default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(ctype), is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    for i, (ts, k, v, h) in enumerate(records):
        theirs.append(i, ts, k, v, h)
    (batch,) = decode_batches(bytes(theirs.build()))
    got = [(r.timestamp, r.key, r.value, r.headers) for r in batch.records]
    assert got == [(ts, k, v, h) for ts, k, v, h in records]


@pytest.mark.parametrize("ctype", [CompressionType.NONE, CompressionType.LZ4])
def test_a_batch_filled_across_calls_is_sent_as_its_buffers(ctype):
    """An open batch of the Arrow path is built as a header over its chunks, not joined: its
    bytes equal the row builder's for the same records, it is re-stamped in place (CRC over the
    chunks where they are), and a Produce request carries its chunks by reference, encoding
    exactly as if it were one ``bytes``."""
    from sparkkafka_sink.protocol.produce import ProduceRequest
    from sparkkafka_sink.record.batch import BatchBuffers, EncodedRecordsBuilder

    rows = [(TS + i, b"k%d" % i, os.urandom(40)) for i in range(9)]
    row_builder = RecordBatchBuilder(ctype, 1 << 20)
    for ts, k, v in rows:
        row_builder.try_append(ts, k, v, None)
    chunked = EncodedRecordsBuilder(ctype, TS)
    for lo, hi in ((0, 4), (4, 5), (5, 9)):  # three calls' chunks
        chunk = b"".join(encode_record(i, ts - TS, k, v, None) for i, (ts, k, v) in enumerate(rows[lo:hi], lo))
        chunked.append(memoryview(chunk), hi - lo, rows[hi - 1][0])
    built = chunked.build(producer_id=5, producer_epoch=1, base_sequence=10)
    assert isinstance(built, BatchBuffers) and len(built) == len(bytes(built))
    assert len(built.chunks) == (3 if ctype == CompressionType.NONE else 1)  # uncompressed: nothing joined
    assert bytes(built) == row_builder.build(producer_id=5, producer_epoch=1, base_sequence=10)
    chunks = list(built.chunks)
    assert set_producer_state(built, 6, 2, 99, True) is built and built.chunks == chunks
    (batch,) = decode_batches(built)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (6, 2, 99, True)
    request = ProduceRequest(None, -1, 30000, [("t", [(0, built)])])
    as_bytes = ProduceRequest(None, -1, 30000, [("t", [(0, bytes(built))])])
    for version in (3, 9):
        parts = request.encode(version)
        assert any(p is c for p in parts for c in built.chunks[:1])  # by reference
        assert b"".join(map(bytes, parts)) == b"".join(map(bytes, as_bytes.encode(version)))
