"""``send_batch`` fills each partition's open batch across calls, as the Java accumulator fills
one across ``send()`` calls: many calls of a few rows per partition make full batches, not one
batch per call and partition.  Against the fake broker, which records every batch it gets."""

from __future__ import annotations

import pyarrow as pa
import pytest
from fake_broker import INVALID_REQUIRED_ACKS

PARTITIONS = 4


def _call(i: int, rows: int = 40):
    keys = [b"key-%d" % (i * rows + j) for j in range(rows)]
    values = [b"value-%06d-" % (i * rows + j) + b"x" * 30 for j in range(rows)]
    return pa.array(keys, pa.binary()), pa.array(values, pa.binary())


def _batches_of(broker, topic: str, partition: int) -> list:
    return [batch for _, batches, _ in broker.produce_batches(topic, partition) for batch in batches]


def _send_calls(p, topic: str, calls: int = 25) -> list:
    futures = [p.send_batch(topic, values=v, keys=k) for k, v in (_call(i) for i in range(calls))]
    p.flush(10)
    assert all(f.get(0).record_count == 40 for f in futures)
    return [v for i in range(calls) for v in _call(i)[1].to_pylist()]


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_many_small_calls_share_each_partitions_open_batch(broker, cluster, make_producer, compression):
    """No batch fills and linger.ms is long: nothing is drained before flush(), so each
    partition's one open batch holds the rows of all 25 calls, in the calls' order."""
    cluster.add_topic("fill", PARTITIONS, broker.node_id)
    p = make_producer(broker, linger_ms=60_000, batch_size=1 << 20, compression_type=compression)
    p.partitions_for("fill")
    sent = _send_calls(p, "fill")
    stored = [v for part in range(PARTITIONS) for v in broker.log_values("fill", part)]
    assert sorted(stored) == sorted(sent) and len(stored) == len(sent)
    for part in range(PARTITIONS):
        values = broker.log_values("fill", part)
        assert values == [v for v in sent if v in set(values)]  # the calls' order, kept per partition
        (batch,) = _batches_of(broker, "fill", part)
        assert [r.offset_delta for r in batch.records] == list(range(len(batch.records)))


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_many_small_calls_make_full_batches_then_the_rest(broker, cluster, make_producer, compression):
    """One partition, batch.size 8 KiB: full batches, then what was left -- not 25 batches, one
    per call.  (With several partitions a full batch makes its node ready and the drain takes
    the other partitions' open batches along, as Java's does: how those split depends on when
    the Sender wakes, so the count is checked where nothing else shares the node.)"""
    cluster.add_topic("full", 1, broker.node_id)
    p = make_producer(broker, linger_ms=60_000, batch_size=8192, compression_type=compression)
    p.partitions_for("full")
    sent = _send_calls(p, "full")
    assert broker.log_values("full", 0) == sent
    batches = _batches_of(broker, "full", 0)
    record_bytes = [sum(len(r.value) + len(r.key) + 10 for r in b.records) for b in batches]
    assert len(batches) <= sum(record_bytes) // 8000 + 2, [len(b.records) for b in batches]
    assert all(size > 8192 // 2 for size in record_bytes[:-1]), record_bytes  # only the last is partial
    assert [r.offset_delta for b in batches for r in b.records] == [
        i for b in batches for i in range(len(b.records))]


def test_calls_sharing_a_batch_each_get_their_own_rows_and_offsets(broker, cluster, make_producer):
    cluster.add_topic("shared", 1, broker.node_id)
    p = make_producer(broker, linger_ms=60_000, batch_size=1 << 20)
    p.partitions_for("shared")
    first = p.send_batch("shared", values=[b"a%d" % i for i in range(5)], partitions=0)
    second = p.send_batch("shared", values=[b"b%d" % i for i in range(3)], partitions=0)
    p.flush(10)
    (batch,) = _batches_of(broker, "shared", 0)  # one batch held both calls
    assert len(batch.records) == 8
    assert first.get(0).partitions == {0: (5, 0, 4)}
    assert second.get(0).partitions == {0: (3, 5, 7)}


def test_a_refused_shared_batch_fails_each_call_for_its_own_rows(broker, cluster, make_producer):
    cluster.add_topic("refused", 1, broker.node_id)
    broker.produce_errors("refused", 0, INVALID_REQUIRED_ACKS)
    p = make_producer(broker, linger_ms=60_000, batch_size=1 << 20)
    p.partitions_for("refused")
    first = p.send_batch("refused", values=[b"a%d" % i for i in range(5)], partitions=0)
    second = p.send_batch("refused", values=[b"b%d" % i for i in range(3)], partitions=0)
    p.flush(10)
    [(_, part, rows)] = first.errors()
    assert part == 0 and rows.tolist() == [0, 1, 2, 3, 4]
    [(_, _, rows)] = second.errors()
    assert rows.tolist() == [0, 1, 2]  # positions in its own call's columns


def test_send_between_two_bulk_calls_keeps_the_order_of_the_partition(broker, cluster, make_producer):
    cluster.add_topic("mixed", 1, broker.node_id)
    p = make_producer(broker, linger_ms=60_000, batch_size=1 << 20)
    p.partitions_for("mixed")
    p.send_batch("mixed", values=[b"bulk-1", b"bulk-2"], partitions=0)
    p.send("mixed", b"single", partition=0)
    p.send_batch("mixed", values=[b"bulk-3"], partitions=0)
    p.flush(10)
    assert broker.log_values("mixed", 0) == [b"bulk-1", b"bulk-2", b"single", b"bulk-3"]


def test_a_call_larger_than_buffer_memory_goes_through_range_by_range(broker, cluster, make_producer):
    cluster.add_topic("big", 2, broker.node_id)
    p = make_producer(broker, buffer_memory=200_000, batch_size=16_384, linger_ms=5)
    p.partitions_for("big")
    values = [b"%08d" % i + b"v" * 200 for i in range(5000)]  # ~1.1 MB: over five times buffer.memory
    result = p.send_batch("big", values=pa.array(values, pa.binary())).get(20)
    assert result.record_count == 5000
    stored = broker.log_values("big", 0) + broker.log_values("big", 1)
    assert sorted(stored) == values
    assert p.metrics()["buffer_available_bytes"] == 200_000  # every reservation given back


def test_a_request_ends_at_the_first_batch_that_does_not_fit():
    """Java's drain: a request takes the node's partitions' batches in turn until one no longer
    fits max.request.size, and the next request starts at that one.  Smaller batches further on
    are not taken to fill the gap (an open batch would be sealed early: at many partitions the
    requests then carried many small batches)."""
    from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
    from sparkkafka_sink.producer.accumulator import RecordAccumulator
    from sparkkafka_sink.producer.buffer_pool import BufferPool
    from sparkkafka_sink.producer.producer_batch import ProducerBatch

    def OneNode():  # every partition led by node 1
        return Cluster(brokers={1: BrokerNode(1, "127.0.0.1", 9092)},
                       partitions={"t": {p: PartitionInfo("t", p, 1) for p in range(8)}})

    acc = RecordAccumulator(batch_size=1 << 20, compression_type=0, linger_ms=0, retry_backoff_ms=100,
                            retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=BufferPool(1 << 24))
    for partition, size in enumerate([400, 400, 400, 100, 400, 400, 400, 100]):
        acc.queue_batch(ProducerBatch.prebuilt("t", partition, bytes(size), 1, 0, 0))
    requests = []
    while got := acc.drain(OneNode(), [1], 1000, 0)[1]:
        requests.append([batch.partition for batch in got])
    assert requests == [[0, 1], [2, 3, 4], [5, 6, 7]]


def test_an_open_batch_that_has_not_lingered_stays_while_other_batches_go():
    """Its node's request takes the full batches of other partitions but not a partition's open
    batch before linger.ms (librdkafka's rule; Java's drain would seal it early as a filler):
    the next bulk call can still fill it.  Lingered, or on flush, it goes."""
    from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
    from sparkkafka_sink.producer.accumulator import RecordAccumulator
    from sparkkafka_sink.producer.buffer_pool import BufferPool
    from sparkkafka_sink.producer.producer_batch import ProducerBatch
    from sparkkafka_sink.record.batch import EncodedRecordsBuilder

    cluster = Cluster(brokers={1: BrokerNode(1, "127.0.0.1", 9092)},
                      partitions={"t": {p: PartitionInfo("t", p, 1) for p in range(2)}})

    def accumulator_with_an_open_batch():
        acc = RecordAccumulator(batch_size=1 << 20, compression_type=0, linger_ms=5, retry_backoff_ms=100,
                                retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=BufferPool(1 << 24))
        acc.queue_batch(ProducerBatch.prebuilt("t", 0, bytes(400), 1, 0, 0))  # full: sendable at once
        open_batch = ProducerBatch("t", 1, EncodedRecordsBuilder(0, 0), 1 << 20, 0, 0)  # created at 0 ms
        open_batch.append_records(bytes(100), 1, 0, 100)
        acc.queue_batch(open_batch)
        return acc

    acc = accumulator_with_an_open_batch()
    assert acc.ready(cluster, 1).ready_nodes == {1}
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 1)[1]] == [0]  # 1 ms: partition 1 stays
    assert acc.ready(cluster, 1).next_ready_check_delay_ms == 4
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 5)[1]] == [1]  # lingered 5 ms
    acc = accumulator_with_an_open_batch()
    acc.begin_flush()
    assert sorted(b.partition for b in acc.drain(cluster, [1], 1 << 20, 1)[1]) == [0, 1]  # flushing


