"""The Avro contenders' data and checks: Spark structs written as Avro in the Schema Registry's
wire format (``spark-pyprod-avro``, ``spark-jvm-avro``, ``spark-confluent-avro``) and the same
bytes encoded beforehand (``spark-pyprod-avro-bytes``).

A record is a struct of an ``id`` (long), a timestamp ``at`` (``timestamp-micros``), a
``score`` (double) and a ``text`` (string), none nullable, sized so that its framed Avro value
(magic byte, 4-byte schema id, Avro body) is exactly ``value_size`` bytes: ids and timestamps
are offset so that every row's varints have one width, and the string takes the rest.  The text
is ``common.make_pool``'s value bytes (half a template, half random letters), the key its key,
so the Avro rows carry what the binary rows carry.  Every field is a function of the row's pool
index, as the binary rows are: the pre-encoded bytes are the pool's, encoded once.

The checks read back what a run wrote: every contender's values must be the pool's bytes
(``compare_bytes``: our encoder, Spark's ``to_avro`` and confluent-kafka's ``AvroSerializer``
must agree byte for byte), and a sample of each run must deserialize with confluent-kafka's
``AvroDeserializer`` into the pool's rows (``check_sample``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from sparkkafka_sink.varint import size_of_varlong

#: the ``id`` field: this plus the pool index, so that every id is a 6-byte Avro long
ID_BASE = 10**12
#: the ``at`` field (2023-11-14T22:13:20Z) plus a millisecond per pool index: 8 bytes
AT_BASE_US = 1_700_000_000_000_000
#: magic byte + schema id + id + at + score: the framed record's bytes besides the string's
FIXED_BYTES = 1 + 4 + size_of_varlong(ID_BASE) + size_of_varlong(AT_BASE_US) + 8
#: the subject the pool's schema is registered under for the pre-encoded bytes (the registry
#: gives one id per schema, whatever the subject: the contenders' topic subjects get it too)
POOL_SUBJECT = "bench-avro-pool-value"


def registry_header(schema_id: int) -> bytes:
    """The Schema Registry's 5-byte header: magic byte 0, the schema id as 4 big-endian bytes."""
    return b"\x00" + schema_id.to_bytes(4, "big")


def text_length(value_size: int) -> int:
    """The string length that makes the framed record ``value_size`` bytes (the string's Avro
    length prefix counted); ValueError where no length does (too small, or a size the prefix
    growing by a byte skips)."""
    room = value_size - FIXED_BYTES
    n = max(0, room - 1)
    while n > 0 and n + size_of_varlong(n) > room:
        n -= 1
    if room < 1 or n + size_of_varlong(n) != room:
        raise ValueError(f"no Avro record of this benchmark's shape is {value_size} bytes framed "
                         f"(at least {FIXED_BYTES + 1}; try {value_size + 1})")
    return n


def make_avro_pool(pool_size: int, key_size: int, value_size: int, seed: int = 42):
    """``pa.Table`` of ``key`` (binary) and ``value`` (the struct, nothing nullable), one row per
    pool index, deterministic for a seed."""
    import numpy as np
    import pyarrow as pa

    from benchmarks.common import make_pool

    last = pool_size - 1
    if (size_of_varlong(ID_BASE + last), size_of_varlong(AT_BASE_US + last * 1000)) != \
            (size_of_varlong(ID_BASE), size_of_varlong(AT_BASE_US)):
        raise ValueError(f"a pool of {pool_size} rows has ids or timestamps of more than one width")
    keys, texts = make_pool(pool_size, key_size, text_length(value_size), seed)
    index = np.arange(pool_size, dtype=np.int64)
    fields = [pa.field("id", pa.int64(), nullable=False), pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
              pa.field("score", pa.float64(), nullable=False), pa.field("text", pa.string(), nullable=False)]
    value = pa.StructArray.from_arrays(
        [pa.array(ID_BASE + index), pa.array(AT_BASE_US + index * 1000, pa.timestamp("us", tz="UTC")),
         pa.array(np.random.default_rng(seed + 1).random(pool_size) * 1000), texts.cast(pa.string())],
        fields=fields)
    schema = pa.schema([pa.field("key", pa.binary(), nullable=False),
                        pa.field("value", value.type, nullable=False)])
    return pa.Table.from_arrays([keys, value], schema=schema)


