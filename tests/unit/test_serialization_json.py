"""The JSON codec: schemas derived for what Spark's ``to_json`` writes, user JSON Schemas checked
structurally, and every row read back by ``json.loads`` and validated by ``jsonschema`` against
the schema (formats included)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import jsonschema
import numpy as np
import pyarrow as pa
import pytest
from arrow_samples import EVERY_TYPE, PRIMITIVES, columns, every_type_rows
from hypothesis import HealthCheck, given, settings

from sparkkafka_sink.serialization.encoded import InvalidSchemaError
from sparkkafka_sink.serialization.json_encoder import JsonEncoder
from sparkkafka_sink.serialization.json_schema import DRAFT_07, check_json_schema, json_schema_of, parse_json_schema

UTC = dt.timezone.utc
#: JSON has no intervals: Spark's DayTimeIntervalType is refused (see the test)
NO_INTERVALS = [t for t in PRIMITIVES if not pa.types.is_duration(t)]
JSON_TYPES = pa.struct([f for f in EVERY_TYPE if f.name != "wait"])


def json_rows() -> list:
    return [None if r is None else {k: v for k, v in r.items() if k != "wait"} for r in every_type_rows()]


def expected(value: Any, t: pa.DataType) -> Any:
    """What ``json.loads(..., parse_float=Decimal)`` should give for a ``to_pylist`` value, as Spark's
    ``to_json`` writes it: null struct fields left out, binary in base64, timestamps to the
    millisecond, numbers as decimals."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: expected(value[f.name], f.type) for f in t if value[f.name] is not None}
    if pa.types.is_map(t):
        return {str(k): expected(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [expected(v, t.value_type) for v in value]
    if pa.types.is_binary(t):
        return base64.b64encode(value).decode()
    if t == pa.date32():
        return value.isoformat()
    if pa.types.is_timestamp(t):
        text = value.replace(tzinfo=None).isoformat(timespec="milliseconds")
        return text + "Z" if t.tz is not None else text
    if t == pa.float32():
        return Decimal(str(np.float32(value)))
    if pa.types.is_floating(t):
        return Decimal(repr(value))
    return value


#: date-time is checked only with rfc3339-validator installed (the test extra has it)
FORMATS = jsonschema.FormatChecker()
assert {"date", "date-time"} <= set(FORMATS.checkers)


def read_back(values: pa.Array, schema: dict) -> list:
    """Each value parsed by ``json.loads`` and validated against ``schema``, formats included."""
    out = []
    for text in values.to_pylist():
        if text is None:
            out.append(None)
            continue
        jsonschema.validate(json.loads(text), schema, format_checker=FORMATS)
        out.append(json.loads(text, parse_float=Decimal))
    return out


def round_trip(arr: pa.Array, schema=None) -> list:
    schema = json_schema_of(arr.type, True) if schema is None else schema
    jsonschema.Draft7Validator.check_schema(schema)
    encoded = JsonEncoder(schema, arr.type).encode(arr)
    assert encoded.bad_rows.tolist() == [], encoded.reasons
    return read_back(encoded.values, schema)


# ----------------------------------------------------------------------------- the schema


def test_the_derived_schema():
    t = pa.struct([pa.field("id", pa.int64(), False), pa.field("price", pa.decimal128(10, 2)),
                   pa.field("blob", pa.binary()), pa.field("at", pa.timestamp("us", tz="UTC")),
                   pa.field("local", pa.timestamp("us")), pa.field("day", pa.date32(), False),
                   pa.field("tags", pa.list_(pa.field("element", pa.string(), False))),
                   pa.field("attrs", pa.map_(pa.string(), pa.float32()), False)])
    assert json_schema_of(t, True) == {
        "$schema": DRAFT_07, "type": ["object", "null"],
        "properties": {
            "id": {"type": "integer"},
            "price": {"type": ["number", "null"]},
            "blob": {"type": ["string", "null"], "contentEncoding": "base64"},
            "at": {"type": ["string", "null"], "format": "date-time"},
            "local": {"type": ["string", "null"]},
            "day": {"type": "string", "format": "date"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "attrs": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
        },
        "required": ["id", "day", "attrs"], "additionalProperties": False}


def test_intervals_and_unkeyable_maps_are_refused_by_field():
    with pytest.raises(InvalidSchemaError, match=r"value\.wait: Spark's INTERVAL DAY TO SECOND has no JSON "
                                                 r"counterpart here; cast it to a string or a number"):
        json_schema_of(pa.struct([pa.field("wait", pa.duration("us"))]))
    with pytest.raises(InvalidSchemaError, match=r"value\.m: the keys of Spark's MAP<BINARY, INT>.*cast them"):
        json_schema_of(pa.struct([pa.field("m", pa.map_(pa.binary(), pa.int32()))]))


# ------------------------------------------------------------------- json.loads reads it all


def test_every_type_reads_back_as_spark_writes_it_and_validates():
    arr = pa.array(json_rows(), JSON_TYPES)
    want = [expected(v, arr.type) for v in arr.to_pylist()]
    want[3]["ratio"] = want[3]["score"] = None  # infinities: bad rows, below
    want[3] = {k: v for k, v in want[3].items() if v is not None}
    schema = json_schema_of(arr.type, True)
    encoded = JsonEncoder(schema, arr.type).encode(arr)
    assert encoded.bad_rows.tolist() == [3]
    assert encoded.reasons == ("field value.ratio: inf is not a JSON number",)
    got = read_back(encoded.values, schema)
    assert got[:3] + got[4:] == want[:3] + want[4:]
    finite = pa.array([r if r is None else dict(r, ratio=1.0, score=-2.5) for r in json_rows()], JSON_TYPES)
    assert round_trip(finite.slice(2)) == [expected(v, finite.type) for v in finite.to_pylist()[2:]]


def test_the_text_is_what_spark_writes():
    """``to_json`` of Spark 4.3 on the same rows (session time zone UTC), but for decimals and
    doubles, whose text differs and value is equal (Spark: Java's ``Double.toString``)."""
    t = pa.struct([pa.field("i", pa.int32()), pa.field("s", pa.string()), pa.field("b", pa.binary()),
                   pa.field("dec", pa.decimal128(20, 10)), pa.field("dt", pa.date32()),
                   pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("arr", pa.list_(pa.int32())),
                   pa.field("m", pa.map_(pa.string(), pa.int32())), pa.field("mi", pa.map_(pa.int32(), pa.string())),
                   pa.field("n", pa.null()), pa.field("bo", pa.bool_()),
                   pa.field("st", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())]))])
    rows = [{"i": 1, "s": 'a"b\\c\n\x01\u2028é/', "b": b"\x00\xffab", "dec": Decimal("0E-10"), "dt": dt.date(1, 2, 3),
             "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "arr": [1, None],
             "m": [("k", None), ("j", 1)], "mi": [(1, "x")], "n": None, "bo": True, "st": {"x": None, "y": "q"}},
            {"i": None, "s": None, "b": b"", "dec": Decimal("-1E-7"), "dt": dt.date(2024, 2, 29),
             "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "arr": [], "m": [], "mi": None,
             "n": None, "bo": None, "st": None}]
    got = JsonEncoder(json_schema_of(t, True), t).encode(pa.array(rows, t)).values.to_pylist()
    assert got == [
        b'{"i":1,"s":"a\\"b\\\\c\\n\\u0001\xe2\x80\xa8\xc3\xa9/","b":"AP9hYg==","dec":0E-10,"dt":"0001-02-03",'
        b'"ts":"2024-01-02T03:04:05.678Z","arr":[1,null],"m":{"k":null,"j":1},"mi":{"1":"x"},"bo":true,'
        b'"st":{"y":"q"}}',
        b'{"b":"","dec":-1.000E-7,"dt":"2024-02-29","ts":"1969-12-31T23:59:59.999Z","arr":[],"m":{}}']


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(columns(NO_INTERVALS, finite=True))
def test_random_nested_columns_read_back_equal_and_validate(arr):
    assert round_trip(arr) == [expected(v, arr.type) for v in arr.to_pylist()]


