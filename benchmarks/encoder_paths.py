"""The ways the bulk path encodes rows it regrouped by partition, side by side:
``python -m benchmarks.encoder_paths [--mib 16] [--rounds 3] [--sizes 64,256,1024]``.

Each call is what a Spark write task does with one call's worth of Spark's Arrow batches
(``coalesceBytes``, 16 MiB by default, in batches of ``--batch-rows``, Spark's
``maxRecordsPerBatch``): keys of 16 bytes, values of the given size, partitions drawn at random
(as keys hash), grouped (``producer.bulk.group_rows``) and encoded in ``batch.size`` batches.
``copy``: Spark's batches joined (a copy), Arrow's ``take`` gathers the keys and values into
partition order (a second), then ``binary_join_element_wise`` interleaves them with the varint
fields (a third).  ``views``: the batches joined, then the gathered rows are binary views
pointing into the joined columns, and one cast to binary writes each record once
(``record.arrow._join_views``; pyarrow >= 19): two copies.  ``pieces``: the same views over
Spark's batches as they came, not joined (``RecordColumns`` of a chunked value column): one
copy.  Fresh columns every call, so the allocator's fresh pages are paid as in a task.  CPU
seconds (user and system) per GB of values, the paths alternated, the median of ``--rounds``; no
broker.  ``record.arrow.VIEW_JOIN_MIN_BYTES`` is where views start to win.  ``--pools`` compares
Arrow's memory pools on the ``pieces`` path instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import pyarrow as pa

from sparkkafka_sink.producer.bulk import group_rows
from sparkkafka_sink.record import arrow
from sparkkafka_sink.record.arrow import RecordColumns, Slice, plan_batches
from sparkkafka_sink.spark.task.worker_memory import raise_malloc_thresholds

BATCH_SIZE = 16384
TS = 1_700_000_000_000


PATHS = ("copy", "views", "pieces")


def _column(rng: np.random.Generator, n: int, size: int) -> pa.Array:
    data = rng.integers(0, 256, n * size, dtype=np.uint8)
    offsets = np.arange(0, n * size + 1, size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _spark_batches(rng: np.random.Generator, n: int, size: int, batch_rows: int) -> pa.Table:
    """``n`` rows as Spark hands them over: record batches of ``batch_rows``, each its own buffers."""
    return pa.Table.from_batches([
        pa.RecordBatch.from_arrays([_column(rng, k, 16), _column(rng, k, size)], ["key", "value"])
        for k in (min(batch_rows, n - start) for start in range(0, n, batch_rows))])


def one_call(path: str, rng: np.random.Generator, n: int, size: int, partitions: int, batch_rows: int) -> float:
    """One call's work on ``path`` from fresh columns (made untimed): its CPU seconds."""
    table = _spark_batches(rng, n, size, batch_rows)
    parts = rng.integers(0, partitions, n).astype(np.int32)
    start = time.process_time()
    if path != "pieces":  # Spark's batches joined first, as the task did before it sent them as they came
        table = table.combine_chunks()
    grouped = group_rows(parts, RecordColumns(table.column("key"), table.column("value"), TS))
    bounds = list(zip(grouped.group_starts.tolist(), grouped.group_starts.tolist()[1:] + [n], strict=True))
    slices = [Slice(a, b) for a, b in plan_batches(grouped.records.sizes, BATCH_SIZE, bounds)]
    grouped.records.encode_slices(slices, stamped_later=True)
    return time.process_time() - start


def measure(path: str, n: int, size: int, partitions: int, calls: int, batch_rows: int) -> float:
    """CPU seconds per GB of values over ``calls`` calls on ``path``."""
    arrow.VIEW_JOIN_MIN_BYTES = 1 << 62 if path == "copy" else 0
    rng = np.random.default_rng(size * 1000 + partitions)
    spent = sum(one_call(path, rng, n, size, partitions, batch_rows) for _ in range(calls))
    return spent / (calls * n * size / 1e9)


#: ``--pools``: Arrow's memory pools, each on the ``pieces`` path (the system's malloc with the
#: thresholds a write task raises, ``spark.task.worker_memory``)
POOLS = ("mimalloc", "jemalloc", "system")


def _use_pool(name: str) -> None:
    if name == "system":
        raise_malloc_thresholds()
    pa.set_memory_pool(getattr(pa, f"{name}_memory_pool")())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=16, help="values per call, MiB (coalesceBytes)")
    ap.add_argument("--calls", type=int, default=8, help="calls per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64,128,256,512,1024,4096", help="value sizes, bytes")
    ap.add_argument("--partitions", default="4,64,256")
    ap.add_argument("--batch-rows", type=int, default=10_000, help="rows per Spark batch (maxRecordsPerBatch)")
    ap.add_argument("--pools", action="store_true",
                    help=f"compare Arrow's memory pools ({', '.join(POOLS)}) on the pieces path instead of the paths")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if not arrow._VIEW_JOIN:
        print(f"pyarrow {pa.__version__}: no views path (needs 19 or newer)", file=sys.stderr)
        return 2
    # what is compared: name -> (path, Arrow memory pool or None: the one in use)
    variants = {pool: ("pieces", pool) for pool in POOLS} if args.pools else {p: (p, None) for p in PATHS}
    names = tuple(variants)
    base, last = names[0], names[-1]

    def run(name: str, n: int, size: int, partitions: int, calls: int) -> float:
        path, pool = variants[name]
        if pool is not None:
            _use_pool(pool)
        return measure(path, n, size, partitions, calls, args.batch_rows)

    for name in names:  # warm up: the first calls load kernels and grow the allocator
        run(name, 4096, 256, 4, 2)
    rows = []
    print(f"{'value B':>8} {'parts':>6} " + " ".join(f"{v + ' s/GB':>11}" for v in names)
          + f" {last + '/' + base:>16}")
    for size in (int(s) for s in args.sizes.split(",")):
        for partitions in (int(p) for p in args.partitions.split(",")):
            n = args.mib * 1024 * 1024 // size
            got: dict[str, list[float]] = {v: [] for v in names}
            for r in range(args.rounds):  # each round forth and back, the next round reversed
                order = names + names[::-1]
                for name in (order if r % 2 == 0 else order[::-1]):
                    got[name].append(run(name, n, size, partitions, args.calls))
            median = {v: statistics.median(got[v]) for v in names}
            rows.append({"value_bytes": size, "partitions": partitions,
                         **{f"{v}_cpu_s_per_gb": round(median[v], 3) for v in names},
                         f"{last}_over_{base}": round(median[last] / median[base], 3)})
            print(f"{size:>8} {partitions:>6} " + " ".join(f"{median[v]:>11.3f}" for v in names)
                  + f" {median[last] / median[base]:>16.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pyarrow": pa.__version__, "numpy": np.__version__, "mib_per_call": args.mib,
                       "batch_rows": args.batch_rows, "calls": args.calls, "rounds": args.rounds,
                       "compared": "pools" if args.pools else "paths", "cells": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
