"""docs/troubleshooting.md held to the code (issue 29): every entry is a message the sink really
raises, and every message the sink raises has an entry.

* Each ``###`` heading of the page is the stable start of a message in a code span, ``…``
  standing for what varies.  A function below (``@entry(heading)``) produces that message for
  real -- the driver's refusals by planning the write (``plan_write``: options, the schema, the
  Schema Registry, the cluster check against Apache Kafka or a refused port), a task's failures
  by running the write task (``run_write_task``) with the real producer against Apache Kafka
  (the secured node for ACLs, SASL and TLS; a paused node where a broker must not answer), the
  commit's by committing prepared transactions that a fencing made stale -- and the message must
  start with its heading (a task's failure: its cause, after "First failure at row …: ").  A
  heading without a function fails, and so does a function whose heading left the page.
* The page must carry the literal text of every message built in ``sparkkafka_sink/spark`` (read
  with ``ast``): a new error without an entry fails the suite.

``TROUBLESHOOTING_PRINT=1`` prints each message produced (what the page's examples are pasted from).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    YearMonthIntervalType,
)

from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.datasource import PyprodKafkaDataSource
from sparkkafka_sink.spark.driver import exactly_once_writes
from sparkkafka_sink.spark.driver.exactly_once_writes import TransactionCommitError
from sparkkafka_sink.spark.driver.planning import plan_write
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.sink_errors import SinkValidationError, SinkWriteError
from sparkkafka_sink.spark.task import task_producer, write_task
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.task_producer import TaskProducer, transactional_id
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [pytest.mark.broker]

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "troubleshooting.md"
SPARK_PACKAGE = REPO / "sparkkafka_sink" / "spark"
PREFIX = "pyprod-kafka: "

#: the page's sections, by how their title starts, and the kind of message their entries are
SECTIONS = {"Before any task": "driver", "In a task": "task", "At the commit": "commit"}
#: what precedes a task failure's cause: the task, its counts, the first failed row and where
TASK_FAILURE = (r"write task for Spark partition \d+ \(attempt \d+\) failed: .*?First failure at row \d+ of this "
                r"task's input, topic [^:]*: ")


# -- the page --------------------------------------------------------------------------------------
def page_entries() -> list[tuple[str, str]]:
    """``(section kind, heading)`` of every ``###`` entry, in page order."""
    entries, kind, fenced = [], None, False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            continue
        elif line.startswith("## "):
            kind = next((k for title, k in SECTIONS.items() if line[3:].startswith(title)), None)
        elif line.startswith("### "):
            m = re.fullmatch(r"### `([^`]+)`", line.strip())
            entries.append((kind, m.group(1) if m else line[4:]))
    return entries


def pattern(kind: str | None, heading: str) -> str:
    """The regular expression a message of the entry ``heading`` matches from its start."""
    text = ".*?".join(re.escape(part) for part in heading.split("…"))
    if kind == "task" and not heading.startswith("write task"):
        return re.escape(PREFIX) + TASK_FAILURE + text  # an entry of a cause
    return re.escape(PREFIX) + text


def _slug(heading: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", heading).strip("-")[:60]


ENTRIES = page_entries()


# -- the functions that produce each entry's message -------------------------------------------------
Messages = str | list[str]
PRODUCERS: dict[str, Callable[[World], Messages]] = {}
#: the session resources each entry's function uses (declared, so that pytest starts them for its
#: test and ``session_resources`` stops them after their last user)
NEEDS: dict[str, tuple[str, ...]] = {}
KAFKA, SECURED, REGISTRY = ("apache_kafka",), ("secured_kafka",), ("schema_registry",)
KAFKA_2_8 = ("kafka_zookeeper",)  # the oldest Apache Kafka tested, for what older brokers lack
KAFKA_AND_REGISTRY = KAFKA + REGISTRY
#: fixtures a function may ask for without declaring them: per test, and the resource under them
CHEAP = {"monkeypatch": None, "tmp_path": None, "acl_topics": "secured_kafka", "secured_topic": "secured_kafka"}


def entry(heading: str, needs: tuple[str, ...] = ()):
    """Register the function producing the message of the page's entry ``heading``; ``needs``:
    the session resources it uses."""
    def register(produce):
        assert heading not in PRODUCERS, f"two functions produce {heading!r}"
        PRODUCERS[heading], NEEDS[heading] = produce, needs
        return produce
    return register


class World:
    """What a producing function may use: the session resources its entry declares (``needs``),
    pytest's monkeypatch, a temporary directory, carol's ACL topics."""

    def __init__(self, request):
        self.request = request

    def fixture(self, name: str):
        resource = CHEAP.get(name, name)
        assert resource is None or resource in self.request.fixturenames, (
            f"{resource} is not among the resources this entry declares: add it to its @entry(needs=...)")
        return self.request.getfixturevalue(name)

    @property
    def kafka(self):
        return self.fixture("apache_kafka")

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    def topic(self, partitions: int = 1, config: dict | None = None, bootstrap: str | None = None) -> str:
        name = f"troubleshooting-{uuid.uuid4().hex[:10]}"
        create_topics(bootstrap or self.bootstrap, {name: partitions}, config=config)
        return name

    def options(self, **options) -> dict:
        """Options of a write to the session's Apache Kafka (names with dots as keyword arguments:
        ``**{"kafka.linger.ms": "0"}``)."""
        return {"kafka.bootstrap.servers": self.bootstrap, **options}


VALUE = StructType([StructField("value", StringType())])
NOWHERE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "clusterCheckTimeoutMs": "0"}  # no cluster asked
TASK = TaskInfo(stage=3, partition=5, attempt=0)
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def refused(options: dict, schema: StructType = VALUE) -> str:
    """The driver's refusal of a write planned with ``options`` (a batch write of ``schema``)."""
    with pytest.raises(SinkValidationError) as info:
        plan_write(options, schema)
    return str(info.value)


def values(*texts: str) -> pa.RecordBatch:
    return pa.record_batch({"value": pa.array(list(texts))})


def failed_task(plan: WritePlan, batches: Iterable, producers: Producers | None = None,
                task: TaskInfo = TASK) -> str:
    """The failure of a write task of ``plan`` over ``batches`` (``producers``: the task's own
    producers, remembered)."""
    with pytest.MonkeyPatch.context() as patch:
        if producers is not None:
            assert not TaskProducer(plan.options, task).pooled, "remembered producers need producerCacheTimeoutMs=0"
            patch.setattr(task_producer, "Producer", producers)
        with pytest.raises(SinkWriteError) as info:
            write_task.run_write_task(iter(batches), plan, None, task)
    return str(info.value)


VALUE_ONLY = ColumnLayout("value")


def task_plan(options: dict, layout: ColumnLayout = VALUE_ONLY) -> WritePlan:
    """A task's plan from ``options``, as the driver makes it (without asking the cluster)."""
    return WritePlan(parse_options(options), layout)


