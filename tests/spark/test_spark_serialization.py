"""valueFormat / keyFormat avro and json: DataFrames written in the Schema Registry's wire format
through a real registry (Apicurio, Confluent's API), read back by independent readers --
confluent-kafka's AvroDeserializer / JSONDeserializer with the registry, and Spark's own
``from_avro`` (spark-avro, after the 5-byte header) into a DataFrame equal to the source."""

from __future__ import annotations

import json
import struct
import time

import pytest
from chispa import assert_df_equality
from kafka_helpers import consume_all
from pyspark.sql import functions as F

pytestmark = [pytest.mark.broker, pytest.mark.spark]

#: every Spark type the sink's Avro mapping covers, nulls included
EVERY_TYPE = """named_struct(
    'id', id,
    'name', concat('n', id),
    'score', cast(id as double) / 3,
    'ratio', cast(id as float) / 4,
    'flag', id % 2 = 0,
    'tiny', cast(id as tinyint),
    'small', cast(id as smallint),
    'int', cast(id * 1000 as int),
    'amount', cast(id * 1.25 as decimal(10, 2)),
    'day', date_add(date'2026-01-01', cast(id as int)),
    'at', timestamp_micros(1700000000000000 + id * 1000001),
    'local', cast(timestamp_micros(1700000000000000 + id) as timestamp_ntz),
    'tags', array('a', concat('t', id)),
    'attrs', map('k', id, 'l', id + 1),
    'nested', named_struct('x', id, 'y', if(id % 3 = 0, null, concat('y', id))),
    'blob', cast(concat('b', id) as binary),
    'maybe', if(id % 4 = 0, null, id)
)"""


def frame_of(spark, n: int = 40, partitions: int = 2):
    return spark.range(n).selectExpr(f"{EVERY_TYPE} as value", "cast(id as string) as key").repartition(partitions)


def writer(df, kafka, registry, **options):
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("schema.registry.url", registry.url))
    for k, v in options.items():
        w = w.option(k, v)
    return w


def registry_client(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": registry.url})


def framed(records):
    """``[(schema id, payload)]`` of framed values; the magic byte checked."""
    out = []
    for r in records:
        assert r.value[:1] == b"\x00", r.value[:8]
        out.append((struct.unpack(">I", r.value[1:5])[0], r.value[5:]))
    return out


@pytest.mark.pyspark_lines
def test_avro_values_read_back_by_confluent_and_by_spark_from_avro(spark, kafka, schema_registry):
    topic = kafka.create_topic(partitions=3)
    df = frame_of(spark)
    writer(df, kafka, schema_registry, topic=topic, valueFormat="avro").save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=40)
    assert len(records) == 40
    ids = {schema_id for schema_id, _ in framed(records)}
    assert len(ids) == 1, ids
    # the registry holds the schema under <topic>-value, as Spark's to_avro derives it
    client = registry_client(schema_registry)
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema_id == ids.pop()
    schema = json.loads(latest.schema.schema_str)
    assert schema["name"] == "topLevelRecord" and [f["name"] for f in schema["fields"]][:3] == ["id", "name", "score"]

    # independent reader 1: confluent-kafka's AvroDeserializer, with the registry
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(client)
    got = {r.key: deserialize(r.value, SerializationContext(topic, MessageField.VALUE)) for r in records}
    source = {row.key.encode(): row.value.asDict(recursive=True) for row in df.collect()}
    assert set(got) == set(source)
    for key, value in got.items():
        want = source[key]
        assert value["id"] == want["id"] and value["name"] == want["name"] and value["amount"] == want["amount"]
        assert value["tags"] == want["tags"] and value["attrs"] == want["attrs"] and value["blob"] == want["blob"]
        assert value["nested"] == want["nested"] and value["maybe"] == want["maybe"] and value["day"] == want["day"]

    # independent reader 2: Spark's own from_avro, every type back into a DataFrame equal to the source
    from pyspark.sql.avro.functions import from_avro

    payloads = spark.createDataFrame([(r.key.decode(), r.value[5:]) for r in records], "key string, payload binary")
    back = payloads.select("key", from_avro("payload", latest.schema.schema_str).alias("value"))
    # Avro has no byte or short: Spark's own to_avro/from_avro round trip widens them to int too
    source_df = df.select("value.*").withColumn("tiny", F.col("tiny").cast("int")).withColumn(
        "small", F.col("small").cast("int"))
    assert_df_equality(back.select("value.*").orderBy("id"), source_df.orderBy("id"), ignore_nullable=True)


