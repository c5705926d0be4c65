"""The Avro codec: schemas derived as Spark derives them, user schemas parsed and checked as
Spark's AvroSerializer accepts them, and every encoding read back by an independent reader
(fastavro; Apache Avro's Java library in tests/oracle/test_avro_matches_java.py)."""

from __future__ import annotations

import datetime as dt
import io
import json
import pickle
from decimal import Decimal

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from arrow_samples import EVERY_TYPE, ORDER, ORDER_SCHEMA, columns, every_type_rows, normalize, order_rows
from hypothesis import HealthCheck, given, settings

from sparkkafka_sink.serialization.avro_encoder import AvroEncoder
from sparkkafka_sink.serialization.avro_schema import (
    AvroSchema,
    avro_schema,
    avro_schema_of,
    check_avro_schema,
    fixed_size_for_precision,
    parse_avro_schema,
)
from sparkkafka_sink.serialization.encoded import InvalidSchemaError, RecordSchemaError, frame

UTC = dt.timezone.utc


def read_back(schema, values: pa.Array) -> list:
    """Every value decoded by fastavro with ``schema``, each consumed to its last byte."""
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    out = []
    for data in values.to_pylist():
        if data is None:
            out.append(None)
            continue
        buf = io.BytesIO(data)
        out.append(fastavro.schemaless_reader(buf, parsed, None))
        assert buf.tell() == len(data), f"{len(data) - buf.tell()} bytes left over in {data.hex()}"
    return out


def round_trip(arr: pa.Array, schema=None) -> list:
    schema = avro_schema_of(arr.type, True) if schema is None else schema
    encoded = AvroEncoder(schema, arr.type).encode(arr)
    assert encoded.bad_rows.tolist() == [], encoded.reasons
    return read_back(schema, encoded.values)


# ------------------------------------------------------------------ the schema Spark derives

#: SchemaConverters.toAvroType(...).toString() for the struct below, from spark-avro_2.13 4.2.0 (Maven Central
#: has no 4.3.0) on pyspark 4.3
SPARK_STRUCT = pa.struct([
    pa.field("id", pa.int64(), False), pa.field("b", pa.int8()), pa.field("amount", pa.decimal128(10, 2)),
    pa.field("addr", pa.struct([pa.field("zip", pa.string()), pa.field("d", pa.decimal128(38, 10), False),
                                pa.field("inner", pa.struct([pa.field("x", pa.int32())]))])),
    pa.field("tags", pa.list_(pa.struct([pa.field("k", pa.string()), pa.field("dd", pa.decimal128(5, 1))]))),
    pa.field("m", pa.map_(pa.string(), pa.field("v", pa.struct([pa.field("q", pa.float64())]), False)), False),
    pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("ntz", pa.timestamp("us")), pa.field("dt", pa.date32()),
    pa.field("iv", pa.duration("us")), pa.field("nul", pa.null()), pa.field("bin", pa.binary()),
])
SPARK_TOP = (
    '{"type":"record","name":"topLevelRecord","fields":[{"name":"id","type":"long"},{"name":"b","type":["int",'
    '"null"]},{"name":"amount","type":[{"type":"fixed","name":"fixed","namespace":"topLevelRecord.amount","size"'
    ':5,"logicalType":"decimal","precision":10,"scale":2},"null"]},{"name":"addr","type":[{"type":"record","name"'
    ':"addr","namespace":"topLevelRecord","fields":[{"name":"zip","type":["string","null"]},{"name":"d","type":'
    '{"type":"fixed","name":"fixed","namespace":"topLevelRecord.addr.d","size":16,"logicalType":"decimal",'
    '"precision":38,"scale":10}},{"name":"inner","type":[{"type":"record","name":"inner","namespace":'
    '"topLevelRecord.addr","fields":[{"name":"x","type":["int","null"]}]},"null"]}]},"null"]},{"name":"tags",'
    '"type":[{"type":"array","items":[{"type":"record","name":"tags","namespace":"topLevelRecord","fields":[{'
    '"name":"k","type":["string","null"]},{"name":"dd","type":[{"type":"fixed","name":"fixed","namespace":'
    '"topLevelRecord.tags.dd","size":3,"logicalType":"decimal","precision":5,"scale":1},"null"]}]},"null"]},'
    '"null"]},{"name":"m","type":{"type":"map","values":{"type":"record","name":"m","namespace":"topLevelRecord",'
    '"fields":[{"name":"q","type":["double","null"]}]}}},{"name":"ts","type":[{"type":"long","logicalType":'
    '"timestamp-micros"},"null"]},{"name":"ntz","type":[{"type":"long","logicalType":"local-timestamp-micros"},'
    '"null"]},{"name":"dt","type":[{"type":"int","logicalType":"date"},"null"]},{"name":"iv","type":[{"type":'
    '"long","spark.sql.catalyst.type":"interval day to second"},"null"]},{"name":"nul","type":"null"},{"name":'
    '"bin","type":["bytes","null"]}]}'
)


