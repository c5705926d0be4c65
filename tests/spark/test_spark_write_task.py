"""One write task (``run_write_task``, what Spark's Python worker runs) with the real producer
against real brokers: the commit message, where failures are named, when the task stops."""

from __future__ import annotations

import re
import threading
import uuid

import pyarrow as pa
import pytest
from kafka_helpers import consume_all

from sparkkafka_sink.errors import BufferExhaustedError, InvalidPartitionError
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.sink_errors import SinkWriteError
from sparkkafka_sink.spark.sink_metrics import MetricsParam
from sparkkafka_sink.spark.task.batches import coalesced as _coalesced
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

TASK = TaskInfo(stage=3, partition=5, attempt=1)
LAYOUT = ColumnLayout("value", key="key", partition="partition", topic="topic")


class ListAccumulator:
    """What a Spark accumulator of the sink's metrics does with a task's ``add``."""

    def __init__(self):
        self.value = {}

    def add(self, d):
        MetricsParam().addInPlace(self.value, d)


def plan(bootstrap, topic, coalesce=None, layout=LAYOUT, **kafka):
    opts = {"kafka.bootstrap.servers": bootstrap, "producerCacheTimeoutMs": "0", **{f"kafka.{k.replace('_', '.')}": str(v) for k, v in kafka.items()}}
    if topic:
        opts["topic"] = topic
    if coalesce is not None:
        opts["coalesceBytes"] = str(coalesce)
    return WritePlan(parse_options(opts), layout)


def batches(n_batches, size, partition=None, topic=None, big=(), big_size=5000):
    """Arrow batches of rows ``v0, v1, ...`` (rows in ``big`` carry ``big_size`` bytes)."""
    out = []
    for b in range(n_batches):
        rows = range(b * size, (b + 1) * size)
        vals = [f"v{i}" + ("x" * big_size if i in big else "") for i in rows]
        out.append(pa.record_batch({"value": pa.array(vals), "key": pa.array([f"k{i}".encode() for i in rows]),
                                    "partition": pa.array([partition] * size, pa.int32()),
                                    "topic": pa.array([topic] * size, pa.string())}))
    return out


@pytest.fixture
def made(monkeypatch):
    """The producers the tasks make (the task's own ``Producer(config)``), remembered; the plans
    here pool none (``producerCacheTimeoutMs=0``), so each task makes its own."""
    from sparkkafka_sink.spark.task import task_producer

    producers: list[Producer] = []

    def make(config):
        producers.append(Producer(config))
        return producers[-1]

    monkeypatch.setattr(task_producer, "Producer", make)
    return producers


def values(records):
    return [r.value.decode() for r in records]


def test_commit_message_counts_offsets_and_metrics(kafka, made):
    topic = kafka.create_topic(partitions=2)
    acc = ListAccumulator()
    msg = run_write_task(iter(batches(3, 4, partition=1)), plan(kafka.bootstrap_servers, topic), acc, TASK)
    assert isinstance(msg, TaskCommitMessage)
    assert (msg.partition_id, msg.attempt, msg.records) == (5, 1, 12)
    assert msg.offsets == {(topic, 1): (12, 0, 11)}
    producer = made[0]
    assert producer.closed and producer.config["client.id"] == "pyprod-kafka-s3-p5-a1"
    assert acc.value["records_sent"] == 12 and acc.value["records_failed"] == 0
    assert acc.value["write_tasks"] == 1 and acc.value["produce_latency_max_ms"] > 0
    assert values(consume_all(kafka.bootstrap_servers, topic, 12, partitions=[1])) == [f"v{i}" for i in range(12)]


def test_empty_partition_opens_no_producer(kafka, made):
    msg = run_write_task(iter([pa.record_batch({"value": pa.array([], pa.string())})]),
                         plan(kafka.bootstrap_servers, "unused"), None, TASK)
    assert msg.records == 0 and msg.offsets == {} and made == []