def test_short_of_memory_the_drain_takes_the_oldest_batches_first():
    """A caller blocked on buffer.memory makes every batch sendable (as Java's accumulator does
    when its pool is exhausted).  The requests then free the memory with the oldest batches,
    which under a steady stream are the fullest, not with a turn of every partition's open
    batch (at 256 partitions and 32 MiB, half-full batches).  With memory to spare the drain
    goes round the partitions as before."""
    import threading

    from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
    from sparkkafka_sink.producer.accumulator import RecordAccumulator
    from sparkkafka_sink.producer.buffer_pool import BufferPool
    from sparkkafka_sink.producer.producer_batch import ProducerBatch
    from sparkkafka_sink.record.batch import EncodedRecordsBuilder
    from sparkkafka_sink.testing.waiting import wait_until

    cluster = Cluster(brokers={1: BrokerNode(1, "127.0.0.1", 9092)},
                      partitions={"t": {p: PartitionInfo("t", p, 1) for p in range(4)}})

    def accumulator(pool, full_batches=0):
        acc = RecordAccumulator(batch_size=1 << 20, compression_type=0, linger_ms=60_000, retry_backoff_ms=100,
                                retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=pool)
        for partition in range(4):  # the partitions' queues in partition order (the drain's turn)
            acc._queue(("t", partition))
        for partition, created_ms in sorted(enumerate([30, 10, 40, 20]), key=lambda p: p[1]):  # made in time order
            for _ in range(full_batches):  # sealed batches before the open one
                acc.queue_batch(ProducerBatch.prebuilt("t", partition, bytes(300), 1, created_ms, 0))
            batch = ProducerBatch("t", partition, EncodedRecordsBuilder(0, 0), 1 << 20, created_ms, 0)  # open, not lingered
            batch.append_records(bytes(300), 1, 0, 300)
            acc.queue_batch(batch)
        return acc

    def requests(acc, request_size=400):  # 400: one batch fits a request
        out = []
        while got := acc.drain(cluster, [1], request_size, 50)[1]:
            out.append([batch.partition for batch in got])
        return out

    assert requests(accumulator(BufferPool(1000))) == []  # nothing lingered, nothing forced
    pool = BufferPool(1000)
    pool.allocate(1000, 0)
    waiter = threading.Thread(target=pool.allocate, args=(500, 10_000))
    waiter.start()
    try:
        wait_until("a caller to wait for memory", lambda: pool.queued == 1, 10)  # observed, not slept for
        acc = accumulator(pool)
        assert acc.ready(cluster, 50).ready_nodes == {1}
        assert requests(acc) == [[1], [3], [0], [2]]  # created at 10, 20, 30, 40 ms
        # a request takes one batch of a partition, though its next is then its oldest
        assert requests(accumulator(pool, full_batches=2), 10_000) == [[1, 3, 0, 2]] * 3
    finally:
        pool.deallocate(1000)
        waiter.join(10)
    acc = accumulator(BufferPool(1000))
    acc.begin_flush()  # forced, memory to spare: round the partitions
    assert requests(acc) == [[0], [1], [2], [3]]


