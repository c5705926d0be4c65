"""Driver-side checks of the DataFrame's schema and the save mode.

The column contract is the one of Spark's built-in Kafka sink, so switching
``format("kafka")`` to ``format("pyprod-kafka")`` needs no other change.  Each
message names the column, the type found and the types accepted; the checks run
once in ``DataSource.writer()`` before any task starts, and tell the tasks where
each column is (``ColumnLayout``).
"""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.sink_errors import SinkValidationError

#: the ``headers`` column's type (record.arrow.HEADERS_TYPE in Spark's words; not imported from
#: there: the driver plans a write in a process of its own, and that module pulls in numpy)
HEADERS_SQL = "array<struct<key:string,value:binary>>"

# column -> (accepted Spark types, how to say it)
_ACCEPTED = {
    "value": ((StringType, BinaryType), "string or binary"),
    "key": ((StringType, BinaryType), "string or binary"),
    "topic": ((StringType,), "string"),
    "partition": ((IntegerType,), "int"),
    "timestamp": ((TimestampType,), "timestamp"),
}


def check_save_mode(overwrite: bool) -> None:
    if overwrite:
        raise SinkValidationError(
            "save mode 'overwrite' is not supported: Kafka topics cannot be truncated, so "
            'records can only be appended. Use .mode("append").'
        )


def _find(schema: StructType, name: str) -> StructField | None:
    """The field named ``name``: exact match first, then case-insensitive (Spark's default)."""
    for f in schema.fields:
        if f.name == name:
            return f
    for f in schema.fields:
        if f.name.lower() == name:
            return f
    return None


def _is_headers_type(dt: DataType) -> bool:
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = dt.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )


def validate_schema(schema: StructType, topic_option: str | None, serialized: Collection[str] = (),
                    trace_column: bool = False) -> ColumnLayout:
    """Check the Kafka columns; return where to find them in each Arrow batch.

    Columns other than value/key/topic/partition/headers/timestamp are ignored,
    as Spark's Kafka sink does.  The ``serialized`` columns ("key", "value": valueFormat or
    keyFormat avro, json or protobuf) may be of any type: their schema is checked by ``driver.schema_plan``.
    """
    present = ", ".join(f"{f.name}:{f.dataType.simpleString()}" for f in schema.fields) or "none"
    found = {}
    for name, (types, accepted) in _ACCEPTED.items():
        f = _find(schema, name)
        if f is None:
            continue
        if name not in serialized and not isinstance(f.dataType, types):
            raise SinkValidationError(
                f"column '{f.name}' has type {f.dataType.simpleString()}; "
                f"accepted types for '{name}': {accepted}"
                + (f" (or any type with {name}Format avro or json, a struct with protobuf: "
                   f".option(\"{name}Format\", \"avro\"))"
                   if name in ("key", "value") else "")
            )
        found[name] = f.name
    h = _find(schema, "headers")
    if h is not None:
        if not _is_headers_type(h.dataType):
            raise SinkValidationError(
                f"column '{h.name}' has type {h.dataType.simpleString()}; "
                f"accepted type for 'headers': {HEADERS_SQL}"
            )
        found["headers"] = h.name
    if "value" not in found:
        raise SinkValidationError(
            "the DataFrame has no 'value' column (required; string or binary, or any type with "
            f"valueFormat avro, json or protobuf; null writes a tombstone). Columns present: {present}"
        )
    if "topic" not in found and topic_option is None:
        raise SinkValidationError(
            "no topic: the DataFrame has no 'topic' column (string) and the 'topic' option is "
            'not set. Add .option("topic", "<name>") or a \'topic\' column.'
        )
    trace = _find(schema, "traceparent") if trace_column else None
    if trace_column and (trace is None or not isinstance(trace.dataType, StringType)):
        raise SinkValidationError(
            "traceHeaders=column takes each row's W3C traceparent from a string column 'traceparent'"
            + (f", which has type {trace.dataType.simpleString()}" if trace is not None else
               f": the DataFrame has none (columns present: {present})")
            + "; or write every record's from the task's span: .option(\"traceHeaders\", \"task\")")
    return ColumnLayout(
        value=found["value"],
        key=found.get("key"),
        topic=found.get("topic"),
        partition=found.get("partition"),
        headers=found.get("headers"),
        timestamp=found.get("timestamp"),
        traceparent=trace.name if trace is not None else None,
    )
