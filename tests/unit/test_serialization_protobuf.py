"""The Protobuf encoder against Protobuf's own runtime: the derived schema is compiled by protoc
(grpcio-tools), the same values are serialized by the ``protobuf`` package, and our bytes must
be theirs -- and parse back, by that runtime, to the source values."""

from __future__ import annotations

import datetime as dt
import random
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from sparkkafka_sink.serialization.encoded import InvalidSchemaError
from sparkkafka_sink.serialization.protobuf_encoder import ProtobufEncoder
from sparkkafka_sink.serialization.protobuf_schema import protobuf_schema_of

pytest.importorskip("grpc_tools.protoc")
from protobuf_runtime import compiled, filled

ADDRESS = pa.struct([pa.field("street", pa.string()), pa.field("zip", pa.int32(), nullable=False)])
ROW = pa.struct([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("small", pa.int8()),
    pa.field("count", pa.int32(), nullable=False),
    pa.field("flag", pa.bool_()),
    pa.field("ratio", pa.float32()),
    pa.field("score", pa.float64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("blob", pa.binary(), nullable=False),
    pa.field("amount", pa.decimal128(12, 3)),
    pa.field("born", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("local_at", pa.timestamp("us")),
    pa.field("took", pa.duration("us")),
    pa.field("address", ADDRESS),
    pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
    pa.field("readings", pa.list_(pa.field("item", pa.int64(), nullable=False))),
    pa.field("doubles", pa.list_(pa.field("item", pa.float64(), nullable=False))),
    pa.field("flags", pa.list_(pa.field("item", pa.bool_(), nullable=False))),
    pa.field("addresses", pa.list_(pa.field("item", ADDRESS, nullable=False))),
    pa.field("attributes", pa.map_(pa.string(), pa.int32())),
    pa.field("places", pa.map_(pa.int64(), ADDRESS)),
])


def _random_row(rng: random.Random) -> dict:
    def maybe(value: object) -> object:
        return None if rng.random() < 0.2 else value

    def address() -> dict:
        return {"street": maybe(rng.choice(["", "Main St", "Ünïcode 街"])), "zip": rng.choice([0, 1, -5, 2**31 - 1])}

    return {
        "id": rng.choice([0, 1, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**40), 2**40)]),
        "small": maybe(rng.randrange(-128, 128)),
        "count": rng.choice([0, 7, -(2**31), 2**31 - 1]),
        "flag": maybe(rng.random() < 0.5),
        "ratio": maybe(rng.choice([0.0, -0.0, 1.5, -2.25])),
        "score": rng.choice([0.0, -0.0, 3.141592653589793, -1e300]),
        "name": maybe(rng.choice(["", "a", "x" * 300])),
        "blob": rng.choice([b"", b"\x00\xff", bytes(range(256))]),
        "amount": maybe(Decimal(rng.randrange(-(10**12) + 1, 10**12)).scaleb(-3)),
        "born": maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(-700_000, 800_000))),
        "at": maybe(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
                    + dt.timedelta(microseconds=rng.randrange(-(10**16), 10**16))),
        "local_at": maybe(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=rng.randrange(-(10**12), 10**12))),
        "took": maybe(dt.timedelta(microseconds=rng.randrange(-(10**13), 10**13))),
        "address": maybe(address()),
        "tags": maybe([rng.choice(["", "t", "tag"]) for _ in range(rng.randrange(4))]),
        "readings": maybe([rng.choice([0, -1, 300, 2**62]) for _ in range(rng.randrange(5))]),
        "doubles": maybe([rng.random() for _ in range(rng.randrange(3))]),
        "flags": maybe([rng.random() < 0.5 for _ in range(rng.randrange(3))]),
        "addresses": maybe([address() for _ in range(rng.randrange(3))]),
        "attributes": maybe([(k, rng.randrange(-3, 3)) for k in sorted(rng.sample(["", "a", "b", "c"], 2))]),
        "places": maybe([(k, address()) for k in sorted(rng.sample([0, 1, -7, 99], rng.randrange(3)))]),
    }


