"""The sink over SASL_SSL + SCRAM-SHA-512 against the secured Apache Kafka node: a batch write and a
streaming write land every row (read back by confluent-kafka with the same security), a wrong
password fails the job with our message, and no secret reaches Spark's event log (every plan,
SQL execution, job property and streaming progress Spark records) or our logs."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from kafka_helpers import consume_all
from pyspark.sql import functions as F
from test_spark_streaming import rate, run_until

from sparkkafka_sink.testing.security import WRONG_PASSWORD
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.security]

_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PASSWORD = "alice-secret"


def secured_options(cluster, topic: str, password: str = PASSWORD) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.bootstrap("SASL_SSL"),
        "topic": topic,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.location": str(cluster.security.pki.ca_cert_path),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f'{_SCRAM_MODULE} required username="alice" password="{password}";',
        "kafka.max.block.ms": "20000",
    }


def reader(confluent_config) -> dict:
    return {k: v for k, v in confluent_config("SASL_SSL", "SCRAM-SHA-512").items() if k != "bootstrap.servers"}


def our_log_text(caplog) -> str:
    """What our own loggers said (py4j's DEBUG log echoes every .option() call to the JVM: not ours)."""
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("sparkkafka_sink"))


def event_log_text(directory: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file())


def event_log_showing_a_write(directory: Path) -> str:
    """The event log's text once it shows a write through the sink.  Spark's event-log listener
    runs on a queue of its own and flushes at job and SQL events: on a busy machine it writes
    them a while after ``save()`` returned."""

    def text_with_a_write() -> str:
        text = event_log_text(directory)
        return text if "SCRAM-SHA-512" in text or "pyprod-kafka" in text else ""

    try:
        return wait_until("Spark's event log to show a write through the sink", text_with_a_write,
                          timeout=60, interval=0.2)
    except AssertionError as exc:
        files = {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*") if p.is_file()}
        where = f"{directory} holds {files}" if directory.is_dir() else f"{directory} does not exist"
        raise AssertionError(f"{exc}; {where}") from None


def test_batch_write_over_sasl_ssl_scram(spark, sink_metrics, spark_event_log, secured_kafka, secured_topic,
                                         confluent_config, caplog):
    caplog.set_level(logging.DEBUG)
    topic = secured_topic(partitions=3)
    n = 20_000
    df = spark.range(n).select(F.col("id").cast("string").alias("value"), F.col("id").cast("string").alias("key"))
    before = sink_metrics.snapshot()["records_sent"]
    df.write.format("pyprod-kafka").mode("append").options(**secured_options(secured_kafka, topic)).save()
    got = consume_all(secured_kafka.bootstrap("SASL_SSL"), topic, expected_count=n, timeout=60,
                      config=reader(confluent_config))
    assert sorted(int(r.value) for r in got) == list(range(n))
    assert sink_metrics.snapshot()["records_sent"] - before == n
    assert PASSWORD not in repr(sink_metrics.snapshot())
    log_text = event_log_showing_a_write(spark_event_log)  # the event log is really written
    assert PASSWORD not in log_text and PASSWORD not in our_log_text(caplog)


def test_streaming_write_over_sasl_ssl_scram(spark, spark_event_log, secured_kafka, secured_topic,
                                             confluent_config, tmp_path):
    topic = secured_topic(partitions=2)
    query = (rate(spark).select(F.col("value").cast("string").alias("value"))
             .writeStream.format("pyprod-kafka").options(**secured_options(secured_kafka, topic))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 60)
    got = consume_all(secured_kafka.bootstrap("SASL_SSL"), topic, expected_count=n, timeout=60,
                      config=reader(confluent_config))
    values = {int(r.value) for r in got}
    assert set(range(n)) <= values
    assert PASSWORD not in str(query.recentProgress)
    assert PASSWORD not in event_log_text(spark_event_log)


def test_wrong_password_fails_the_job_with_our_message_and_no_secret(spark, spark_event_log, secured_kafka,
                                                                     secured_topic, caplog):
    caplog.set_level(logging.DEBUG)
    topic = secured_topic()
    df = spark.range(10).select(F.col("id").cast("string").alias("value"))
    start = time.monotonic()
    with pytest.raises(Exception) as info:
        df.write.format("pyprod-kafka").mode("append").options(
            **secured_options(secured_kafka, topic, password=WRONG_PASSWORD)).save()
    text = str(info.value)
    assert "SCRAM-SHA-512 authentication of 'alice'" in text, text[-2000:]
    # refused on the driver, before any task: at once, naming the options to check
    assert "pyprod-kafka: the cluster at kafka.bootstrap.servers=" in text and "refused this client" in text
    assert "kafka.sasl.*" in text and "write task" not in text
    assert time.monotonic() - start < 15
    assert WRONG_PASSWORD not in text
    assert WRONG_PASSWORD not in event_log_text(spark_event_log) and WRONG_PASSWORD not in our_log_text(caplog)


def test_unknown_mechanism_fails_on_the_driver(spark, secured_kafka, secured_topic):
    options = secured_options(secured_kafka, "t")
    options["kafka.sasl.mechanism"] = "CRAM-MD5"
    df = spark.range(1).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception) as info:
        df.write.format("pyprod-kafka").mode("append").options(**options).save()
    assert "Invalid value 'CRAM-MD5' for configuration 'kafka.sasl.mechanism'" in str(info.value), str(info.value)
    assert PASSWORD not in str(info.value)


