"""The sink's serialization options: how the ``key`` and ``value`` columns become bytes.

``valueFormat`` / ``keyFormat``: ``binary`` (the column's own bytes, a string as UTF-8: Spark's
Kafka sink's contract, the default), ``avro``, ``json`` (JSON Schema) or ``protobuf`` -- then
the column may be of any Spark type (a struct, usually; for Protobuf always) and is written in the
Schema Registry's wire format.  The schema is derived from the column's type (Spark's
``to_avro`` mapping; ``protobuf_schema``'s for proto3) or given (``valueSchema`` /
``keySchema``); the derived record or message is named ``valueRecordName`` in
``valueRecordNamespace`` (Spark's ``topLevelRecord`` by default; a JSON Schema's ``title``).

The registry client's settings take the prefix ``schema.registry.`` with confluent-kafka's names
(``schema.registry.url``, ``schema.registry.basic.auth.user.info``, ``schema.registry.ssl.*``,
...); the serializer's settings keep Confluent's names (``auto.register.schemas``,
``use.latest.version``, ``normalize.schemas``, ``key.subject.name.strategy``,
``value.subject.name.strategy``).  Everything is checked on the driver, before any task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.serialization.subjects import DEFAULT_STRATEGY
from sparkkafka_sink.spark.errors import REGISTRY_PREFIX, SinkValidationError, in_option_names
from sparkkafka_sink.spark.option_catalog import SERIALIZATION_OPTIONS, column_options, fields, parse_all

ColumnFormatName = Literal["binary", "avro", "json", "protobuf"]
#: the serialization options of both columns together (the serializer's settings)
FORMATS_OPTIONS = tuple(o for o in SERIALIZATION_OPTIONS if not o.key.startswith(("key", "value")))


@dataclass(frozen=True)
class ColumnFormat:
    """What the options say of one column."""

    column: Literal["key", "value"]
    format: ColumnFormatName = "binary"
    #: the user's schema (Avro JSON, JSON Schema or proto3 text); None: derived from the column's type
    schema: str | None = None
    #: Protobuf: a descriptor set file holding the user's schema (read on the driver)
    descriptor_file: str | None = None
    #: the derived schema's record (Protobuf: its message; with a given schema, the one written)
    record_name: str | None = None
    record_namespace: str | None = None
    subject_strategy: str = DEFAULT_STRATEGY

    @property
    def serialized(self) -> bool:
        return self.format != "binary"

    @property
    def option(self) -> str:
        """The option that chose the format (for messages)."""
        return f"{self.column}Format"


@dataclass(frozen=True)
class Formats:
    """The key's and value's formats and, when either uses one, the registry's settings."""

    key: ColumnFormat = ColumnFormat("key")
    value: ColumnFormat = ColumnFormat("value")
    #: ``schema.registry.*`` without the prefix (secrets in it: never shown, see ``__repr__``)
    registry: tuple[tuple[str, str], ...] = ()
    auto_register: bool = True
    use_latest_version: bool = False
    normalize: bool = False

    @property
    def serialized(self) -> tuple[ColumnFormat, ...]:
        """The columns written in a registry format."""
        return tuple(c for c in (self.key, self.value) if c.serialized)

    @property
    def registry_config(self) -> dict[str, str]:
        return dict(self.registry)

    def __repr__(self) -> str:
        return (f"Formats(key={self.key.format}, value={self.value.format}, "
                f"registry={'set' if self.registry else 'none'})")


def parse_formats(lowered: Mapping[str, str], from_file: frozenset[str] = frozenset()) -> Formats:
    """The serialization options of a write (``lowered``: the options, keys lower-cased); each
    parses itself (``option_catalog``), here are the rules that span several.  Registry lines of
    a properties file (``from_file``) are dropped when no column is serialized: the file serves
    the job's other clients too."""
    key, value = (_column(lowered, c) for c in ("key", "value"))
    registry_keys = [k for k in lowered if k.startswith(REGISTRY_PREFIX)]
    if registry_keys and set(registry_keys) <= from_file and not (key.serialized or value.serialized):
        lowered = {k: v for k, v in lowered.items() if k not in from_file or not k.startswith(REGISTRY_PREFIX)}
    registry = tuple(sorted((k[len(REGISTRY_PREFIX):], str(v)) for k, v in lowered.items()
                            if k.startswith(REGISTRY_PREFIX)))
    values = parse_all(lowered, FORMATS_OPTIONS)
    if values["use.latest.version"] and values["auto.register.schemas"]:
        raise SinkValidationError("option 'use.latest.version' writes with the subject's latest schema, which "
                                  "needs auto.register.schemas=false (Confluent's rule): drop one of them")
    if values["auto.register.schemas"] is None:
        values["auto.register.schemas"] = not values["use.latest.version"]
    formats = Formats(key, value, registry, **fields(values, FORMATS_OPTIONS))
    if formats.serialized and not registry:
        columns = " and ".join(f"{c.option}={c.format}" for c in formats.serialized)
        raise SinkValidationError(
            f"{columns} writes in the Schema Registry's format: set option '{REGISTRY_PREFIX}url' (e.g. "
            f'.option("{REGISTRY_PREFIX}url", "http://registry:8081"); Apicurio: .../apis/ccompat/v7)')
    if registry:
        if not formats.serialized:
            raise SinkValidationError(
                f"options '{REGISTRY_PREFIX}*' are used only with valueFormat or keyFormat avro, json or protobuf; "
                "the key and value are written as they are (binary)")
        _check_registry(formats.registry_config)
    return formats


def _column(lowered: Mapping[str, str], column: Literal["key", "value"]) -> ColumnFormat:
    declared = column_options(column)
    values = parse_all(lowered, declared)
    given = [o.name for o in declared if o.field in ("schema", "descriptor_file", "record_name", "record_namespace")
             and values[o.name] is not None]
    format = values[f"{column}Format"]
    if format == "binary" and given:
        raise SinkValidationError(f"option '{given[0]}' needs {column}Format=avro, json or protobuf (the {column} "
                                  "column is written as it is)")
    descriptor = values[f"{column}DescriptorFile"] is not None
    if descriptor and format != "protobuf":
        raise SinkValidationError(f"option '{column}DescriptorFile' needs {column}Format=protobuf (for "
                                  f"{format}, give the schema's text in '{column}Schema')")
    schema = f"{column}DescriptorFile" if descriptor else f"{column}Schema"
    if descriptor and values[f"{column}Schema"] is not None:
        raise SinkValidationError(f"options '{column}Schema' and '{column}DescriptorFile' both give the {column} "
                                  "schema: give one")
    naming = [g for g in given if g not in (f"{column}Schema", f"{column}DescriptorFile")]
    if format == "protobuf" and naming == [f"{column}RecordName"]:
        naming = []  # with a given .proto, the record name says which of its messages is written
    if (descriptor or values[f"{column}Schema"] is not None) and naming:
        raise SinkValidationError(f"options '{column}RecordName' and '{column}RecordNamespace' name the derived "
                                  f"schema's record: with '{schema}' the record is named in the schema")
    return ColumnFormat(column, **fields(values, declared))


def _check_registry(config: Mapping[str, str]) -> None:
    """The registry client's settings, checked as the client reads them; errors speak in the
    sink's option names ('url' -> 'schema.registry.url')."""
    from sparkkafka_sink.serialization.registry_settings import RegistrySettings

    try:
        RegistrySettings(config)
    except ConfigError as e:
        raise SinkValidationError(f"invalid Schema Registry option: {in_option_names(e, REGISTRY_PREFIX)}") from None
