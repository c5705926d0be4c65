"""A ``format("kafka")`` job's options carry over to ``format("pyprod-kafka")``, the format name the
only change (issue 33): the producer examples of Spark's Structured Streaming + Kafka Integration
Guide (batch with the topic as an option and as a column, streaming) against Apache Kafka, and a
job configured from a Confluent Cloud Java client properties file (SASL_SSL, PLAIN in
``sasl.jaas.config``, ``client.dns.lookup``, the consumer's ``session.timeout.ms``, ``acks=all``)
against the secured Apache Kafka node.  confluent-kafka reads every row back.  The same jobs,
run with Spark's own sink (spark-sql-kafka from Maven, in a process of its own), show the options
are what Spark's sink takes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import migration_jobs as jobs
import pytest
from kafka_helpers import consume_all

from sparkkafka_sink.producer.config import read_properties
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.spark]

FORMAT = "pyprod-kafka"
JOBS = Path(__file__).with_name("migration_jobs.py")

#: Confluent Cloud's Java client properties file ("Configure a client" > Java), with the secured
#: node's address, a PLAIN user and its CA in place of Confluent Cloud's (public) one
CONFLUENT_CLOUD_PROPERTIES = """\
# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers={bootstrap}
security.protocol=SASL_SSL
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='{user}' password='{password}';
sasl.mechanism=PLAIN
# Required for correctness in Apache Kafka clients prior to 2.6
client.dns.lookup=use_all_dns_ips

# Best practice for higher availability in Apache Kafka clients prior to 3.0
session.timeout.ms=45000

# Best practice for Kafka producer to prevent data loss
acks=all

# Here, not in Confluent Cloud's file: the test broker's certificate chains to the test CA
ssl.truststore.location={ca}
ssl.truststore.type=PEM
"""


def _expected(tag: str) -> list[tuple[bytes, bytes]]:
    return sorted((f"{tag}-key-{i}".encode(), f"{tag}-value-{i}".encode()) for i in range(jobs.ROWS))


def _read(bootstrap: str, topic: str, config: dict | None = None) -> list[tuple[bytes, bytes]]:
    got = consume_all(bootstrap, topic, expected_count=jobs.ROWS, timeout=60, config=config)
    return sorted((r.key, r.value) for r in got)


def _source_dir(tmp_path: Path) -> str:
    """JSON files of the stream's rows (two files, read once with availableNow)."""
    source = tmp_path / "source"
    source.mkdir()
    for part in range(2):
        lines = [json.dumps({"key": f"stream-key-{i}", "value": f"stream-value-{i}"})
                 for i in range(jobs.ROWS) if i % 2 == part]
        (source / f"part-{part}.json").write_text("\n".join(lines) + "\n")
    return str(source)


def _properties_file(tmp_path: Path, cluster) -> str:
    path = tmp_path / "client.properties"
    path.write_text(CONFLUENT_CLOUD_PROPERTIES.format(
        bootstrap=cluster.bootstrap("SASL_SSL"), user="alice", password=cluster.security.plain_users["alice"],
        ca=cluster.security.pki.ca_cert_path))
    return str(path)


def _topics(bootstrap: str, names: list[str]) -> dict[str, str]:
    topics = {name: f"migration-{name}-{uuid.uuid4().hex[:8]}" for name in names}
    create_topics(bootstrap, {t: 2 for t in topics.values()})
    return topics


def test_the_integration_guides_producer_examples(spark, sink_metrics, apache_kafka, tmp_path):
    bootstrap = apache_kafka.bootstrap_servers
    topics = _topics(bootstrap, ["option", "column", "stream"])
    jobs.guide_batch_topic_option(spark, FORMAT, bootstrap, topics["option"])
    jobs.guide_batch_topic_column(spark, FORMAT, bootstrap, topics["column"])
    jobs.guide_stream_topic_option(spark, FORMAT, bootstrap, topics["stream"], _source_dir(tmp_path),
                                   str(tmp_path / "checkpoint"))
    for name, tag in (("option", "batch"), ("column", "column"), ("stream", "stream")):
        assert _read(bootstrap, topics[name]) == _expected(tag), name