class Producers:
    """The task's ``Producer(config)`` (``changes`` applied), remembering what it made."""

    def __init__(self, **changes):
        self.made: list[Producer] = []
        self.changes = changes

    def __call__(self, config) -> Producer:
        self.made.append(Producer(config.updated(self.changes) if self.changes else config))
        return self.made[-1]

    def sent(self) -> float:
        return self.made[-1].metrics()["records_sent"] if self.made else 0


def free_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Before any task: options ---------------------------------------------------------------------------
@entry("option 'kafka.bootstrap.servers' is required")
def _(w: World) -> str:
    return refused({"topic": "t"})


@entry("unknown option '…'")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, "topc": "t"}), refused({**NOWHERE, "lingerMs": "5"})]


@entry("invalid producer option: …")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, "kafka.lingerms": "5"}), refused({**NOWHERE, "kafka.linger.ms": "-1"}),
            refused({**NOWHERE, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"})]


@entry("option 'kafka.…' is not supported: …")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, f"kafka.{key}": "x"})
            for key in ("key.serializer", "value.serializer", "transactional.id")]


@entry("option '…' is empty")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, "topic": " "}),
            refused({**NOWHERE, "topic": "t", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": ""})]


@entry("option '…' must be …")
def _(w: World) -> Messages:
    """Every option with a value out of what it accepts (the page lists each message)."""
    bad = [{"errors.tolerance": "some"}, {"errors.log.enable": "yes"}, {"normalize.schemas": "maybe"},
           {"deliveryGuarantee": "twice"},
           {"valueFormat": "parquet"}, {"value.subject.name.strategy": "TopicStrategy"}, {"coalesceBytes": "big"}, {"clusterCheckTimeoutMs": "-5"},
           {"producerCacheTimeoutMs": "1h"}, {"maxRecordsPerSecond": "0"},
           {"deliveryGuarantee": "exactly-once", "batchId": "-1"},
           {"deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "x" * 201}]
    return [refused({**NOWHERE, "topic": "t", **options}) for options in bad]


@entry("option 'propertiesFile': cannot read …")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "propertiesFile": "/etc/kafka/client.properties"})


@entry("option 'propertiesFile': …")
def _(w: World) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "client.properties"
        path.write_text("bootstrap.servers\n")
        return refused({**NOWHERE, "topic": "t", "propertiesFile": str(path)})


@entry("option 'databricks.serviceCredential.scope' is not used here")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "databricks.serviceCredential": "msk-writer",
                    "databricks.serviceCredential.scope": "https://www.googleapis.com/auth/cloud-platform"})


def _java_job_file(serializer: str) -> str:
    """The refusal of a Java job's producer.properties whose value.serializer is ``serializer``."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "producer.properties"
        path.write_text(f"bootstrap.servers=broker:9092\nvalue.serializer={serializer}\n")
        return refused({**NOWHERE, "topic": "t", "propertiesFile": str(path)})


@entry("option 'propertiesFile' (…): line …serializer=…: the sink serializes the … column itself")
def _(w: World) -> str:
    return _java_job_file("io.confluent.kafka.serializers.KafkaAvroSerializer")


@entry("option 'propertiesFile' (…): line …serializer=…: the sink writes the … column's bytes")
def _(w: World) -> str:
    return _java_job_file("org.apache.kafka.common.serialization.LongSerializer")


@entry("option 'errors.deadletterqueue.topic.name' needs errors.tolerance=all")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "errors.deadletterqueue.topic.name": "t-dlq"})


@entry("option 'errors.deadletterqueue.topic.name' names the topic the rows are written to")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "t"})


@entry("option 'traceHeaders' is 'task', which writes each task's span, but 'openTelemetry' is false")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "traceHeaders": "task", "openTelemetry": "false"})


@entry("option 'traceHeaders' is 'task', which writes each task's OpenTelemetry span, but OpenTelemetry is not installed")
def _(w: World) -> str:
    from unittest.mock import patch

    from sparkkafka_sink import otel

    with patch.object(otel, "available", lambda: False):  # (installed here: the [test] extra has it)
        return refused({**NOWHERE, "topic": "t", "traceHeaders": "task"})


# Before any task: the DataFrame's schema --------------------------------------------------------------
@entry("save mode 'overwrite' is not supported")
def _(w: World) -> str:
    with pytest.raises(SinkValidationError) as info:
        PyprodKafkaDataSource({**NOWHERE, "topic": "t"}).writer(VALUE, overwrite=True)
    return str(info.value)


@entry("the DataFrame has no 'value' column")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t"}, StructType([StructField("payload", StringType())]))


@entry("traceHeaders=column takes each row's W3C traceparent from a string column 'traceparent'")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "traceHeaders": "column"})


@entry("no topic: the DataFrame has no 'topic' column")
def _(w: World) -> str:
    return refused(NOWHERE)


@entry("column '…' has type …; accepted …")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, "topic": "t"}, StructType([StructField("value", IntegerType())])),
            refused({**NOWHERE, "topic": "t"}, StructType([StructField("value", StringType()),
                                                            StructField("headers", StringType())]))]


# Before any task: serialization and the Schema Registry ----------------------------------------------
AVRO = {**NOWHERE, "topic": "t", "valueFormat": "avro", "schema.registry.url": "http://127.0.0.1:8081"}
PROTOBUF = {**AVRO, "valueFormat": "protobuf"}


@entry("…Format=… writes in the Schema Registry's format: set option 'schema.registry.url'")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "valueFormat": "avro"})


@entry("options 'schema.registry.*' are used only with valueFormat or keyFormat avro, json or protobuf")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "schema.registry.url": "http://127.0.0.1:8081"})


@entry("invalid Schema Registry option: …")
def _(w: World) -> Messages:
    return [refused({**AVRO, "schema.registry.url": "registry:8081"}),
            refused({**AVRO, "schema.registry.user.info": "me:secret"})]


@entry("option 'use.latest.version' writes with the subject's latest schema, which needs "
       "auto.register.schemas=false")
def _(w: World) -> str:
    return refused({**AVRO, "use.latest.version": "true", "auto.register.schemas": "true"})


@entry("option '…' needs …Format=avro, json or protobuf")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "valueSchema": '"string"'})


@entry("option '…DescriptorFile' needs …Format=protobuf")
def _(w: World) -> str:
    return refused({**AVRO, "valueDescriptorFile": "shop.pb"})


@entry("options '…Schema' and '…DescriptorFile' both give the … schema")
def _(w: World) -> str:
    return refused({**PROTOBUF, "valueDescriptorFile": "shop.pb", "valueSchema": 'syntax = "proto3";'})


@entry("options '…RecordName' and '…RecordNamespace' name the derived schema's record")
def _(w: World) -> str:
    return refused({**AVRO, "valueSchema": '"string"', "valueRecordName": "Order"})


@entry("…Format=…, but the DataFrame has no '…' column")
def _(w: World) -> str:
    return refused({**AVRO, "keyFormat": "avro"})


@entry("…Format=…: option '…Schema': …")
def _(w: World) -> Messages:
    return [refused({**AVRO, "valueSchema": '"int"'}),
            refused({**PROTOBUF, "valueSchema": 'syntax = "proto3"; message Order { enum Kind { A = 0; } }'},
                    StructType([StructField("value", StructType([StructField("kind", StringType())]))]))]


@entry("…Format=…: the … column: …")
def _(w: World) -> Messages:
    return [refused(AVRO, StructType([StructField("value", MapType(IntegerType(), StringType()))])),
            refused(PROTOBUF)]


@entry("column '…' of type … cannot be serialized")
def _(w: World) -> str:
    return refused(AVRO, StructType([StructField("value", YearMonthIntervalType())]))


@entry("…Format=…: the Schema Registry could not give the … schema's id for …", needs=REGISTRY)
def _(w: World) -> Messages:
    registry = w.fixture("schema_registry")
    missing = f"troubleshooting-{uuid.uuid4().hex[:8]}"  # its subject, <topic>-value, does not exist
    return [refused({**AVRO, "topic": missing, "schema.registry.url": registry.url, "auto.register.schemas": "false"}),
            refused({**AVRO, "schema.registry.url": f"http://127.0.0.1:{free_port()}",
                     "schema.registry.max.retries": "0"})]


# Before any task: the cluster check -----------------------------------------------------------------
@entry("nothing listens at kafka.bootstrap.servers=…")
def _(w: World) -> str:
    return refused({"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "topic": "t"})


@entry("no Kafka broker answered at kafka.bootstrap.servers=… within … s", needs=KAFKA)
def _(w: World) -> str:
    node = w.kafka.nodes[0]
    node.pause()  # the port takes connections, nothing answers: a hung broker
    try:
        return refused(w.options(topic="t", clusterCheckTimeoutMs="1000"))
    finally:
        node.resume()


@entry("the cluster at kafka.bootstrap.servers=… refused this client: …", needs=SECURED)
def _(w: World) -> Messages:
    secured = w.fixture("secured_kafka")
    return [refused({**carol(secured, password="wrong"), "topic": "t"}),
            refused({"kafka.bootstrap.servers": secured.bootstrap("SSL"), "topic": "t"}),
            refused({"kafka.bootstrap.servers": secured.bootstrap("SSL"), "kafka.security.protocol": "SSL",
                     "topic": "t"})]


@entry("topic '…' does not exist", needs=KAFKA)
def _(w: World) -> str:
    return refused(w.options(topic=f"missing-{uuid.uuid4().hex[:8]}", **{"kafka.allow.auto.create.topics": "false"}))


@entry("'…' is not a valid topic name", needs=KAFKA)
def _(w: World) -> str:
    return refused(w.options(topic="orders by day"))


@entry("not authorized to access topic '…'", needs=SECURED)
def _(w: World) -> str:
    secured, topics = acl_topics(w)
    return refused({**carol(secured), "topic": topics["hidden"]})


@entry("not authorized to write to topic '…'", needs=SECURED)
def _(w: World) -> str:
    secured, topics = acl_topics(w)
    return refused({**carol(secured), "topic": topics["describe_only"]})


@entry("the cluster check at kafka.bootstrap.servers=… failed: …", needs=KAFKA)
def _(w: World) -> str:
    """A broker answering the check's Metadata request with an error the check does not expect
    (UNKNOWN_SERVER_ERROR for the topic), through a fault proxy in front of the session's node."""
    from faults.harness import METADATA, FaultProxy

    with FaultProxy(0, "127.0.0.1", w.kafka.nodes[0].port, rewrite_metadata=True) as proxy:
        proxy.mutate_next_response(_metadata_topic_error(-1, proxy.port), api_key=METADATA, times=10)
        return refused({"kafka.bootstrap.servers": proxy.address, "topic": "t"})