def _refusing_topic(apache_kafka):
    """A topic whose broker refuses records over 2,000 bytes (MESSAGE_TOO_LARGE): a row the
    producer sends (its max.request.size allows it) and the broker refuses, for good."""
    return _topic(apache_kafka, config={"max.message.bytes": "2000"})


def _topic(apache_kafka, partitions=1, config=None):
    name = f"write-task-{uuid.uuid4().hex[:10]}"
    create_topics(apache_kafka.bootstrap_servers, {name: partitions}, config=config)
    return name


def test_a_record_the_broker_refuses_fails_the_task_naming_count_first_row_and_place(apache_kafka, made):
    topic = _refusing_topic(apache_kafka)
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches(2, 6, partition=0, big={5, 2, 9})), plan(apache_kafka.bootstrap_servers, topic),
                       None, TASK)
    text = str(e.value)
    assert "Spark partition 5 (attempt 1)" in text
    assert "3 record(s) failed, 9 delivered" in text
    assert re.search(rf"row 2 of this task's input, topic '{topic}', partition 0: \w+: .*MESSAGE_TOO_LARGE", text), text
    assert made[0].closed
    landed = values(consume_all(apache_kafka.bootstrap_servers, topic, 9))
    assert landed == [f"v{i}" for i in range(12) if i not in (2, 5, 9)]


def test_failed_row_position_counts_rows_across_coalesced_batches(apache_kafka):
    topic = _refusing_topic(apache_kafka)
    with pytest.raises(SinkWriteError, match=r"row 9 of this task's input"):
        run_write_task(iter(batches(3, 4, big={9})), plan(apache_kafka.bootstrap_servers, topic), None, TASK)


def test_stops_sending_after_a_failed_batch(apache_kafka, made):
    """The task checks for failures after each batch it hands over: once the broker refused a
    record of the first batch, the second batch is the last one the task takes."""
    topic = _refusing_topic(apache_kafka)
    taken = []

    def batches_after_the_first_failure():
        for i, batch in enumerate(batches(3, 4, big={0})):
            if i == 1:
                # observed: the broker refused row 0 and every callback of the batch ran (a batch
                # leaves the producer's incomplete ones after its callbacks)
                wait_until("the broker refused row 0", lambda: made[0].metrics()["records_failed"] > 0
                           and not made[0]._accumulator.has_incomplete())
            taken.append(i)
            yield batch

    with pytest.raises(SinkWriteError, match=r"row 0 of this task's input"):
        run_write_task(batches_after_the_first_failure(), plan(apache_kafka.bootstrap_servers, topic, coalesce=0),
                       None, TASK)
    assert taken == [0, 1]
    assert values(consume_all(apache_kafka.bootstrap_servers, topic, 7)) == [f"v{i}" for i in range(1, 8)]


def test_coalesced_batches_keep_rows_in_order_up_to_the_byte_limit():
    parts = batches(5, 100)
    parts.insert(2, parts[0].slice(0, 0))  # an empty batch is dropped
    each = parts[0].nbytes
    grouped = list(_coalesced(iter(parts), int(each * 2.5)))
    assert [t.num_rows for t in grouped] == [300, 200]
    # Spark's batches as the pieces of each table, not joined (the producer reads them in place)
    assert [t.column("value").num_chunks for t in grouped] == [3, 2]
    assert grouped[0].column("value").chunk(0).buffers()[2].address == parts[0].column("value").buffers()[2].address
    assert pa.concat_tables(grouped).column("value").to_pylist() == [f"v{i}" for i in range(500)]
    assert [b.num_rows for b in _coalesced(iter(parts), 0)] == [100] * 5
    assert [b.num_rows for b in _coalesced(iter(parts), 1)] == [100] * 5
    assert list(_coalesced(iter([]), 1 << 20)) == []


