"""A write seen through OpenTelemetry: every task's span and the driver's commit span, in the
caller's trace, and the producers' metrics, recorded by OpenTelemetry's SDK in the processes
Spark runs them in (``sparkkafka_sink.testing.otel_capture``, set up there by the sink's
``openTelemetrySetup`` hook) and checked against what was read back with confluent-kafka."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka_helpers import consume_all
from pyspark.sql import functions as F

from sparkkafka_sink.testing import otel_capture
from sparkkafka_sink.testing.brokers import create_topics

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is in the [test] extra")

SETUP = "sparkkafka_sink.testing.otel_capture:set_up"
REPO = Path(__file__).resolve().parents[2]
ABSENT = Path(__file__).with_name("otel_absent")  # sitecustomize hiding OpenTelemetry, and the job


def _trace() -> tuple[str, str, str]:
    """A caller's span of its own: (traceparent, trace id, span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _topic(apache_kafka, partitions: int = 3) -> str:
    topic = f"otel-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: partitions}, timeout=30)
    return topic


def _spans(trace_id: str, expected: int, timeout: float = 30) -> list[dict]:
    """The trace's spans once ``expected`` of them are there (the commit span is written by the
    driver's commit process as Spark's action returns)."""
    deadline = time.monotonic() + timeout
    while True:
        found = otel_capture.spans(trace_id)
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _total(name: str, **attributes: str) -> float:
    """A counter's value summed over the processes that recorded it."""
    return sum(p["value"] for p in otel_capture.metric_points(name, **attributes))


def _writer(df, apache_kafka, topic: str, traceparent: str, **more):
    w = (df.write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", topic)
         .option("openTelemetrySetup", SETUP).option("traceParent", traceparent))
    for k, v in more.items():
        w = w.option(k, v)
    return w


def test_a_batch_write_makes_a_span_per_task_and_a_commit_span_in_the_callers_trace(spark, apache_kafka):
    topic = _topic(apache_kafka)
    traceparent, trace_id, caller = _trace()
    rows = 3000
    df = spark.range(rows).select(F.col("id").cast("string").alias("value")).repartition(4)
    _writer(df, apache_kafka, topic, traceparent).save()
    assert len(consume_all(apache_kafka.bootstrap_servers, topic, expected_count=rows)) == rows

    spans = _spans(trace_id, 5)
    tasks = [s for s in spans if s["name"] == f"send {topic}"]
    (commit,) = [s for s in spans if s["name"] == "pyprod-kafka commit"]
    assert len(tasks) == 4 and len(spans) == 5
    for s in [*tasks, commit]:
        assert s["parent_id"] == f"0x{caller}"  # the caller's span: the write continues its trace
        assert s["status"]["status_code"] == "UNSET"
    assert {s["kind"] for s in tasks} == {"SpanKind.PRODUCER"}
    attrs = [s["attributes"] for s in tasks]
    assert sum(a["messaging.batch.message_count"] for a in attrs) == rows  # as read back
    assert all(a["messaging.system"] == "kafka" and a["messaging.destination.name"] == topic
               and a["messaging.operation.type"] == "send" and a["sparkkafka_sink.bytes"] > 0
               and a["sparkkafka_sink.batches"] >= 1 for a in attrs)
    assert sorted(a["spark.partition.id"] for a in attrs) == [0, 1, 2, 3]
    written = {r.partition for r in consume_all(apache_kafka.bootstrap_servers, topic, expected_count=rows)}
    assert {p for a in attrs for p in a["sparkkafka_sink.topic_partitions"]} == {f"{topic}-{p}" for p in written}
    # the commit links every task's span and says what it decided
    assert sorted(link["context"]["span_id"] for link in commit["links"]) == \
        sorted(s["context"]["span_id"] for s in tasks)
    assert commit["attributes"]["sparkkafka_sink.decision"] == "commit"
    assert commit["attributes"]["messaging.batch.message_count"] == rows
    assert commit["attributes"]["sparkkafka_sink.tasks"] == 4

    # the producers' metrics: records acknowledged as read back, bytes and batches as the spans say
    where = {"messaging.destination.name": topic}
    assert _total("messaging.client.sent.messages", **where) == rows
    assert _total("sparkkafka_sink.producer.sent.bytes", **where) == sum(a["sparkkafka_sink.bytes"] for a in attrs)
    batches = otel_capture.metric_points("sparkkafka_sink.producer.batch.size", **where)
    assert sum(p["count"] for p in batches) == sum(a["sparkkafka_sink.batches"] for a in attrs)
    durations = otel_capture.metric_points("messaging.client.operation.duration")
    assert durations and all(p["attributes"]["messaging.operation.name"] == "send" for p in durations)