def _metadata_topic_error(code: int, proxy_port: int):
    """A ``FaultProxy.mutate_next_response`` function: a Metadata answer whose topics all carry
    the error ``code`` (its brokers still advertised at the proxy)."""
    from sparkkafka_sink.protocol import messages
    from sparkkafka_sink.protocol.header import decode_response_header

    def mutate(frame: bytes, api_key: int, version: int) -> bytes:
        _, offset = decode_response_header(memoryview(frame), api_key, version)
        answer = messages.decode_body("MetadataResponse", memoryview(frame)[offset:], version)
        for broker in answer.brokers:
            broker.host, broker.port = "127.0.0.1", proxy_port
        for topic in answer.topics:
            topic.error_code, topic.partitions = code, []
        return frame[:offset] + b"".join(bytes(b) for b in messages.encode_body(answer, version))
    return mutate


_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def carol(secured, password: str = "carol-secret") -> dict:
    """Options writing as ``carol`` (SASL/PLAIN) to the secured node."""
    return {"kafka.bootstrap.servers": secured.bootstrap("SASL_PLAINTEXT"),
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": f'{_PLAIN} required username="carol" password="{password}";',
            "kafka.max.block.ms": "5000"}


def acl_topics(w: World):
    """The secured node and the topics of carol's ACL tests (``describe_only``, ``hidden``)."""
    return w.fixture("secured_kafka"), w.fixture("acl_topics")


# Before any task: exactly-once ----------------------------------------------------------------------
@entry("option '…' needs deliveryGuarantee=exactly-once")
def _(w: World) -> Messages:
    return [refused({**NOWHERE, "topic": "t", "transactionalIdPrefix": "orders"}),
            refused({**NOWHERE, "topic": "t", "batchId": "7"})]


@entry("deliveryGuarantee=exactly-once needs kafka.acks=all")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "deliveryGuarantee": "exactly-once", "kafka.acks": "1"})


@entry("deliveryGuarantee=exactly-once needs idempotence")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"})


@entry('deliveryGuarantee=exactly-once on writeStream (or with batchId in foreachBatch) needs '
       '.option("checkpointLocation", path)')
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "deliveryGuarantee": "exactly-once", "batchId": "7"})


@entry("deliveryGuarantee=exactly-once: the driver commits the tasks' transactions, so it connects to the cluster as "
       "they do")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "deliveryGuarantee": "exactly-once", "kafka.security.protocol": "SSL",
                    "kafka.ssl.truststore.location": "/etc/kafka/ca-shipped-to-the-executors-only.pem"})


@entry("deliveryGuarantee=exactly-once: the exactly-once decisions topic '…' does not exist and this principal may "
       "not create it", needs=KAFKA)