@pytest.mark.parametrize("t, rows", [
    (pa.string(), ["", None, '\x00\x1f\x7f"\\ \u2028 😀', "plain"]),
    (pa.int8(), [-128, None, 127]),
    (pa.binary(), [b"", b"a", b"ab", b"abc", b"abcd", None, bytes(range(256))]),
    (pa.list_(pa.list_(pa.string())), [[["a"], None, []], None, []]),
    (pa.map_(pa.int64(), pa.bool_()), [[(1, True), (-2, None)], None, []]),
    (pa.large_string(), ["x", None]),
])
def test_top_level_values_that_are_not_objects(t, rows):
    arr = pa.array(rows, t)
    assert round_trip(arr) == [expected(v, t) for v in arr.to_pylist()]


# -------------------------------------------------------------------------------- bad rows


def test_non_finite_numbers_and_disallowed_nulls_are_bad_rows_the_rest_written():
    schema = {"type": "object", "properties": {
        "x": {"type": "number"}, "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["id"]}
    t = pa.struct([pa.field("x", pa.float64()), pa.field("id", pa.int64()), pa.field("tags", pa.list_(pa.string()))])
    rows = [{"x": 1.5, "id": 1, "tags": ["a"]}, {"x": float("nan"), "id": 2, "tags": []},
            {"x": None, "id": None, "tags": None}, {"x": -float("inf"), "id": 4, "tags": []},
            {"x": 2.0, "id": 5, "tags": ["b", None]}, None, {"x": None, "id": 7, "tags": None}]
    encoded = JsonEncoder(schema, t).encode(pa.array(rows, t))
    assert encoded.bad_rows.tolist() == [1, 2, 3, 4]
    assert encoded.reasons == ("field value.x: nan is not a JSON number",
                               "field value.id: null, but the JSON Schema does not allow null here",
                               "field value.x: -inf is not a JSON number",
                               "field value.tags[]: null, but the JSON Schema does not allow null here")
    assert encoded.values.to_pylist() == [b'{"x":1.5,"id":1,"tags":["a"]}', None, None, None, None, None, b'{"id":7}']
    assert encoded.error(1).row == 2 and encoded.error(1).field == "value.id"


def test_a_required_nullable_property_is_written_as_null():
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "string"}},
              "required": ["a"]}
    t = pa.struct([pa.field("a", pa.string()), pa.field("b", pa.string())])
    encoded = JsonEncoder(schema, t).encode(pa.array([{"a": None, "b": None}, {"a": "x", "b": "y"}], t))
    assert encoded.values.to_pylist() == [b'{"a":null}', b'{"a":"x","b":"y"}']


