"""The write task without Spark, against the real producer and the brokers: its one send path
(``send_batch`` per Arrow batch and topic) delivers every column, reports exact offsets, and
names the failing row."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from readback import read_records

from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.sink_errors import SinkWriteError
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
FULL = ColumnLayout("value", "key", "topic", "partition", "headers", "timestamp")
NOW_MS = (int(time.time()) - 60) * 1000
TASK = TaskInfo(1, 2, 0)


def plan(kafka, topic=None, layout=FULL, **kafka_opts):
    opts = {"kafka.bootstrap.servers": kafka.bootstrap_servers, **{f"kafka.{k}": v for k, v in kafka_opts.items()}}
    if topic:
        opts["topic"] = topic
    return WritePlan(parse_options(opts), layout)


def batch(topics, n, start=0, partition=None):
    ids = range(start, start + n)
    return pa.record_batch({
        "value": pa.array([None if i % 9 == 8 else f"v{i}" for i in ids]),
        "key": pa.array([None if i % 4 == 0 else f"k{i}".encode() for i in ids]),
        "topic": pa.array([topics[i % len(topics)] for i in ids]),
        "partition": pa.array([partition(i) if partition else None for i in ids], pa.int32()),
        "headers": pa.array([[{"key": "i", "value": str(i).encode()}] if i % 3 else None for i in ids], HEADERS),
        "timestamp": pa.array([(NOW_MS + i) * 1000 for i in ids], pa.timestamp("us", tz="UTC")),
    })


def test_every_column_is_delivered_with_exact_offsets(kafka):
    a, b = kafka.create_topic(partitions=3), kafka.create_topic(partitions=2)
    batches = [batch([a, b], 50, 0), batch([a, b], 50, 50, partition=lambda i: i % 2)]
    msg = run_write_task(iter(batches), plan(kafka), None, task=TASK)
    assert msg.records == 100
    records = read_records(kafka, [a, b])
    assert len(records) == 100
    by_tp = {}
    for r in records:
        by_tp.setdefault((r.topic, r.partition), []).append(r.offset)
    assert msg.offsets == {tp: (len(o), min(o), max(o)) for tp, o in by_tp.items()}
    got = {int(r.headers[0][1]) if r.headers else None for r in records}
    assert {i for i in range(100) if i % 3} <= got
    for r in records:
        if r.value is not None:
            i = int(r.value[1:])
            assert r.timestamp_ms == NOW_MS + i
            assert r.key == (None if i % 4 == 0 else f"k{i}".encode())
            assert r.topic == (a if i % 2 == 0 else b)
            if i >= 50:
                assert r.partition == i % 2


def test_partition_out_of_range_names_the_row(kafka):
    t = kafka.create_topic(partitions=2)
    batches = [batch([t], 10), batch([t], 10, 10, partition=lambda i: 5 if i == 13 else 0)]
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter(batches), plan(kafka, **{"max.block.ms": "3000"}), None, task=TASK)
    assert f"row 13 of this task's input, topic '{t}', partition 5" in str(e.value)


def test_record_too_large_names_the_row(kafka):
    t = kafka.create_topic()
    values = ["small"] * 6 + ["x" * 3000] + ["small"]
    b = pa.record_batch({"value": pa.array(values)})
    with pytest.raises(SinkWriteError) as e:
        run_write_task(iter([b]), plan(kafka, topic=t, layout=ColumnLayout("value"),
                                       **{"max.request.size": "2000"}), None, task=TASK)
    assert f"row 6 of this task's input, topic '{t}'" in str(e.value)
    assert "RecordTooLargeError" in str(e.value)
