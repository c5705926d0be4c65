"""The rows the Schema Registry contenders write, whatever the format (``benchmarks/avro.py``,
``benchmarks/protobuf.py``): one struct, sized per format, its framed bytes, and the checks of
what a run wrote against them.

A record is a struct of an ``id`` (long), a timestamp ``at``, a ``score`` (double) and a
``text`` (string), none nullable, sized so that its framed value (the registry's header, the
format's body) is exactly ``value_size`` bytes: ids and timestamps are chosen so that every row's
fields have one width in both formats, and the string takes the rest.  The text is
``common.make_pool``'s value bytes (half a template, half random letters), the key its key, so
the struct rows carry what the binary rows carry.  Every field is a function of the row's pool
index, as the binary rows are: the pre-encoded bytes are the pool's, encoded once.

A format's pool (``RegistryPool``) derives the value's schema as the sink does, registers it once
(the pre-encoded bytes carry its id) and encodes the rows with the sink's encoder.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

#: the ``id`` field: this plus the pool index (a 6-byte Avro long, a 6-byte Protobuf varint)
ID_BASE = 10**12
#: the ``at`` field: 2023-11-14T22:13:20Z plus a second per pool index plus 0.1-0.2 s, so that
#: Avro's micros are 8 bytes and Protobuf's Timestamp 5-byte seconds and 4-byte nanos (never 0)
AT_BASE_US = 1_700_000_000_000_000
AT_FRACTION_US = 100_000


def at_micros(index):
    """The ``at`` field of pool index ``index`` (an int or a numpy array) in microseconds."""
    return AT_BASE_US + index * 1_000_000 + AT_FRACTION_US + index % AT_FRACTION_US


def registry_header(schema_id: int) -> bytes:
    """The Schema Registry's 5-byte header: magic byte 0, the schema id as 4 big-endian bytes."""
    return b"\x00" + schema_id.to_bytes(4, "big")


def text_length(value_size: int, fixed_bytes: int, prefix_size: Callable[[int], int], what: str) -> int:
    """The string length that makes a framed record ``value_size`` bytes, given the record's
    ``fixed_bytes`` besides the string and the size of the string's length prefix; ValueError
    where no length does (too small, or a size the prefix growing by a byte skips)."""
    room = value_size - fixed_bytes
    n = max(0, room - 1)
    while n > 0 and n + prefix_size(n) > room:
        n -= 1
    if room < 1 or n + prefix_size(n) != room:
        raise ValueError(f"no {what} record of this benchmark's shape is {value_size} bytes framed "
                         f"(at least {fixed_bytes + 1}; try {value_size + 1})")
    return n


def make_struct_pool(pool_size: int, key_size: int, text_len: int, seed: int = 42):
    """``pa.Table`` of ``key`` (binary) and ``value`` (the struct, nothing nullable) of
    ``text_len``-character texts, one row per pool index, deterministic for a seed."""
    import numpy as np
    import pyarrow as pa

    from benchmarks.common import make_pool

    keys, texts = make_pool(pool_size, key_size, text_len, seed)
    index = np.arange(pool_size, dtype=np.int64)
    scores = np.random.default_rng(seed + 1).random(pool_size) * 1000
    if not scores.all():  # proto3 leaves a 0.0 out: the record would be 9 bytes short
        raise ValueError(f"seed {seed} draws a score of 0.0; choose another")
    fields = [pa.field("id", pa.int64(), nullable=False), pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
              pa.field("score", pa.float64(), nullable=False), pa.field("text", pa.string(), nullable=False)]
    value = pa.StructArray.from_arrays(
        [pa.array(ID_BASE + index), pa.array(at_micros(index), pa.timestamp("us", tz="UTC")), pa.array(scores),
         texts.cast(pa.string())], fields=fields)
    schema = pa.schema([pa.field("key", pa.binary(), nullable=False),
                        pa.field("value", value.type, nullable=False)])
    return pa.Table.from_arrays([keys, value], schema=schema)


def derived_value_schema(format: str, arrow_type) -> str:
    """The schema of a non-null value column of ``arrow_type`` in ``format``, derived as the sink
    derives it."""
    from sparkkafka_sink.serialization.serializer import derived_schema

    return derived_schema(format, arrow_type, False, "value")  # type: ignore[arg-type]


