"""A column's serializer: Confluent's serializer semantics over our codecs.

A ``SerializerSpec`` says how one column (a record's key or value) becomes bytes: the format
(Avro, JSON Schema or Protobuf), the schema the data is checked against (derived from the column's type,
or the user's), and the serializer settings Confluent's clients have -- the subject name
strategy, ``auto.register.schemas``, ``use.latest.version``, ``normalize.schemas``.
``resolve`` asks the registry which schema and id the column is written with under a subject,
and answers the same spec with them (``schema_id`` set: resolved):

* ``auto.register.schemas`` (the default): the schema is registered (an equal one already there
  answers with its id);
* ``use.latest.version``: the subject's latest schema, which must be able to hold the column;
* neither: the schema must already be registered under the subject (a lookup).

``ColumnSerializer`` then encodes whole Arrow columns with a resolved spec and frames every value
with the registry's header (magic byte, 4-byte schema id).  Rows the schema cannot hold come
back as bad rows (``EncodedColumn.bad_rows``), never as an exception.

The spec travels in a write's plan, which the Spark driver's planning and commit processes
unpickle: this module imports the codecs (and pyarrow) only where it encodes or checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from sparkkafka_sink.serialization.subjects import DEFAULT_STRATEGY, subject_name_strategy

if TYPE_CHECKING:
    import pyarrow as pa

    from sparkkafka_sink.serialization.encoded import EncodedColumn
    from sparkkafka_sink.serialization.registry import SchemaRegistryClient

__all__ = ["Format", "FORMATS", "SerializerSpec", "ColumnSerializer", "derived_schema", "record_name_of"]

Format = Literal["avro", "json", "protobuf"]
#: the formats a column may be written in besides its own bytes (``binary``)
FORMATS: tuple[Format, ...] = ("avro", "json", "protobuf")
_SCHEMA_TYPES: dict[str, Literal["AVRO", "JSON", "PROTOBUF"]] = {"avro": "AVRO", "json": "JSON",
                                                                  "protobuf": "PROTOBUF"}



@dataclass(frozen=True)
class SerializerSpec:
    """How one column is serialized; small and picklable (it travels in the write's plan).

    ``schema`` is the schema the data must fit: the user's text, or the one derived from the
    column's type (Spark's ``to_avro`` mapping; a JSON Schema likewise); ``record_name`` its
    record's full name (Avro: ``namespace.name``; JSON: its ``title``), which the record
    strategies name subjects after.  Once resolved (``resolve``), ``schema`` is the schema the
    column is written with and ``schema_id`` its id in the registry (the framing's)."""

    column: Literal["key", "value"]
    format: Format
    schema: str
    record_name: str | None = None
    subject_strategy: str = DEFAULT_STRATEGY
    auto_register: bool = True
    use_latest_version: bool = False
    normalize: bool = False
    #: the registry's id of ``schema``: None until resolved
    schema_id: int | None = None

    @property
    def schema_type(self) -> Literal["AVRO", "JSON", "PROTOBUF"]:
        return _SCHEMA_TYPES[self.format]

    @property
    def subject_uses_topic(self) -> bool:
        """Whether the subject depends on the topic (then each topic has an id of its own)."""
        return subject_name_strategy(self.subject_strategy).uses_topic

    def subject(self, topic: str) -> str:
        """The subject this column's schema lives under when written to ``topic``."""
        strategy = subject_name_strategy(self.subject_strategy, f"{self.column}.subject.name.strategy")
        return strategy.subject(topic, self.column == "key", self.record_name)

    def check(self, arrow_type: pa.DataType, nullable: bool = True) -> None:
        """``InvalidSchemaError`` naming the field and both types unless the schema is valid and
        can hold a column of ``arrow_type``."""
        _check(self.format, self.schema, arrow_type, nullable, self.column, self.record_name)

    def resolve(self, client: SchemaRegistryClient, topic: str, arrow_type: pa.DataType,
                nullable: bool = True) -> SerializerSpec:
        """This spec with the schema and id the column is written with to ``topic`` (see the
        module's doc)."""
        from sparkkafka_sink.serialization.encoded import InvalidSchemaError

        subject = self.subject(topic)
        if self.use_latest_version:
            latest = client.latest_version(subject)
            record = self.record_name
            if self.format == "protobuf" and record not in _message_names(latest.schema_text):
                record = record_name_of(self.format, latest.schema_text)  # the subject's message: its file's first
            try:
                _check(self.format, latest.schema_text, arrow_type, nullable, self.column, record)
            except InvalidSchemaError as e:
                raise InvalidSchemaError(
                    f"use.latest.version: the latest schema of subject {subject!r} (version {latest.version}, "
                    f"id {latest.schema_id}) cannot hold the {self.column} column: {e}") from None
            return replace(self, schema=latest.schema_text, schema_id=latest.schema_id, record_name=record)
        if self.auto_register:
            return replace(self, schema_id=client.register(subject, self.schema, self.schema_type,
                                                           normalize=self.normalize))
        found = client.lookup(subject, self.schema, self.schema_type, normalize=self.normalize)
        return replace(self, schema_id=found.schema_id)


def derived_schema(format: Format, arrow_type: pa.DataType, nullable: bool, column: str,
                   record_name: str | None = None, namespace: str | None = None) -> str:
    """The schema of a column of ``arrow_type``: Avro as Spark's ``to_avro`` derives it (its
    record named ``record_name`` in ``namespace``; Spark's ``topLevelRecord`` by default), a
    JSON Schema (``record_name`` its ``title``), or a proto3 file of one message (``record_name``
    in the package ``namespace``; see ``protobuf_schema``)."""
    if format == "protobuf":
        from sparkkafka_sink.serialization.protobuf_schema import protobuf_schema_of

        return protobuf_schema_of(arrow_type, record_name or "topLevelRecord", namespace or "", column).text()
    if format == "avro":
        from sparkkafka_sink.serialization.avro_schema import avro_schema_of

        return json.dumps(avro_schema_of(arrow_type, nullable, record_name or "topLevelRecord", namespace or "",
                                         column=column))
    from sparkkafka_sink.serialization.json_schema import json_schema_of

    schema = json_schema_of(arrow_type, nullable, column=column)
    if record_name:
        schema = {"title": ".".join(p for p in (namespace, record_name) if p), **schema}
    return json.dumps(schema)


def record_name_of(format: Format, schema: str) -> str | None:
    """The record's full name in schema text: an Avro named type's ``namespace.name``, a JSON
    Schema's ``title``, a .proto file's first message's ``package.Name``; None when it has none
    (a primitive, an untitled JSON Schema)."""
    if format == "protobuf":
        from sparkkafka_sink.serialization.protobuf_schema import parse_proto

        return parse_proto(schema).full_name
    try:
        doc = json.loads(schema)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    if format == "json":
        title = doc.get("title")
        return title if isinstance(title, str) and title else None
    name = doc.get("name")
    if doc.get("type") not in ("record", "enum", "fixed") or not isinstance(name, str):
        return None
    namespace = doc.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _message_names(text: str) -> set[str]:
    """The top-level messages of a .proto, by full name (none when it cannot be read)."""
    from sparkkafka_sink.serialization.encoded import InvalidSchemaError
    from sparkkafka_sink.serialization.protobuf_schema import parse_proto

    try:
        first = parse_proto(text)
    except InvalidSchemaError:
        return set()
    prefix = f"{first.package}." if first.package else ""
    return {prefix + m.name for m in first.siblings or (first.message,)}


def _check(format: Format, schema: str, arrow_type: pa.DataType, nullable: bool, column: str,
           record_name: str | None = None) -> None:
    if format == "protobuf":  # the message written: the record's (its full name), or the file's first
        from sparkkafka_sink.serialization.protobuf_schema import check_protobuf_schema, parse_proto

        check_protobuf_schema(parse_proto(schema, record_name).message, arrow_type, column)
    elif format == "avro":
        from sparkkafka_sink.serialization.avro_schema import check_avro_schema, parse_avro_schema

        check_avro_schema(parse_avro_schema(schema), arrow_type, nullable, column=column)
    else:
        from sparkkafka_sink.serialization.json_schema import check_json_schema, parse_json_schema

        check_json_schema(parse_json_schema(schema), arrow_type, nullable, column=column)


class ColumnSerializer:
    """Encodes Arrow columns with a resolved spec's schema, each value framed with its id.  The
    encoder is planned once per Arrow type (a task sees one: Spark's)."""

    def __init__(self, spec: SerializerSpec):
        assert spec.schema_id is not None, "a spec is resolved before it encodes"
        self.spec = spec
        self.schema_id: int = spec.schema_id
        self._encoders: dict[pa.DataType, Any] = {}
        self._proto = None
        #: what the framing holds after the id: Protobuf's message indexes (the message written)
        self._after_id = b""
        if spec.format == "protobuf":
            from sparkkafka_sink.serialization.protobuf_schema import parse_proto

            self._proto = parse_proto(spec.schema, spec.record_name)
            self._after_id = self._proto.message_indexes()

    def encode(self, array: pa.Array | pa.ChunkedArray) -> EncodedColumn:
        from sparkkafka_sink.serialization.encoded import EncodedColumn, frame

        encoder = self._encoders.get(array.type)
        if encoder is None:
            encoder = self._encoders[array.type] = self._encoder(array.type)
        encoded = encoder.encode(array)
        return EncodedColumn(frame(encoded.values, self.schema_id, self._after_id),
                             encoded.bad_rows, encoded.fields,
                             encoded.reasons)

    def _encoder(self, arrow_type: pa.DataType) -> Any:
        spec = self.spec
        if self._proto is not None:
            from sparkkafka_sink.serialization.protobuf_encoder import ProtobufEncoder

            return ProtobufEncoder(self._proto, arrow_type, column=spec.column)
        if spec.format == "avro":
            from sparkkafka_sink.serialization.avro_encoder import AvroEncoder
            from sparkkafka_sink.serialization.avro_schema import parse_avro_schema

            return AvroEncoder(parse_avro_schema(spec.schema), arrow_type, column=spec.column)
        from sparkkafka_sink.serialization.json_encoder import JsonEncoder

        return JsonEncoder(spec.schema, arrow_type, column=spec.column)