def compact(schema) -> str:
    return json.dumps(schema, separators=(",", ":"))


def test_the_derived_schema_is_the_one_spark_derives():
    assert compact(avro_schema_of(SPARK_STRUCT)) == SPARK_TOP


def test_a_record_name_and_namespace_prefix_every_nested_name_as_in_spark():
    derived = compact(avro_schema_of(SPARK_STRUCT, True, "rec", "com.ex"))
    assert derived.startswith('[{"type":"record","name":"rec","namespace":"com.ex","fields":[')
    assert derived.endswith('}]},"null"]')
    for spark_says in ('"name":"fixed","namespace":"com.ex.rec.amount","size":5',
                       '"name":"addr","namespace":"com.ex.rec"', '"name":"inner","namespace":"com.ex.rec.addr"',
                       '"name":"fixed","namespace":"com.ex.rec.tags.dd"'):
        assert spark_says in derived


def test_top_level_columns_that_are_not_structs():
    assert compact(avro_schema_of(pa.decimal128(5, 2), True)) == (
        '[{"type":"fixed","name":"fixed","namespace":"topLevelRecord","size":3,"logicalType":"decimal",'
        '"precision":5,"scale":2},"null"]')
    assert avro_schema_of(pa.list_(pa.string())) == {"type": "array", "items": ["string", "null"]}
    assert avro_schema_of(pa.string(), True) == ["string", "null"]
    assert avro_schema_of(pa.null(), True) == "null"


def test_fixed_sizes_are_sparks_min_bytes_for_precision():
    assert [fixed_size_for_precision(p) for p in (1, 2, 3, 5, 9, 10, 18, 19, 38)] == [1, 1, 2, 3, 4, 5, 8, 9, 16]


def test_what_avro_cannot_hold_is_refused_by_field():
    with pytest.raises(InvalidSchemaError, match=r"value\.m: Avro maps have string keys; Spark's MAP<INT, "
                                                 r"STRING>.*Cast the keys to STRING"):
        avro_schema_of(pa.struct([pa.field("m", pa.map_(pa.int32(), pa.string()))]))
    with pytest.raises(InvalidSchemaError, match=r"value\.my field: 'my field' is not a valid Avro field name"):
        avro_schema_of(pa.struct([pa.field("my field", pa.int32())]))
    with pytest.raises(InvalidSchemaError, match=r"key: Spark's Arrow uint64 has no Avro counterpart"):
        avro_schema_of(pa.uint64(), column="key")


# ------------------------------------------------------------------- fastavro reads it all


def test_every_type_nested_and_nullable_reads_back_equal():
    arr = pa.array(every_type_rows(), EVERY_TYPE)
    want = [normalize(v, arr.type) for v in arr.to_pylist()]
    assert round_trip(arr) == want
    assert round_trip(arr.slice(1, 3)) == want[1:4]  # a slice: offsets into longer buffers


def test_a_chunked_column_encodes_like_its_concatenation():
    arr = pa.array(every_type_rows(), EVERY_TYPE)
    encoder = AvroEncoder(avro_schema_of(EVERY_TYPE, True), EVERY_TYPE)
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert encoder.encode(chunked).values.equals(encoder.encode(arr).values)