def encode_values(values, format: str, schema: str, schema_id: int):
    """``values`` (the struct column) framed in ``format``: ``pa.BinaryArray``, by the sink's encoder."""
    from sparkkafka_sink.serialization.serializer import ColumnSerializer, SerializerSpec

    spec = SerializerSpec("value", format, schema, schema_id=schema_id)  # type: ignore[arg-type]
    encoded = ColumnSerializer(spec).encode(values)
    if len(encoded.bad_rows):
        raise ValueError(f"the pool does not fit its own schema: {encoded.error()}")
    return encoded.values


def register(url: str, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    """Register ``schema`` under ``subject`` with confluent-kafka's client (as a user without the
    sink does); its id."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    return SchemaRegistryClient({"url": url}).register_schema(subject, Schema(schema, schema_type))


class RegistryPool:
    """The pool of one value size as a format's contenders write it: the structs (``table``:
    ``key``, ``value``, and ``value_encoded`` their framed bytes), their schema and its id.
    A format sets ``format``, ``schema_type``, ``subject``, ``header_bytes`` (the framing before
    the body) and ``text_length``."""

    format = ""
    schema_type = ""
    #: the subject the pool's schema is registered under for the pre-encoded bytes
    subject = ""
    header_bytes = 5

    @staticmethod
    def text_length(value_size: int) -> int:
        raise NotImplementedError

    def __init__(self, pool_size: int, key_size: int, value_size: int, seed: int, registry_url: str):
        import pyarrow.compute as pc

        table = make_struct_pool(pool_size, key_size, self.text_length(value_size), seed)
        self.registry_url = registry_url
        self.schema = derived_value_schema(self.format, table.schema.field("value").type)
        self.schema_id = register(registry_url, self.subject, self.schema, self.schema_type)
        encoded = encode_values(table.column("value"), self.format, self.schema, self.schema_id)
        sizes = pc.min_max(pc.binary_length(encoded)).as_py()
        if sizes != {"min": value_size, "max": value_size}:
            raise ValueError(f"the {self.format} pool's framed values are {sizes['min']}-{sizes['max']} bytes, "
                             f"not {value_size}: a field's width varies")
        self.table = table.append_column("value_encoded", encoded)
        keys = table.column("key").to_pylist()
        self._row = {k: i for i, k in enumerate(keys)}

    def expected_bytes(self, key: bytes) -> bytes | None:
        i = self._row.get(key)
        return None if i is None else self.table.column("value_encoded")[i].as_py()

    def expected_value(self, key: bytes) -> dict | None:
        i = self._row.get(key)
        return None if i is None else self.table.column("value")[i].as_py()

    def compare(self, records: list[tuple[bytes, bytes]], body_only: bool = False) -> dict:
        """``compare_bytes`` against this pool; ``body_only``: after the framing's header."""
        return compare_bytes(records, self.expected_bytes, self.header_bytes if body_only else 0)

    def check_sample(self, records: list[tuple[bytes, bytes]], topic: str) -> dict:
        """A sample of a run read back by the format's own reader into the pool's rows:
        ``{"sampled", "matched", "ok"[, "first_failure"]}``."""
        raise NotImplementedError


def compare_bytes(records: list[tuple[bytes, bytes]], expected: Callable[[bytes], bytes | None],
                  skip: int = 0) -> dict:
    """What a contender wrote against the pool's bytes, key by key (from byte ``skip`` on: 0, the
    whole value): ``records`` read, how many are ``identical``, the schema ids their headers
    carry, the first that differs."""
    same, ids, first = 0, set(), None
    for key, value in records:
        want = expected(key)
        if value is not None and len(value) >= 5:
            ids.add(int.from_bytes(value[1:5], "big"))
        if value is not None and want is not None and value[skip:] == want[skip:]:
            same += 1
        elif first is None:
            first = {"key": repr(key), "got": (value or b"")[:40].hex(), "expected": (want or b"")[:40].hex()}
    out = {"records": len(records), "identical": same, "schema_ids": sorted(ids)}
    if first is not None:
        out["first_difference"] = first
    return out


def sample_verdict(records: list[tuple[bytes, bytes]], read: Callable[[bytes], object],
                   expected: Callable[[bytes], object]) -> dict:
    """Each of ``records`` read by ``read`` and compared with the pool's row of its key:
    ``{"sampled", "matched", "ok"[, "first_failure"]}``."""
    matched, failure = 0, None
    for key, value in records:
        try:
            got = read(value)
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
