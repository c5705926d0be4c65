"""valueFormat / keyFormat protobuf: DataFrames written in the Schema Registry's Protobuf wire
format (magic byte, schema id, the message index 0, the message) through a real registry
(Apicurio, Confluent's API), read back by Protobuf's own runtime with the registered schema
compiled by protoc: every row equal to the source."""

from __future__ import annotations

import struct
import time

import pytest
from kafka_helpers import assert_in_transactions, consume_all

pytest.importorskip("grpc_tools.protoc")
from oracle.support import needs_java_oracle
from oracle.test_protobuf_matches_java import protobuf_round_trip  # noqa: F401 - Java's reader, a fixture
from protobuf_runtime import compiled_text, filled
from test_spark_serialization import EVERY_TYPE, registry_client, writer

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def unframed(values):
    """``[(schema id, message bytes)]`` of framed values: the magic byte and the message index checked."""
    out = []
    for value in values:
        assert value[:1] == b"\x00" and value[5:6] == b"\x00", value[:8]
        out.append((struct.unpack(">I", value[1:5])[0], value[6:]))
    return out


def test_protobuf_values_read_back_by_protobufs_runtime_with_the_registered_schema(spark, kafka, schema_registry):
    topic = kafka.create_topic(partitions=3)
    df = spark.range(40).selectExpr(f"{EVERY_TYPE} as value", "cast(id as string) as key").repartition(2)
    writer(df, kafka, schema_registry, topic=topic, valueFormat="protobuf", valueRecordName="Order",
           valueRecordNamespace="shop.v1").save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=40)
    assert len(records) == 40
    ids = {schema_id for schema_id, _ in unframed(r.value for r in records)}
    assert len(ids) == 1, ids
    registered = registry_client(schema_registry).get_schema(ids.pop())
    assert registered.schema_type == "PROTOBUF"
    cls = compiled_text(registered.schema_str, "shop.v1.Order")
    source = df.select("value").toArrow().column("value")
    expected = {row["id"]: filled(cls, row, source.type) for row in source.to_pylist()}
    for _, payload in unframed(r.value for r in records):
        got = cls()
        got.ParseFromString(payload)
        assert got == expected[got.id]
    # confluent-kafka's deserializer reads the framing and the message alike (given no registry
    # client: Apicurio 2.x does not answer the descriptor form it would ask for)
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert sorted(expected) == list(range(40))
    for r in records:
        got = deserialize(r.value, ctx)
        assert got == expected[got.id]


def test_a_row_protobuf_cannot_hold_fails_the_task_naming_the_row_and_field(spark, kafka, schema_registry):
    topic = kafka.create_topic()
    df = spark.range(5).selectExpr("named_struct('id', id, 'tags', array('a', if(id = 3, null, 'b'))) as value")
    with pytest.raises(Exception) as info:
        writer(df.coalesce(1), kafka, schema_registry, topic=topic, valueFormat="protobuf").save()
    text = str(info.value)
    assert "row 3 of this task's input" in text and "value.tags" in text and "null element" in text, text


def test_a_column_protobuf_cannot_write_fails_on_the_driver_naming_it(spark, kafka, schema_registry):
    df = spark.range(1).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="valueFormat=protobuf: .*must be a struct"):
        writer(df, kafka, schema_registry, topic="never-written", valueFormat="protobuf").save()


def test_an_incompatible_protobuf_schema_fails_on_the_driver(spark, kafka, schema_registry):
    import urllib.request

    topic = kafka.create_topic()
    writer(spark.range(3).selectExpr("named_struct('id', id) as value"), kafka, schema_registry, topic=topic,
           valueFormat="protobuf").save()
    request = urllib.request.Request(f"{schema_registry.url}/config/{topic}-value", method="PUT",
                                     data=b'{"compatibility": "BACKWARD"}',
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    urllib.request.urlopen(request, timeout=10).read()
    changed = spark.range(3).selectExpr("named_struct('id', cast(id as string)) as value")
    with pytest.raises(Exception, match="valueFormat=protobuf: the Schema Registry could not give"):
        writer(changed, kafka, schema_registry, topic=topic, valueFormat="protobuf").save()
    assert len(consume_all(kafka.bootstrap_servers, topic, expected_count=3)) == 3  # nothing more written


def _messages(values, registry):
    """Each framed value parsed by Protobuf's runtime with the schema its id names."""
    client, classes, out = registry_client(registry), {}, []
    for schema_id, payload in unframed(values):
        if schema_id not in classes:
            classes[schema_id] = compiled_text(client.get_schema(schema_id).schema_str)
        message = classes[schema_id]()
        message.ParseFromString(payload)
        out.append(message)
    return out


def test_the_key_as_protobuf_and_bad_rows_to_the_dead_letter_topic(spark, kafka, schema_registry, sink_metrics):
    topic, dlq = kafka.create_topic(), kafka.create_topic()
    before = sink_metrics.snapshot()
    df = spark.range(20).selectExpr("named_struct('id', id) as key",
                                    "named_struct('id', id, 'tags', array('a', if(id in (7, 12), null, 'b'))) as value")
    writer(df.coalesce(1), kafka, schema_registry, topic=topic, keyFormat="protobuf", valueFormat="protobuf",
           **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}).save()
    good = consume_all(kafka.bootstrap_servers, topic, expected_count=18)
    values = _messages([r.value for r in good], schema_registry)
    assert sorted(v.id for v in values) == [i for i in range(20) if i not in (7, 12)]
    assert all(list(v.tags) == ["a", "b"] for v in values)
    keys = _messages([r.key for r in good], schema_registry)
    assert sorted(k.id for k in keys) == sorted(v.id for v in values)
    dead = consume_all(kafka.bootstrap_servers, dlq, expected_count=2)
    for r, row in zip(dead, (7, 12), strict=True):
        headers = dict(r.headers)
        assert headers["__connect.errors.stage"] == b"serialization"
        assert headers["__pyprod.errors.row"] == str(row).encode()
        assert b"value.tags" in headers["__connect.errors.exception.message"]
    delta = {k: sink_metrics.snapshot()[k] - before[k] for k in ("records_sent", "records_skipped")}
    assert delta == {"records_sent": 18, "records_skipped": 2}


