"""Protobuf through the real registry (Apicurio speaking Confluent's API) onto Apache Kafka, read
back by independent readers: a struct column of every type of the mapping is resolved against
the registry, encoded and framed by ``ColumnSerializer``, written by ``Producer.send_batch``, then
consumed by confluent-kafka's Consumer (check.crcs) and parsed by its ``ProtobufDeserializer``
into a class protoc compiled from the text the registry answers for the framing's id.

The deserializer runs without a registry client: with one, it asks
``GET /schemas/ids/{id}?format=serialized`` for a base64 FileDescriptorProto, which Apicurio 2.x
does not serve (it answers the .proto text; /work/notes/protobuf-registry.md has the probe).
It still reads the framing itself: magic byte, schema id, message indexes."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest
from kafka_helpers import consume_all, producer_for

from sparkkafka_sink.serialization.protobuf_schema import protobuf_schema_of
from sparkkafka_sink.serialization.registry import SchemaRegistryClient, SchemaRegistryError
from sparkkafka_sink.serialization.serializer import ColumnSerializer, SerializerSpec, derived_schema
from sparkkafka_sink.testing.brokers import create_topics

pytest.importorskip("grpc_tools.protoc")
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, protobuf_to_decimal
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.message import Message
from protobuf_runtime import compiled_text

UTC = dt.timezone.utc
ORDER = pa.struct([
    ("tiny", pa.int8()), ("small", pa.int16()), ("qty", pa.int32()), ("id", pa.int64()),
    ("paid", pa.bool_()), ("weight", pa.float32()), ("price", pa.float64()),
    ("note", pa.string()), ("blob", pa.binary()),
    ("amount", pa.decimal128(12, 3)), ("day", pa.date32()),
    ("at", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")), ("took", pa.duration("us")),
    ("customer", pa.struct([("name", pa.string()), ("vip", pa.bool_())])),
    ("lines", pa.list_(pa.struct([("sku", pa.string()), ("count", pa.int32())]))),
    ("tags", pa.map_(pa.string(), pa.int32())),
])


def rows(n: int) -> list[dict | None]:
    out: list[dict | None] = []
    for i in range(n):
        if i % 50 == 49:
            out.append(None)                                    # a null value: a tombstone
            continue
        nulls = i % 7 == 3                                      # every nullable field null
        out.append({
            "tiny": None if nulls else (i % 256) - 128, "small": None if nulls else -i * 7,
            "qty": None if nulls else i - 250, "id": None if nulls else (i * 7_919) << 30,
            "paid": None if nulls else i % 2 == 0,
            "weight": None if nulls else 0.5 * i, "price": None if nulls else i / 3,
            "note": None if nulls else f"order {i} \u00e9\u4e2d", "blob": None if nulls else bytes([i % 256]) * (i % 5),
            "amount": None if nulls else Decimal(i * 1001 - 40_000).scaleb(-3),
            "day": None if nulls else dt.date(1969, 12, 1) + dt.timedelta(days=i * 37),
            "at": None if nulls else dt.datetime(2024, 2, 29, tzinfo=UTC) + dt.timedelta(microseconds=i * 1_000_003),
            "local": None if nulls else dt.datetime(1960, 1, 1) + dt.timedelta(seconds=i * 86_399),
            "took": None if nulls else dt.timedelta(microseconds=i * 999_999 - 1000),
            "customer": None if nulls else {"name": f"c{i}", "vip": None if i % 3 else True},
            "lines": None if nulls else [{"sku": f"s{j}", "count": j} for j in range(i % 4)],
            "tags": None if nulls else [(f"t{j}", j - i) for j in range(i % 3)],
        })
    return out


def expected(row: dict | None) -> dict | None:
    """What a Protobuf reader reads back: a null array or map is an empty one (proto3 cannot
    tell them apart); map order is not kept."""
    if row is None:
        return None
    return {**row, "lines": row["lines"] or [], "tags": dict(row["tags"] or [])}


def as_row(message: Message, arrow_type: pa.StructType) -> dict:
    """A parsed message as the row it was written from, through the runtime's own accessors."""
    out: dict = {}
    for field in arrow_type:
        t, f = field.type, message.DESCRIPTOR.fields_by_name[field.name]
        value = getattr(message, field.name)
        if pa.types.is_map(t):
            out[field.name] = dict(value)
        elif pa.types.is_list(t):
            out[field.name] = [as_row(item, t.value_type) for item in value]
        elif f.has_presence and not message.HasField(field.name):
            out[field.name] = None
        elif pa.types.is_struct(t):
            out[field.name] = as_row(value, t)
        elif pa.types.is_timestamp(t):
            out[field.name] = value.ToDatetime(tzinfo=UTC) if t.tz else value.ToDatetime()
        elif pa.types.is_duration(t):
            out[field.name] = value.ToTimedelta()
        elif pa.types.is_date(t):
            out[field.name] = dt.date(value.year, value.month, value.day)
        elif pa.types.is_decimal(t):
            out[field.name] = protobuf_to_decimal(value)         # Confluent's own conversion
        else:
            out[field.name] = value
    return out


