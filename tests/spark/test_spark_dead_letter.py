"""errors.tolerance=all with a dead-letter topic: a DataFrame of good rows and each kind of bad
row (null topic, header without a key, partition out of range, record over max.request.size
-- refused before sending -- and, on Apache Kafka, a record over the topic's max.message.bytes,
refused by the broker after the batch was split around it).  Every good row lands in its topic,
every bad row in the DLQ with its key, value and context headers, and the metrics are exact;
with errors.tolerance=none (the default) the same DataFrame fails naming the first bad row."""

from __future__ import annotations

import uuid

import pytest
from kafka_helpers import consume_all
from pyspark.sql import functions as F

pytestmark = [pytest.mark.broker, pytest.mark.spark]

N = 200
BROKER_LIMIT = 4096  # the topic's max.message.bytes (Apache Kafka)
PRODUCER_LIMIT = 100_000  # kafka.max.request.size
HEADERS = "array<struct<key:string,value:binary>>"


def bad_rows(kind: str) -> dict:
    """row -> why it is bad."""
    rows = {10: "row check", 20: "producer", 30: "producer", 50: "producer"}
    if kind == "apache":
        rows[40] = "broker"
    return rows


def frame(spark, topic: str, kind: str):
    bad = bad_rows(kind)
    rows = []
    for i in range(N):
        value = b"v%03d" % i
        t, partition, headers = topic, None, [("row", b"%d" % i)]
        if i == 10:
            t = None
        elif i == 20:
            headers = [(None, b"keyless")]
        elif i == 30:
            partition = 7
        elif i == 40 and 40 in bad:
            value = b"b" * (BROKER_LIMIT * 2)
        elif i == 50:
            value = b"p" * (PRODUCER_LIMIT * 2)
        rows.append((b"k%03d" % i, value, t, partition, [{"key": k, "value": v} for k, v in headers]))
    return spark.createDataFrame(rows, f"key binary, value binary, topic string, partition int, headers {HEADERS}") \
        .coalesce(1)


def writer(df, kafka, **options):
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("kafka.max.request.size", str(PRODUCER_LIMIT)))
    for k, v in options.items():
        w = w.option(k, v)
    return w


@pytest.mark.pyspark_lines
def test_bad_rows_go_to_the_dead_letter_topic(spark, sink_metrics, kafka):
    topic = kafka.create_topic(partitions=2, config={"max.message.bytes": str(BROKER_LIMIT), "retention.ms": "-1"}
                               if kafka.kind == "apache" else None)
    dlq = kafka.create_topic(partitions=1)
    bad = bad_rows(kafka.kind)
    before = sink_metrics.snapshot()
    writer(frame(spark, topic, kafka.kind), kafka, **{"errors.tolerance": "all",
                                                      "errors.deadletterqueue.topic.name": dlq,
                                                      "errors.log.enable": "true"}).save()
    good = consume_all(kafka.bootstrap_servers, topic, expected_count=N - len(bad))
    assert sorted(int(r.key[1:]) for r in good) == [i for i in range(N) if i not in bad]
    dead = consume_all(kafka.bootstrap_servers, dlq, expected_count=len(bad))
    assert len(dead) == len(bad)
    by_row = {int(dict(r.headers)["__pyprod.errors.row"]): r for r in dead}
    assert sorted(by_row) == sorted(bad)
    for row, r in by_row.items():
        h = dict(r.headers)
        assert r.key == b"k%03d" % row  # the original key and value
        assert r.value is not None and r.value[:1] in (b"v", b"b", b"p")
        assert h["__connect.errors.stage"] == bad[row].encode()
        assert h["__pyprod.errors.spark.partition"] == b"0" and h["__pyprod.errors.spark.attempt"] == b"0"
        assert h["__connect.errors.exception.class.name"] and h["__connect.errors.exception.message"]
        assert h["__connect.errors.topic"] == (None if row == 10 else topic.encode())
        if row != 20:  # the original headers travel along (row 20's cannot be read)
            assert h["row"] == b"%d" % row
    assert b"Partition" in dict(by_row[30].headers)["__connect.errors.exception.class.name"]
    assert b"max.request.size" in dict(by_row[50].headers)["__connect.errors.exception.message"]
    # a value too large to travel is cut to fit, its length kept
    assert dict(by_row[50].headers)["__pyprod.errors.value.truncated.from"] == b"%d" % (PRODUCER_LIMIT * 2)
    assert by_row[50].value == b"p" * len(by_row[50].value) and len(by_row[50].value) < PRODUCER_LIMIT
    if 40 in bad:
        assert b"MESSAGE_TOO_LARGE" in dict(by_row[40].headers)["__connect.errors.exception.message"]
    after = sink_metrics.snapshot()
    delta = {k: after[k] - before[k] for k in ("records_sent", "records_failed", "records_skipped",
                                               "records_dead_lettered")}
    assert delta == {"records_sent": N - len(bad), "records_failed": 0, "records_skipped": len(bad),
                     "records_dead_lettered": len(bad)}


def test_without_tolerance_the_first_bad_row_fails_the_task(spark, kafka):
    topic = kafka.create_topic(partitions=2)
    with pytest.raises(Exception) as info:
        writer(frame(spark, topic, kafka.kind), kafka).save()
    text = str(info.value)
    assert "row 10 of this task's input, topic None" in text and "topic is null" in text