def test_exactly_once_and_foreach_batch_write_protobuf(spark, apache_kafka, schema_registry, tmp_path):
    from test_spark_streaming import rate, run_until

    from sparkkafka_sink.testing.brokers import create_topics

    topic, per_batch = f"eos-protobuf-{time.monotonic_ns()}", f"each-protobuf-{time.monotonic_ns()}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 2, per_batch: 2})
    writer(spark.range(30).selectExpr("named_struct('id', id) as value"), apache_kafka, schema_registry, topic=topic,
           valueFormat="protobuf", deliveryGuarantee="exactly-once").save()
    committed = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=30, isolation_level="read_committed")
    assert sorted(m.id for m in _messages([r.value for r in committed], schema_registry)) == list(range(30))
    assert_in_transactions(apache_kafka.bootstrap_servers, topic, 30)

    rows = rate(spark).selectExpr("named_struct('n', value, 'at', timestamp) as value")

    def write_batch(batch_df, batch_id):
        writer(batch_df, apache_kafka, schema_registry, topic=per_batch, valueFormat="protobuf").save()

    query = (rows.writeStream.foreachBatch(write_batch).option("checkpointLocation", str(tmp_path / "each"))
             .trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 40)
    got = {m.n for m in _messages([r.value for r in consume_all(apache_kafka.bootstrap_servers, per_batch,
                                                                  expected_count=n)], schema_registry)}
    assert set(range(n)) <= got, sorted(set(range(n)) - got)[:10]


TWO_MESSAGES = """syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";

message Customer { string name = 1; }
message Order {
  int64 id = 1;
  Customer customer = 2;
  google.protobuf.Timestamp placed_at = 3;
  map<string, int64> quantities = 4;
}
"""


@pytest.mark.parametrize("given", ["valueSchema", "valueDescriptorFile"])
def test_a_given_proto_or_descriptor_set_writes_the_message_the_record_name_chooses(spark, kafka, schema_registry,
                                                                                   tmp_path, given):
    from protobuf_runtime import descriptor_set

    topic = kafka.create_topic()
    df = spark.range(12).selectExpr(
        "named_struct('quantities', map('a', id), 'placed_at', timestamp_micros(1700000000000000 + id),"
        " 'customer', named_struct('name', concat('c', id)), 'id', id) as value")
    schema = {"valueSchema": TWO_MESSAGES}
    if given == "valueDescriptorFile":
        path = tmp_path / "shop.pb"
        path.write_bytes(descriptor_set(TWO_MESSAGES).SerializeToString())
        schema = {"valueDescriptorFile": str(path)}
    writer(df.coalesce(1), kafka, schema_registry, topic=topic, valueFormat="protobuf", valueRecordName="shop.v1.Order",
           **schema).save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=12)
    # the framing names the file's second top-level message: the array [1] as zigzag varints
    assert {r.value[5:7] for r in records} == {b"\x02\x02"}
    schema_id = struct.unpack(">I", records[0].value[1:5])[0]
    registered = registry_client(schema_registry).get_schema(schema_id).schema_str
    if given == "valueSchema":
        assert registered.strip() == TWO_MESSAGES.strip()  # the user's text, as given (the registry trims it)
    cls = compiled_text(registered, "shop.v1.Order")
    got = {}
    for r in records:
        message = cls()
        message.ParseFromString(r.value[7:])
        got[message.id] = (message.customer.name, message.placed_at.ToMicroseconds(), dict(message.quantities))
    assert got == {i: (f"c{i}", 1700000000000000 + i, {"a": i}) for i in range(12)}