@pytest.mark.parametrize("t, rows", [
    (pa.string(), ["a", None, "", "ü" * 100]),
    (pa.int64(), [0, -1, 2**63 - 1, -(2**63), None]),
    (pa.float64(), [0.0, -0.0, 1e-310, None]),
    (pa.decimal128(38, 0), [Decimal(10**38 - 1), Decimal(-(10**38) + 1), Decimal(0), Decimal(-1), None]),
    (pa.list_(pa.int32()), [[], None, [1, None, 3]]),
    (pa.binary(), [b"", None, bytes(300)]),
])
def test_top_level_values_that_are_not_records(t, rows):
    arr = pa.array(rows, t)
    assert round_trip(arr) == [normalize(v, t) for v in rows]
    assert round_trip(arr, avro_schema_of(t, False)) == [normalize(v, t) for v in rows]  # null: a tombstone


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(columns())
def test_random_nested_columns_read_back_equal(arr):
    assert round_trip(arr) == [normalize(v, arr.type) for v in arr.to_pylist()]


def test_large_strings_and_lists_and_views_encode_like_the_plain_types():
    small = pa.array([{"s": "abc", "l": [1, 2]}, None, {"s": None, "l": None}])
    large = pa.array(small.to_pylist(), pa.struct([pa.field("s", pa.large_string()),
                                                   pa.field("l", pa.large_list(pa.int64()))]))
    schema = avro_schema_of(small.type, True)
    assert avro_schema_of(large.type, True) == schema
    assert AvroEncoder(schema, large.type).encode(large).values.equals(
        AvroEncoder(schema, small.type).encode(small).values)


# ----------------------------------------------------------------------------- user schemas

def test_a_user_schema_with_widenings_enums_fixed_millis_unions_and_defaults():
    got = round_trip(pa.array(order_rows(), ORDER), ORDER_SCHEMA)
    assert got[0] == {
        "id": 1, "ratio": 0.5, "status": "NEW", "hash": b"abcd", "amount": Decimal("-12.34"),
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "local": -1,  # milliseconds rounded down, as Spark's microsToMillis
        "seq": 2**40, "source": "spark", "lines": ["NEW"], "note": None}
    assert got[1] == {"id": -7, "ratio": None, "status": None, "hash": None, "amount": None, "at": None,
                      "local": None, "seq": None, "source": "spark", "lines": ["NEW"], "note": None}


def test_the_json_text_of_a_schema_works_as_its_json():
    arr = pa.array(order_rows(), ORDER)
    text = json.dumps(ORDER_SCHEMA)
    assert AvroEncoder(text, ORDER).encode(arr).values.equals(AvroEncoder(ORDER_SCHEMA, ORDER).encode(arr).values)
    assert AvroEncoder(parse_avro_schema(text), ORDER).encode(arr).values.equals(
        AvroEncoder(ORDER_SCHEMA, ORDER).encode(arr).values)


def test_a_parsed_schema_pickles_as_its_text():
    schema = parse_avro_schema(json.dumps(ORDER_SCHEMA, indent=2))
    again = pickle.loads(pickle.dumps(schema))
    assert isinstance(again, AvroSchema) and again.text == schema.text
    assert again.root.fields[2].type.branches[1].symbols == ("NEW", "PAID")


def test_recursive_and_referenced_named_types_parse():
    linked = {"type": "record", "name": "Node", "namespace": "a.b", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]},
        {"name": "same", "type": ["null", "a.b.Node"]}]}
    root = avro_schema(linked).root
    assert root.fields[1].type.branches[1] is root and root.fields[2].type.branches[1] is root
    rows = [{"value": 1, "next": {"value": 2, "next": None, "same": None}, "same": None}]
    t = pa.struct([pa.field("value", pa.int32()),
                   pa.field("next", pa.struct([pa.field("value", pa.int32()),
                                               pa.field("next", pa.struct([pa.field("value", pa.int32())])),
                                               pa.field("same", pa.struct([pa.field("value", pa.int32())]))])),
                   pa.field("same", pa.struct([pa.field("value", pa.int32())]))])
    got = round_trip(pa.array(rows, t), linked)  # the innermost 'next' and 'same' are missing: null
    assert got == [{"value": 1, "next": {"value": 2, "next": {"value": None, "next": None, "same": None} and None,
                                         "same": None}, "same": None}]


