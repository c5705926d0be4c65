"""One write task against a contract-following fake producer: commit message, failures, metrics."""

import pyarrow as pa
import pytest
from spark_fakes import FakeProducer

from sparkkafka_sink.errors import InvalidPartitionError, KafkaTimeoutError
from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.errors import SinkWriteError
from sparkkafka_sink.spark.sink_metrics import MetricsParam
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.task.batches import coalesced as _coalesced
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task


class ListAccumulator:
    def __init__(self):
        self.value = {}

    def add(self, d):
        MetricsParam().addInPlace(self.value, d)


def plan(topic="t", layout=None, coalesce=None, **kafka):
    opts = {"kafka.bootstrap.servers": "h:1", **{f"kafka.{k}": v for k, v in kafka.items()}}
    if topic:
        opts["topic"] = topic
    if coalesce is not None:
        opts["coalesceBytes"] = str(coalesce)
    return WritePlan(parse_options(opts), layout or ColumnLayout("value", key="key", partition="partition",
                                                                   topic="topic"))


def batches(n_batches, size, partition=None, topic=None):
    out = []
    for b in range(n_batches):
        vals = [f"v{b * size + i}" for i in range(size)]
        cols = {"value": pa.array(vals), "key": pa.array([v.encode() for v in vals])}
        cols["partition"] = pa.array([partition] * size, pa.int32())
        cols["topic"] = pa.array([topic] * size, pa.string())
        out.append(pa.record_batch(cols))
    return out


def factory(**kw):
    made = []

    def make(config):
        p = FakeProducer(config, **kw)
        made.append(p)
        return p

    make.made = made
    return make


TASK = TaskInfo(stage=3, partition=5, attempt=1)


def test_commit_message_counts_offsets_and_metrics():
    f, acc = factory(partitions={"t": 2}), ListAccumulator()
    msg = run_write_task(iter(batches(3, 4, partition=1)), plan(), acc, f, TASK)
    assert isinstance(msg, TaskCommitMessage)
    assert (msg.partition_id, msg.attempt, msg.records) == (5, 1, 12)
    assert msg.offsets == {("t", 1): (12, 0, 11)}
    producer = f.made[0]
    assert producer.flushes == 1 and producer.closed_with is None
    assert producer.config["client.id"] == "pyprod-kafka-s3-p5-a1"
    assert acc.value["records_sent"] == 12 and acc.value["records_failed"] == 0
    assert acc.value["write_tasks"] == 1 and acc.value["produce_latency_max_ms"] == 7.0
    assert [s[1] for s in producer.sent] == [f"v{i}".encode() for i in range(12)]


def test_empty_partition_opens_no_producer():
    f = factory()
    msg = run_write_task(iter([pa.record_batch({"value": pa.array([], pa.string())})]), plan(), None, f, TASK)
    assert msg.records == 0 and msg.offsets == {} and f.made == []


def test_async_failure_raises_with_count_first_row_and_place():
    f = factory(fail_rows={5, 2, 9}, error=RuntimeError("broker said no"))
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches(2, 6, partition=0)), plan(), None, f, TASK)
    text = str(e.value)
    assert "Spark partition 5 (attempt 1)" in text
    assert "3 record(s) failed, 9 delivered" in text
    assert "row 2 of this task's input, topic 't', partition 0: RuntimeError: broker said no" in text
    assert len(f.made[0].sent) == 12  # failures surfaced only at flush: everything was sent
    assert f.made[0].closed_with == 2.0


def test_stops_sending_after_a_failed_batch():
    f = factory(fail_rows={0}, resolve_on_send=True)
    with pytest.raises(SinkWriteError):
        run_write_task(iter(batches(3, 4)), plan(coalesce=0), None, f, TASK)
    assert len(f.made[0].sent) == 4
    # coalesced (the default), the three small batches are one: all of it was handed over
    f = factory(fail_rows={0}, resolve_on_send=True)
    with pytest.raises(SinkWriteError):
        run_write_task(iter(batches(3, 4)), plan(), None, f, TASK)
    assert len(f.made[0].sent) == 12


def test_coalesced_batches_keep_rows_in_order_up_to_the_byte_limit():
    parts = batches(5, 100)
    parts.insert(2, parts[0].slice(0, 0))  # an empty batch is dropped
    each = parts[0].nbytes
    joined = list(_coalesced(iter(parts), int(each * 2.5)))
    assert [b.num_rows for b in joined] == [300, 200]
    assert pa.Table.from_batches(joined).column("value").to_pylist() == [f"v{i}" for i in range(500)]
    assert [b.num_rows for b in _coalesced(iter(parts), 0)] == [100] * 5
    assert [b.num_rows for b in _coalesced(iter(parts), 1)] == [100] * 5
    assert list(_coalesced(iter([]), 1 << 20)) == []


def test_failed_row_position_counts_rows_across_coalesced_batches():
    f = factory(fail_rows={9}, resolve_on_send=True)
    with pytest.raises(SinkWriteError, match=r"row 9 of this task's input"):
        run_write_task(iter(batches(3, 4)), plan(), None, f, TASK)


def test_partition_out_of_range_is_a_row_error():
    f = factory(partitions={"t": 2})
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches(1, 3, partition=7)), plan(), None, f, TASK)
    assert "row 0 of this task's input, topic 't', partition 7: InvalidPartitionError" in str(e.value)
    assert isinstance(e.value.__cause__, InvalidPartitionError)


def test_null_topic_fails_before_the_batch_is_sent():
    f = factory()
    b = list(batches(1, 3, topic="x")) + [pa.record_batch({
        "value": pa.array(["a", "b"]), "key": pa.array([None, None], pa.binary()),
        "partition": pa.array([None, None], pa.int32()), "topic": pa.array(["x", None])})]
    with pytest.raises(SinkWriteError, match=r"row 4 of this task's input, topic None.*topic is null and no 'topic' option is set"):
        run_write_task(iter(b), plan(topic=None, coalesce=0), None, f, TASK)
    assert len(f.made[0].sent) == 3
    f = factory()  # coalesced: one batch, refused before any of its rows is sent
    with pytest.raises(SinkWriteError, match=r"row 4 of this task's input, topic None"):
        run_write_task(iter(b), plan(topic=None), None, f, TASK)
    assert len(f.made[0].sent) == 0


def test_blocked_send_names_the_brokers():
    f = factory(block_after=2)
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches(1, 5)), plan(), None, f, TASK)
    text = str(e.value)
    assert "row 2 of this task's input" in text and "KafkaTimeoutError" in text
    assert "is kafka.bootstrap.servers=h:1 reachable?" in text
    assert len(f.made[0].sent) == 2  # no further row waited max.block.ms again
    assert isinstance(e.value.__cause__, KafkaTimeoutError)