@pytest.mark.pyspark_lines
def test_key_as_avro_and_value_as_json_with_headers_timestamps_and_partitions(spark, kafka, schema_registry):
    topic = kafka.create_topic(partitions=2)
    df = spark.range(20).selectExpr(
        "named_struct('tenant', concat('t', id % 3), 'id', id) as key",
        "named_struct('id', id, 'text', concat('x', id), 'price', cast(id / 8 as decimal(6, 3))) as value",
        "cast(id % 2 as int) as partition",
        "array(named_struct('key', 'h', 'value', cast(concat('v', id) as binary))) as headers",
        "timestamp_millis(1764000000000 + id) as timestamp").coalesce(1)
    writer(df, kafka, schema_registry, topic=topic, keyFormat="avro", valueFormat="json").save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=20)
    client = registry_client(schema_registry)
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    keys = AvroDeserializer(client)
    values = JSONDeserializer(None, schema_registry_client=client)
    seen = set()
    for r in records:
        key = keys(r.key, SerializationContext(topic, MessageField.KEY))
        value = values(r.value, SerializationContext(topic, MessageField.VALUE))
        i = key["id"]
        seen.add(i)
        assert key == {"tenant": f"t{i % 3}", "id": i}
        assert value["id"] == i and value["text"] == f"x{i}" and float(value["price"]) == pytest.approx(i / 8, abs=1e-3)
        assert r.partition == i % 2 and r.headers == [("h", b"v%d" % i)] and r.timestamp_ms == 1764000000000 + i
    assert seen == set(range(20))
    assert json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str)["type"] == "object"
    assert client.get_latest_version(f"{topic}-key").schema.schema_type == "AVRO"


def test_a_topic_column_with_topic_name_strategy_registers_a_subject_per_topic(spark, kafka, schema_registry):
    """The subject depends on the topic column's values, which only the tasks see: they ask the
    registry once per topic."""
    a, b = kafka.create_topic(), kafka.create_topic()
    df = spark.range(30).selectExpr("named_struct('id', id) as value",
                                    f"if(id % 2 = 0, '{a}', '{b}') as topic").repartition(2)
    writer(df, kafka, schema_registry, valueFormat="avro").save()
    client = registry_client(schema_registry)
    for t, parity in ((a, 0), (b, 1)):
        records = consume_all(kafka.bootstrap_servers, t, expected_count=15)
        assert {schema_id for schema_id, _ in framed(records)} == {client.get_latest_version(f"{t}-value").schema_id}
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        deserialize = AvroDeserializer(client)
        assert sorted(deserialize(r.value, SerializationContext(t, MessageField.VALUE))["id"] for r in records) == \
            list(range(parity, 30, 2))


def test_record_name_strategy_names_the_subject_after_the_record(spark, kafka, schema_registry):
    topic = kafka.create_topic()
    namespace = f"com.example.t{time.monotonic_ns()}"
    df = spark.range(5).selectExpr("named_struct('id', id) as value")
    writer(df, kafka, schema_registry, topic=topic, valueFormat="avro", valueRecordName="Order",
           valueRecordNamespace=namespace, **{"value.subject.name.strategy": "RecordNameStrategy"}).save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=5)
    latest = registry_client(schema_registry).get_latest_version(f"{namespace}.Order")
    assert {schema_id for schema_id, _ in framed(records)} == {latest.schema_id}
    assert json.loads(latest.schema.schema_str)["namespace"] == namespace


# --- rows a schema cannot hold -----------------------------------------------------------------
ORDER_SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string"}]})


def notes_frame(spark, n: int = 20, null_at: tuple = (7, 12)):
    """``note`` is nullable in Spark and null on ``null_at`` rows; ORDER_SCHEMA says it is not."""
    nulls = ", ".join(str(i) for i in null_at)
    return spark.range(n).selectExpr(f"named_struct('id', id, 'note', if(id in ({nulls}), null, concat('n', id))) "
                                     "as value", "cast(id as string) as key").coalesce(1)


def _fails(w):
    with pytest.raises(Exception) as e:
        w.save()
    return str(e.value)


def test_a_row_the_given_schema_cannot_hold_fails_the_task_naming_the_row_and_field(spark, kafka, schema_registry):
    topic = kafka.create_topic()
    text = _fails(writer(notes_frame(spark), kafka, schema_registry, topic=topic, valueFormat="avro",
                         valueSchema=ORDER_SCHEMA))
    assert f"First failure at row 7 of this task's input, topic '{topic}'" in text, text
    assert "RecordSchemaError" in text and "value.note" in text, text
    assert consume_all(kafka.bootstrap_servers, topic) == []  # the batch holding it was not sent


