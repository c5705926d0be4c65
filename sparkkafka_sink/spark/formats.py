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
from typing import Any, Literal

from sparkkafka_sink.config_def import Declared, declarations
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.spark.option_catalog import ColumnSettings, SerializerSettings, column_values, parse_all
from sparkkafka_sink.spark.sink_errors import REGISTRY_PREFIX, SinkValidationError, in_option_names

#: the serialization options of both columns together (the serializer's settings)
FORMATS_OPTIONS = declarations(SerializerSettings)


class ColumnFormat(ColumnSettings):
    """What the options say of one column: its settings (``option_catalog.ColumnSettings``:
    ``format``, ``schema``, ``descriptor_file``, ``record_name``, ``record_namespace``,
    ``subject_name_strategy``) and which column it is."""

    def __init__(self, column: Literal["key", "value"], values: Mapping[str, Any] | None = None):
        super().__init__(values or {})
        self.column = column

    @property
    def serialized(self) -> bool:
        return self.format != "binary"

    @property
    def option(self) -> str:
        """The option that chose the format (for messages)."""
        return f"{self.column}Format"


class Formats(SerializerSettings):
    """The key's and value's formats and, when either uses one, the registry's settings
    (``auto_register_schemas``, ``use_latest_version``, ``normalize_schemas``:
    ``option_catalog.SerializerSettings``)."""

    def __init__(self, key: ColumnFormat | None = None, value: ColumnFormat | None = None,
                 registry: tuple[tuple[str, str], ...] = (), values: Mapping[str, Any] | None = None):
        super().__init__(values or {})
        self.key = key or ColumnFormat("key")
        self.value = value or ColumnFormat("value")
        #: ``schema.registry.*`` without the prefix (secrets in it: never shown, see ``__repr__``)
        self.registry = registry

    @property
    def registers_schemas(self) -> bool:
        """``auto.register.schemas``, where unset ``true`` unless ``use.latest.version`` (Confluent's rule)."""
        given = self.auto_register_schemas
        return not self.use_latest_version if given is None else given

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
    formats = Formats(key, value, registry, parse_all(lowered, FORMATS_OPTIONS))
    if formats.use_latest_version and formats.auto_register_schemas:
        raise SinkValidationError("option 'use.latest.version' writes with the subject's latest schema, which "
                                  "needs auto.register.schemas=false (Confluent's rule): drop one of them")
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
    found = ColumnFormat(column, column_values(lowered, column))

    def name(attribute: Declared[Any]) -> str:  # the option as users write it: keySchema, valueRecordName
        return attribute.key.for_column(column).name
    declared = ColumnSettings
    given = [name(option) for option, value in ((declared.schema, found.schema),
                                                (declared.descriptor_file, found.descriptor_file),
                                                (declared.record_name, found.record_name),
                                                (declared.record_namespace, found.record_namespace))
             if value is not None]
    if found.format == "binary" and given:
        raise SinkValidationError(f"option '{given[0]}' needs {found.option}=avro, json or protobuf (the {column} "
                                  "column is written as it is)")
    descriptor, schema_option = name(declared.descriptor_file), name(declared.schema)
    if found.descriptor_file is not None and found.format != "protobuf":
        raise SinkValidationError(f"option '{descriptor}' needs {found.option}=protobuf (for "
                                  f"{found.format}, give the schema's text in '{schema_option}')")
    if found.descriptor_file is not None and found.schema is not None:
        raise SinkValidationError(f"options '{schema_option}' and '{descriptor}' both give the {column} "
                                  "schema: give one")
    naming = [g for g in given if g not in (schema_option, descriptor)]
    if found.format == "protobuf" and naming == [name(declared.record_name)]:
        naming = []  # with a given .proto, the record name says which of its messages is written
    if (found.descriptor_file is not None or found.schema is not None) and naming:
        schema = descriptor if found.descriptor_file is not None else schema_option
        raise SinkValidationError(f"options '{name(declared.record_name)}' and '{name(declared.record_namespace)}' "
                                  f"name the derived schema's record: with '{schema}' the record is named in the "
                                  "schema")
    return found


def _check_registry(config: Mapping[str, str]) -> None:
    """The registry client's settings, checked as the client reads them; errors speak in the
    sink's option names ('url' -> 'schema.registry.url')."""
    from sparkkafka_sink.serialization.registry_settings import RegistrySettings

    try:
        RegistrySettings(config)
    except ConfigError as e:
        raise SinkValidationError(f"invalid Schema Registry option: {in_option_names(e, REGISTRY_PREFIX)}") from None