def test_a_failed_task_and_the_abort_carry_the_error(spark, apache_kafka):
    topic = _topic(apache_kafka, 1)
    traceparent, trace_id, caller = _trace()
    df = spark.createDataFrame([("a", 0), ("b", 5)], "value string, partition int").coalesce(1)
    with pytest.raises(Exception, match="partition 5 of topic"):
        _writer(df, apache_kafka, topic, traceparent).save()
    spans = _spans(trace_id, 2)
    failed = [s for s in spans if s["name"] == f"send {topic}"]
    assert failed and all(s["status"]["status_code"] == "ERROR" for s in failed)
    assert all(s["attributes"]["error.type"] == "SinkWriteError" for s in failed)
    assert any(e["name"] == "exception" for s in failed for e in s["events"])
    (abort,) = [s for s in spans if s["name"] == "pyprod-kafka abort"]
    assert abort["attributes"]["sparkkafka_sink.decision"] == "abort" and abort["parent_id"] == f"0x{caller}"


def test_a_streaming_write_makes_a_commit_span_per_micro_batch(spark, apache_kafka, tmp_path):
    topic = _topic(apache_kafka, 2)
    traceparent, trace_id, _ = _trace()
    query = (spark.readStream.format("rate").option("rowsPerSecond", 40).option("numPartitions", 2).load()
             .select(F.col("value").cast("string").alias("value"))
             .writeStream.format("pyprod-kafka")
             .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", topic)
             .option("openTelemetrySetup", SETUP).option("traceParent", traceparent)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while sum(p["numInputRows"] for p in query.recentProgress) < 60:
            assert time.monotonic() < deadline, query.recentProgress
            time.sleep(0.2)
    finally:
        query.stop()
    batches = {p["batchId"]: p["numInputRows"] for p in query.recentProgress if p["numInputRows"]}
    landed = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=sum(batches.values()))
    spans = otel_capture.spans(trace_id)
    commits = {s["attributes"]["spark.streaming.batch.id"]: s for s in spans if s["name"] == "pyprod-kafka commit"}
    for batch_id, rows in batches.items():
        commit = commits[batch_id]
        assert commit["attributes"]["messaging.batch.message_count"] == rows
        tasks = [s for s in spans if s["name"] == f"send {topic}"
                 and s["context"]["span_id"] in {link["context"]["span_id"] for link in commit["links"]}]
        assert sum(s["attributes"]["messaging.batch.message_count"] for s in tasks) == rows
        assert all(s["attributes"]["spark.streaming.batch.id"] == batch_id for s in tasks)
    # what the committed micro-batches' spans count is in Kafka (at-least-once: a batch cut short by
    # stop() may have landed rows too)
    assert sum(c["attributes"]["messaging.batch.message_count"] for c in commits.values()) <= len(landed)


def test_no_span_when_turned_off(spark, apache_kafka):
    topic = _topic(apache_kafka, 1)
    traceparent, trace_id, _ = _trace()
    df = spark.createDataFrame([("a",)], "value string")
    _writer(df, apache_kafka, topic, traceparent, openTelemetry="false").save()
    assert len(consume_all(apache_kafka.bootstrap_servers, topic, expected_count=1)) == 1
    assert otel_capture.spans(trace_id) == []