# -------------------------------------------------------------------------------- framing


def test_frame_puts_the_registry_header_before_each_value_and_keeps_nulls():
    values = pa.array([b"\x02a", None, b""], pa.binary())
    assert frame(values, 258).to_pylist() == [b"\x00\x00\x00\x01\x02\x02a", None, b"\x00\x00\x00\x01\x02"]
    with pytest.raises(ValueError, match="non-negative int32"):
        frame(values, -1)


# ------------------------------------------------------------------------------ bad rows


def test_rows_the_schema_cannot_hold_are_bad_rows_named_by_field_the_rest_encoded():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "fixed", "name": "A", "size": 3, "logicalType": "decimal",
                                    "precision": 5, "scale": 2}},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}},
        {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "I", "fields": [
            {"name": "sku", "type": "string"}]}}},
    ]}
    t = pa.struct([pa.field("id", pa.int64()), pa.field("amount", pa.decimal128(10, 2)),
                   pa.field("kind", pa.string()), pa.field("hash", pa.binary()),
                   pa.field("items", pa.list_(pa.struct([pa.field("sku", pa.string())])))])
    good = {"id": 1, "amount": Decimal("999.99"), "kind": "A", "hash": b"ab", "items": [{"sku": "x"}]}
    rows = [good,
            dict(good, id=None),  # 1: null in a non-null field
            dict(good, amount=Decimal("123456.78")),  # 2: beyond decimal(5,2)
            dict(good, kind="C"),  # 3: not a symbol
            dict(good, hash=b"abc"),  # 4: wrong size for the fixed
            None,  # 5: a tombstone, not a bad row
            dict(good, items=[{"sku": "y"}, {"sku": None}]),  # 6: null in a nested non-null field
            dict(good, amount=Decimal("-999.99"), kind="B"),
            dict(good, id=None, kind="C")]  # 8: two faults, the first named
    encoded = AvroEncoder(schema, t).encode(pa.array(rows, t))
    assert encoded.bad_rows.tolist() == [1, 2, 3, 4, 6, 8]
    assert encoded.fields == ("value.id", "value.amount", "value.kind", "value.hash", "value.items[].sku", "value.id")
    assert encoded.reasons == (
        "field value.id: null, but Avro long has no null",
        "field value.amount: 123456.78 does not fit decimal(5,2)",
        "field value.kind: 'C' is not a symbol of Avro enum K {A, B}",
        "field value.hash: 3 bytes do not fit Avro fixed H (size 2): it holds exactly 2",
        "field value.items[].sku: null, but Avro string has no null",
        "field value.id: null, but Avro long has no null")
    assert [i for i, v in enumerate(encoded.values.to_pylist()) if v is None] == [1, 2, 3, 4, 5, 6, 8]
    back = read_back(schema, encoded.values)
    assert back[0] == dict(good, amount=Decimal("999.99")) and back[7]["kind"] == "B"
    assert back[7]["amount"] == Decimal("-999.99")
    error = encoded.error(1)
    assert isinstance(error, RecordSchemaError) and error.row == 2 and error.field == "value.amount"
    assert str(error) == "Row 2: field value.amount: 123456.78 does not fit decimal(5,2)"


