"""Arrow columns of the types Spark hands a task (``sparkkafka_sink.serialization.arrow_types``),
for the codec tests: one column with every type, nested and nullable, and Hypothesis strategies
of random nested types and their data."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

UTC = dt.timezone.utc

PRIMITIVES = [pa.null(), pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
              pa.string(), pa.binary(), pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("us"),
              pa.duration("us")]

#: every type, nested: a struct holding a struct, lists of structs and of lists, maps
EVERY_TYPE = pa.struct([
    pa.field("id", pa.int64(), False),
    pa.field("flag", pa.bool_()),
    pa.field("tiny", pa.int8()),
    pa.field("small", pa.int16()),
    pa.field("count", pa.int32()),
    pa.field("ratio", pa.float32()),
    pa.field("score", pa.float64()),
    pa.field("name", pa.string()),
    pa.field("blob", pa.binary()),
    pa.field("amount", pa.decimal128(10, 2)),
    pa.field("huge", pa.decimal128(38, 6), False),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("local", pa.timestamp("us")),
    pa.field("wait", pa.duration("us")),
    pa.field("nothing", pa.null()),
    pa.field("address", pa.struct([pa.field("street", pa.string(), False), pa.field("zip", pa.string()),
                                   pa.field("geo", pa.struct([pa.field("lat", pa.float64()),
                                                              pa.field("lon", pa.float64())]))])),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("lines", pa.list_(pa.field("element", pa.struct([pa.field("sku", pa.string()),
                                                                 pa.field("qty", pa.int32(), False),
                                                                 pa.field("price", pa.decimal128(7, 3))]),
                                        False))),
    pa.field("matrix", pa.list_(pa.list_(pa.int64()))),
    pa.field("attrs", pa.map_(pa.string(), pa.field("value", pa.float64(), True))),
    pa.field("nested_map", pa.map_(pa.string(), pa.field("value", pa.list_(pa.string()), False)), False),
])


def every_type_rows() -> list[dict | None]:
    """Rows of ``EVERY_TYPE``: extremes, nulls at every level, empty lists and maps, a null row."""
    full = {
        "id": 2**63 - 1, "flag": True, "tiny": -128, "small": 32767, "count": -(2**31), "ratio": 1.5,
        "score": -1e300, "name": "naïve ☃ \U0001f600 \"quoted\" \\ \n", "blob": bytes(range(256)),
        "amount": Decimal("-99999999.99"), "huge": Decimal("-" + "9" * 32 + ".999999"),
        "day": dt.date(1, 1, 1), "at": dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        "local": dt.datetime(1969, 12, 31, 23, 59, 59, 1), "wait": dt.timedelta(days=-3, microseconds=5),
        "nothing": None,
        "address": {"street": "Main", "zip": "02134", "geo": {"lat": 52.5, "lon": None}},
        "tags": ["a", None, ""], "lines": [{"sku": "x", "qty": 3, "price": Decimal("1.005")},
                                          {"sku": None, "qty": -1, "price": None}],
        "matrix": [[1, -2**40], [], None, [None]], "attrs": [("k", 1.0), ("", None)],
        "nested_map": [("a", ["b", None]), ("c", [])],
    }
    sparse = {name: None for name in EVERY_TYPE.names} | {
        "id": -(2**63), "huge": Decimal("0.000001"), "nested_map": [], "tags": [], "lines": [], "matrix": [],
        "attrs": [], "address": {"street": "", "zip": None, "geo": None}}
    small = dict(full, id=0, amount=Decimal("0.01"), huge=Decimal("1"), day=dt.date(9999, 12, 31),
                 at=dt.datetime(1, 1, 1, tzinfo=UTC), local=dt.datetime(9999, 12, 31), score=float("-inf"),
                 ratio=float("inf"), blob=b"", name="")
    return [full, sparse, None, small, dict(full, id=1, address=None, lines=None, matrix=None)]


def normalize(value: Any, t: pa.DataType) -> Any:
    """A ``to_pylist`` value as an independent reader returns it: maps as dicts, intervals as
    microseconds."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: normalize(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [normalize(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: normalize(value[f.name], f.type) for f in t}
    if pa.types.is_duration(t):
        return value // dt.timedelta(microseconds=1)
    return value


