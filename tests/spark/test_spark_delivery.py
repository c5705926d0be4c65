"""delivery.py: the ``DeliveryTracker`` of a write task, with our producer against Apache Kafka --
it counts what the broker took, offsets per partition, the bad rows the broker refused (under
``errors.tolerance=all``: handed to the dead letters, whose records the task sends after the flush
and the tracker follows too), and a failure of either kind naming the task's row."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import Producer
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.dead_letters import H_ROW, H_STAGE, DeadLetters
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.routing import Part, route
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker]

LAYOUT = ColumnLayout("value")
LIMIT = 2000  # the topic's max.message.bytes: a larger record is refused by the broker
BIG = {7, 19}  # rows over it


def _topic(kafka, **config: str) -> str:
    name = f"delivery-{uuid.uuid4().hex[:8]}"
    create_topics(kafka.bootstrap_servers, {name: 2}, config=config or None)
    return name


def _batch(rows: int = 40) -> pa.RecordBatch:
    return pa.record_batch({"value": pa.array([b"x" * (LIMIT * 2) if i in BIG else b"v%d" % i
                                               for i in range(rows)])})


def _write(kafka, topic: str, tracker: DeliveryTracker, first_row: int = 100) -> None:
    with Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 50}) as producer:
        tracker.record(route(producer, Part.of(_batch(), first_row), LAYOUT, topic, None, tracker.tolerant))
        producer.flush(60)
        assert tracker.wait_all(30)
        sent = tracker.dead_letters.send(producer) if tracker.dead_letters is not None else None
        if sent is not None:  # the bad rows the broker refused, dead-lettered after the flush (as a task does)
            tracker.record([sent])
            producer.flush(60)
            assert tracker.wait_all(30)
            assert tracker.dead_letters.send(producer) is None  # a dead letter is never dead-lettered: one round


def test_counts_offsets_and_the_first_failed_row(apache_kafka):
    topic = _topic(apache_kafka, **{"max.message.bytes": str(LIMIT)})
    tracker = DeliveryTracker()
    _write(apache_kafka, topic, tracker)
    assert (tracker.sent, tracker.delivered, tracker.failed, tracker.pending) == (40, 38, 2, 0)
    assert tracker.first_failure is not None and tracker.first_failure.row == 107  # row 7 of a part from row 100
    assert not tracker.first_failure.dead_letter
    landed = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=38)
    assert sum(count for count, _, _ in tracker.offsets.values()) == 38
    for (t, partition), (count, first, last) in tracker.offsets.items():
        offsets = [r.offset for r in landed if r.partition == partition]
        assert t == topic and (count, first, last) == (len(offsets), min(offsets), max(offsets))


def test_bad_rows_the_broker_refuses_are_dead_lettered_and_followed(apache_kafka):
    topic, dlq = _topic(apache_kafka, **{"max.message.bytes": str(LIMIT)}), _topic(apache_kafka)
    dead_letters = DeadLetters(dlq, True, False, spark_partition=3, attempt=0, max_request_size=1 << 20,
                               layout=LAYOUT)
    tracker = DeliveryTracker(dead_letters)
    _write(apache_kafka, topic, tracker)
    assert (tracker.delivered, tracker.tolerated, tracker.dead_lettered, tracker.failed) == (38, 2, 2, 0)
    assert sum(count for count, _, _ in tracker.offsets.values()) == 38  # the target's offsets only
    letters = consume_all(apache_kafka.bootstrap_servers, dlq, expected_count=2)
    assert sorted(dict(r.headers)[H_ROW] for r in letters) == [b"107", b"119"]
    assert {dict(r.headers)[H_STAGE] for r in letters} == {b"broker"}


def test_a_dead_letter_refused_fails_naming_its_bad_row(apache_kafka):
    topic = _topic(apache_kafka, **{"max.message.bytes": str(LIMIT)})
    dlq = _topic(apache_kafka, **{"max.message.bytes": str(LIMIT)})  # too small for the bad rows too
    dead_letters = DeadLetters(dlq, True, False, spark_partition=3, attempt=0, max_request_size=1 << 20,
                               layout=LAYOUT)
    tracker = DeliveryTracker(dead_letters)
    _write(apache_kafka, topic, tracker)
    assert (tracker.delivered, tracker.tolerated, tracker.dead_lettered, tracker.failed) == (38, 2, 0, 2)
    assert tracker.first_failure is not None and tracker.first_failure.dead_letter
    assert tracker.first_failure.row == 107 and tracker.first_failure.topic == dlq