# ---------------------------------------------------------------------------- user schemas


CONFLUENT_STYLE = {
    "$schema": DRAFT_07, "title": "Order", "type": "object", "additionalProperties": False,
    "properties": {
        "id": {"type": "integer"},
        "customer": {"oneOf": [{"type": "null", "title": "Not included"}, {"$ref": "#/definitions/Customer"}]},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
        "paid_at": {"type": "string", "format": "date-time"},
        "extra": {"type": "object"},
    },
    "required": ["id", "lines"],
    "definitions": {
        "Customer": {"type": "object", "additionalProperties": False,
                     "properties": {"name": {"type": "string"}, "tags": {"type": "object",
                                                                        "additionalProperties": {"type": "integer"}}}},
        "Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "number"}}},
    },
}


def test_a_user_schema_with_refs_one_of_null_and_open_objects():
    t = pa.struct([pa.field("id", pa.int32(), False),
                   pa.field("customer", pa.struct([pa.field("name", pa.string()),
                                                   pa.field("tags", pa.map_(pa.string(), pa.int16()))])),
                   pa.field("lines", pa.list_(pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.int64()),
                                                         pa.field("note", pa.string())])), False),
                   pa.field("paid_at", pa.timestamp("us", tz="UTC"))])
    rows = [{"id": 1, "customer": {"name": "a", "tags": [("x", 1)]},
             "lines": [{"sku": "s", "qty": 2, "note": "free"}], "paid_at": dt.datetime(2024, 5, 6, tzinfo=UTC)},
            {"id": 2, "customer": None, "lines": [], "paid_at": None}]
    assert round_trip(pa.array(rows, t), CONFLUENT_STYLE) == [
        {"id": 1, "customer": {"name": "a", "tags": {"x": 1}}, "lines": [{"sku": "s", "qty": 2, "note": "free"}],
         "paid_at": "2024-05-06T00:00:00.000Z"},
        {"id": 2, "lines": []}]
    assert JsonEncoder(json.dumps(CONFLUENT_STYLE), t).encode(pa.array(rows, t)).bad_rows.tolist() == []


