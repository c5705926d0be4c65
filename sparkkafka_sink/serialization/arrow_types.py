"""The Arrow types Spark's columns arrive as, named as Spark names them.

PySpark hands a task its rows as Arrow (``to_arrow_schema``): BooleanType is ``bool``, Byte/
Short/Integer/LongType ``int8``..``int64``, Float/DoubleType ``float32``/``float64``, StringType
``string``, BinaryType ``binary``, DecimalType ``decimal128(p, s)``, DateType ``date32``,
TimestampType ``timestamp('us', tz='UTC')``, TimestampNTZType ``timestamp('us')``,
DayTimeIntervalType ``duration('us')``, arrays ``list``, maps ``map``, structs ``struct`` and
NullType ``null``.  Errors speak of Spark's types, the ones the user wrote.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["spark_type_name", "is_string", "is_binary", "is_list", "TIME_UNIT_MICROS"]

#: how many microseconds one unit of an Arrow timestamp or duration is (``ns``: a fraction)
TIME_UNIT_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1 / 1000}


#: view types arrived in pyarrow 16
_is_string_view = getattr(pa.types, "is_string_view", lambda t: False)
_is_binary_view = getattr(pa.types, "is_binary_view", lambda t: False)


def is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or _is_string_view(t))


def is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or _is_binary_view(t)
                or pa.types.is_fixed_size_binary(t))


def is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


_SIMPLE = {
    pa.bool_(): "BOOLEAN", pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT",
    pa.int64(): "BIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.date32(): "DATE",
    pa.null(): "VOID",
}


def spark_type_name(t: pa.DataType) -> str:
    """Spark SQL's name of the type a column of Arrow type ``t`` came from (``DECIMAL(10,2)``,
    ``ARRAY<STRING>``, ``STRUCT<id: BIGINT, ...>``); the Arrow name when Spark has none."""
    if t in _SIMPLE:
        return _SIMPLE[t]
    if is_string(t):
        return "STRING"
    if is_binary(t):
        return "BINARY"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is not None else "TIMESTAMP_NTZ"
    if pa.types.is_duration(t):
        return "INTERVAL DAY TO SECOND"
    if pa.types.is_map(t):
        return f"MAP<{spark_type_name(t.key_type)}, {spark_type_name(t.item_type)}>"
    if is_list(t):
        return f"ARRAY<{spark_type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"{f.name}: {spark_type_name(f.type)}" for f in t) + ">"
    return f"Arrow {t}"
