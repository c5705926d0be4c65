"""A batch the broker refuses as too large (MESSAGE_TOO_LARGE: the topic's max.message.bytes is
below the producer's batch.size) is split and sent again in halves, as the Java client does:
every record lands once, in order, each future with its own offset; only a single record too
large for the broker fails.  On Apache Kafka, with idempotence (several batches in flight behind
the refused one) and under a transaction; both send paths; and on every broker with a size limit
(Apache Kafka and noida-db: their default 1048588 bytes)."""

from __future__ import annotations

import functools
import uuid

import pyarrow as pa
import pytest
from kafka_helpers import consume_all, producer_for

from sparkkafka_sink import Producer
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker]

LIMIT = 16_384  # the topic's max.message.bytes: a 16 KiB batch at most


@pytest.fixture
def small_topic(apache_kafka):
    name = f"split-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {name: 2}, config={"max.message.bytes": str(LIMIT)})
    return name


_producer = functools.partial(producer_for, defaults={"batch.size": 262_144, "linger.ms": 20,
                                                    "max.block.ms": 30_000})


def _check_in_order_once(apache_kafka, topic, sent: dict, futures=None):
    n = sum(len(v) for v in sent.values())
    got = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=n)
    by_partition: dict[int, list] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r)
    assert {p: [r.value for r in rs] for p, rs in by_partition.items()} == sent
    if futures is not None:  # each record's future answers with its own offset
        where = {r.value: (r.partition, r.offset) for r in got}
        for value, f in futures:
            md = f.get(0)
            assert (md.partition, md.offset) == where[value]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_send_path_batches_split_in_order_with_their_offsets(apache_kafka, small_topic, codec):
    sent, futures = {0: [], 1: []}, []
    with _producer(apache_kafka, **{"compression.type": codec}) as p:
        for i in range(4000):
            value = b"%05d-" % i + bytes(uuid.uuid4().hex * 3, "ascii")  # ~100 bytes, poorly compressible
            sent[i % 2].append(value)
            futures.append((value, p.send(small_topic, value=value, partition=i % 2)))
        p.flush(60)
        metrics = p.metrics()
    assert metrics["records_failed"] == 0 and metrics["batch_splits"] > 0
    _check_in_order_once(apache_kafka, small_topic, sent, futures)


def test_bulk_path_split_keeps_order_and_offset_ranges(apache_kafka, small_topic):
    n = 6000
    values = [b"%05d-" % i + bytes(uuid.uuid4().hex * 2, "ascii") for i in range(n)]
    with _producer(apache_kafka) as p:
        result = p.send_batch(small_topic, pa.array(values, pa.binary()),
                              partitions=pa.array([i % 2 for i in range(n)], pa.int32())).get(60)
        metrics = p.metrics()
    assert metrics["batch_splits"] > 0 and result.record_count == n
    sent = {0: values[0::2], 1: values[1::2]}
    _check_in_order_once(apache_kafka, small_topic, sent)
    for _partition, (count, first, last) in result.partitions.items():
        assert count == n // 2 and (first, last) == (0, n // 2 - 1)  # the offset range spans the pieces


def test_split_inside_a_transaction(apache_kafka, small_topic):
    sent = {0: [], 1: []}
    with _producer(apache_kafka, **{"transactional.id": f"split-{uuid.uuid4().hex}"}) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3000):
            value = b"%05d-" % i + bytes(uuid.uuid4().hex * 3, "ascii")
            sent[i % 2].append(value)
            p.send(small_topic, value=value, partition=i % 2)
        p.commit_transaction()
        assert p.metrics()["batch_splits"] > 0
    got = consume_all(apache_kafka.bootstrap_servers, small_topic, expected_count=3000,
                      isolation_level="read_committed")
    assert {p: [r.value for r in got if r.partition == p] for p in (0, 1)} == sent


def test_a_single_record_too_large_for_the_broker_fails_alone(apache_kafka, small_topic):
    with _producer(apache_kafka) as p:
        small = [p.send(small_topic, value=b"s%d" % i, partition=0) for i in range(50)]
        big = p.send(small_topic, value=b"x" * (LIMIT * 2), partition=0)
        after = [p.send(small_topic, value=b"t%d" % i, partition=0) for i in range(50)]
        p.flush(60)
    error = big.exception(0)
    assert getattr(error, "name", None) == "MESSAGE_TOO_LARGE", repr(error)
    assert all(f.exception(0) is None for f in small + after)
    values = [r.value for r in consume_all(apache_kafka.bootstrap_servers, small_topic, expected_count=100)]
    assert values == [b"s%d" % i for i in range(50)] + [b"t%d" % i for i in range(50)]


def test_invalid_record_fails_only_that_record(apache_kafka):
    """A compacted topic refuses a record without a key (INVALID_RECORD) and with it the whole
    batch: split down to that record, the others of its batch land."""
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 1}, config={"cleanup.policy": "compact"})
    with _producer(apache_kafka) as p:
        futures = [p.send(topic, key=None if i == 37 else b"k%d" % i, value=b"v%d" % i) for i in range(100)]
        p.flush(60)
    assert [i for i, f in enumerate(futures) if f.exception(0) is not None] == [37]
    assert getattr(futures[37].exception(0), "name", None) == "INVALID_RECORD"
    got = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=99)
    assert [r.value for r in got] == [b"v%d" % i for i in range(100) if i != 37]


def test_a_batch_over_the_brokers_default_limit_is_split_on_every_broker_that_has_one(kafka):
    """No topic config: the broker's own limit (1048588 bytes on Apache Kafka and noida-db).  A
    3 MB batch of 300 KB records (batch.size 4 MB, max.request.size 8 MB) is refused, split, and
    lands whole, in order, with idempotence.  tansu has no such limit: there is nothing to split."""
    if kafka.kind == "tansu":
        pytest.skip("tansu accepts batches of any size: nothing to split")
    topic = kafka.create_topic(partitions=1)
    values = [b"%03d" % i + bytes([65 + i % 26]) * 300_000 for i in range(10)]
    with Producer({"bootstrap.servers": kafka.bootstrap_servers, "batch.size": 4 << 20,
                   "max.request.size": 8 << 20, "buffer.memory": 64 << 20, "linger.ms": 50,
                   "max.block.ms": 30_000}) as p:
        futures = [p.send(topic, value=v, partition=0) for v in values]
        p.flush(60)
        offsets = [f.get(0).offset for f in futures]
        splits = p.metrics()["batch_splits"]
    assert splits >= 1, "the broker took the whole batch: the test did not bite"
    assert offsets == sorted(offsets) and len(set(offsets)) == len(values)
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=len(values), timeout=60)
    assert [r.value for r in got] == values