def test_rows_the_schema_cannot_hold_go_to_the_dead_letter_topic(spark, kafka, schema_registry, sink_metrics):
    topic, dlq = kafka.create_topic(), kafka.create_topic()
    before = sink_metrics.snapshot()
    writer(notes_frame(spark), kafka, schema_registry, topic=topic, valueFormat="avro", valueSchema=ORDER_SCHEMA,
           **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}).save()
    good = consume_all(kafka.bootstrap_servers, topic, expected_count=18)
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(registry_client(schema_registry))
    assert sorted(deserialize(r.value, SerializationContext(topic, MessageField.VALUE))["id"] for r in good) == \
        [i for i in range(20) if i not in (7, 12)]
    dead = consume_all(kafka.bootstrap_servers, dlq, expected_count=2)
    for r, row in zip(dead, (7, 12), strict=True):
        headers = dict(r.headers)
        assert headers["__connect.errors.stage"] == b"serialization"
        assert headers["__pyprod.errors.row"] == str(row).encode()
        assert headers["__connect.errors.exception.class.name"].endswith(b"RecordSchemaError")
        assert b"value.note" in headers["__connect.errors.exception.message"]
        assert r.key == str(row).encode()
        assert json.loads(r.value) == {"id": row, "note": None}  # the row's data, as JSON text
    delta = {k: sink_metrics.snapshot()[k] - before[k] for k in ("records_sent", "records_skipped")}
    assert delta == {"records_sent": 18, "records_skipped": 2}


@pytest.mark.pyspark_lines
def test_exactly_once_avro(spark, apache_kafka, schema_registry):
    from kafka_helpers import consume_all as consume

    topic = f"eos-avro-{time.monotonic_ns()}"
    from sparkkafka_sink.testing.brokers import create_topics

    create_topics(apache_kafka.bootstrap_servers, {topic: 2})
    df = spark.range(30).selectExpr("named_struct('id', id, 'text', concat('x', id)) as value").repartition(2)
    (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers)
     .option("topic", topic).option("schema.registry.url", schema_registry.url).option("valueFormat", "avro")
     .option("deliveryGuarantee", "exactly-once").save())
    committed = consume(apache_kafka.bootstrap_servers, topic, 30, isolation_level="read_committed")
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(registry_client(schema_registry))
    assert sorted(deserialize(r.value, SerializationContext(topic, MessageField.VALUE))["id"] for r in committed) == \
        list(range(30))
    from kafka_helpers import assert_in_transactions

    assert_in_transactions(apache_kafka.bootstrap_servers, topic, 30)


# --- the driver refuses before any task ----------------------------------------------------------
def _driver_refuses(w) -> str:
    start = time.monotonic()
    text = _fails(w)
    assert time.monotonic() - start < 30, "the driver took too long to refuse"
    assert "write task" not in text, "a task ran"
    return text


def test_an_unreachable_registry_fails_on_the_driver(spark, kafka):
    from sparkkafka_sink.testing.brokers import free_port

    topic = kafka.create_topic()
    df = spark.range(3).selectExpr("named_struct('id', id) as value")
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
         .option("topic", topic).option("valueFormat", "avro")
         .option("schema.registry.url", f"http://127.0.0.1:{free_port()}").option("schema.registry.max.retries", "0"))
    text = _driver_refuses(w)
    assert "no registry could be reached" in text and "schema.registry.url" in text, text
    assert consume_all(kafka.bootstrap_servers, topic) == []


def test_an_incompatible_schema_fails_on_the_driver_with_the_registrys_message(spark, kafka, schema_registry):
    topic = kafka.create_topic()
    client = registry_client(schema_registry)
    from confluent_kafka.schema_registry import Schema

    client.register_schema(f"{topic}-value", Schema(json.dumps(
        {"type": "record", "name": "topLevelRecord", "fields": [{"name": "id", "type": "long"}]}), "AVRO"))
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    df = spark.range(3).selectExpr("named_struct('id', cast(id as string)) as value")  # id: long -> string
    text = _driver_refuses(writer(df, kafka, schema_registry, topic=topic, valueFormat="avro"))
    assert "incompatible" in text and f"{topic}-value" in text and "BACKWARD" in text, text
    assert consume_all(kafka.bootstrap_servers, topic) == []


def test_without_auto_registration_an_unregistered_schema_fails_on_the_driver(spark, kafka, schema_registry):
    topic = kafka.create_topic()
    df = spark.range(3).selectExpr("named_struct('id', id) as value")
    text = _driver_refuses(writer(df, kafka, schema_registry, topic=topic, valueFormat="avro",
                                  **{"auto.register.schemas": "false"}))
    assert f"subject '{topic}-value' does not exist" in text and "auto.register.schemas" in text, text