def _(w: World) -> str:
    """The decisions topic missing, and the cluster refusing to create it (a fault proxy answers
    the driver's CreateTopics with TOPIC_AUTHORIZATION_FAILED)."""
    from faults.harness import FaultProxy

    from sparkkafka_sink.protocol import messages
    from sparkkafka_sink.protocol.api import ApiKey
    from sparkkafka_sink.protocol.header import decode_response_header

    def refuse(frame: bytes, api_key: int, version: int) -> bytes:
        header, offset = decode_response_header(memoryview(frame), api_key, version)
        answer = messages.decode_body("CreateTopicsResponse", memoryview(frame)[offset:], version)
        for topic in answer.topics:
            topic.error_code = 29
        return bytes(frame[:offset]) + b"".join(bytes(b) for b in messages.encode_body(answer, version))

    with FaultProxy(0, "127.0.0.1", w.kafka.nodes[0].port, rewrite_metadata=True) as proxy:
        proxy.mutate_next_response(refuse, api_key=ApiKey.CREATE_TOPICS)
        return refused({"kafka.bootstrap.servers": proxy.address, "topic": w.topic(), "clusterCheckTimeoutMs": "0",
                        "deliveryGuarantee": "exactly-once", "decisionTopic": f"decisions-{uuid.uuid4().hex[:8]}"})


def decision_topic(w: World, partitions: int, **configs: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"decisions-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": w.kafka.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)
    create_topics(w.kafka.bootstrap_servers, {name: partitions}, timeout=30)
    return name


@entry("deliveryGuarantee=exactly-once: the exactly-once decisions topic '…' has … partitions: it needs at least 16",
       needs=KAFKA)
def _(w: World) -> str:
    return refused(w.options(topic=w.topic(), deliveryGuarantee="exactly-once",
                             decisionTopic=decision_topic(w, 3, **{"cleanup.policy": "compact"})))


@entry("deliveryGuarantee=exactly-once: the exactly-once decisions topic '…' has cleanup.policy=…", needs=KAFKA)
def _(w: World) -> str:
    return refused(w.options(topic=w.topic(), deliveryGuarantee="exactly-once",
                             decisionTopic=decision_topic(w, 16, **{"cleanup.policy": "delete"})))


@entry("deliveryGuarantee=exactly-once: the principal may not … the exactly-once decisions topic '…'", needs=SECURED)
def _(w: World) -> str:
    """carol may write and describe the decisions topic, not read it."""
    from kafka_helpers import allow_on_topic

    secured, _ = acl_topics(w)
    topic = w.fixture("secured_topic")(partitions=16)
    allow_on_topic(secured.bootstrap(), topic, "User:carol", ["WRITE", "DESCRIBE"])
    return refused({**carol(secured), "topic": acl_topics(w)[1]["writable"], "clusterCheckTimeoutMs": "0",
                    "deliveryGuarantee": "exactly-once", "decisionTopic": topic,
                    "transactionalIdPrefix": f"carol-{uuid.uuid4().hex[:6]}"})


@entry("deliveryGuarantee=exactly-once needs kafka.transaction.timeout.ms of at least 60000")
def _(w: World) -> str:
    return refused({**NOWHERE, "topic": "t", "deliveryGuarantee": "exactly-once",
                    "kafka.transaction.timeout.ms": "30000"})


@entry("deliveryGuarantee=exactly-once: the driver's lease keeper could not start: …", needs=KAFKA)
def _(w: World) -> str:
    """Its files cannot be written: ``$SPARKKAFKA_LEASE_DIR`` names a file, not a directory."""
    not_a_directory = w.fixture("tmp_path") / "a-file"
    not_a_directory.write_text("")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARKKAFKA_LEASE_DIR", str(not_a_directory))
        return refused(w.options(topic=w.topic(), deliveryGuarantee="exactly-once"))


@entry("kafka.transaction.timeout.ms=… is more than the brokers allow", needs=KAFKA)
def _(w: World) -> str:
    return refused(w.options(topic=w.topic(), deliveryGuarantee="exactly-once",
                             **{"kafka.transaction.timeout.ms": "3600000"}))


@entry("deliveryGuarantee=exactly-once: the transaction coordinator refused the driver's probe under transactional id "
       "'…-probe': …", needs=KAFKA)
def _(w: World) -> str:
    """The coordinator refusing the probe's InitProducerId with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    through a fault proxy in front of the session's node (it rewrites the coordinator's address too)."""
    from faults.harness import INIT_PRODUCER_ID, FaultProxy

    with FaultProxy(0, "127.0.0.1", w.kafka.nodes[0].port, rewrite_metadata=True) as proxy:
        proxy.mutate_next_response(_error_code("InitProducerIdResponse", 53), api_key=INIT_PRODUCER_ID)
        return refused({"kafka.bootstrap.servers": proxy.address, "topic": w.topic(),
                        "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "orders-eos",
                        "clusterCheckTimeoutMs": "0"})


@entry("deliveryGuarantee=exactly-once: the driver could not end the open writes under '…' whose driver is gone: …",
       needs=KAFKA)
