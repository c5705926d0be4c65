"""Splitting a batch a broker refused as too large, without a broker: the records re-encoded in
order, the batch's result completing from its pieces, each record's offset and error its own;
and a batch's result waking whoever waits on it."""

from __future__ import annotations

import threading

import pytest

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.producer.future import FutureRecordMetadata, ProduceRequestResult
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.record.batch import CompressionType, RecordBatchBuilder, decode_batches, split_batch
from sparkkafka_sink.testing.waiting import wait_until


def built(n: int, codec=CompressionType.ZSTD) -> bytes:
    b = RecordBatchBuilder(codec, write_limit=1 << 30)
    for i in range(n):
        b.try_append(1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i, b"v%d" % i,
                     [("h", b"%d" % i)] if i % 2 else [])
    return b.build(7, 1, 100)


@pytest.mark.parametrize("n", [2, 5, 64])
def test_split_batch_keeps_every_record_in_order(n):
    (original,) = decode_batches(built(n))
    pieces = split_batch(built(n))
    assert [count for _, count in pieces] == [-(-n // 2), n // 2]
    records = [r for data, _ in pieces for r in decode_batches(data)[0].records]
    strip = lambda r: (r.timestamp, r.key, r.value, r.headers)  # noqa: E731
    assert [strip(r) for r in records] == [strip(r) for r in original.records]
    assert all(decode_batches(d)[0].compression_type == CompressionType.ZSTD for d, _ in pieces)


def test_split_batch_compresses_again_at_the_level_given():
    text = b"".join(b"%d the quick brown fox jumps over the lazy dog %x\n" % (i, i * i) for i in range(4000))
    b = RecordBatchBuilder(CompressionType.ZSTD, write_limit=1 << 30, compression_level=19)
    for i in range(8):
        b.try_append(1_700_000_000_000 + i, None, text[i::8], [])
    data = b.build(7, 1, 100)
    fast, small = split_batch(data, 2, -5), split_batch(data, 2, 19)
    assert sum(len(d) for d, _ in small) < sum(len(d) for d, _ in fast)  # the level reached the codec
    assert [r.value for d, _ in small for r in decode_batches(d)[0].records] == [text[i::8] for i in range(8)]


def test_split_pieces_keep_the_sequence_range_and_complete_the_batch():
    batch = ProducerBatch.prebuilt("t", 0, built(5), 5, 0.0, 1000)
    batch.close(7, 1, 100)
    futures = [FutureRecordMetadata(batch.result, i, 0, 0, 0) for i in range(5)]
    first, second = batch.split()
    assert (first.record_count, second.record_count) == (3, 2)
    assert (first.base_sequence, second.base_sequence) == (100, 103)
    assert decode_batches(second.built)[0].base_sequence == 103 and first.reserved == 1000
    first.done(40, -1, None)
    assert not batch.result.is_done()
    second.done(90, -1, None)  # another producer wrote between the pieces
    assert batch.result.is_done() and batch.result.error is None
    assert [f.get(0).offset for f in futures] == [40, 41, 42, 90, 91]
    assert batch.result.offset_of(0) == 40 and batch.result.offset_of(4) == 91


def test_a_failed_piece_fails_only_its_records():
    result = ProduceRequestResult("t", 0)
    a, b = ProduceRequestResult("t", 0), ProduceRequestResult("t", 0)
    result.split([(0, 2, a), (2, 3, b)])
    futures = [FutureRecordMetadata(result, i, 0, 0, 0) for i in range(5)]
    a.done(10, -1, None)
    b.done(-1, -1, KafkaError("too large"))
    assert result.error is not None
    assert [f.failed() for f in futures] == [False, False, True, True, True]
    assert futures[1].get(0).offset == 11
    assert [(s, n) for _, s, n in result.failed_pieces(5)] == [(2, 3)]


def test_result_wait_wakes_on_done_and_times_out_before():
    """A batch's result has no Event until someone waits: a waiter already blocked is woken by
    ``done``, one arriving later returns at once, one with a timeout says False before."""
    result = ProduceRequestResult("t", 0)
    assert not result.is_done() and result.wait(0.01) is False
    woken = []
    waiter = threading.Thread(target=lambda: woken.append(result.wait(30)))
    waiter.start()
    wait_until("the waiter to block", lambda: result._event is not None, 10)  # observed, not slept for
    result.done(42, -1, None)
    waiter.join(10)
    assert woken == [True] and result.is_done() and result.base_offset == 42
    assert result.wait(0) is True and ProduceRequestResult("t", 1)._event is None
