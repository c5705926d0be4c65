"""The sink against a cluster with ACLs (the ``secured_kafka`` node runs Kafka's StandardAuthorizer),
writing as ``carol`` over SASL_PLAINTEXT/PLAIN:

* the driver's check fails the job in seconds, naming the topic, when carol may not see the
  ``topic`` option's topic, or may describe it but not write it;
* a ``topic`` column spreading rows over a permitted topic and two refused ones: with
  ``errors.tolerance=all`` the refused rows go to the dead-letter topic naming
  TOPIC_AUTHORIZATION_FAILED and their intended topic, every permitted row lands, metrics exact
  -- at-least-once and exactly-once alike (the producer refuses them before sending, so the
  task's transaction commits); with ``errors.tolerance=none`` the job fails naming the topic and
  the authorization failure.

Read back by confluent-kafka over PLAINTEXT (a super user on this node)."""

from __future__ import annotations

import time

import pytest
from kafka_helpers import consume_all, log_end_offsets
from pyspark.sql import functions as F

pytestmark = [pytest.mark.broker, pytest.mark.security]

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def carol_options(cluster) -> dict:
    return {"kafka.bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"),
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": f'{_PLAIN_MODULE} required username="carol" password="carol-secret";',
            "kafka.max.block.ms": "20000"}


@pytest.fixture
def acl_topics(acl_topics, secured_topic) -> dict:
    """The shared topics with carol's ACLs, and a dead-letter topic without ACLs (open to
    everyone here)."""
    return {**acl_topics, "dlq": secured_topic(partitions=1)}


@pytest.mark.parametrize("kind, says", [("hidden", "not authorized to access topic"),
                                        ("describe_only", "has no WRITE permission")])
def test_driver_check_names_a_topic_the_principal_may_not_write(spark, secured_kafka, acl_topics, kind, says):
    df = spark.range(10).select(F.col("id").cast("string").alias("value"))
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        df.write.format("pyprod-kafka").mode("append").options(**carol_options(secured_kafka)) \
            .option("topic", acl_topics[kind]).save()
    text = str(info.value)
    assert says in text and repr(acl_topics[kind]) in text and "option 'topic'" in text, text[-2000:]
    assert "write task" not in text  # refused on the driver, before any task
    assert time.monotonic() - start < 15
    assert consume_all(secured_kafka.bootstrap(), acl_topics[kind]) == []


def frame(spark, topics: dict):
    """300 rows: row i goes to the writable topic, except i % 3 == 1 (describe_only) and
    i % 3 == 2 and i < 60 (hidden)."""
    def where(i: int) -> str:
        if i % 3 == 1:
            return topics["describe_only"]
        if i % 3 == 2 and i < 60:
            return topics["hidden"]
        return topics["writable"]
    rows = [(b"k%03d" % i, b"v%03d" % i, where(i)) for i in range(300)]
    return spark.createDataFrame(rows, "key binary, value binary, topic string").coalesce(1)


def test_refused_topics_rows_are_dead_lettered_and_the_rest_lands(spark, sink_metrics, secured_kafka, acl_topics):
    df = frame(spark, acl_topics)
    refused = {i for i in range(300) if i % 3 == 1 or (i % 3 == 2 and i < 60)}
    before = sink_metrics.snapshot()
    df.write.format("pyprod-kafka").mode("append").options(**carol_options(secured_kafka)).options(**{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": acl_topics["dlq"]}).save()
    bootstrap = secured_kafka.bootstrap()
    good = consume_all(bootstrap, acl_topics["writable"], expected_count=300 - len(refused))
    assert sorted(int(r.key[1:]) for r in good) == [i for i in range(300) if i not in refused]
    dead = consume_all(bootstrap, acl_topics["dlq"], expected_count=len(refused))
    by_row = {int(dict(r.headers)["__pyprod.errors.row"]): r for r in dead}
    assert sorted(by_row) == sorted(refused) and len(dead) == len(refused)
    for row, r in by_row.items():
        h = dict(r.headers)
        intended = acl_topics["describe_only"] if row % 3 == 1 else acl_topics["hidden"]
        assert (r.key, r.value) == (b"k%03d" % row, b"v%03d" % row)
        assert h["__connect.errors.topic"] == intended.encode()
        assert b"TOPIC_AUTHORIZATION_FAILED" in h["__connect.errors.exception.message"] + \
            h["__connect.errors.exception.class.name"]
        # both refused by the Metadata answer, before sending
        assert h["__connect.errors.stage"] == b"producer"
    assert consume_all(bootstrap, acl_topics["describe_only"]) == []
    after = sink_metrics.snapshot()
    delta = {k: after[k] - before[k] for k in ("records_sent", "records_failed", "records_skipped",
                                               "records_dead_lettered")}
    assert delta == {"records_sent": 300 - len(refused), "records_failed": 0, "records_skipped": len(refused),
                     "records_dead_lettered": len(refused)}


def test_without_tolerance_a_refused_topic_fails_the_job_naming_it(spark, secured_kafka, acl_topics):
    with pytest.raises(Exception) as info:
        frame(spark, acl_topics).write.format("pyprod-kafka").mode("append") \
            .options(**carol_options(secured_kafka)).save()
    text = str(info.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in text, text[-2000:]
    assert acl_topics["describe_only"] in text or acl_topics["hidden"] in text, text[-2000:]


def test_refused_topics_under_exactly_once_are_dead_lettered_in_the_committed_transaction(
        spark, sink_metrics, secured_kafka, acl_topics):
    df = frame(spark, acl_topics)
    refused = {i for i in range(300) if i % 3 == 1 or (i % 3 == 2 and i < 60)}
    before = sink_metrics.snapshot()
    df.write.format("pyprod-kafka").mode("append").options(**carol_options(secured_kafka)).options(**{
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": acl_topics["dlq"],
        "deliveryGuarantee": "exactly-once"}).save()
    bootstrap = secured_kafka.bootstrap()
    good = consume_all(bootstrap, acl_topics["writable"], expected_count=300 - len(refused),
                       isolation_level="read_committed")
    assert sorted(int(r.key[1:]) for r in good) == [i for i in range(300) if i not in refused]
    dead = consume_all(bootstrap, acl_topics["dlq"], expected_count=len(refused), isolation_level="read_committed")
    assert sorted(int(dict(r.headers)["__pyprod.errors.row"]) for r in dead) == sorted(refused)
    after = sink_metrics.snapshot()
    assert after["records_dead_lettered"] - before["records_dead_lettered"] == len(refused)
    for topic, count in ((acl_topics["writable"], 300 - len(refused)), (acl_topics["dlq"], len(refused))):
        # a transaction's commit marker takes an offset: a write outside a transaction leaves none
        assert sum(log_end_offsets(bootstrap, topic).values()) > count, f"{topic}: written outside a transaction"