def _(w: World) -> str:
    """A transaction a dead write left open under the prefix (its id names a driver whose lease
    never beat), and the coordinator refusing the driver's question about it (a fault proxy
    answers its DescribeTransactions with TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    from faults.harness import FaultProxy

    from sparkkafka_sink.protocol.api import ApiKey

    topic, prefix = w.topic(), f"eos-{uuid.uuid4().hex[:8]}"
    left = Producer({"bootstrap.servers": w.bootstrap, "transactional.id": f"{prefix}-r{'d' * 8}{'0' * 6}-p0-t1"})
    left.init_transactions()
    left.begin_transaction()
    left.send(topic, value=b"left open").get(30)
    try:
        with FaultProxy(0, "127.0.0.1", w.kafka.nodes[0].port, rewrite_metadata=True) as proxy:
            proxy.mutate_next_response(_error_code("DescribeTransactionsResponse", 53), api_key=ApiKey.DESCRIBE_TRANSACTIONS)
            return refused({"kafka.bootstrap.servers": proxy.address, "topic": topic,
                            "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": prefix,
                            "clusterCheckTimeoutMs": "0"})
    finally:
        left.abort_transaction()
        left.close()


@entry("deliveryGuarantee=exactly-once needs brokers of Apache Kafka … or newer", needs=KAFKA_2_8)
def _(w: World) -> str:
    """Apache Kafka 2.8 answers the probe but lacks ListTransactions and DescribeTransactions."""
    old = w.fixture("kafka_zookeeper")
    return refused({"kafka.bootstrap.servers": old.bootstrap_servers, "deliveryGuarantee": "exactly-once",
                    "topic": w.topic(bootstrap=old.bootstrap_servers)})


def _error_code(response: str, code: int):
    """A ``FaultProxy.mutate_next_response`` function: the ``response`` answered with ``code``."""
    from sparkkafka_sink.protocol import messages
    from sparkkafka_sink.protocol.header import decode_response_header

    def mutate(frame: bytes, api_key: int, version: int) -> bytes:
        _, offset = decode_response_header(memoryview(frame), api_key, version)
        answer = messages.decode_body(response, memoryview(frame)[offset:], version)
        for part in getattr(answer, "transaction_states", None) or [answer]:  # DescribeTransactions: per id
            part.error_code = code
        return frame[:offset] + b"".join(bytes(b) for b in messages.encode_body(answer, version))
    return mutate


# In a task: rows the producer refuses ----------------------------------------------------------------
@entry("RecordTooLargeError: Row … larger than …, the value of kafka.max.request.size", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(), **{"kafka.max.request.size": "2000"}))
    return failed_task(plan, [values("small", "x" * 3000)])


@entry("RecordTooLargeError: Attempt to allocate … bytes, but kafka.buffer.memory is only … bytes", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(), **{"kafka.buffer.memory": "32768"}))
    return failed_task(plan, [values("small", "x" * 40_000)])


@entry("InvalidPartitionError: Row …: partition … of topic '…' does not exist", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(partitions=2)), ColumnLayout("value", partition="partition"))
    return failed_task(plan, [pa.record_batch({"value": pa.array(["a", "b"]),
                                               "partition": pa.array([0, 7], pa.int32())})])


@entry("InvalidHeaderError: Row …: its headers hold a null element or a null key", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic()), ColumnLayout("value", headers="headers"))
    headers = pa.array([[{"key": "source", "value": b"web"}], [{"key": None, "value": b"web"}]], HEADERS)
    return failed_task(plan, [pa.record_batch({"value": pa.array(["a", "b"]), "headers": headers})])


@entry("InvalidRecordError: topic is null and no 'topic' option is set", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(), ColumnLayout("value", topic="topic"))
    return failed_task(plan, [pa.record_batch({"value": pa.array(["a", "b"]), "topic": pa.array([w.topic(), None])})])


@entry("RecordSchemaError: Row …: field …", needs=KAFKA_AND_REGISTRY)
def _(w: World) -> Messages:
    registry = w.fixture("schema_registry")
    schema = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "qty", "type": "int"}]})
    plan = plan_write(w.options(topic=w.topic(), valueFormat="avro", valueSchema=schema,
                                **{"schema.registry.url": registry.url}),
                      StructType([StructField("value", StructType([StructField("qty", IntegerType())]))]))
    orders = pa.array([{"qty": 1}, {"qty": None}], pa.struct([("qty", pa.int32())]))
    tagged = StructType([StructField("value", StructType([StructField("tags", ArrayType(StringType()))]))])
    protobuf = plan_write(w.options(topic=w.topic(), valueFormat="protobuf", **{"schema.registry.url": registry.url}),
                          tagged)
    tags = pa.array([{"tags": ["a"]}, {"tags": ["a", None]}], pa.struct([("tags", pa.list_(pa.string()))]))
    return [failed_task(plan, [pa.record_batch({"value": orders})]),
            failed_task(protobuf, [pa.record_batch({"value": tags})])]


@entry("TopicAuthorizationFailedError: [Error 29] TOPIC_AUTHORIZATION_FAILED", needs=SECURED)
def _(w: World) -> str:
    secured, topics = acl_topics(w)
    plan = task_plan(carol(secured), ColumnLayout("value", topic="topic"))
    return failed_task(plan, [pa.record_batch({"value": pa.array(["a"]), "topic": pa.array([topics["describe_only"]])})])


# In a task: waiting for the cluster ------------------------------------------------------------------
@entry("BufferExhaustedError: Failed to allocate … bytes within the configured max blocking time … ms "
       "(kafka.max.block.ms)", needs=KAFKA)
def _(w: World) -> str:
    """More rows than buffer.memory holds in front of a paused broker; resumed once the task
    stopped sending and waits in its flush, so the rows queued before are delivered."""
    node, producers = w.kafka.nodes[0], Producers()
    plan = task_plan(w.options(topic=w.topic(partitions=3), coalesceBytes="0", producerCacheTimeoutMs="0",
                               **{"kafka.buffer.memory": str(1 << 20), "kafka.max.block.ms": "1000"}))

    def rows():
        yield values("warm-up")
        wait_until("the first row delivered", lambda: producers.sent() == 1)
        node.pause()
        yield values(*(f"{i:06d}" + "v" * 1018 for i in range(4000)))

    def resume_once_flushing():
        wait_until("the task to flush after the memory ran out",
                   lambda: producers.made and producers.made[0]._accumulator._flushes_in_progress > 0, timeout=60)
        node.resume()

    resumer = threading.Thread(target=resume_once_flushing, daemon=True)
    resumer.start()
    try:
        return failed_task(plan, rows(), producers)
    finally:
        resumer.join(60)
        if node.paused:
            node.resume()


@entry("KafkaTimeoutError: Topic '…' not present in metadata after … ms (kafka.max.block.ms)")
def _(w: World) -> str:
    plan = task_plan({"kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "topic": "orders",
                      "kafka.max.block.ms": "1000"})
    return failed_task(plan, [values("a")])


@entry("UnknownTopicError: Topic '…' not present in metadata after … ms (kafka.max.block.ms): the broker says "
       "UNKNOWN_TOPIC_OR_PARTITION", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=f"missing-{uuid.uuid4().hex[:8]}",
                               **{"kafka.allow.auto.create.topics": "false", "kafka.max.block.ms": "1000"}))
    return failed_task(plan, [values("a")])


@entry("KafkaTimeoutError: Expiring … record(s) for …: … ms has passed since batch creation "
       "(kafka.delivery.timeout.ms=…)", needs=KAFKA)
def _(w: World) -> str:
    node, producers = w.kafka.nodes[0], Producers()
    plan = task_plan(w.options(topic=w.topic(), coalesceBytes="0", producerCacheTimeoutMs="0", **{
        "kafka.linger.ms": "0", "kafka.request.timeout.ms": "1000", "kafka.delivery.timeout.ms": "1500"}))

    def rows():
        yield values("first")
        wait_until("the first row delivered", lambda: producers.sent() == 1)
        node.pause()  # the second row waits for an answer until delivery.timeout.ms
        yield values("second")

    try:
        return failed_task(plan, rows(), producers)
    finally:
        node.resume()


# In a task: the broker refuses ----------------------------------------------------------------------
@entry("MessageTooLargeError: [Error 10] MESSAGE_TOO_LARGE", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(config={"max.message.bytes": "2000"})))
    return failed_task(plan, [values("small", "x" * 3000, "small")])


@entry("AuthenticationError: …", needs=SECURED)
def _(w: World) -> str:
    secured = w.fixture("secured_kafka")
    return failed_task(task_plan({**carol(secured, password="wrong"), "topic": "t"}), [values("a")])


@entry("SslError: …", needs=SECURED)
def _(w: World) -> str:
    secured = w.fixture("secured_kafka")
    plan = task_plan({"kafka.bootstrap.servers": secured.bootstrap("SSL"), "kafka.security.protocol": "SSL",
                      "topic": "t"})
    return failed_task(plan, [values("a")])


# In a task: exactly-once ----------------------------------------------------------------------------
@entry("… under exactly-once a record the broker refuses after it was sent cannot be dead-lettered", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(config={"max.message.bytes": "2000"}), deliveryGuarantee="exactly-once",
                               **{"errors.tolerance": "all"}))
    return failed_task(plan, [values("small", "x" * 3000, "small")])


@entry("write task for Spark partition … (attempt …): the driver already ended this write", needs=KAFKA)
def _(w: World) -> str:
    plan = task_plan(w.options(topic=w.topic(), deliveryGuarantee="exactly-once"))
    winner = write_task.run_write_task(iter([values("a")]), plan, None, task=TaskInfo(0, 1, 0, attempt_id=1))
    exactly_once_writes.commit_all([winner], plan.options)
    return failed_task(plan, [values("late")], task=TaskInfo(0, 1, 1, attempt_id=2))


@entry("ProducerFencedError: Producer with transactional id '…' was fenced", needs=KAFKA)
def _(w: World) -> str:
    """A late attempt that began its transaction before the driver ended the write: the driver's
    sweep fences it, and its next send fails."""
    plan = task_plan(w.options(topic=w.topic(), deliveryGuarantee="exactly-once", coalesceBytes="0"))
    winner = write_task.run_write_task(iter([values("a")]), plan, None, task=TaskInfo(0, 1, 0, attempt_id=1))
    producers = Producers()

    def rows():
        yield values("late-1")
        wait_until("the late attempt's first row delivered", lambda: producers.sent() == 1)
        exactly_once_writes.commit_all([winner], plan.options)  # the driver ends the write now
        yield values("late-2")

    return failed_task(plan, rows(), producers, TaskInfo(0, 1, 1, attempt_id=2))


# In a task: the task's own steps -------------------------------------------------------------------
@entry("write task for Spark partition … (attempt …) failed: could not open its producer: …")
def _(w: World) -> str:
    """A truststore that is not on the executor (the driver checks only files it has)."""
    plan = task_plan({**NOWHERE, "topic": "t", "kafka.security.protocol": "SSL",
                      "kafka.ssl.truststore.location": str(w.fixture("tmp_path") / "missing-ca.pem")})
    return failed_task(plan, [values("a")])


@entry("write task for Spark partition … (attempt …) failed: could not begin its exactly-once transaction: …",
       needs=KAFKA)
def _(w: World) -> str:
    """The transaction coordinator not answering (the node paused) within kafka.max.block.ms."""
    plan = task_plan(w.options(topic=w.topic(), deliveryGuarantee="exactly-once", **{"kafka.max.block.ms": "2000"}))
    node = w.kafka.nodes[0]
    node.pause()
    try:
        return failed_task(plan, [values("a")])
    finally:
        node.resume()


@entry("write task for Spark partition … (attempt …) failed: could not serialize its rows: …", needs=KAFKA_AND_REGISTRY)
def _(w: World) -> str:
    """Subjects named after a topic column's values, asked of the registry by the task: the
    subject does not exist and auto-registration is off."""
    schema = StructType([StructField("value", StructType([StructField("id", IntegerType())])),
                         StructField("topic", StringType())])
    plan = plan_write(w.options(valueFormat="avro", clusterCheckTimeoutMs="0",
                                **{"schema.registry.url": w.fixture("schema_registry").url,
                                   "auto.register.schemas": "false"}), schema)
    assert plan.value_serializer is not None and plan.value_serializer.schema_id is None  # left to the tasks
    rows = pa.record_batch({"value": pa.array([{"id": 1}], pa.struct([("id", pa.int32())])),
                            "topic": pa.array([w.topic()])})
    return failed_task(plan, [rows])


@entry("write task for Spark partition … (attempt …): this exactly-once write has run … s, close to "
       "kafka.transaction.timeout.ms …", needs=KAFKA)
def _(w: World) -> str:
    """A task of a write planned longer ago than 90 % of its transaction timeout."""
    plan = task_plan(w.options(topic=w.topic(), deliveryGuarantee="exactly-once"))
    timeout_ms = plan.options.producer_config["transaction.timeout.ms"]
    late = dataclasses.replace(plan, planned_at_ms=time.time() * 1000 - timeout_ms * 1.2)
    return failed_task(late, [values("a")])


# In a task: the flush, the dead letters --------------------------------------------------------------
@entry("write task for Spark partition … (attempt …): flush did not finish …", needs=KAFKA)
def _(w: World) -> str:
    """A producer that holds its records past the plan's bound (its own delivery.timeout.ms is
    longer) in front of a paused broker; the margin after the bound shortened to half a second."""
    w.fixture("monkeypatch").setattr(write_task, "_FLUSH_MARGIN_S", 0.5)
    node, producers = w.kafka.nodes[0], Producers(**{"delivery.timeout.ms": 120_000})
    plan = task_plan(w.options(topic=w.topic(), coalesceBytes="0", producerCacheTimeoutMs="0", **{
        "kafka.linger.ms": "0", "kafka.request.timeout.ms": "1000", "kafka.delivery.timeout.ms": "1500"}))

    def rows():
        yield values("first")
        wait_until("the first row delivered", lambda: producers.sent() == 1)
        node.pause()
        yield values("second")

    try:
        return failed_task(plan, rows(), producers)
    finally:
        node.resume()


@entry("write task for Spark partition … (attempt …) failed: writing bad rows to the dead-letter topic '…' failed", needs=KAFKA)
def _(w: World) -> str:
    """A bad row (a partition that does not exist) too large for the dead-letter topic."""
    dead_letters = w.topic(config={"max.message.bytes": "2000"})
    plan = task_plan(w.options(topic=w.topic(), **{"errors.tolerance": "all",
                                                   "errors.deadletterqueue.topic.name": dead_letters}),
                     ColumnLayout("value", partition="partition"))
    return failed_task(plan, [pa.record_batch({"value": pa.array(["a", "x" * 3000]),
                                               "partition": pa.array([0, 9], pa.int32())})])


# At the commit --------------------------------------------------------------------------------------
def started(options: dict) -> WritePlan:
    """The plan of an exactly-once write as the driver starts it (its owner named, its keeper beating)."""
    return WritePlan(exactly_once_writes.start_exactly_once(parse_options(options)), VALUE_ONLY)


def written(plan: WritePlan, attempt_id: int = 7) -> TaskCommitMessage:
    """A task of ``plan`` that wrote one row in its transaction, handed over."""
    return write_task.run_write_task(iter([values("a")]), plan, None, task=TaskInfo(0, 0, 0, attempt_id=attempt_id))


def commit_refused(plan: WritePlan, message: TaskCommitMessage) -> str:
    with pytest.raises(TransactionCommitError) as info:
        exactly_once_writes.commit_all([message], plan.options)
    return str(info.value)


@entry("exactly-once write … was ended before its driver closed it", needs=KAFKA)
def _(w: World) -> str:
    """An ender (the next write, judging this driver gone) ended the write before the commit."""
    from sparkkafka_sink.exactly_once.decision_log import DecisionLog
    from sparkkafka_sink.exactly_once.settle import settle

    plan = started(w.options(topic=w.topic(), deliveryGuarantee="exactly-once"))
    message = written(plan)
    with TransactionAdmin(plan.options.producer_config) as admin:
        settle(admin, DecisionLog(admin), plan.options.write(), time.monotonic() + 30)
    return commit_refused(plan, message)


@entry("exactly-once write …: the transactions of … are no longer open", needs=KAFKA)
def _(w: World) -> str:
    """A task's transaction a newer producer with its id fenced (the coordinator aborted it)."""
    plan = started(w.options(topic=w.topic(), deliveryGuarantee="exactly-once"))
    message = written(plan)
    with TransactionAdmin(plan.options.producer_config) as admin:
        admin.fence(transactional_id(plan.options, TaskInfo(0, 0, 0, attempt_id=7)), time.monotonic() + 30)
    return commit_refused(plan, message)