def test_truststore_shipped_with_add_file_is_found_by_the_tasks(spark, secured_kafka, secured_topic,
                                                                confluent_config, tmp_path):
    """On a cluster the truststore travels with --files / addFile: the option may name it by its
    base name, which does not exist on the driver's working directory; tasks find Spark's copy."""
    import shutil

    shipped = tmp_path / "shipped-ca-for-tasks.pem"
    shutil.copy(secured_kafka.security.pki.ca_cert_path, shipped)
    spark.sparkContext.addFile(str(shipped))
    topic = secured_topic()
    options = secured_options(secured_kafka, topic)
    options["kafka.ssl.truststore.location"] = shipped.name
    df = spark.range(100).select(F.col("id").cast("string").alias("value"))
    df.write.format("pyprod-kafka").mode("append").options(**options).save()
    got = consume_all(secured_kafka.bootstrap("SASL_SSL"), topic, expected_count=100, timeout=60,
                      config=reader(confluent_config))
    assert sorted(int(r.value) for r in got) == list(range(100))


def test_batch_write_with_jks_trust_and_key_stores_over_mutual_tls(spark, spark_event_log, secured_kafka,
                                                                    secured_topic, confluent_config, caplog):
    """A Java job's JKS stores, unchanged: keytool-made truststore and keystore (the key under its
    own ssl.key.password) on the listener that requires a client certificate."""
    pki = secured_kafka.security.pki
    if pki.truststore_jks_path is None:
        pytest.skip("JKS stores are made by the JDK's keytool, not on PATH")
    caplog.set_level(logging.DEBUG)
    topic = secured_topic(partitions=2)
    options = {
        "kafka.bootstrap.servers": secured_kafka.bootstrap("MTLS"),
        "topic": topic,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(pki.truststore_jks_path),
        "kafka.ssl.truststore.type": "JKS",
        "kafka.ssl.truststore.password": pki.store_password,
        "kafka.ssl.keystore.location": str(pki.client_keystore_jks_key_password_path),
        "kafka.ssl.keystore.type": "JKS",
        "kafka.ssl.keystore.password": pki.store_password,
        "kafka.ssl.key.password": pki.key_password,
        "kafka.max.block.ms": "20000",
    }
    n = 2_000
    df = spark.range(n).select(F.col("id").cast("string").alias("value"))
    df.write.format("pyprod-kafka").mode("append").options(**options).save()
    got = consume_all(secured_kafka.bootstrap("MTLS"), topic, expected_count=n, timeout=60,
                      config={k: v for k, v in confluent_config("MTLS").items() if k != "bootstrap.servers"})
    assert sorted(int(r.value) for r in got) == list(range(n))
    log_text = event_log_showing_a_write(spark_event_log)
    for secret in (pki.store_password, pki.key_password):
        assert secret not in log_text and secret not in our_log_text(caplog)