def test_pyspark_refuses_the_default_save_mode_for_python_data_sources(spark, sink_metrics, apache_kafka):
    """Why the jobs say mode("append"): the one change besides the format name a batch job may
    need (Spark's sink takes its default, ErrorIfExists).  When pyspark takes it too, this fails:
    drop ``migration_jobs.MODE`` and the documentation's caveat."""
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        (jobs.rows_frame(spark, "default-mode", 1).write.format(FORMAT)
         .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", "never-written").save())


def test_a_confluent_cloud_properties_file(spark, sink_metrics, secured_kafka, secured_topic, confluent_config,
                                           tmp_path):
    topic = secured_topic(partitions=2)
    properties = _properties_file(tmp_path, secured_kafka)
    jobs.confluent_cloud_job(spark, FORMAT, properties, topic)
    # what the driver logged (one line each; pyspark plans a Python data source's write in a Python
    # worker whose stderr the JVM holds, out of this test's reach: the planning is asked again here)
    options = {f"kafka.{k}": v for k, v in read_properties(properties).items()}
    assert set(parse_options({**options, "topic": topic}).producer_config.noted) == {
        "client.dns.lookup", "session.timeout.ms"}
    reader = {k: v for k, v in confluent_config("SASL_SSL", "PLAIN", user="alice").items() if k != "bootstrap.servers"}
    assert _read(secured_kafka.bootstrap("SASL_SSL"), topic, reader) == _expected("cloud")


@pytest.mark.slow
def test_the_same_jobs_run_on_sparks_own_sink(apache_kafka, secured_kafka, secured_topic, confluent_config, tmp_path):
    """The options are Spark's: its JVM sink (``format("kafka")``) runs the same jobs."""
    from sparkkafka_sink.testing.spark_jars import SparkModuleUnavailable, resolve_spark_kafka

    try:
        spark_kafka = resolve_spark_kafka()
    except SparkModuleUnavailable as e:
        pytest.skip(f"spark-sql-kafka is not available: {e}")
    bootstrap = apache_kafka.bootstrap_servers
    topics = _topics(bootstrap, ["option", "column", "stream"])
    topics["cloud"] = secured_topic(partitions=2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "jars": spark_kafka["jars"], "bootstrap": bootstrap, "topics": topics,
        "source_dir": _source_dir(tmp_path), "checkpoint": str(tmp_path / "checkpoint"),
        "properties_file": _properties_file(tmp_path, secured_kafka)}))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, str(JOBS), "kafka", str(spec)], env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-6000:]
    for name, tag in (("option", "batch"), ("column", "column"), ("stream", "stream")):
        assert _read(bootstrap, topics[name]) == _expected(tag), name
    reader = {k: v for k, v in confluent_config("SASL_SSL", "PLAIN", user="alice").items() if k != "bootstrap.servers"}
    assert _read(secured_kafka.bootstrap("SASL_SSL"), topics["cloud"], reader) == _expected("cloud")


#: Confluent Cloud's generated file with its Schema Registry lines (API key and secret)
REGISTRY_LINES_API_KEY = """\
# Required connection configs for Confluent Cloud Schema Registry
schema.registry.url={url}
basic.auth.credentials.source=USER_INFO
basic.auth.user.info={key}:{secret}
"""
#: Confluent Cloud's OAuth variant: Kafka over OAUTHBEARER (an identity pool), the registry too
CONFLUENT_CLOUD_OAUTH_PROPERTIES = """\
bootstrap.servers={bootstrap}
security.protocol=SASL_SSL
sasl.oauthbearer.token.endpoint.url={endpoint}
sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId='{client_id}' clientSecret='{client_secret}' scope='kafka' extension_logicalCluster='lkc-test' extension_identityPoolId='pool-test';
schema.registry.url={url}
bearer.auth.credentials.source=OAUTHBEARER
bearer.auth.issuer.endpoint.url={endpoint}
bearer.auth.client.id={client_id}
bearer.auth.client.secret={client_secret}
bearer.auth.scope=kafka
bearer.auth.logical.cluster=lsrc-test
bearer.auth.identity.pool.id=pool-test
ssl.truststore.location={ca}
ssl.truststore.type=PEM
"""


def _avro_values(bootstrap: str, topic: str, reader: dict, registry_url: str) -> list[str]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    got = consume_all(bootstrap, topic, expected_count=jobs.ROWS, timeout=60, config=reader)
    return sorted(deserialize(r.value, None) for r in got)


@pytest.mark.parametrize("sign_in", ["api-key", "oauth"])
def test_a_confluent_cloud_properties_file_whole_with_its_registry_lines(
        spark, sink_metrics, secured_kafka, secured_topic, confluent_config, schema_registry, token_endpoint,
        tmp_path, sign_in):
    """The file Confluent Cloud hands out, as it is, given as ``propertiesFile``: its Kafka lines
    sign in (PLAIN with an API key, or OAUTHBEARER from a token endpoint), its registry lines
    reach the registry client (the values are written in Avro with the registry's ids)."""
    topic = secured_topic(partitions=2)
    path = tmp_path / "client.properties"
    if sign_in == "api-key":
        path.write_text(Path(_properties_file(tmp_path, secured_kafka)).read_text() + REGISTRY_LINES_API_KEY.format(
            url=schema_registry.url, key="SRKEY", secret="sr-secret"))
        reader = {k: v for k, v in confluent_config("SASL_SSL", "PLAIN", user="alice").items()
                  if k != "bootstrap.servers"}
    else:
        path.write_text(CONFLUENT_CLOUD_OAUTH_PROPERTIES.format(
            bootstrap=secured_kafka.bootstrap("SASL_SSL"), endpoint=token_endpoint.url,
            client_id=token_endpoint.client_id, client_secret=token_endpoint.client_secret, url=schema_registry.url,
            ca=secured_kafka.security.pki.ca_cert_path))
        reader = {k: v for k, v in confluent_config("SASL_SSL", "OAUTHBEARER").items() if k != "bootstrap.servers"}
    options = parse_options({"propertiesFile": str(path), "topic": topic, "valueFormat": "avro"})
    registry = options.formats.registry_config
    assert registry["url"] == schema_registry.url
    assert (registry["basic.auth.user.info"] == "SRKEY:sr-secret" if sign_in == "api-key"
            else registry["bearer.auth.client.secret"] == token_endpoint.client_secret)
    (jobs.rows_frame(spark, "file").select("value").write.format(FORMAT).mode(jobs.MODE)
     .option("propertiesFile", str(path)).option("topic", topic).option("valueFormat", "avro").save())
    assert _avro_values(secured_kafka.bootstrap("SASL_SSL"), topic, reader, schema_registry.url) == sorted(
        f"file-value-{i}" for i in range(jobs.ROWS))