def value_schema(arrow_type) -> str:
    """The Avro schema of a non-null value column of ``arrow_type``, derived as the sink derives
    it (Spark's ``to_avro`` mapping, character for character)."""
    from sparkkafka_sink.serialization.serializer import derived_schema

    return derived_schema("avro", arrow_type, False, "value")


def encode_values(values, schema: str, schema_id: int):
    """``values`` (the struct column) as framed Avro: ``pa.BinaryArray``, by the sink's encoder."""
    from sparkkafka_sink.serialization.serializer import ColumnSerializer, SerializerSpec

    encoded = ColumnSerializer(SerializerSpec("value", "avro", schema, schema_id=schema_id)).encode(values)
    if len(encoded.bad_rows):
        raise ValueError(f"the pool does not fit its own schema: {encoded.error()}")
    return encoded.values


def avro_value(column, schema_id: int):
    """Spark's JVM path to the same bytes: ``concat(header, to_avro(column))`` (spark-avro)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    return F.concat(F.lit(registry_header(schema_id)), to_avro(column))


def register(url: str, subject: str, schema: str) -> int:
    """Register ``schema`` under ``subject`` with confluent-kafka's client (as a user without the
    sink does); its id."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    return SchemaRegistryClient({"url": url}).register_schema(subject, Schema(schema, "AVRO"))


class AvroPool:
    """The pool of one value size as the Avro contenders write it: the structs (``table``:
    ``key``, ``value``, and ``value_avro`` their framed bytes), their schema and its id."""

    def __init__(self, pool_size: int, key_size: int, value_size: int, seed: int, registry_url: str):
        table = make_avro_pool(pool_size, key_size, value_size, seed)
        self.schema = value_schema(table.schema.field("value").type)
        self.schema_id = register(registry_url, POOL_SUBJECT, self.schema)
        self.table = table.append_column("value_avro", encode_values(table.column("value"), self.schema,
                                                                     self.schema_id))
        keys = table.column("key").to_pylist()
        self._row = {k: i for i, k in enumerate(keys)}

    def expected_bytes(self, key: bytes) -> bytes | None:
        i = self._row.get(key)
        return None if i is None else self.table.column("value_avro")[i].as_py()

    def expected_value(self, key: bytes) -> dict | None:
        i = self._row.get(key)
        return None if i is None else self.table.column("value")[i].as_py()


def compare_bytes(records: list[tuple[bytes, bytes]], expected: Callable[[bytes], bytes | None]) -> dict:
    """What a contender wrote against the pool's bytes, key by key: ``records`` read, how many
    are ``identical``, the schema ids their headers carry, the first that differs."""
    same, ids, first = 0, set(), None
    for key, value in records:
        want = expected(key)
        if value is not None and len(value) >= 5:
            ids.add(int.from_bytes(value[1:5], "big"))
        if value == want:
            same += 1
        elif first is None:
            first = {"key": repr(key), "got": (value or b"")[:40].hex(), "expected": (want or b"")[:40].hex()}
    out = {"records": len(records), "identical": same, "schema_ids": sorted(ids)}
    if first is not None:
        out["first_difference"] = first
    return out


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
    matched, failure = 0, None
    for key, value in records:
        try:
            got = deserialize(value, ctx)
        except Exception as e:  # noqa: BLE001 - the check's verdict, reported
            failure = failure or f"key {key!r}: {type(e).__name__}: {e}"
            continue
        want = expected(key)
        if got == want:
            matched += 1
        elif failure is None:
            failure = f"key {key!r}: read {_short(got)}, the pool has {_short(want)}"
    out = {"sampled": len(records), "matched": matched, "ok": bool(records) and matched == len(records)}
    if failure or not records:
        out["first_failure"] = failure or "nothing read"
    return out


def _short(value) -> str:
    if isinstance(value, dict):
        value = {k: (v[:20] + "..." if isinstance(v, str) and len(v) > 23 else v) for k, v in value.items()}
        value = {k: v.isoformat() if isinstance(v, _dt.datetime) else v for k, v in value.items()}
    return repr(value)[:200]