def held_commit(w: World, holding: bytes, api_key: int | None = None, also: tuple | None = None) -> str:
    """The driver's commit through a fault proxy that holds the request (EndTxn unless
    ``api_key``) naming ``holding`` past the commit's bound (made short here), and the request
    ``also`` picks (a predicate and an api key); the write is then ended as decided."""
    from faults.harness import FaultProxy

    from sparkkafka_sink.exactly_once.decision_log import DecisionLog
    from sparkkafka_sink.exactly_once.settle import settle
    from sparkkafka_sink.protocol.api import ApiKey

    with FaultProxy(0, "127.0.0.1", w.kafka.nodes[0].port, rewrite_metadata=True) as proxy:
        plan = started({"kafka.bootstrap.servers": proxy.address, "topic": w.topic(), "clusterCheckTimeoutMs": "0",
                        "deliveryGuarantee": "exactly-once"})
        message = written(plan)
        proxy.blackhole_request(lambda frame: holding in frame, ApiKey.END_TXN if api_key is None else api_key)
        if also is not None:
            proxy.blackhole_request(*also)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(exactly_once_writes, "_END_TIMEOUT_S", 6.0)
            text = commit_refused(plan, message)
        proxy.clear_faults()
        proxy.cut_all()
        with TransactionAdmin(plan.options.producer_config) as admin:
            settle(admin, DecisionLog(admin), plan.options.write(), time.monotonic() + 60)
    return text


