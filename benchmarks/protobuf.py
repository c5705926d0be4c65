"""The Protobuf contenders' data and checks: Spark structs written as Protobuf in the Schema
Registry's wire format (``spark-pyprod-protobuf``, ``spark-confluent-protobuf``) and the same
bytes encoded beforehand (``spark-pyprod-protobuf-bytes``).

The rows are ``benchmarks/struct_rows.py``'s (``at`` a ``google.protobuf.Timestamp``), the framed
value magic byte, 4-byte schema id, the message index ``0``, the message; the schema is the
sink's derived proto3 text, registered as PROTOBUF.  confluent-kafka's ``ProtobufSerializer``
registers its message's file as a base64 ``FileDescriptorProto`` under its topic's subject, a
schema the registry stores apart from the text, so its values carry another id: the check before
the rounds (``RegistryPool.compare(..., body_only=True)``) wants the same *message* bytes, after
the 6-byte header, and reports the ids.  A sample of each run must parse, with the class protoc
compiles from the text registered under the pool's id, into the pool's rows (``check_sample``;
confluent-kafka's ``ProtobufDeserializer`` without a registry client, as
``docs/guide/serialization.md`` says to read Protobuf on Apicurio 2.x).

``descriptor_set`` (the driver) compiles a schema's text with protoc (grpcio-tools, as the tests
do: ``tests/protobuf_runtime.py``); ``message_class`` (the tasks) builds the message class from
the serialized ``FileDescriptorSet``, as a user ships generated code.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import sys
from collections.abc import Callable

from benchmarks import struct_rows
from benchmarks.struct_rows import AT_BASE_US, AT_FRACTION_US, ID_BASE, RegistryPool, sample_verdict
from sparkkafka_sink.varint import size_of_unsigned_varint as _uvarint

#: the framing before the message: magic byte, schema id, the message index array ``[0]`` as 0
HEADER_BYTES = 6
#: the Timestamp message: seconds (field 1) and nanos (field 2), each a tag and a varint
_TIMESTAMP_BYTES = 1 + _uvarint(AT_BASE_US // 1_000_000) + 1 + _uvarint(AT_FRACTION_US * 1000)
#: header + id (tag, varint) + at (tag, length, Timestamp) + score (tag, 8 bytes) + text's tag:
#: the framed record's bytes besides the string and its length
FIXED_BYTES = HEADER_BYTES + 1 + _uvarint(ID_BASE) + 2 + _TIMESTAMP_BYTES + 9 + 1
#: the subject the pool's schema is registered under for the pre-encoded bytes
POOL_SUBJECT = "bench-protobuf-pool-value"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def text_length(value_size: int) -> int:
    """The string length that makes the framed Protobuf record ``value_size`` bytes (its varint
    length prefix counted)."""
    return struct_rows.text_length(value_size, FIXED_BYTES, _uvarint, "Protobuf")


def make_protobuf_pool(pool_size: int, key_size: int, value_size: int, seed: int = 42):
    """The struct rows whose framed Protobuf is ``value_size`` bytes."""
    return struct_rows.make_struct_pool(pool_size, key_size, text_length(value_size), seed)


def value_schema(arrow_type) -> str:
    """The proto3 schema of a non-null value column of ``arrow_type``, as the sink derives it."""
    return struct_rows.derived_value_schema("protobuf", arrow_type)


@functools.lru_cache(maxsize=8)
def descriptor_set(text: str) -> bytes:
    """``.proto`` ``text`` compiled by protoc: a serialized ``FileDescriptorSet``, imports first
    (what ``protoc --descriptor_set_out --include_imports`` writes; a build step, cached)."""
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    from protobuf_runtime import descriptor_set as compile_text

    return compile_text(text).SerializeToString()


def message_name(text: str) -> str:
    """The full name of the message a schema's text writes (its first)."""
    from sparkkafka_sink.serialization.protobuf_schema import parse_proto

    return parse_proto(text).full_name


@functools.lru_cache(maxsize=8)
def message_class(files: bytes, name: str):
    """The message class ``name`` of a serialized ``FileDescriptorSet`` (built once per process)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(files).file:  # dependencies first
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def as_row(message) -> dict:
    """A message of the pool's schema as the pool's row (``pa.StructArray.as_py``'s dict)."""
    row = {}
    for f in message.DESCRIPTOR.fields:
        v = getattr(message, f.name)
        if f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp":
            v = v.ToDatetime(tzinfo=_dt.timezone.utc)
        row[f.name] = v
    return row


class ProtobufPool(RegistryPool):
    format, schema_type, subject, header_bytes = "protobuf", "PROTOBUF", POOL_SUBJECT, HEADER_BYTES
    text_length = staticmethod(text_length)

    def check_sample(self, records: list[tuple[bytes, bytes]], topic: str) -> dict:
        return check_sample(records, self.registry_url, self.schema_id, self.expected_value)


def check_sample(records: list[tuple[bytes, bytes]], registry_url: str, schema_id: int,
                 expected: Callable[[bytes], dict | None]) -> dict:
    """Parse ``records`` (a sample of a run) with confluent-kafka's ``ProtobufDeserializer`` and
    the class protoc compiles from the text the registry holds under ``schema_id`` (the pool's),
    and compare each with the pool's row of its key.  The id in each header must name a
    PROTOBUF schema of the registry (ours, or the one confluent-kafka's serializer registered)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    client = SchemaRegistryClient({"url": registry_url})
    text = client.get_schema(schema_id).schema_str
    deserialize = ProtobufDeserializer(message_class(descriptor_set(text), message_name(text)),
                                       {"use.deprecated.format": False})
    known: dict[int, str | None] = {}

    def read(value: bytes) -> dict:
        sid = int.from_bytes(value[1:5], "big")
        if sid not in known:
            try:
                known[sid] = client.get_schema(sid).schema_type
            except Exception:  # noqa: BLE001 - an unknown id: the verdict
                known[sid] = None
        if known[sid] != "PROTOBUF":
            raise ValueError(f"schema id {sid} names no PROTOBUF schema in the registry ({known[sid]})")
        return as_row(deserialize(value, None))

    return sample_verdict(records, read, expected)