def test_partition_out_of_range_is_a_row_error_named_by_the_producer(kafka):
    topic = kafka.create_topic(partitions=2)
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches(1, 3, partition=7)), plan(kafka.bootstrap_servers, topic), None, TASK)
    assert f"row 0 of this task's input, topic '{topic}', partition 7: InvalidPartitionError" in str(e.value)
    assert isinstance(e.value.__cause__, InvalidPartitionError)
    assert consume_all(kafka.bootstrap_servers, topic) == []


def test_null_topic_fails_before_the_batch_is_sent(kafka):
    topic = kafka.create_topic()
    b = batches(1, 3, topic=topic) + [pa.record_batch({
        "value": pa.array(["a", "b"]), "key": pa.array([None, None], pa.binary()),
        "partition": pa.array([None, None], pa.int32()), "topic": pa.array([topic, None])})]
    with pytest.raises(SinkWriteError, match=r"row 4 of this task's input, topic None.*topic is null and no "
                                             r"'topic' option is set"):
        run_write_task(iter(b), plan(kafka.bootstrap_servers, None, coalesce=0), None, TASK)
    assert values(consume_all(kafka.bootstrap_servers, topic, 3)) == ["v0", "v1", "v2"]
    second = kafka.create_topic()
    b = [batch.set_column(3, "topic", pa.array([second if t else None for t in batch.column(3).to_pylist()]))
         for batch in b]
    with pytest.raises(SinkWriteError, match=r"row 4 of this task's input, topic None"):  # coalesced: one batch,
        run_write_task(iter(b), plan(kafka.bootstrap_servers, None), None, TASK)  # none sent
    assert consume_all(kafka.bootstrap_servers, second) == []


def test_buffer_memory_running_out_fails_the_task_with_the_producers_error_and_loses_nothing(apache_kafka, made):
    """A task whose producer runs out of buffer.memory part-way through a bulk call, in front of
    a paused broker: the task fails with the producer's own error (what ran out, for how long,
    and whether the brokers are reachable); the rows it queued before are still delivered once
    the broker answers again, and the task's count of them is the topic's."""
    topic = _topic(apache_kafka, partitions=3)
    node = apache_kafka.nodes[0]
    rows = 20_000
    failure = []

    def first_a_row_then_more_than_memory_holds():
        yield pa.record_batch({"value": pa.array(["warm-up"])})
        wait_until("the first row delivered", lambda: made[0].metrics()["records_sent"] == 1)
        node.pause()
        yield pa.record_batch({"value": pa.array([f"{i:06d}" + "v" * 1018 for i in range(rows)])})

    def task():
        try:
            run_write_task(first_a_row_then_more_than_memory_holds(),
                           plan(apache_kafka.bootstrap_servers, topic, coalesce=0, layout=ColumnLayout("value"),
                                buffer_memory=1 << 20, max_block_ms=1000), None, TASK)
        except SinkWriteError as e:
            failure.append(e)

    runner = threading.Thread(target=task, daemon=True)
    try:
        runner.start()
        # observed: memory ran out, the task stopped sending and waits in its final flush
        wait_until("the task to flush after the memory ran out",
                   lambda: made and made[0]._accumulator._flushes_in_progress > 0, timeout=60)
    finally:
        if node.paused:
            node.resume()
    runner.join(120)
    assert failure, "the task did not fail"
    text = str(failure[0])
    assert "BufferExhaustedError" in text and "buffer.memory" in text and "max.block.ms" in text, text
    assert "is kafka.bootstrap.servers=" in text and "reachable?" in text, text
    assert isinstance(failure[0].__cause__, BufferExhaustedError)
    failed, delivered = map(int, re.search(r"(\d+) record\(s\) failed, (\d+) delivered", text).groups())
    assert failed + delivered == rows + 1 and 1 < delivered < rows, text
    assert len(consume_all(apache_kafka.bootstrap_servers, topic, delivered)) == delivered