def test_faults_under_a_null_parent_are_not_written_so_not_bad():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "inner", "type": ["null", {"type": "record", "name": "In", "fields": [
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}},
            {"name": "n", "type": "int"}]}]},
        {"name": "list", "type": ["null", {"type": "array", "items": "int"}]}]}
    t = pa.struct([pa.field("inner", pa.struct([pa.field("kind", pa.string()), pa.field("n", pa.int32())])),
                   pa.field("list", pa.list_(pa.int32()))])
    inner = pa.StructArray.from_arrays([pa.array(["Z", "A"]), pa.array([None, 1], pa.int32())],
                                       names=["kind", "n"], mask=pa.array([True, False]))
    lists = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), pa.array([None, 5], pa.int32()),
                                     mask=pa.array([True, False]))
    arr = pa.StructArray.from_arrays([inner, lists], fields=list(t))
    encoded = AvroEncoder(schema, t).encode(arr)
    assert encoded.bad_rows.tolist() == []
    assert read_back(schema, encoded.values) == [{"inner": None, "list": None}, {"inner": {"kind": "A", "n": 1},
                                                                                 "list": [5]}]


def test_a_large_column_with_few_bad_rows_names_each():
    n = 100_000
    ids = pa.array(np.arange(n), pa.int64(), mask=np.isin(np.arange(n), [7, 99_999]))
    arr = pa.StructArray.from_arrays([ids], names=["id"])
    encoded = AvroEncoder({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]},
                          arr.type).encode(arr)
    assert encoded.bad_rows.tolist() == [7, 99_999] and encoded.values.null_count == 2


# ------------------------------------------------------------------ checks: errors name it all


