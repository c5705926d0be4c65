"""Kafka's own record-batch reader accepts the batches our encoders build.

``ValidateBatches.java`` wraps the bytes with ``MemoryRecords.readableRecords``, runs
``ensureValid()`` (size, CRC-32C), iterates the records (decompressing with Java's codecs) and
describes every batch and record; the expected description is computed from the records the
test encoded, not from our decoder.  Covers ``RecordBatchBuilder`` with every codec, producer
state (built in and re-stamped with ``set_producer_state``), the transactional flag, and the
Arrow encoder (one batch, and many batches split by size and stamped in place).
"""

from __future__ import annotations

import struct

import pyarrow as pa

from sparkkafka_sink.record.arrow import HEADERS_TYPE, encode_batch_from_arrow, encode_batches_from_arrow
from sparkkafka_sink.record.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_COUNT_OFFSET,
    RecordBatchBuilder,
    set_producer_state,
)
from sparkkafka_sink.record.compression import CompressionType
from sparkkafka_sink.record.crc import crc32c

from .support import Rec, first_differences, needs_java_oracle, sample_records

pytestmark = needs_java_oracle

INT_MAX = 2**31 - 1
PID, EPOCH = 0x1234_5678_9ABC, 7


def _sequence(base: int, delta: int) -> int:
    """Java's ``DefaultRecordBatch.incrementSequence`` (wraps at Integer.MAX_VALUE to 0)."""
    if base < 0:
        return -1
    return delta - (INT_MAX - base) - 1 if base > INT_MAX - delta else base + delta


def _describe(batch: bytes, records, codec: CompressionType, pid=-1, epoch=-1, seq=-1, txn=False):
    """The lines ValidateBatches.java must write for ``batch``, which holds ``records``."""
    n = len(records)
    head = ["batch", str(len(batch)), "2", codec.name.lower(), "CreateTime", str(txn).lower(), "false",
            str(pid), str(epoch), str(seq), str(_sequence(seq, n - 1)), "0", str(n - 1), str(n), str(n),
            str(max(r.timestamp for r in records))]
    lines = ["\t".join(head)]
    for i, r in enumerate(records):
        lines.append("\t".join(("record", str(i), str(r.timestamp), str(_sequence(seq, i)), r.content())))
    return lines


def _arrow_columns(records):
    return dict(
        keys=pa.array([r.key for r in records], pa.binary()),
        values=pa.array([r.value for r in records], pa.binary()),
        timestamps_ms=pa.array([r.timestamp for r in records], pa.int64()),
        headers=pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADERS_TYPE),
    )


def _cases(codec: CompressionType, records):
    """(batch bytes, expected lines) for every way we build a batch."""
    def builder():
        b = RecordBatchBuilder(codec, write_limit=1 << 30)
        for r in records:
            assert b.try_append(r.timestamp, r.key, r.value, r.headers)
        return b

    plain = builder().build()
    yield plain, _describe(plain, records, codec)
    idem = builder().build(PID, EPOCH, 1000)
    yield idem, _describe(idem, records, codec, PID, EPOCH, 1000)
    txn = builder().build(PID + 1, 0, 0, is_transactional=True)
    yield txn, _describe(txn, records, codec, PID + 1, 0, 0, txn=True)
    wrapped = builder().build(PID, EPOCH, INT_MAX - 10)  # sequences wrap to 0 inside the batch
    yield wrapped, _describe(wrapped, records, codec, PID, EPOCH, INT_MAX - 10)
    restamped = bytes(set_producer_state(plain, PID + 2, 3, 42))
    yield restamped, _describe(restamped, records, codec, PID + 2, 3, 42)

    cols = _arrow_columns(records)
    one = encode_batch_from_arrow(**cols, compression_type=codec, producer_id=PID, producer_epoch=EPOCH,
                                  base_sequence=5, is_transactional=True)
    yield one, _describe(one, records, codec, PID, EPOCH, 5, txn=True)
    seq = 0
    for start, stop, batch in encode_batches_from_arrow(**cols, compression_type=codec, write_limit=2048):
        batch = bytes(set_producer_state(batch, PID, EPOCH, seq))  # in place for uncompressed ones
        yield batch, _describe(batch, records[start:stop], codec, PID, EPOCH, seq)
        seq += stop - start


def _refresh_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return batch


def test_java_validates_and_reads_our_batches(java, tmp_path):
    records = sample_records(seed=3, n=60)  # with values of 150 and 240 kB
    many = sample_records(seed=4, n=300, large=False)  # offset deltas past one varint byte
    extreme = [Rec(5, b"k" * 200, None, [(f"h{i}", None if i % 2 else b"v") for i in range(100)]),
               Rec(2**62, None, b"\x00" * 70_000), Rec(0, b"", b""), Rec(2**63 - 1, None, None)]
    good_file = tmp_path / "good.bin"
    expected = ["file\tgood.bin"]
    with open(good_file, "wb") as f:
        for n, codec in enumerate(CompressionType):
            # vary the first record too: its key, value and timestamp set the batch's base fields
            for record_set in (records[n:], many, extreme):
                for batch, lines in _cases(codec, record_set):
                    f.write(batch)
                    expected += lines
    assert len(expected) > 5 * 7 * (60 + 300 + 4)

    # Corrupted batches must be rejected, so the checks above can fail.
    plain = RecordBatchBuilder(CompressionType.NONE, 1 << 30)
    for r in records[:10]:
        plain.try_append(r.timestamp, r.key, r.value, r.headers)
    good = plain.build()
    flipped = bytearray(good)
    flipped[-3] ^= 0x01  # a header value byte: the CRC no longer matches
    miscounted = bytearray(good)
    struct.pack_into(">i", miscounted, RECORDS_COUNT_OFFSET, 11)  # one record more than there is
    gz = RecordBatchBuilder(CompressionType.GZIP, 1 << 30)
    gz.try_append(1, b"k", b"v" * 1000, None)
    truncated_gzip = bytearray(gz.build())
    truncated_gzip[-8:] = bytes(8)  # the gzip trailer (CRC-32, size) zeroed, batch CRC made right
    bad_file = tmp_path / "bad.bin"
    bad_file.write_bytes(good + bytes(flipped) + bytes(_refresh_crc(miscounted))
                         + bytes(_refresh_crc(truncated_gzip)) + good)

    out = tmp_path / "validated.tsv"
    java.run("ValidateBatches", out, good_file, bad_file)
    got = out.read_text(encoding="utf-8").splitlines()
    bad_at = got.index("file\tbad.bin")
    assert got[:bad_at] == expected, first_differences(got[:bad_at], expected)

    verdicts = [line.split("\t")[0] if line.startswith("batch") else line
                for line in got[bad_at + 1:] if not line.startswith("record")]
    assert verdicts == ["batch", "invalid\tCorruptRecordException", "invalid\tInvalidRecordException",
                        "invalid\tKafkaException", "batch"], got[bad_at:]