def test_the_derived_schema_is_proto3_that_protoc_compiles():
    schema = protobuf_schema_of(ROW, "Order", "shop.v1")
    text = schema.text()
    assert text.startswith('syntax = "proto3";\n\npackage shop.v1;\n')
    for line in ('import "confluent/type/decimal.proto";', 'import "google/protobuf/timestamp.proto";',
                 "  int64 id = 1;", "  optional int32 small = 2;", "  optional string name = 7;",
                 "  confluent.type.Decimal amount = 9;", "  google.type.Date born = 10;",
                 "  Address address = 14;", "  repeated string tags = 15;", "  map<string, int32> attributes = 20;",
                 "  map<int64, Places> places = 21;", "  message Address {", "    optional string street = 1;"):
        assert line in text, line
    assert compiled(schema).DESCRIPTOR.full_name == "shop.v1.Order"


def test_every_row_is_the_bytes_protobufs_runtime_writes_and_reads_back_equal():
    rng = random.Random(35)
    rows = [_random_row(rng) for _ in range(600)] + [None]  # and a tombstone
    array = pa.array(rows, ROW)
    schema = protobuf_schema_of(ROW, "Order", "shop.v1")
    cls = compiled(schema)
    encoded = ProtobufEncoder(schema, ROW).encode(array)
    assert encoded.bad_rows.tolist() == []
    ours = encoded.values.to_pylist()
    assert ours[-1] is None  # a null row stays null: a tombstone
    for i, (row, got) in enumerate(zip(array.to_pylist()[:-1], ours[:-1], strict=True)):
        theirs = filled(cls, row, ROW)
        if all(len(row[m] or ()) <= 1 for m in ("attributes", "places")):  # a map's order is the writer's
            assert got == theirs.SerializeToString(deterministic=True), f"row {i}: {row}"
        back = cls()
        back.ParseFromString(got)
        assert back == theirs


def test_slices_and_chunks_encode_as_the_whole():
    rng = random.Random(7)
    array = pa.array([_random_row(rng) for _ in range(50)], ROW)
    encoder = ProtobufEncoder(protobuf_schema_of(ROW), ROW)
    whole = encoder.encode(array).values.to_pylist()
    assert encoder.encode(array.slice(13, 20)).values.to_pylist() == whole[13:33]
    assert encoder.encode(pa.chunked_array([array.slice(0, 5), array.slice(5)])).values.to_pylist() == whole


def test_nulls_protobuf_cannot_hold_are_bad_rows_naming_the_field():
    t = pa.struct([pa.field("id", pa.int32()), pa.field("tags", pa.list_(pa.string())),
                   pa.field("attributes", pa.map_(pa.string(), pa.string()))])
    array = pa.array([{"id": 1, "tags": ["a"], "attributes": [("k", "v")]},
                      {"id": 2, "tags": ["a", None], "attributes": None},
                      {"id": 3, "tags": [], "attributes": [("k", None)]},
                      None], t)
    encoded = ProtobufEncoder(protobuf_schema_of(t), t).encode(array)
    assert encoded.bad_rows.tolist() == [1, 2]
    assert encoded.fields == ("value.tags", "value.attributes")
    assert "null element" in encoded.reasons[0] and "null value" in encoded.reasons[1]
    assert encoded.values.to_pylist()[1:] == [None, None, None]


@pytest.mark.parametrize("arrow_type, message", [
    (pa.string(), "must be a struct"),
    (pa.struct([pa.field("m", pa.list_(pa.list_(pa.int32())))]), "value.m is ARRAY<ARRAY<INT>>"),
    (pa.struct([pa.field("m", pa.map_(pa.float64(), pa.int32()))]), "keys are strings, integers or booleans"),
    (pa.struct([pa.field("my col", pa.int32())]), "'my col' is not a Protobuf field name"),
    (pa.struct([pa.field("n", pa.null())]), "value.n is VOID, which Protobuf cannot hold"),
])
def test_types_protobuf_cannot_hold_are_refused_naming_the_field(arrow_type, message):
    with pytest.raises(InvalidSchemaError, match=message.replace("[", r"\[").replace("<", "<")):
        protobuf_schema_of(arrow_type)


def test_a_derived_schema_parses_back_to_itself():
    from sparkkafka_sink.serialization.protobuf_schema import parse_proto

    schema = protobuf_schema_of(ROW, "Order", "shop.v1")
    assert parse_proto(schema.text()) == schema


USER_PROTO = """
// an order, as a team wrote it
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";

message Customer { string name = 1; }
message Order {
  /* fields out of order, renumbered, with options */
  reserved 2, 15 to 20;
  int64 id = 1 [json_name = "orderId"];
  .shop.v1.Customer customer = 3;
  repeated Line lines = 4;
  message Line { string sku = 1; int32 quantity = 2; }
  google.protobuf.Timestamp placed_at = 5;
  map<string, string> labels = 6;
}
"""