def test_tolerance_without_a_dead_letter_topic_skips_and_counts(spark, sink_metrics, kafka):
    topic = kafka.create_topic(partitions=2)
    before = sink_metrics.snapshot()
    df = spark.range(100).select(F.col("id").cast("string").alias("value"),
                                 F.when(F.col("id") % 25 == 0, F.lit(9)).otherwise(F.lit(None)).cast("int")
                                 .alias("partition")).coalesce(1)
    writer(df, kafka, topic=topic, **{"errors.tolerance": "all"}).save()
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=96)
    assert sorted(int(r.value) for r in got) == [i for i in range(100) if i % 25]
    after = sink_metrics.snapshot()
    assert after["records_skipped"] - before["records_skipped"] == 4
    assert after["records_dead_lettered"] == before["records_dead_lettered"]


def test_dead_letter_options_are_checked(spark, kafka):
    df = spark.range(1).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="needs errors.tolerance=all"):
        writer(df, kafka, topic="t", **{"errors.deadletterqueue.topic.name": "dlq"}).save()
    with pytest.raises(Exception, match="errors.tolerance' must be one of none, all"):
        writer(df, kafka, topic="t", **{"errors.tolerance": "some"}).save()


@pytest.mark.pyspark_lines
def test_dead_letters_under_exactly_once_share_the_task_transaction(spark, sink_metrics, apache_kafka):
    """The dead-letter records are written by the task's transactional producer, in the task's
    transaction: a job that fails after its task dead-lettered rows (a record the broker refuses
    after it was sent fails the task under exactly-once) leaves them in the log, aborted --
    read_uncommitted sees them, read_committed nothing of either topic; the job that succeeds
    makes both visible."""
    from sparkkafka_sink.testing.brokers import create_topics

    topic, dlq = (f"eos-dlq-{uuid.uuid4().hex[:8]}-{n}" for n in ("rows", "dead"))
    create_topics(apache_kafka.bootstrap_servers, {topic: 2, dlq: 1},
                  config={"max.message.bytes": str(BROKER_LIMIT), "retention.ms": "-1"})
    bad_partition = F.when(F.col("id") % 100 == 7, F.lit(5)).otherwise(F.lit(None)).cast("int").alias("partition")
    df = spark.range(300).select(F.col("id").cast("string").alias("value"), bad_partition).coalesce(1)

    def write(frame):
        (frame.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers",
                                                                   apache_kafka.bootstrap_servers)
         .option("topic", topic).option("deliveryGuarantee", "exactly-once").option("errors.tolerance", "all")
         .option("errors.deadletterqueue.topic.name", dlq).save())

    failing = spark.range(300).select(F.when(F.col("id") == 250, F.repeat(F.lit("b"), BROKER_LIMIT * 2))
                                      .otherwise(F.col("id").cast("string")).alias("value"), bad_partition).coalesce(1)
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE"):
        write(failing)
    written = consume_all(apache_kafka.bootstrap_servers, dlq, expected_count=3, isolation_level="read_uncommitted")
    assert sorted(int(r.value) for r in written) == [7, 107, 207], "the failed task's dead letters were not written"
    assert consume_all(apache_kafka.bootstrap_servers, dlq, isolation_level="read_committed") == []
    assert consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed") == []
    write(df)
    good = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=297, isolation_level="read_committed")
    dead = consume_all(apache_kafka.bootstrap_servers, dlq, expected_count=3, isolation_level="read_committed")
    assert sorted(int(r.value) for r in good) == [i for i in range(300) if i % 100 != 7]
    assert sorted(int(r.value) for r in dead) == [7, 107, 207]
    assert all(dict(r.headers)["__connect.errors.stage"] == b"producer" for r in dead)


def test_under_exactly_once_a_record_the_broker_refuses_fails_the_task_saying_how_to_avoid_it(spark, sink_metrics,
                                                                                          apache_kafka):
    """Kafka never commits a transaction one of whose batches was refused, so under exactly-once
    a record over the topic's max.message.bytes (but within kafka.max.request.size) cannot be
    dead-lettered: the task fails naming the row and the remedy -- which works: with
    kafka.max.request.size at the topic's limit the record is refused before sending and
    dead-lettered, and the transaction commits."""
    from sparkkafka_sink.testing.brokers import create_topics

    topic, dlq = (f"eos-big-{uuid.uuid4().hex[:8]}-{n}" for n in ("rows", "dead"))
    create_topics(apache_kafka.bootstrap_servers, {topic: 1, dlq: 1},
                  config={"max.message.bytes": str(BROKER_LIMIT), "retention.ms": "-1"})
    df = spark.range(50).select(F.when(F.col("id") == 20, F.repeat(F.lit("b"), BROKER_LIMIT * 2))
                                .otherwise(F.col("id").cast("string")).alias("value")).coalesce(1)

    def write(max_request_size: int):
        (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers)
         .option("topic", topic).option("deliveryGuarantee", "exactly-once").option("errors.tolerance", "all")
         .option("errors.deadletterqueue.topic.name", dlq).option("kafka.max.request.size", str(max_request_size))
         .save())

    with pytest.raises(Exception) as info:
        write(PRODUCER_LIMIT)
    text = str(info.value)
    assert "row 20 of this task's input" in text and "MESSAGE_TOO_LARGE" in text, text[-3000:]
    assert "under exactly-once a record the broker refuses after it was sent cannot be dead-lettered" in text
    assert "keep kafka.max.request.size at most the topic's max.message.bytes" in text
    assert consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed") == []
    write(BROKER_LIMIT)
    good = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=49, isolation_level="read_committed")
    assert sorted(int(r.value) for r in good) == [i for i in range(50) if i != 20]
    dead = consume_all(apache_kafka.bootstrap_servers, dlq, expected_count=1, isolation_level="read_committed")
    assert [dict(r.headers)["__pyprod.errors.row"] for r in dead] == [b"20"]
    assert dict(dead[0].headers)["__connect.errors.stage"] == b"producer"
