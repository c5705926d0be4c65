"""Structured Streaming into pyprod-kafka: inside foreachBatch and as the direct writeStream sink.

The rate source numbers its rows 0, 1, 2, ... so the rows of the micro-batches that completed are
exactly 0..N-1, N being the sum of their numInputRows: all of them must be in Kafka (rows of a
batch interrupted by stop() may land too: at-least-once)."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka_helpers import consume_all, log_end_offsets
from pyspark.sql import functions as F
from readback import read_records

from sparkkafka_sink.testing.brokers import create_topics

ROWS_PER_SECOND = 40


def rate(spark):
    return (spark.readStream.format("rate").option("rowsPerSecond", ROWS_PER_SECOND)
            .option("numPartitions", 2).load())


def run_until(query, min_rows, timeout=120):
    """Let ``query`` process at least ``min_rows`` in completed batches, stop it, return N."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if query.exception():
                raise query.exception()
            done = sum(p["numInputRows"] for p in query.recentProgress)
            if done >= min_rows and len([p for p in query.recentProgress if p["numInputRows"]]) >= 2:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"stream did not reach {min_rows} rows: {query.recentProgress[-1:]}")
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return sum(p["numInputRows"] for p in query.recentProgress)


def check_every_row_landed(kafka, topic, n):
    values = [int(r.value) for r in read_records(kafka, topic, expected_count=n)]
    assert set(range(n)) <= set(values), f"missing rows: {sorted(set(range(n)) - set(values))[:10]}"
    return values


@pytest.mark.pyspark_lines
def test_foreach_batch_with_rate_source(spark, kafka, sink_metrics, tmp_path):
    topic = kafka.create_topic(partitions=2)
    bootstrap = kafka.bootstrap_servers

    def write_batch(batch_df, batch_id):
        (batch_df.select(F.col("value").cast("string").alias("value"), F.col("timestamp"),
                         F.col("value").cast("string").alias("key"))
         .write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())

    query = (rate(spark).writeStream.foreachBatch(write_batch)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 60)
    check_every_row_landed(kafka, topic, n)
    per_batch = sink_metrics.micro_batches(query.id)
    assert per_batch, "no per micro-batch metrics"
    progress = {p["batchId"]: p["numInputRows"] for p in query.recentProgress}
    for row in per_batch:
        if row["batch_id"] in progress:
            assert row["records_sent"] == progress[row["batch_id"]]


@pytest.mark.pyspark_lines
def test_direct_write_stream_sink(spark, kafka, sink_metrics, tmp_path):
    topic = kafka.create_topic(partitions=2)
    before = sink_metrics.snapshot()["records_sent"]
    query = (rate(spark).select(F.col("value").cast("string").alias("value"),
                                F.col("value").cast("string").alias("key"))
             .writeStream.format("pyprod-kafka")
             .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", topic)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 60)
    check_every_row_landed(kafka, topic, n)
    assert sink_metrics.snapshot()["records_sent"] - before >= n
    per_batch = {r["batch_id"]: r["records_sent"] for r in sink_metrics.micro_batches(query.id)}
    for p in query.recentProgress:
        if p["numInputRows"]:
            assert per_batch.get(p["batchId"]) == p["numInputRows"], (p["batchId"], per_batch)


@pytest.mark.pyspark_lines
def test_direct_write_stream_exactly_once(spark, apache_kafka, sink_metrics, tmp_path):
    """writeStream under exactly-once: a read_committed reader sees every row of the completed
    micro-batches exactly once (the checkpoint's batches committed by the driver), each written in
    a transaction -- its commit marker in the log, which a write that ignored the guarantee
    would not leave."""
    topic = f"stream-eos-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 2})
    before = sink_metrics.snapshot()["records_sent"]
    query = (rate(spark).select(F.col("value").cast("string").alias("value"))
             .writeStream.format("pyprod-kafka")
             .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", topic)
             .option("deliveryGuarantee", "exactly-once")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 60)
    got = [int(r.value) for r in consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed")]
    assert set(range(n)) <= set(got), f"missing rows: {sorted(set(range(n)) - set(got))[:10]}"
    assert len(got) == len(set(got)), "a row committed twice"
    assert sink_metrics.snapshot()["records_sent"] - before >= n
    written = len(consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_uncommitted"))
    assert sum(log_end_offsets(apache_kafka.bootstrap_servers, topic).values()) > written, \
        "no transaction marker in the log: the rows were not written in transactions"


def test_a_new_query_on_a_reused_checkpoint_location_is_not_taken_for_a_replay(spark, apache_kafka, tmp_path):
    """A checkpoint location deleted and reused by a new query: the query's prefix is the
    location's, so the old query's decisions are found under it; the new query's micro-batches
    (numbered from 0 again) are its own -- Spark's query id, recorded with each decision, says so --
    and are committed, not aborted as replays of the old query's."""
    import shutil

    topic = f"stream-reuse-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 2})
    location = tmp_path / "checkpoint"

    def start(tag: str):
        return (rate(spark).select(F.concat(F.lit(tag), F.col("value").cast("string")).alias("value"))
                .writeStream.format("pyprod-kafka")
                .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", topic)
                .option("deliveryGuarantee", "exactly-once").option("checkpointLocation", str(location))
                .trigger(processingTime="500 milliseconds").start())

    first = run_until(start("old-"), 80)
    shutil.rmtree(location)
    second = run_until(start("new-"), 40)
    got = [r.value.decode() for r in consume_all(apache_kafka.bootstrap_servers, topic,
                                                 isolation_level="read_committed")]
    new = {int(v[4:]) for v in got if v.startswith("new-")}
    assert set(range(second)) <= new, f"the new query's rows missing: {sorted(set(range(second)) - new)[:10]}"
    assert len({v for v in got if v.startswith("old-")}) >= first
