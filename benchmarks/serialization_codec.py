"""Rows/s of the serialization codecs against per-row serializers:
``python -m benchmarks.serialization_codec [--rows N] [--rounds R]``.

Two row shapes: a ~100-byte struct (an id, a ~60-character string, a double, a timestamp, a
nullable string) and a ~1 KiB struct (nested record, arrays, a map, a decimal, long text).  For
each: ``AvroEncoder`` (whole columns, plus the Schema Registry header) against fastavro's
``schemaless_writer`` per row behind the same header (what confluent-kafka's ``AvroSerializer``
does for each message), and ``JsonEncoder`` against ``json.dumps`` and orjson per row.  The per-row
contenders get their dicts ready-made (``to_pylist`` is timed apart, the price of reaching them
from Arrow); the best of ``--rounds`` counts.  No broker, no Spark: the codec alone.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from sparkkafka_sink.serialization.avro_encoder import AvroEncoder
from sparkkafka_sink.serialization.avro_schema import avro_schema_of
from sparkkafka_sink.serialization.encoded import frame
from sparkkafka_sink.serialization.json_encoder import JsonEncoder
from sparkkafka_sink.serialization.json_schema import json_schema_of

SCHEMA_ID = 42


def _strings(rng: np.random.Generator, n: int, size: int, nulls: float = 0.0) -> pa.Array:
    """``n`` strings of ``size`` ASCII letters (a random window of one long random text)."""
    text = rng.integers(97, 123, size=n + size, dtype=np.uint8)
    starts = rng.integers(0, n, size=n)
    data = np.lib.stride_tricks.sliding_window_view(text, size)[starts].reshape(-1)
    offsets = (np.arange(n + 1, dtype=np.int64) * size).astype(np.int32)
    mask = None if not nulls else pa.py_buffer(np.packbits(rng.random(n) >= nulls, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), n, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])


def small_rows(n: int, rng: np.random.Generator) -> pa.StructArray:
    """~100 bytes of Avro: id, 60-character text, a double, a timestamp, a nullable 20-char note."""
    return pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int64)), _strings(rng, n, 60), pa.array(rng.random(n)),
         pa.array(1_700_000_000_000_000 + rng.integers(0, 10**12, n), pa.timestamp("us", tz="UTC")),
         _strings(rng, n, 20, nulls=0.3)],
        fields=[pa.field("id", pa.int64(), False), pa.field("text", pa.string()), pa.field("score", pa.float64()),
                pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("note", pa.string())])


def large_rows(n: int, rng: np.random.Generator) -> pa.StructArray:
    """~1 KiB of Avro: the small row's fields, an address record, 5 tags, 10 scores, a 3-entry map,
    a decimal and 500 characters of text."""
    small = small_rows(n, rng)
    address = pa.StructArray.from_arrays([_strings(rng, n, 60), _strings(rng, n, 20), _strings(rng, n, 8)],
                                         names=["street", "city", "zip"])
    tags = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * 5), _strings(rng, 5 * n, 16))
    scores = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * 10), pa.array(rng.random(10 * n)))
    attrs = pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * 3), _strings(rng, 3 * n, 8),
                                    pa.array(rng.integers(0, 10**9, 3 * n)))
    unscaled = rng.integers(-10**11, 10**11, n)
    amount = pa.array([Decimal(int(v)).scaleb(-2) for v in unscaled[:1000]] * (n // 1000) +
                      [Decimal(0)] * (n % 1000), pa.decimal128(12, 2))
    return pa.StructArray.from_arrays(
        [*small.flatten(), address, tags, scores, attrs, amount, _strings(rng, n, 500)],
        fields=[*small.type, pa.field("address", address.type), pa.field("tags", tags.type),
                pa.field("scores", scores.type), pa.field("attrs", attrs.type),
                pa.field("amount", pa.decimal128(12, 2)), pa.field("description", pa.string())])


def best_of(rounds: int, run: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def fastavro_per_row(records: list, schema: Any) -> Callable[[], list]:
    import fastavro

    parsed = fastavro.parse_schema(schema)
    header = struct.pack(">bI", 0, SCHEMA_ID)

    def run() -> list:
        out = []
        for record in records:
            buf = io.BytesIO()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, record)
            out.append(buf.getvalue())
        return out
    return run


def json_per_row(records: list, dumps: Callable[[Any], Any]) -> Callable[[], list]:
    header = struct.pack(">bI", 0, SCHEMA_ID)

    def run() -> list:
        out = []
        for record in records:
            text = dumps(record)
            out.append(header + (text if isinstance(text, bytes) else text.encode()))
        return out
    return run


def encoded(encode: Callable[[pa.Array], Any], column: pa.Array) -> Callable[[], pa.Array]:
    """Our codec's run: the column encoded and framed (the header per row, as the per-row ones)."""
    return lambda: frame(encode(column).values, SCHEMA_ID)


def measure(label: str, column: pa.StructArray, rounds: int) -> None:
    n = len(column)
    avro = AvroEncoder(avro_schema_of(column.type, True), column.type)
    as_json = JsonEncoder(json_schema_of(column.type, True), column.type)
    avro_size = pa.compute.sum(pa.compute.binary_length(avro.encode(column).values)).as_py() / n
    json_size = pa.compute.sum(pa.compute.binary_length(as_json.encode(column).values)).as_py() / n
    ours_avro = best_of(rounds, encoded(avro.encode, column))
    ours_json = best_of(rounds, encoded(as_json.encode, column))
    started = time.perf_counter()
    records = column.to_pylist()
    for record in records:  # a map comes out as (key, value) pairs; per-row serializers take dicts
        if "attrs" in record:
            record["attrs"] = dict(record["attrs"])
    to_pylist = time.perf_counter() - started

    def versus(ours: float, name: str, theirs: float) -> str:
        return (f"{name} per row {n / theirs:,.0f} rows/s (+ to_pylist {n / (theirs + to_pylist):,.0f}): ours "
                f"{theirs / ours:.1f}x ({(theirs + to_pylist) / ours:.1f}x)")

    fastavro_time = best_of(1, fastavro_per_row(records, avro.schema.json))
    print(f"Avro {label} ({avro_size:.0f} bytes a row, {n:,} rows): AvroEncoder {n / ours_avro:,.0f} rows/s; "
          + versus(ours_avro, "fastavro", fastavro_time), flush=True)
    line = f"JSON {label} ({json_size:.0f} bytes a row): JsonEncoder {n / ours_json:,.0f} rows/s"
    line += "; " + versus(ours_json, "json.dumps", best_of(1, json_per_row(
        records, lambda r: json.dumps(r, default=str, separators=(",", ":")))))
    try:
        import orjson
    except ImportError:
        pass
    else:
        line += "; " + versus(ours_json, "orjson", best_of(1, json_per_row(records, lambda r: orjson.dumps(r, default=str))))
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    measure("~100 B", small_rows(args.rows, rng), args.rounds)
    measure("~1 KiB", large_rows(args.rows, rng), args.rounds)


if __name__ == "__main__":
    main()