@pytest.mark.parametrize("t, schema, message", [
    (pa.struct([pa.field("address", pa.struct([pa.field("zip", pa.int32())]))]),
     {"type": "record", "name": "R", "fields": [{"name": "address", "type": {
         "type": "record", "name": "A", "fields": [{"name": "zip", "type": "string"}]}}]},
     r"value\.address\.zip: Spark's INT cannot be written as Avro string; cast the column or change the schema"),
    (pa.struct([pa.field("a", pa.int32()), pa.field("extra", pa.string())]),
     {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
     r"value\.extra: the DataFrame's field 'extra' \(STRING\) is not in Avro record R \(its fields: a\); add it "
     r"to the schema or drop the column"),
    (pa.struct([pa.field("a", pa.int32())]),
     {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}]},
     r"value\.b: Avro record R's field 'b' \(string\) is not in the DataFrame and has no default .*add the column "
     r"or give the field a default"),
    (pa.struct([pa.field("n", pa.int64())]),
     {"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]},
     r"value\.n: Spark's BIGINT cannot be written as Avro int"),
    (pa.struct([pa.field("d", pa.decimal128(10, 2))]),
     {"type": "record", "name": "R", "fields": [{"name": "d", "type": {
         "type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}}]},
     r"value\.d: Spark's DECIMAL\(10,2\) cannot be written as Avro bytes \(decimal\(10,3\)\) \(the scales differ"),
    (pa.struct([pa.field("d", pa.decimal128(10, 2))]),
     {"type": "record", "name": "R", "fields": [{"name": "d", "type": "bytes"}]},
     r"value\.d: .*logical type decimal"),
    (pa.struct([pa.field("t", pa.timestamp("us", tz="UTC"))]),
     {"type": "record", "name": "R", "fields": [{"name": "t", "type": {
         "type": "long", "logicalType": "local-timestamp-micros"}}]},
     r"value\.t: Spark's TIMESTAMP cannot be written as Avro long \(local-timestamp-micros\) \(that is how Spark's "
     r"TIMESTAMP_NTZ is written\)"),
    (pa.struct([pa.field("m", pa.map_(pa.int32(), pa.string()))]),
     {"type": "record", "name": "R", "fields": [{"name": "m", "type": {"type": "map", "values": "string"}}]},
     r"value\.m: .*MAP<INT, STRING>.*string keys"),
    (pa.struct([pa.field("l", pa.list_(pa.struct([pa.field("x", pa.bool_())])))]),
     {"type": "record", "name": "R", "fields": [{"name": "l", "type": {"type": "array", "items": {
         "type": "record", "name": "I", "fields": [{"name": "x", "type": "int"}]}}}]},
     r"value\.l\[\]\.x: Spark's BOOLEAN cannot be written as Avro int"),
    (pa.struct([pa.field("v", pa.null())]),
     {"type": "record", "name": "R", "fields": [{"name": "v", "type": "string"}]},
     r"value\.v: Spark's VOID .*needs null"),
    (pa.string(), ["null", "int", "long"], r"value: Spark's STRING cannot be written as Avro union \[null, int, long\] "
                                           r"\(no branch of the union can hold it\)"),
])
def test_a_schema_that_cannot_hold_the_column_is_refused_naming_field_and_types(t, schema, message):
    with pytest.raises(InvalidSchemaError, match=message):
        check_avro_schema(schema, t)


def test_fields_match_case_insensitively_when_unambiguous_as_spark():
    t = pa.struct([pa.field("USER_ID", pa.int64())])
    binding = check_avro_schema({"type": "record", "name": "R", "fields": [{"name": "user_id", "type": "long"}]}, t)
    assert binding.fields[0].arrow_index == 0
    with pytest.raises(InvalidSchemaError, match=r"several fields matching 'USER_ID'"):
        check_avro_schema({"type": "record", "name": "R", "fields": [
            {"name": "user_id", "type": "long"}, {"name": "User_Id", "type": "long"}]}, t)


# ----------------------------------------------------------------------- parsing: clear errors


@pytest.mark.parametrize("text, message", [
    ("{", r"not JSON"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Address"}]}',
     r"record R, field 'a': unknown type 'Address'"),
    ('{"type": "record", "name": "1R", "fields": []}', r"'1R' is not a valid Avro name"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
     r"two fields of that name"),
    ('[{"type": "fixed", "name": "F", "size": 1}, {"type": "fixed", "name": "F", "size": 2}]', r"F is defined twice"),
    ('["int", ["null", "int"]]', r"a union cannot hold a union"),
    ('["int", "string", "int"]', r"the union holds int twice"),
    ('{"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": 10}',
     r"fixed F of size 4 holds at most 9 digits"),
    ('{"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5}', r"scale"),
    ('{"type": "string", "logicalType": "date"}', r"logical type date annotates int, not string"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "int"], "default": 1}]}',
     r"field 'a': the default 1 is not a value of union \[null, int\]"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', r"repeats a symbol"),
    ('{"type": "array"}', r"an array needs 'items'"),
])
def test_invalid_schemas_say_where_and_why(text, message):
    with pytest.raises(InvalidSchemaError, match=message):
        parse_avro_schema(text)


def test_unknown_logical_types_are_ignored_as_the_specification_says():
    assert parse_avro_schema('{"type": "long", "logicalType": "epoch-weeks"}').root.logical is None


def test_defaults_of_every_kind_are_written_for_fields_the_dataframe_lacks():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "int"},
        {"name": "flag", "type": "boolean", "default": True},
        {"name": "big", "type": "long", "default": -(2**40)},
        {"name": "ratio", "type": "float", "default": 0.5},
        {"name": "score", "type": "double", "default": -1},
        {"name": "raw", "type": "bytes", "default": "\u00ff\u0000a"},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}, "default": "ab"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}, "default": "B"},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}, "default": {"x": None}},
        {"name": "empty", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [
            {"name": "a", "type": "string", "default": "q"}, {"name": "b", "type": ["null", "int"]}]},
         "default": {"b": None}},
        {"name": "maybe", "type": ["string", "null"], "default": "dflt"},
    ]}
    t = pa.struct([pa.field("id", pa.int32())])
    got = round_trip(pa.array([{"id": 3}], t), schema)
    assert got == [{"id": 3, "flag": True, "big": -(2**40), "ratio": 0.5, "score": -1.0, "raw": b"\xff\x00a",
                    "hash": b"ab", "kind": "B", "attrs": {"x": None}, "empty": [], "inner": {"a": "q", "b": None},
                    "maybe": "dflt"}]


def test_an_encoder_takes_only_the_type_it_was_planned_for():
    encoder = AvroEncoder("long", pa.int64())
    with pytest.raises(TypeError, match="planned for int64, not int32"):
        encoder.encode(pa.array([1], pa.int32()))
    assert read_back("long", encoder.encode(pa.array([1, None, -2**63])).values) == [1, None, -2**63]
