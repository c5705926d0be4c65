"""The driver's schema plan: the key's and value's schemas and ids, before any task.

For each column written as Avro, JSON Schema or Protobuf (``valueFormat``/``keyFormat``), the schema is
derived from the column's Spark type (Spark's ``to_avro`` mapping) or the user's is checked
against it (an error names the field and both types), and the registry is asked once for the
id the column is written with (``SerializerSpec.resolve``: registered, the latest version, or
looked up).  The tasks then encode with that schema and id and never call the registry -- unless
the subject depends on a ``topic`` column's values (TopicNameStrategy without the ``topic``
option), which only the tasks see: they ask once per topic (``task/encoders.py``).

Everything that can fail here fails the write before it starts, in a few seconds, with the
registry's own message and what to change: an unreachable registry, refused credentials, an
unknown subject or version, an incompatible (409) or invalid (422) schema.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyspark.sql.types import DataType, StructType

from sparkkafka_sink.errors import ConfigError, KafkaError
from sparkkafka_sink.serialization.serializer import SerializerSpec, derived_schema, record_name_of
from sparkkafka_sink.spark.formats import ColumnFormat
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.sink_errors import REGISTRY_PREFIX, SinkValidationError, in_option_names

if TYPE_CHECKING:
    import pyarrow as pa

    from sparkkafka_sink.serialization.registry import SchemaRegistryClient


def plan_serialization(options: SinkOptions, schema: StructType, layout: ColumnLayout
                       ) -> tuple[SerializerSpec | None, SerializerSpec | None]:
    """``(key, value)``: how each is encoded (None: written as it is), resolved unless its
    subject depends on the topic column's values (then each task resolves it per topic)."""
    formats = options.formats
    planned = {}
    client = None
    for column in formats.serialized:
        name = getattr(layout, column.column)
        if name is None:
            raise SinkValidationError(f"{column.option}={column.format}, but the DataFrame has no '{column.column}' "
                                      "column")
        field = schema[name]
        arrow_type = _arrow_type(field.dataType, name)
        spec = _spec(column, options, arrow_type, field.nullable)
        if options.topic is not None or not spec.subject_uses_topic:
            if client is None:
                client = _client(options)
            with _registry_errors(column, options):
                spec = spec.resolve(client, options.topic or "", arrow_type, field.nullable)
        planned[column.column] = spec
    return planned.get("key"), planned.get("value")


def _spec(column: ColumnFormat, options: SinkOptions, arrow_type: pa.DataType, nullable: bool) -> SerializerSpec:
    """The column's serializer, its schema derived from the column's type or the user's checked
    against it."""
    formats = options.formats
    format = column.format
    assert format != "binary", "only serialized columns are planned"
    try:
        text, record_name = _schema(column, arrow_type, nullable)
        spec = SerializerSpec(column.column, format, text, record_name, column.subject_name_strategy,
                              formats.registers_schemas, formats.use_latest_version, formats.normalize_schemas)
        if not formats.use_latest_version:
            spec.check(arrow_type, nullable)
        if options.topic is not None or not spec.subject_uses_topic:
            spec.subject(options.topic or "")  # a record strategy without a record name says so now
    except ConfigError as e:  # InvalidSchemaError: names the field and both types
        where = (f"option '{column.column}Schema'" if column.schema is not None else
                 f"option '{column.column}DescriptorFile'" if column.descriptor_file is not None else
                 f"the {column.column} column")
        raise SinkValidationError(f"{column.option}={column.format}: {where}: {e}") from None
    return spec


def _schema(column: ColumnFormat, arrow_type: pa.DataType, nullable: bool) -> tuple[str, str | None]:
    """The column's schema text and its record's full name: the user's (a Protobuf schema's
    message chosen by the record name, or its first), or derived from the column's type."""
    format = column.format
    assert format != "binary", "only serialized columns are planned"
    if column.descriptor_file is not None:
        from sparkkafka_sink.serialization.protobuf_schema import from_descriptor_set

        try:
            with open(column.descriptor_file, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read {column.descriptor_file!r}: {e.strerror or e}") from None
        proto = from_descriptor_set(data, column.record_name)
        return proto.text(), proto.full_name
    if column.schema is not None:
        if format == "protobuf":
            from sparkkafka_sink.serialization.protobuf_schema import parse_proto

            return column.schema, parse_proto(column.schema, column.record_name).full_name
        return column.schema, record_name_of(format, column.schema)
    text = derived_schema(format, arrow_type, nullable, column.column, column.record_name, column.record_namespace)
    return text, record_name_of(format, text)


def _arrow_type(data_type: DataType, column: str) -> pa.DataType:
    """The Arrow type Spark hands the tasks a column of ``data_type`` in (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_type

    # the keyword naming the zone changed (pyspark 4.2: timezone=; before: timestamp_utc=True)
    in_utc = ({"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_type).parameters
              else {"timestamp_utc": True})
    try:
        return to_arrow_type(data_type, **in_utc)
    except (TypeError, ValueError, NotImplementedError) as e:
        raise SinkValidationError(f"column '{column}' of type {data_type.simpleString()} cannot be serialized: "
                                  f"{e}") from None


def _client(options: SinkOptions) -> SchemaRegistryClient:
    from sparkkafka_sink.serialization.registry import SchemaRegistryClient

    return SchemaRegistryClient(options.formats.registry_config)


@contextmanager
def _registry_errors(column: ColumnFormat, options: SinkOptions) -> Iterator[None]:
    """A registry's refusal fails the write here, with its message (the registry's words, what to
    change) in the sink's option names."""
    try:
        yield
    except (KafkaError, ConfigError) as e:  # SchemaRegistryError, InvalidSchemaError
        text = in_option_names(e, REGISTRY_PREFIX)
        subject_of = options.topic or "the records"
        raise SinkValidationError(f"{column.option}={column.format}: the Schema Registry could not give the "
                                  f"{column.column} schema's id for {subject_of}: {text}") from None