def test_ready_stops_once_every_broker_is_ready_and_still_finds_unknown_leaders():
    """The Sender's ``ready`` walks the queued partitions until every broker is ready (at 256
    partitions on one broker: the first sendable batch) -- but only while every queued
    partition's leader is known: a partition queued later, of a topic without a leader, is still
    reported for a metadata update, and a second broker's partitions still make it ready."""
    from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
    from sparkkafka_sink.producer.accumulator import RecordAccumulator
    from sparkkafka_sink.producer.buffer_pool import BufferPool
    from sparkkafka_sink.producer.producer_batch import ProducerBatch

    brokers = {1: BrokerNode(1, "127.0.0.1", 9092), 2: BrokerNode(2, "127.0.0.1", 9093)}
    cluster = Cluster(brokers=brokers, partitions={"t": {p: PartitionInfo("t", p, 1 + p % 2) for p in range(4)}})
    acc = RecordAccumulator(batch_size=1 << 20, compression_type=0, linger_ms=0, retry_backoff_ms=100,
                            retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=BufferPool(1 << 24))
    for partition in (0, 2, 1):  # node 1's partitions first: the walk must go on to node 2's
        acc.queue_batch(ProducerBatch.prebuilt("t", partition, bytes(100), 1, 0, 0))
    first = acc.ready(cluster, 1)
    assert first.ready_nodes == {1, 2} and not first.unknown_leader_topics
    acc.queue_batch(ProducerBatch.prebuilt("other", 0, bytes(100), 1, 0, 0))  # no leader known for it
    later = acc.ready(cluster, 1)
    assert later.ready_nodes == {1, 2} and later.unknown_leader_topics == {"other"}
    led = Cluster(brokers=brokers, partitions={**cluster.partitions, "other": {0: PartitionInfo("other", 0, 2)}})
    assert acc.ready(led, 1).unknown_leader_topics == set()