def test_use_latest_version_writes_with_the_subjects_schema(spark, kafka, schema_registry):
    """The subject's latest schema (here with a field the DataFrame lacks, which has a default)
    is the one the rows are written with, and its id frames them."""
    topic = kafka.create_topic()
    client = registry_client(schema_registry)
    from confluent_kafka.schema_registry import Schema

    latest = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "region", "type": "string", "default": "eu"}]})
    schema_id = client.register_schema(f"{topic}-value", Schema(latest, "AVRO"))
    df = spark.range(4).selectExpr("named_struct('id', id) as value")
    writer(df, kafka, schema_registry, topic=topic, valueFormat="avro", **{"use.latest.version": "true"}).save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=4)
    assert {i for i, _ in framed(records)} == {schema_id}
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(client)
    assert sorted((v["id"], v["region"]) for v in (deserialize(r.value, SerializationContext(topic, MessageField.VALUE))
                                                   for r in records)) == [(i, "eu") for i in range(4)]
    # a latest schema that cannot hold the column fails on the driver, naming the field and both types
    other = kafka.create_topic()
    client.register_schema(f"{other}-value", Schema(json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "string"}]}), "AVRO"))
    text = _driver_refuses(writer(df, kafka, schema_registry, topic=other, valueFormat="avro",
                                  **{"use.latest.version": "true"}))
    assert "value.id" in text and "BIGINT" in text and "string" in text, text


def test_a_given_schema_that_does_not_fit_the_dataframe_names_the_field_and_both_types(spark, kafka, schema_registry):
    df = spark.range(3).selectExpr("named_struct('id', cast(id as string), 'note', 'x') as value")
    text = _driver_refuses(writer(df, kafka, schema_registry, topic=kafka.create_topic(), valueFormat="avro",
                                  valueSchema=ORDER_SCHEMA))
    assert "valueSchema" in text and "value.id" in text and "STRING" in text and "long" in text, text


# --- streaming ---------------------------------------------------------------------------------
@pytest.mark.pyspark_lines
def test_write_stream_and_foreach_batch_write_avro(spark, kafka, schema_registry, tmp_path):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from test_spark_streaming import rate, run_until

    deserialize = AvroDeserializer(registry_client(schema_registry))
    direct, per_batch = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    rows = rate(spark).selectExpr("named_struct('n', value, 'at', timestamp) as value")
    query = (rows.writeStream.format("pyprod-kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("topic", direct).option("valueFormat", "avro").option("schema.registry.url", schema_registry.url)
             .option("checkpointLocation", str(tmp_path / "direct")).trigger(processingTime="500 milliseconds").start())

    def write_batch(batch_df, batch_id):
        writer(batch_df, kafka, schema_registry, topic=per_batch, valueFormat="avro").save()

    batches = (rows.writeStream.foreachBatch(write_batch).option("checkpointLocation", str(tmp_path / "each"))
               .trigger(processingTime="500 milliseconds").start())
    for q, topic in ((query, direct), (batches, per_batch)):
        n = run_until(q, 40)
        got = {deserialize(r.value, SerializationContext(topic, MessageField.VALUE))["n"]
               for r in consume_all(kafka.bootstrap_servers, topic, expected_count=n)}
        assert set(range(n)) <= got, sorted(set(range(n)) - got)[:10]


def test_refused_credentials_fail_on_the_driver_without_the_password(spark, kafka, spark_event_log):
    """A stand-in for a registry that refuses our credentials (401): Apicurio 2.6 authenticates
    only through an OpenID Connect server, so the refusal is played by a tiny local HTTP server
    answering what Confluent's registry answers."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from test_spark_security import event_log_text

    password = "s3cret-registry-password"

    class Refusing(BaseHTTPRequestHandler):
        def _refuse(self):
            body = json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _refuse

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        df = spark.range(3).selectExpr("named_struct('id', id) as value")
        w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("topic", kafka.create_topic()).option("valueFormat", "avro")
             .option("schema.registry.url", f"http://127.0.0.1:{server.server_port}")
             .option("schema.registry.basic.auth.user.info", f"alice:{password}"))
        text = _driver_refuses(w)
    finally:
        server.shutdown()
        server.server_close()
    assert "401" in text and "schema.registry.basic.auth.user.info" in text and "alice" in text, text
    assert password not in text and password not in event_log_text(spark_event_log)


def test_a_schema_the_registry_refuses_as_invalid_fails_on_the_driver(spark, kafka, schema_registry):
    """A JSON Schema our check accepts (any object) but the registry refuses (Apicurio answers 422
    to a bare {"type": "object"}: it cannot tell the artifact's type): its words, on the driver."""
    df = spark.range(3).selectExpr("named_struct('id', id) as value")
    text = _driver_refuses(writer(df, kafka, schema_registry, topic=kafka.create_topic(), valueFormat="json",
                                  valueSchema='{"type": "object"}'))
    assert "422" in text and "invalid" in text, text
