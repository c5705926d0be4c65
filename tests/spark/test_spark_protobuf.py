"""valueFormat / keyFormat protobuf: DataFrames written in the Schema Registry's Protobuf wire
format (magic byte, schema id, the message index 0, the message) through a real registry
(Apicurio, Confluent's API), read back by Protobuf's own runtime with the registered schema
compiled by protoc: every row equal to the source."""

from __future__ import annotations

import struct

import pytest
from kafka_helpers import consume_all

pytest.importorskip("grpc_tools.protoc")
from protobuf_runtime import compiled_text, filled
from test_spark_serialization import EVERY_TYPE, registry_client, writer

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def unframed(records):
    """``[(schema id, message bytes)]``: the magic byte and the message index checked."""
    out = []
    for r in records:
        assert r.value[:1] == b"\x00" and r.value[5:6] == b"\x00", r.value[:8]
        out.append((struct.unpack(">I", r.value[1:5])[0], r.value[6:]))
    return out


def test_protobuf_values_read_back_by_protobufs_runtime_with_the_registered_schema(spark, kafka, schema_registry):
    topic = kafka.create_topic(partitions=3)
    df = spark.range(40).selectExpr(f"{EVERY_TYPE} as value", "cast(id as string) as key").repartition(2)
    writer(df, kafka, schema_registry, topic=topic, valueFormat="protobuf", valueRecordName="Order",
           valueRecordNamespace="shop.v1").save()
    records = consume_all(kafka.bootstrap_servers, topic, expected_count=40)
    assert len(records) == 40
    ids = {schema_id for schema_id, _ in unframed(records)}
    assert len(ids) == 1, ids
    registered = registry_client(schema_registry).get_schema(ids.pop())
    assert registered.schema_type == "PROTOBUF"
    cls = compiled_text(registered.schema_str, "shop.v1.Order")
    source = df.select("value").toArrow().column("value")
    expected = {row["id"]: filled(cls, row, source.type) for row in source.to_pylist()}
    for _, payload in unframed(records):
        got = cls()
        got.ParseFromString(payload)
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