@entry("exactly-once write …: the decision's transaction got no answer", needs=KAFKA)
def _(w: World) -> str:
    return held_commit(w, b"-decision")


@entry("exactly-once write …: whether its decision was recorded is not known here", needs=KAFKA)
def _(w: World) -> str:
    """The decision's EndTxn held, and so is the driver's own fence of the decision id after it
    (its second InitProducerId naming it: the first is the close)."""
    from sparkkafka_sink.protocol.api import ApiKey

    seen = []

    def second_init(frame: bytes) -> bool:
        if b"-decision" in frame:
            seen.append(frame)
        return len(seen) >= 2

    return held_commit(w, b"-decision", also=(second_init, ApiKey.INIT_PRODUCER_ID))


@entry("exactly-once write …: its oldest transactions have … s left of their kafka.transaction.timeout.ms",
       needs=KAFKA)
def _(w: World) -> str:
    """A task that took all but a few seconds of its transaction's time (its coordinator's clock
    moved on: here the transaction is one that began the timeout's length less 20 s ago --
    a minute's timeout, so 40 s of waiting stand for it)."""
    plan = started(w.options(topic=w.topic(), deliveryGuarantee="exactly-once",
                             **{"kafka.transaction.timeout.ms": "60000"}))
    message = written(plan)
    from sparkkafka_sink.exactly_once import commit as commit_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(commit_module, "time", type("Later", (), {"time": staticmethod(lambda: time.time() + 36),
                                                                "monotonic": staticmethod(time.monotonic)}))
        return commit_refused(plan, message)


@entry("exactly-once write …: its commit failed before anything was decided", needs=KAFKA)
def _(w: World) -> str:
    """The sweep's listing of the write gets no answer (the proxy holds the ListTransactions
    asking for the write's ids: its pattern names them)."""
    from sparkkafka_sink.protocol.api import ApiKey

    return held_commit(w, b"-r", ApiKey.LIST_TRANSACTIONS)


@entry("exactly-once write … is decided (… transactions), but the commits of … got no answer", needs=KAFKA)
def _(w: World) -> str:
    return held_commit(w, b"-p0-t")


# -- the tests ------------------------------------------------------------------------------------------
def test_the_page_has_entries_in_its_three_sections():
    assert [k for k in SECTIONS.values() if any(kind == k for kind, _ in ENTRIES)] == list(SECTIONS.values())
    assert all(kind is not None for kind, _ in ENTRIES), "an entry outside the three sections"
    headings = [h for _, h in ENTRIES]
    assert len(set(headings)) == len(headings), "two entries with one heading"
    for heading in headings:
        assert re.fullmatch(r"[^`]+", heading) and not heading.startswith(PREFIX), (
            f"### {heading}: an entry's heading is one code span, the message after {PREFIX!r}")


def _entries(needs: tuple[str, ...]) -> list:
    """The page's entries whose functions use ``needs`` (an entry without a function: with none)."""
    return [pytest.param(kind, heading, id=f"{i:02d}-{_slug(heading)}") for i, (kind, heading) in enumerate(ENTRIES)
            if NEEDS.get(heading, ()) == needs]


def check_entry(request, kind: str, heading: str) -> None:
    """Produce the entry's message for real; it must start as its heading says."""
    produce = PRODUCERS.get(heading)
    assert produce is not None, f"no function here produces the entry {heading!r}: add one (@entry)"
    produced = produce(World(request))
    messages = [produced] if isinstance(produced, str) else produced
    assert messages
    for message in messages:
        if os.environ.get("TROUBLESHOOTING_PRINT"):
            print(f"\n[{heading}]\n{message}", file=sys.stderr)
        assert re.match(pattern(kind, heading), message, re.S), f"{heading!r} is not how this starts:\n{message}"


# one test per set of session resources, each declaring its own (the entries run in that order)
@pytest.mark.parametrize("kind, heading", _entries(()))
def test_each_entry_is_a_message_the_sink_raises(request, kind, heading):
    check_entry(request, kind, heading)