def test_a_users_proto_is_read_and_bound_by_name_to_the_columns():
    from sparkkafka_sink.serialization.protobuf_schema import parse_proto

    schema = parse_proto(USER_PROTO, "shop.v1.Order")
    assert schema.full_name == "shop.v1.Order" and schema.imports == ("google/protobuf/timestamp.proto",)
    t = pa.struct([pa.field("labels", pa.map_(pa.string(), pa.string())),
                   pa.field("placed_at", pa.timestamp("us", tz="UTC")),
                   pa.field("lines", pa.list_(pa.struct([pa.field("quantity", pa.int32()),
                                                         pa.field("sku", pa.string())]))),
                   pa.field("customer", pa.struct([pa.field("name", pa.string())])),
                   pa.field("id", pa.int64())])
    row = {"labels": [("a", "b")], "placed_at": dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc),
           "lines": [{"quantity": 2, "sku": "x"}], "customer": {"name": "Ann"}, "id": 5}
    got = ProtobufEncoder(schema, t).encode(pa.array([row], t)).values.to_pylist()[0]
    cls = compiled(schema, USER_PROTO)  # the user's text itself, compiled by protoc
    assert got == filled(cls, row, t).SerializeToString(deterministic=True)


@pytest.mark.parametrize("text, message", [
    ('syntax = "proto2"; message M { optional int32 a = 1; }', "proto2"),
    ('syntax = "proto3"; message M { enum E { A = 0; } }', "enum is not supported yet"),
    ('syntax = "proto3"; message M { oneof o { int32 a = 1; } }', "oneof is not supported yet"),
    ('syntax = "proto3"; message M { Unknown u = 1; }', "'Unknown', which is neither"),
    ('syntax = "proto3"; message M { M m = 1; }', "recursive"),
    ('syntax = "proto3"; message M { int32 a = 1; }', None),
])
def test_what_the_encoder_does_not_write_yet_is_refused_naming_it(text, message):
    from sparkkafka_sink.serialization.protobuf_schema import parse_proto

    if message is None:
        with pytest.raises(InvalidSchemaError, match="no top-level message 'N'"):
            parse_proto(text, "N")
        return
    with pytest.raises(InvalidSchemaError, match=message):
        parse_proto(text)


def test_a_descriptor_set_reads_as_the_proto_it_was_compiled_from():
    from protobuf_runtime import descriptor_set

    from sparkkafka_sink.serialization.protobuf_schema import from_descriptor_set, parse_proto

    data = descriptor_set(USER_PROTO).SerializeToString()
    for name, index in ((None, 0), ("Order", 1), ("shop.v1.Order", 1)):
        proto = from_descriptor_set(data, name)
        assert proto.index == index and proto.message_indexes() == (b"\x00" if index == 0 else b"\x02\x02")
        again = parse_proto(proto.text(), proto.full_name)  # the rendered text: what is registered
        assert again.index == index
        t = pa.struct([pa.field("id", pa.int64()), pa.field("customer", pa.struct([pa.field("name", pa.string())]))])
        if index:  # the same message, bound and encoded alike from either source
            row = pa.array([{"id": 3, "customer": {"name": "Ann"}}], t)
            assert ProtobufEncoder(proto, t).encode(row).values == ProtobufEncoder(again, t).encode(row).values
    with pytest.raises(InvalidSchemaError, match="not a FileDescriptorSet"):
        from_descriptor_set(b"\xff\xff\xff")
    enums = descriptor_set('syntax = "proto3"; message M { enum E { A = 0; } E e = 1; }').SerializeToString()
    with pytest.raises(InvalidSchemaError, match="enum is not supported yet"):
        from_descriptor_set(enums)


def test_a_descriptor_set_without_the_protobuf_package_names_the_extra(monkeypatch):
    """Only a descriptor set needs Protobuf's runtime: without it the refusal says what to install
    (the `protobuf` extra) or to give the schema as text."""
    from sparkkafka_sink.serialization.protobuf_schema import from_descriptor_set

    monkeypatch.setitem(sys.modules, "google.protobuf", None)  # as if the package were not installed
    with pytest.raises(InvalidSchemaError, match=r"needs the protobuf package.*pip install 'sparkkafka-sink\[protobuf\]'"):
        from_descriptor_set(b"")
