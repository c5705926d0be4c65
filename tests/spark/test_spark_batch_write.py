"""Batch writes through format("pyprod-kafka") against the embedded brokers, read back with
confluent-kafka and compared with chispa."""

from __future__ import annotations

import re
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from readback import as_written, read_records, records_df

from sparkkafka_sink.testing.brokers import create_topics, free_port

# Recent, whole-millisecond timestamps: brokers enforce retention by timestamp (noida drops
# records older than 7 days at once), and Kafka keeps milliseconds only.
BASE_TS_MS = (int(time.time()) - 3600) * 1000


def writer(df, kafka, **options):
    w = df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def all_columns_df(spark, topic_a, topic_b, n=40):
    """Every column the sink reads, with null keys, tombstones and null/multi headers mixed in."""
    return spark.range(n).select(
        F.when(F.col("id") % 7 == 3, F.lit(None)).otherwise(F.concat(F.lit("k"), F.col("id"))).cast("binary").alias("key"),
        F.when(F.col("id") % 5 == 4, F.lit(None)).otherwise(F.concat(F.lit("value-"), F.col("id"))).alias("value"),
        F.when(F.col("id") % 2 == 0, F.lit(topic_a)).otherwise(F.lit(topic_b)).alias("topic"),
        (F.col("id") % 2).cast("int").alias("partition"),
        F.when(F.col("id") % 3 == 0, F.lit(None)).otherwise(F.array(
            F.struct(F.lit("trace").alias("key"), F.col("id").cast("string").cast("binary").alias("value")),
            F.struct(F.lit("empty").alias("key"), F.lit(None).cast("binary").alias("value")),
        )).alias("headers"),
        F.timestamp_millis(F.lit(BASE_TS_MS) + F.col("id") * 1000).alias("timestamp"),
        F.col("id").alias("ignored_extra_column"),
    )


@pytest.mark.pyspark_lines
def test_every_column_round_trips_to_two_topics(spark, kafka, sink_metrics):
    a, b = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    df = all_columns_df(spark, a, b).repartition(3)
    writer(df, kafka, **{"kafka.compression.type": "zstd"}).save()
    got = records_df(spark, read_records(kafka, [a, b]))
    assert_df_equality(got, as_written(df), ignore_row_order=True, ignore_nullable=True)
    assert got.filter(F.col("topic") == a).count() == 20
    assert got.filter(F.col("value").isNull()).count() == 8  # tombstones arrive as null values


def test_topic_option_overrides_the_column(spark, kafka):
    t = kafka.create_topic()
    df = spark.createDataFrame([("a", "elsewhere"), ("b", None)], "value string, topic string")
    writer(df, kafka, topic=t).save()
    assert sorted(r.value for r in read_records(kafka, t, expected_count=2)) == [b"a", b"b"]


def test_partition_column_is_honoured(spark, kafka):
    t = kafka.create_topic(partitions=4)
    df = spark.range(40).select(F.col("id").cast("string").alias("value"), (F.col("id") % 4).cast("int").alias("partition"))
    writer(df, kafka, topic=t).save()
    recs = read_records(kafka, t, expected_count=40)
    assert len(recs) == 40
    assert all(int(r.value) % 4 == r.partition for r in recs)


def test_null_keys_and_tombstones(spark, kafka):
    t = kafka.create_topic()
    df = spark.createDataFrame([(None, None), ("k", None), (None, b"v")], "key string, value binary")
    writer(df, kafka, topic=t).save()
    got = sorted(((r.key, r.value) for r in read_records(kafka, t, expected_count=3)), key=repr)
    assert got == sorted([(None, None), (b"k", None), (None, b"v")], key=repr)


@pytest.mark.pyspark_lines
def test_multi_partition_write_and_metrics_equal_row_count(spark, kafka, sink_metrics):
    t = kafka.create_topic(partitions=3)
    n = 2000
    df = spark.range(n).select(F.col("id").cast("string").alias("key"), F.col("id").cast("string").alias("value")).repartition(5)
    assert df.rdd.getNumPartitions() >= 4
    before = sink_metrics.snapshot()
    writer(df, kafka, topic=t).save()
    after = sink_metrics.snapshot()
    recs = read_records(kafka, t, expected_count=n)
    assert sorted(int(r.value) for r in recs) == list(range(n))
    assert after["records_sent"] - before["records_sent"] == n
    assert after["records_failed"] == before["records_failed"]
    assert after["write_tasks"] - before["write_tasks"] == 5
    assert after["bytes_sent"] > before["bytes_sent"]
    assert after["batches_sent"] > before["batches_sent"]
    assert after["produce_latency_max_ms"] > 0 and after["produce_latency_avg_ms"] > 0


@pytest.mark.pyspark_lines
def test_auto_discovered_source_writes_without_register(plain_session, kafka, sink_metrics):
    """A new session has no runtime registration: the format resolves via pyspark_pyprod_kafka."""
    t = kafka.create_topic()
    other = plain_session
    before = sink_metrics.snapshot()["records_sent"]
    writer(other.range(10).select(F.col("id").cast("string").alias("value")), kafka, topic=t).save()
    assert len(read_records(kafka, t, expected_count=10)) == 10
    # metrics only for registered sessions -- where Spark let register() shadow the name; where it
    # kept the auto-discovered class (pyspark 4.0), the metrics are the whole context's
    shadowed = sink_metrics.total is not None  # the accumulator rides on the shadowing subclass
    assert sink_metrics.snapshot()["records_sent"] == (before if shadowed else before + 10)


# -- per-row failures: the task fails, naming topic/partition and the row ----------------------