@pytest.mark.parametrize("t, schema, message", [
    (pa.struct([pa.field("address", pa.struct([pa.field("zip", pa.int32())]))]),
     {"type": "object", "properties": {"address": {"type": "object", "properties": {"zip": {"type": "string"}}}}},
     r"value\.address\.zip: Spark's INT cannot be written as JSON Schema \{\"type\":\"string\"\}; cast the column or "
     r"change the schema"),
    (pa.struct([pa.field("a", pa.int32()), pa.field("extra", pa.string())]),
     {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     r"value\.extra: the DataFrame's field 'extra' \(STRING\) is not a property of the JSON Schema, which allows no "
     r"others \(its properties: a\); add it to the schema or drop the column"),
    (pa.struct([pa.field("a", pa.int32())]),
     {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a", "b"]},
     r"value: the JSON Schema requires 'b', not in the DataFrame .*add the column or drop it from 'required'"),
    (pa.struct([pa.field("t", pa.timestamp("us"))]),
     {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}},
     r"value\.t: Spark's TIMESTAMP_NTZ .*Spark writes it as a local date-time, which format date-time refuses; cast "
     r"the column to TIMESTAMP"),
    (pa.struct([pa.field("d", pa.date32())]),
     {"type": "object", "properties": {"d": {"type": "string", "format": "date-time"}}}, r"value\.d: .*as a date"),
    (pa.struct([pa.field("m", pa.map_(pa.string(), pa.int32()))]),
     {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": False}}},
     r"value\.m: .*additionalProperties is false"),
    (pa.struct([pa.field("l", pa.list_(pa.float64()))]),
     {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}},
     r"value\.l\[\]: Spark's DOUBLE cannot be written as JSON Schema \{\"type\":\"integer\"\}"),
    (pa.struct([pa.field("a", pa.int32())]), {"$ref": "#/definitions/Nope"}, r"value: \$ref '#/definitions/Nope' does "
                                                                             r"not resolve"),
    (pa.struct([pa.field("v", pa.null())]), {"type": "object", "properties": {"v": {"type": "string"}}},
     r"value\.v: Spark's VOID .*only nulls"),
    (pa.string(), {"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, r"value: .*no branch can hold it"),
])
def test_a_schema_that_does_not_fit_the_column_is_refused_naming_field_and_types(t, schema, message):
    with pytest.raises(InvalidSchemaError, match=message):
        check_json_schema(schema, t)


def test_parse_errors_are_clear():
    with pytest.raises(InvalidSchemaError, match="not JSON"):
        parse_json_schema("{")
    with pytest.raises(InvalidSchemaError, match="an object or a boolean, not list"):
        parse_json_schema("[]")
    with pytest.raises(InvalidSchemaError, match="only local \\$ref"):
        parse_json_schema('{"$ref": "http://example.com/s.json"}')
    assert parse_json_schema("true") is True
