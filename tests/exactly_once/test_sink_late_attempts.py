"""A write task attempt that starts after the driver ended its write -- a losing speculative copy
or a task of a failed job that Spark is still killing -- must not leave a transaction open
(read_committed readers would wait transaction.timeout.ms, 15 minutes).  The write task and the
driver's commit run here without Spark, against Apache Kafka, in the two orders that matter:
the late attempt starts after the driver closed the write (it sees the marker and writes
nothing), or it initialised its producer just before (the driver's sweep fences it)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from kafka_helpers import consume_all, open_transactions

from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.driver import exactly_once_writes
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.sink_errors import SinkWriteError
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.task_producer import transactional_id
from sparkkafka_sink.spark.task.write_task import run_write_task
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.transactions]


def rows(start: int, n: int):
    return [pa.record_batch({"value": pa.array([str(i) for i in range(start, start + n)])})]


@pytest.fixture
def write(apache_kafka):
    topic = f"late-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 1})
    options = exactly_once_writes.start_exactly_once(parse_options({
        "kafka.bootstrap.servers": apache_kafka.bootstrap_servers, "topic": topic, "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": f"{topic}-txn"}))
    return topic, WritePlan(options, ColumnLayout("value"))


def test_an_attempt_starting_after_the_commit_writes_nothing(apache_kafka, write):
    topic, plan = write
    winner = run_write_task(iter(rows(0, 100)), plan, None, TaskInfo(0, 1, 0, attempt_id=11))
    exactly_once_writes.commit_all([winner], plan.options)
    with pytest.raises(SinkWriteError, match="the driver already ended this write"):
        run_write_task(iter(rows(1000, 100)), plan, None, TaskInfo(0, 1, 1, attempt_id=12))
    assert open_transactions(apache_kafka.bootstrap_servers, plan.options.transactional_id_prefix) == []
    got = consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed", timeout=30)
    assert sorted(int(r.value) for r in got) == list(range(100))
    written = consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_uncommitted", timeout=30)
    assert sorted(int(r.value) for r in written) == list(range(100)), "the late attempt wrote rows (then aborted)"


def test_an_attempt_initialised_before_the_commit_is_fenced(apache_kafka, write, monkeypatch):
    """The late attempt's producer was initialised (and found no marker) just before the driver
    closed the write; it sends afterwards: the sweep fenced it, so it fails and nothing stays open."""
    topic, plan = write
    winner = run_write_task(iter(rows(0, 100)), plan, None, TaskInfo(0, 1, 0, attempt_id=21))
    late_task = TaskInfo(0, 1, 1, attempt_id=22)

    def commit_after_init(config):
        from sparkkafka_sink import Producer

        producer = Producer(config)
        real_init = producer.init_transactions

        def init_then_commit(timeout=None):
            real_init(timeout)
            assert config["transactional.id"] == transactional_id(plan.options, late_task)
            exactly_once_writes.commit_all([winner], plan.options)  # the driver ends the write right now

        producer.init_transactions = init_then_commit
        return producer

    # the marker check comes after init_transactions: it sees the marker too, so force the
    # other order by checking before the driver acts (as a slow attempt would have)
    import sparkkafka_sink.spark.task.task_producer as task_producer

    checked = []
    monkeypatch.setattr(task_producer, "write_closed", lambda *a: checked.append(a))  # looked too early
    monkeypatch.setattr(task_producer, "Producer", commit_after_init)
    with pytest.raises(SinkWriteError) as info:
        run_write_task(iter(rows(1000, 100)), plan, None, late_task)
    assert checked and "was fenced" in str(info.value)
    assert open_transactions(apache_kafka.bootstrap_servers, plan.options.transactional_id_prefix) == []
    got = consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed", timeout=30)
    assert sorted(int(r.value) for r in got) == list(range(100))
    assert isinstance(winner, TaskCommitMessage)