def test_trace_headers_task_put_the_tasks_span_on_every_record(spark, apache_kafka):
    topic = _topic(apache_kafka, 2)
    traceparent, trace_id, _ = _trace()
    rows = 400
    df = spark.range(rows).select(
        F.col("id").cast("string").alias("value"),
        F.array(F.struct(F.lit("own").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
        .alias("headers")).repartition(2)
    _writer(df, apache_kafka, topic, traceparent, traceHeaders="task").save()
    records = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=rows)
    spans = _spans(trace_id, 3)
    task_ids = {f"00-{trace_id}-{s['context']['span_id'][2:]}" for s in spans if s["name"] == f"send {topic}"}
    assert len(records) == rows and len(task_ids) == 2
    for r in records:  # the row's own header first, then the task's span, read by an independent client
        assert [k for k, _ in r.headers] == ["own", "traceparent"]
        assert r.headers[0][1] == r.value
        assert r.headers[1][1].decode()[:-3] in task_ids
    assert {r.headers[1][1].decode()[:-3] for r in records} == task_ids  # each task its own


def test_trace_headers_column_keep_each_rows_own_trace(spark, apache_kafka):
    topic = _topic(apache_kafka, 1)
    traceparent, trace_id, _ = _trace()
    own = [f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01" for _ in range(3)]
    df = spark.createDataFrame([("a", own[0]), ("b", None), ("c", own[1]), ("d", own[2])],
                               "value string, traceparent string").coalesce(1)
    _writer(df, apache_kafka, topic, traceparent, traceHeaders="column").save()
    records = {r.value: dict(r.headers)["traceparent"].decode()
               for r in consume_all(apache_kafka.bootstrap_servers, topic, expected_count=4)}
    (task,) = [s for s in _spans(trace_id, 2) if s["name"] == f"send {topic}"]
    assert records.pop(b"b")[:-3] == f"00-{trace_id}-{task['context']['span_id'][2:]}"  # the task's span
    assert records == {b"a": own[0], b"c": own[1], b"d": own[2]}


def test_trace_headers_column_refuses_a_value_that_is_no_traceparent(spark, apache_kafka):
    topic = _topic(apache_kafka, 1)
    traceparent, _, _ = _trace()
    df = spark.createDataFrame([("a", None), ("b", "00-not-a-trace-01")], "value string, traceparent string").coalesce(1)
    with pytest.raises(Exception, match=r"Row 1: its traceparent '00-not-a-trace-01' is not a W3C traceparent"):
        _writer(df, apache_kafka, topic, traceparent, traceHeaders="column").save()
    dead = f"{topic}-dead"
    create_topics(apache_kafka.bootstrap_servers, {dead: 1}, timeout=30)
    _writer(df, apache_kafka, topic, traceparent, traceHeaders="column", **{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead}).save()
    assert [r.value for r in consume_all(apache_kafka.bootstrap_servers, topic, expected_count=1)] == [b"a"]
    assert [r.value for r in consume_all(apache_kafka.bootstrap_servers, dead, expected_count=1)] == [b"b"]


def test_trace_headers_column_needs_the_column(spark, apache_kafka):
    topic = _topic(apache_kafka, 1)
    traceparent, _, _ = _trace()
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="traceHeaders=column takes each row's W3C traceparent from a string column"):
        _writer(df, apache_kafka, topic, traceparent, traceHeaders="column").save()


def test_without_the_extra_a_write_imports_none_of_it(apache_kafka, tmp_path):
    """OpenTelemetry absent from every process of a spark-submit job (``otel_absent/sitecustomize``
    answers "not found" for it, as an install without the ``[otel]`` extra does): the write lands
    as without the options, no process imports any of it -- each only looks whether it is there --
    and ``traceHeaders=task`` is refused naming the extra."""
    topic = _topic(apache_kafka, 3)
    traceparent, _, _ = _trace()
    rows = 3000
    log = tmp_path / "asked.tsv"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ABSENT), str(REPO)]), "OTEL_ABSENT_LOG": str(log),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), str(ABSENT / "write_job.py"),
                          "--bootstrap-servers", apache_kafka.bootstrap_servers, "--topic", topic,
                          "--rows", str(rows), "--trace-parent", traceparent],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-5000:]
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("ABSENT_RESULT ")]
    result = json.loads(line.split(" ", 1)[1])
    records = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=rows)
    assert len(records) == rows and all(r.headers == [] for r in records)  # no header the options did not ask for
    assert "OpenTelemetry is not installed: pip install 'sparkkafka-sink[otel]'" in result["refused"]
    assert result["traceparent"] is None and result["imported"] == []

    asked = [ln.split("\t") for ln in log.read_text(encoding="utf-8").splitlines()]
    looks = [a for a in asked if a[3].endswith(os.path.join("sparkkafka_sink", "otel", "__init__.py") + ":available")]
    assert asked == looks, f"not a look of otel.available(): {[a for a in asked if a not in looks]}"
    assert {a[2] for a in looks} == {"look"}
    # more than one process looked (the driver, the tasks' Python workers, the planner's) and found nothing
    assert len({a[0] for a in looks}) >= 2, asked