@pytest.mark.usefixtures(*KAFKA)
@pytest.mark.parametrize("kind, heading", _entries(KAFKA))
def test_each_entry_is_a_message_the_sink_raises_with_apache_kafka(request, kind, heading):
    check_entry(request, kind, heading)


@pytest.mark.usefixtures(*SECURED)
@pytest.mark.parametrize("kind, heading", _entries(SECURED))
def test_each_entry_is_a_message_the_sink_raises_with_the_secured_node(request, kind, heading):
    check_entry(request, kind, heading)


@pytest.mark.usefixtures(*REGISTRY)
@pytest.mark.parametrize("kind, heading", _entries(REGISTRY))
def test_each_entry_is_a_message_the_sink_raises_with_the_registry(request, kind, heading):
    check_entry(request, kind, heading)


@pytest.mark.usefixtures(*KAFKA_AND_REGISTRY)
@pytest.mark.parametrize("kind, heading", _entries(KAFKA_AND_REGISTRY))
def test_each_entry_is_a_message_the_sink_raises_with_apache_kafka_and_the_registry(request, kind, heading):
    check_entry(request, kind, heading)


@pytest.mark.usefixtures(*KAFKA_2_8)
@pytest.mark.parametrize("kind, heading", _entries(KAFKA_2_8))
def test_each_entry_is_a_message_the_sink_raises_with_apache_kafka_2_8(request, kind, heading):
    check_entry(request, kind, heading)


def test_each_set_of_resources_has_its_test():
    assert set(NEEDS.values()) <= {(), KAFKA, SECURED, REGISTRY, KAFKA_AND_REGISTRY, KAFKA_2_8}, "entries no test runs"


def test_each_producing_function_has_its_entry():
    headings = {h for _, h in ENTRIES}
    assert sorted(set(PRODUCERS) - headings) == [], "entries gone from the page (or renamed)"


# -- completeness: every message built in sparkkafka_sink/spark is on the page ----------------------------
ERRORS = {"SinkValidationError", "SinkWriteError", "TransactionCommitError"}
#: a constant piece of a message shorter than this says nothing on its own ("': '", "', got '")
LEAST = 16
#: messages made of another error's text, by (module, source of the message): the entries that
#: document them
PASSED_ON = {
    ("driver/exactly_once_writes.py", "f'pyprod-kafka: {in_option_names(e)}'"): [
        "exactly-once write … was ended before its driver closed it",
        "exactly-once write …: the transactions of … are no longer open",
        "exactly-once write …: the decision's transaction got no answer",
        "exactly-once write … is decided (… transactions), but the commits of … got no answer",
        "exactly-once write …: its commit failed before anything was decided"],
    ("driver/cluster_check.py", "f\"{in_option_names(e)} (option '{option}'; at {where})\""): [
        "topic '…' does not exist", "'…' is not a valid topic name", "not authorized to access topic '…'",
        "not authorized to write to topic '…'"],
    ("option_catalog.py", "f\"option '{key.name}' must be {invalid.accepted}{hint}, got {key.shown(raw)}\""): [
        "option '…' must be …"],
    ("driver/schema_plan.py", "f'{column.option}={column.format}: {where}: {e}'"): [
        "…Format=…: option '…Schema': …", "…Format=…: the … column: …"],
}


def _pieces(node: ast.AST) -> list[str]:
    """The constant text of a message expression, cut where a value is formatted in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out = [""]
        for part in node.values:
            if isinstance(part, ast.Constant):
                out[-1] += part.value
            else:
                out.append("")
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pieces(node.left), _pieces(node.right)
        return left[:-1] + [left[-1] + right[0]] + right[1:]
    return ["", ""]


class _Module:
    """A module of the sink: its calls and the function around each."""

    def __init__(self, path: Path):
        self.path = path.relative_to(SPARK_PACKAGE).as_posix()
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.enclosing: dict[ast.AST, ast.FunctionDef | None] = {}
        self._walk(self.tree, None)

    def _walk(self, node: ast.AST, function) -> None:
        for child in ast.iter_child_nodes(node):
            self.enclosing[child] = function
            self._walk(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function)

    def calls(self, name: str) -> list[ast.Call]:
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and _called(n) == name]

    def texts(self, message: ast.AST, depth: int = 0) -> list[str]:
        """The constant texts of ``message`` long enough to find on the page -- and of what the
        callers pass for a parameter of the enclosing function formatted into it."""
        longest = max(_pieces(message), key=len)
        found = [longest] if len(longest) >= LEAST else []
        function = self.enclosing.get(message)
        if function is None or depth >= 2:
            return found
        params = [a.arg for a in function.args.args]
        for name in sorted({n.id for n in ast.walk(message) if isinstance(n, ast.Name)} & set(params)):
            for call in self.calls(function.name):
                argument = _argument(call, name, params)
                if argument is not None:
                    found += self.texts(argument, depth + 1)
        return found


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _argument(call: ast.Call, name: str, params: list[str]) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    index = params.index(name)
    return call.args[index] if index < len(call.args) else None


def _normal(text: str) -> str:
    return " ".join(text.split())


def sink_messages() -> list[tuple[str, int, str, list[str]]]:
    """``(module, line, message source, constant texts)`` of every message the sink builds."""
    out = []
    for path in sorted(SPARK_PACKAGE.rglob("*.py")):
        module = _Module(path)
        for call in ast.walk(module.tree):
            if isinstance(call, ast.Call) and _called(call) in ERRORS and call.args:
                out.append((module.path, call.lineno, ast.unparse(call.args[0]), module.texts(call.args[0])))
    return out


def test_the_page_carries_every_message_the_sink_raises():
    page = _normal(PAGE.read_text(encoding="utf-8"))
    headings = {h for _, h in ENTRIES}
    messages = sink_messages()
    assert len(messages) >= 45, f"the scan of {SPARK_PACKAGE} found only {len(messages)} messages"
    missing, unexplained = [], []
    for module, line, source, texts in messages:
        if not texts:
            documented = PASSED_ON.get((module, source))
            if documented is None:
                unexplained.append(f"{module}:{line}: {source}")
            else:
                missing += [f"{module}:{line}: entry {h!r}" for h in documented if h not in headings]
            continue
        missing += [f"{module}:{line}: {text!r}" for text in texts if _normal(text) not in page]
    assert not unexplained, ("messages without text of their own (another error's): list each in PASSED_ON with the "
                             "entries documenting it:\n" + "\n".join(unexplained))
    assert not missing, f"messages the sink raises that {PAGE.name} does not carry:\n" + "\n".join(missing)
    assert {k for k in PASSED_ON} <= {(m, s) for m, _, s, _ in messages}, "PASSED_ON names a message gone from the code"