def _fails(w):
    with pytest.raises(Exception) as e:
        w.save()
    return str(e.value)


def test_partition_out_of_range_fails_the_task(spark, kafka):
    t = kafka.create_topic(partitions=2)
    df = spark.createDataFrame([("a", 0), ("b", 1), ("c", 9)], "value string, partition int").coalesce(1)
    text = _fails(writer(df, kafka, topic=t, **{"kafka.max.block.ms": "3000"}))
    assert "pyprod-kafka: write task for Spark partition 0" in text
    assert f"row 2 of this task's input, topic '{t}', partition 9" in text
    assert "InvalidPartitionError" in text or "KafkaTimeoutError" in text


def test_null_topic_fails_the_task(spark, kafka):
    t = kafka.create_topic()
    df = spark.createDataFrame([("a", t), ("b", None)], "value string, topic string").coalesce(1)
    text = _fails(writer(df, kafka))
    assert "row 1 of this task's input, topic None" in text
    assert "topic is null and no 'topic' option is set" in text


def test_record_too_large_fails_the_task(spark, kafka):
    t = kafka.create_topic()
    df = spark.createDataFrame([("small",), ("x" * 5000,)], "value string").coalesce(1)
    text = _fails(writer(df, kafka, topic=t, **{"kafka.max.request.size": "2000"}))
    assert f"row 1 of this task's input, topic '{t}', partition chosen by the partitioner: RecordTooLargeError" in text


def test_buffer_memory_running_out_fails_the_task_with_the_producers_error(spark, apache_kafka):
    """The task's first Produce request hangs in the network (a proxy holds its connection until
    the producer's request.timeout.ms gives up on it): the producer's buffer.memory fills, a bulk
    call waits max.block.ms for it, and the task fails with the producer's own error -- what ran
    out, for how long -- counting what it delivered before: the rows queued before the error
    still land (sent again on a new connection), and the topic holds exactly that many."""
    from faults.harness import PRODUCE, proxy_existing_broker
    from kafka_helpers import consume_all

    t = f"slow-{time.monotonic_ns()}"
    create_topics(apache_kafka.bootstrap_servers, {t: 3})
    rows = 20_000
    df = spark.range(rows).select(F.concat(F.lpad(F.col("id").cast("string"), 6, "0"),
                                           F.repeat(F.lit("v"), 1018)).alias("value")).coalesce(1)
    with proxy_existing_broker(apache_kafka.nodes[0]) as proxied:
        held = proxied.proxy.blackhole_request(lambda frame: True, api_key=PRODUCE)
        w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers",
                                                                   proxied.bootstrap_servers)
             .option("topic", t).option("kafka.buffer.memory", str(1 << 20)).option("kafka.max.block.ms", "1000")
             .option("kafka.request.timeout.ms", "5000"))
        text = _fails(w)
        assert held.hits, "no Produce request was held"
    assert "BufferExhaustedError" in text and "buffer.memory" in text and "max.block.ms" in text, text
    failed, delivered = map(int, re.search(r"(\d+) record\(s\) failed, (\d+) delivered", text).groups())
    assert failed + delivered == rows and 0 < delivered < rows, text
    assert len(consume_all(apache_kafka.bootstrap_servers, t, delivered)) == delivered


def test_a_refused_connection_fails_on_the_driver_at_once(spark):
    """The driver's cluster check: every bootstrap address refusing the connection is an answer
    (nothing listens there), given at once in one line naming the address, before any task."""
    port = free_port()  # nothing listens there
    df = spark.createDataFrame([("a",), ("b",)], "value string").coalesce(1)
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
         .option("topic", "nowhere").option("clusterCheckTimeoutMs", "60000"))
    start = time.monotonic()
    with pytest.raises(Exception) as e:
        w.save()
    took = time.monotonic() - start
    text = str(e.value)
    assert took < 20, took  # not the 60 s of clusterCheckTimeoutMs: a refusal is an answer
    # ours is the exception's last line (before Spark's SQLSTATE), and the whole text is short
    last = [line for line in text.strip().splitlines() if line.strip() and "SQLSTATE" not in line][-1]
    assert f"pyprod-kafka: nothing listens at kafka.bootstrap.servers=127.0.0.1:{port}: every address refused" in last, text
    assert len(text.strip().splitlines()) <= 7, text
    assert "write task" not in text  # no task ran


def test_missing_topic_fails_on_the_driver(spark, kafka):
    df = spark.createDataFrame([("a",)], "value string")
    missing = f"missing-{time.monotonic_ns()}"
    text = _fails(writer(df, kafka, topic=missing, **{"kafka.allow.auto.create.topics": "false"}))
    assert f"pyprod-kafka: topic '{missing}' does not exist (kafka.allow.auto.create.topics is false)" in text
    assert "option 'topic'" in text and "write task" not in text


def test_unreachable_broker_fails_within_the_timeouts(spark):
    """Without the driver's check (clusterCheckTimeoutMs=0) each task gives up within its timeouts."""
    port = free_port()  # nothing listens there
    df = spark.createDataFrame([("a",), ("b",)], "value string").coalesce(1)
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
         .option("clusterCheckTimeoutMs", "0")
         .option("topic", "nowhere").option("kafka.max.block.ms", "2000")
         .option("kafka.delivery.timeout.ms", "3000").option("kafka.request.timeout.ms", "1000"))
    start = time.monotonic()
    text = _fails(w)
    assert time.monotonic() - start < 30
    assert "row 0 of this task's input, topic 'nowhere'" in text
    assert f"is kafka.bootstrap.servers=127.0.0.1:{port} reachable?" in text
