"""The Avro contenders' data and checks: Spark structs written as Avro in the Schema Registry's
wire format (``spark-pyprod-avro``, ``spark-jvm-avro``, ``spark-confluent-avro``) and the same
bytes encoded beforehand (``spark-pyprod-avro-bytes``).

The rows are ``benchmarks/struct_rows.py``'s (``at`` a ``timestamp-micros``), the framed value
magic byte, 4-byte schema id, Avro body.  The checks read back what a run wrote: every
contender's values must be the pool's bytes (``compare_bytes``: our encoder, Spark's ``to_avro``
and confluent-kafka's ``AvroSerializer`` must agree byte for byte, the schema id included), and a
sample of each run must deserialize with confluent-kafka's ``AvroDeserializer`` into the pool's
rows (``check_sample``).
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import struct_rows
from benchmarks.struct_rows import (
    AT_BASE_US,
    ID_BASE,
    RegistryPool,
    compare_bytes,
    make_struct_pool,
    register,
    registry_header,
    sample_verdict,
)
from sparkkafka_sink.varint import size_of_varlong

__all__ = ["FIXED_BYTES", "POOL_SUBJECT", "AvroPool", "avro_value", "check_sample", "compare_bytes", "encode_values",
           "make_avro_pool", "register", "registry_header", "text_length", "value_schema"]

#: magic byte + schema id + id + at + score: the framed record's bytes besides the string's
FIXED_BYTES = 1 + 4 + size_of_varlong(ID_BASE) + size_of_varlong(AT_BASE_US) + 8
#: the subject the pool's schema is registered under for the pre-encoded bytes (the registry
#: gives one id per schema, whatever the subject: the contenders' topic subjects get it too)
POOL_SUBJECT = "bench-avro-pool-value"


def text_length(value_size: int) -> int:
    """The string length that makes the framed Avro record ``value_size`` bytes (its zigzag
    length prefix counted)."""
    return struct_rows.text_length(value_size, FIXED_BYTES, size_of_varlong, "Avro")


def make_avro_pool(pool_size: int, key_size: int, value_size: int, seed: int = 42):
    """The struct rows whose framed Avro is ``value_size`` bytes."""
    return make_struct_pool(pool_size, key_size, text_length(value_size), seed)


def value_schema(arrow_type) -> str:
    """The Avro schema of a non-null value column of ``arrow_type``, derived as the sink derives
    it (Spark's ``to_avro`` mapping, character for character)."""
    return struct_rows.derived_value_schema("avro", arrow_type)


def encode_values(values, schema: str, schema_id: int):
    """``values`` (the struct column) as framed Avro: ``pa.BinaryArray``, by the sink's encoder."""
    return struct_rows.encode_values(values, "avro", schema, schema_id)


def avro_value(column, schema_id: int):
    """Spark's JVM path to the same bytes: ``concat(header, to_avro(column))`` (spark-avro)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    return F.concat(F.lit(registry_header(schema_id)), to_avro(column))


class AvroPool(RegistryPool):
    format, schema_type, subject = "avro", "AVRO", POOL_SUBJECT
    text_length = staticmethod(text_length)

    def check_sample(self, records: list[tuple[bytes, bytes]], topic: str) -> dict:
        return check_sample(records, topic, self.registry_url, self.expected_value)


def check_sample(records: list[tuple[bytes, bytes]], topic: str, registry_url: str,
                 expected: Callable[[bytes], dict | None]) -> dict:
    """Deserialize ``records`` (a sample of a run) with confluent-kafka's ``AvroDeserializer``
    (the schema fetched from the registry by the id in each header) and compare each with the
    pool's row of its key: ``{"sampled", "matched", "ok"[, "first_failure"]}``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return sample_verdict(records, lambda value: deserialize(value, ctx), expected)