@pytest.fixture
def client(schema_registry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry.url, "retries.wait.ms": 10})


def test_every_type_reads_back_equal_through_confluents_deserializer(apache_kafka, schema_registry, client):
    topic = f"protobuf-registry-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 3})
    source = rows(400)
    column = pa.array(source, ORDER)
    schema = derived_schema("protobuf", ORDER, True, "value", "Order", "shop")
    assert 'import "confluent/type/decimal.proto";' in schema and 'import "google/type/date.proto";' in schema
    spec = SerializerSpec("value", "protobuf", schema, "shop.Order").resolve(client, topic, ORDER)
    assert client.latest_version(f"{topic}-value").schema_id == spec.schema_id    # TopicNameStrategy

    encoded = ColumnSerializer(spec).encode(column)
    assert len(encoded.bad_rows) == 0
    with producer_for(apache_kafka, **{"linger.ms": 5, "batch.size": 16384}) as producer:
        result = producer.send_batch(topic, encoded.values).get(30)
    assert result.record_count == len(source)

    got = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=len(source))
    assert len(got) == len(source)
    values = [r.value for r in got]
    assert sum(v is None for v in values) == sum(r is None for r in source)
    ids = {int.from_bytes(v[1:5], "big") for v in values if v is not None}
    assert ids == {spec.schema_id}

    # the reader knows nothing of ours: the schema comes from the registry by the framing's id
    registered = ConfluentRegistryClient({"url": schema_registry.url}).get_schema(ids.pop())
    assert (registered.schema_type, registered.references) == ("PROTOBUF", [])
    assert registered.schema_str == schema
    message_class = compiled_text(registered.schema_str)
    assert message_class.DESCRIPTOR.full_name == "shop.Order"
    deserializer = ProtobufDeserializer(message_class, {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    read = sorted((as_row(deserializer(v, context), ORDER) for v in values if v is not None),
                  key=lambda r: (r["note"] is None, r["note"] or "", r["id"] or 0))
    want = sorted((expected(r) for r in source if r is not None),
                  key=lambda r: (r["note"] is None, r["note"] or "", r["id"] or 0))
    assert read == want


def test_an_incompatible_change_is_refused_and_a_compatible_one_registered(client, registry_subject):
    topic = registry_subject("topic")
    v1 = pa.struct([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))])
    first = SerializerSpec("value", "protobuf", protobuf_schema_of(v1, "Order", "shop", "value").text(),
                           "shop.Order").resolve(client, topic, v1)
    subject = f"{topic}-value"
    client.set_compatibility(subject, "BACKWARD")

    v2 = pa.struct([("id", pa.string()), ("at", pa.timestamp("us", tz="UTC"))])      # int64 -> string
    incompatible = SerializerSpec("value", "protobuf", protobuf_schema_of(v2, "Order", "shop", "value").text(),
                                  "shop.Order")
    assert not client.is_compatible(subject, incompatible.schema, "PROTOBUF")
    with pytest.raises(SchemaRegistryError) as e:
        incompatible.resolve(client, topic, v2)
    assert (e.value.status, e.value.error_code) == (409, 409)
    assert "incompatible" in str(e.value) and "(compatibility BACKWARD)" in str(e.value)
    latest = client.latest_version(subject)
    assert (latest.version, latest.schema_id, latest.schema_type) == (1, first.schema_id, "PROTOBUF")

    v3 = pa.struct([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")), ("note", pa.string())])
    added = SerializerSpec("value", "protobuf", protobuf_schema_of(v3, "Order", "shop", "value").text(),
                           "shop.Order").resolve(client, topic, v3)
    assert added.schema_id != first.schema_id and client.latest_version(subject).version == 2