@needs_java_oracle
def test_java_reads_a_dataframe_written_through_apache_kafka_and_the_registry(protobuf_round_trip, spark,  # noqa: F811
                                                                              apache_kafka, schema_registry):
    """The whole way: a DataFrame written with valueFormat=protobuf to Apache Kafka, each value's
    message read by Java with the schema the registry holds for the id in its framing."""
    import pyarrow as pa

    from sparkkafka_sink.testing.brokers import create_topics

    topic = f"java-protobuf-{time.monotonic_ns()}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 2})
    df = spark.range(200).selectExpr(
        "named_struct('id', id, 'name', if(id % 5 = 0, null, concat('n', id)), 'amount', cast(id * 1.25 as decimal(10, 2)),"
        " 'at', timestamp_micros(1700000000000000 + id * 1000001), 'tags', array('a', concat('t', id)),"
        " 'attrs', map('k', id, 'l', id + 1), 'nested', named_struct('x', id, 'y', cast(id as double) / 3)) as value")
    (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers)
     .option("topic", topic).option("valueFormat", "protobuf").option("valueRecordName", "Order")
     .option("valueRecordNamespace", "shop").option("schema.registry.url", schema_registry.url).save())
    records = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=200)
    assert len(records) == 200 and {r.value[5:6] for r in records} == {b"\x00"}
    schema_ids = {int.from_bytes(r.value[1:5], "big") for r in records}
    assert len(schema_ids) == 1
    text = registry_client(schema_registry).get_schema(schema_ids.pop()).schema_str
    messages = pa.array([r.value[6:] for r in records], pa.binary())
    assert protobuf_round_trip(text, "shop.Order", messages) == messages.to_pylist()


def test_registration_settings_and_strategies_work_for_protobuf_as_for_avro(spark, kafka, schema_registry):
    """use.latest.version writes with the subject's latest .proto (a field the DataFrame lacks
    left unset), auto.register.schemas=false looks the schema up (and refuses an unregistered
    one on the driver), and RecordNameStrategy names the subject after the message."""
    from confluent_kafka.schema_registry import Schema

    client = registry_client(schema_registry)
    df = spark.range(4).selectExpr("named_struct('id', id) as value")
    topic = kafka.create_topic()
    latest = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; string region = 2; }\n'
    schema_id = client.register_schema(f"{topic}-value", Schema(latest, "PROTOBUF"))
    writer(df, kafka, schema_registry, topic=topic, valueFormat="protobuf", **{"use.latest.version": "true"}).save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=4)
    assert {i for i, _ in unframed(r.value for r in records)} == {schema_id}
    assert sorted((m.id, m.region) for m in _messages([r.value for r in records], schema_registry)) == \
        [(i, "") for i in range(4)]

    looked_up = kafka.create_topic()
    with pytest.raises(Exception, match=f"subject '{looked_up}-value' does not exist"):
        writer(df, kafka, schema_registry, topic=looked_up, valueFormat="protobuf",
               **{"auto.register.schemas": "false"}).save()
    writer(df, kafka, schema_registry, topic=looked_up, valueFormat="protobuf").save()  # registers it
    writer(df, kafka, schema_registry, topic=looked_up, valueFormat="protobuf",
           **{"auto.register.schemas": "false"}).save()  # now found
    assert len({i for i, _ in unframed(r.value for r in consume_all(kafka.bootstrap_servers, looked_up,
                                                                    expected_count=8))}) == 1

    named = kafka.create_topic()
    package = f"shop.t{time.monotonic_ns()}"
    writer(df, kafka, schema_registry, topic=named, valueFormat="protobuf", valueRecordName="Order",
           valueRecordNamespace=package, **{"value.subject.name.strategy": "RecordNameStrategy"}).save()
    subject = client.get_latest_version(f"{package}.Order")
    records = consume_all(kafka.bootstrap_servers, named, expected_count=4)
    assert {i for i, _ in unframed(r.value for r in records)} == {subject.schema_id}


def test_write_stream_format_writes_protobuf(spark, kafka, schema_registry, tmp_path):
    from test_spark_streaming import rate, run_until

    topic = kafka.create_topic(partitions=2)
    rows = rate(spark).selectExpr("named_struct('n', value, 'at', timestamp) as value")
    query = (rows.writeStream.format("pyprod-kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("topic", topic).option("valueFormat", "protobuf").option("schema.registry.url", schema_registry.url)
             .option("checkpointLocation", str(tmp_path / "direct")).trigger(processingTime="500 milliseconds").start())
    n = run_until(query, 40)
    got = {m.n for m in _messages([r.value for r in consume_all(kafka.bootstrap_servers, topic, expected_count=n)],
                                  schema_registry)}
    assert set(range(n)) <= got, sorted(set(range(n)) - got)[:10]