#: a column and a user's Avro schema for it: widenings, an enum, a fixed, milliseconds, a bytes
#: decimal, Spark's [int, long] union, null-first unions, fields the DataFrame lacks
ORDER = pa.struct([
    pa.field("id", pa.int32(), False), pa.field("ratio", pa.float32()), pa.field("Status", pa.string()),
    pa.field("hash", pa.binary()), pa.field("amount", pa.decimal128(10, 2)),
    pa.field("at", pa.timestamp("us", tz="UTC")), pa.field("local", pa.timestamp("us")),
    pa.field("seq", pa.int64()),
])
ORDER_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "com.example", "fields": [
        {"name": "id", "type": "long"},  # INT widened
        {"name": "ratio", "type": ["null", "double"]},  # FLOAT widened, null first
        {"name": "status", "type": ["null", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}]},
        {"name": "hash", "type": ["null", {"type": "fixed", "name": "Md5", "size": 4}]},
        {"name": "amount", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}]},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "local", "type": ["null", "long"]},  # no logical type: milliseconds, as Spark writes
        {"name": "seq", "type": ["null", "int", "long"]},  # Spark's [int, long] for a BIGINT
        {"name": "source", "type": "string", "default": "spark"},  # not in the DataFrame: its default
        {"name": "lines", "type": {"type": "array", "items": "Status"}, "default": ["NEW"]},
        {"name": "note", "type": ["null", "string"]},  # not in the DataFrame, nullable: null
    ]}


def order_rows():
    return [
        {"id": 1, "ratio": 0.5, "Status": "NEW", "hash": b"abcd", "amount": Decimal("-12.34"),
         "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "local": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
         "seq": 2**40},
        {"id": -7, "ratio": None, "Status": None, "hash": None, "amount": None, "at": None, "local": None, "seq": None},
    ]


# ------------------------------------------------------------------------------ hypothesis

_NAMES = st.sampled_from(["a", "b", "c", "id", "value", "Zip", "x_1"])


def _decimal_types() -> st.SearchStrategy[pa.DataType]:
    return st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s)))


def _field(name: str, t: pa.DataType, nullable: bool) -> pa.Field:
    return pa.field(name, t, nullable or pa.types.is_null(t))  # a null field is always nullable


def _struct(children: list[tuple[str, pa.DataType, bool]]) -> pa.DataType:
    seen: dict[str, pa.Field] = {}
    for name, t, nullable in children:
        seen.setdefault(name, _field(name, t, nullable))
    return pa.struct(list(seen.values()))


def arrow_types(primitives: list[pa.DataType] = PRIMITIVES) -> st.SearchStrategy[pa.DataType]:
    """Random nested types of Spark's columns, a few levels deep."""
    leaves = st.one_of(st.sampled_from(primitives), _decimal_types())
    return st.recursive(leaves, lambda inner: st.one_of(
        st.tuples(inner, st.booleans()).map(lambda c: pa.list_(_field("element", *c))),
        st.tuples(inner, st.booleans()).map(lambda c: pa.map_(pa.string(), _field("value", *c))),
        st.lists(st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=4).map(_struct),
    ), max_leaves=8)


def values_of(t: pa.DataType, nullable: bool, finite: bool = False) -> st.SearchStrategy[Any]:
    """Python values of type ``t`` as ``pa.array`` takes them (None too when ``nullable``)."""
    value: st.SearchStrategy[Any]
    if pa.types.is_null(t):
        return st.none()
    if t == pa.bool_():
        value = st.booleans()
    elif pa.types.is_integer(t):
        bits = t.bit_width - 1
        value = st.integers(-(2**bits), 2**bits - 1)
    elif pa.types.is_floating(t):
        value = st.floats(width=t.bit_width, allow_nan=False, allow_infinity=not finite)
    elif pa.types.is_string(t):
        value = st.text(max_size=8)
    elif pa.types.is_binary(t):
        value = st.binary(max_size=8)
    elif pa.types.is_decimal(t):
        top = 10**t.precision - 1
        value = st.integers(-top, top).map(lambda i: Decimal(f"{i}e-{t.scale}"))
    elif t == pa.date32():
        value = st.dates()
    elif pa.types.is_timestamp(t):
        value = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31),
                             timezones=st.just(UTC) if t.tz is not None else st.none())
    elif pa.types.is_duration(t):
        value = st.integers(-(2**62), 2**62).map(lambda us: dt.timedelta(microseconds=us))
    elif pa.types.is_map(t):
        value = st.dictionaries(st.text(max_size=4), values_of(t.item_type, t.item_field.nullable, finite),
                                max_size=3).map(lambda d: list(d.items()))
    elif pa.types.is_list(t):
        value = st.lists(values_of(t.value_type, t.value_field.nullable, finite), max_size=4)
    elif pa.types.is_struct(t):
        value = st.fixed_dictionaries({f.name: values_of(f.type, f.nullable, finite) for f in t})
    else:
        raise AssertionError(f"no values for {t}")
    return st.one_of(st.none(), value) if nullable else value


@st.composite
def columns(draw: st.DrawFn, primitives: list[pa.DataType] = PRIMITIVES, finite: bool = False) -> pa.Array:
    """A column of a random nested type, nulls included, sometimes a slice of a longer one."""
    t = draw(arrow_types(primitives))
    rows = draw(st.lists(values_of(t, True, finite), min_size=1, max_size=16))
    arr = pa.array(rows, t)
    skip = draw(st.integers(0, min(2, len(arr))))
    return arr.slice(skip)
