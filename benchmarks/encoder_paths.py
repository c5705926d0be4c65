"""The two ways the bulk path encodes rows it regrouped by partition, side by side:
``python -m benchmarks.encoder_paths [--mib 16] [--rounds 3] [--sizes 64,256,1024]``.

``copy``: Arrow's ``take`` gathers the keys and values into partition order (a copy), then
``binary_join_element_wise`` interleaves them with the varint fields (a second copy).
``views``: the gathered rows are binary views pointing into the columns' own buffers, and one
cast to binary writes each record once (``record.arrow._join_views``; pyarrow >= 19).  Each call
is what ``Producer.send_batch`` does with one coalesced Spark batch (``coalesceBytes``, 16 MiB
by default): keys of 16 bytes, values of the given size, partitions drawn at random (as keys
hash), grouped (``producer.bulk.group_rows``) and encoded in ``batch.size`` batches.  Fresh
columns every call, so the allocator's fresh pages are paid as in a task.  CPU seconds (user
and system) per GB of values, the paths alternated ABBA, the median of ``--rounds``; no broker.
``record.arrow.VIEW_JOIN_MIN_BYTES`` is where ``views`` starts to win.
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

BATCH_SIZE = 16384
TS = 1_700_000_000_000


def _column(rng: np.random.Generator, n: int, size: int) -> pa.Array:
    data = rng.integers(0, 256, n * size, dtype=np.uint8)
    offsets = np.arange(0, n * size + 1, size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def one_call(rng: np.random.Generator, n: int, size: int, partitions: int) -> float:
    """One call's work from fresh columns (made untimed): its CPU seconds."""
    keys, values = _column(rng, n, 16), _column(rng, n, size)
    parts = rng.integers(0, partitions, n).astype(np.int32)
    start = time.process_time()
    grouped = group_rows(parts, RecordColumns(keys, values, TS))
    bounds = list(zip(grouped.group_starts.tolist(), grouped.group_starts.tolist()[1:] + [n], strict=True))
    slices = [Slice(a, b) for a, b in plan_batches(grouped.records.sizes, BATCH_SIZE, bounds)]
    grouped.records.encode_slices(slices, stamped_later=True)
    return time.process_time() - start


def measure(path: str, n: int, size: int, partitions: int, calls: int) -> float:
    """CPU seconds per GB of values over ``calls`` calls on ``path``."""
    arrow.VIEW_JOIN_MIN_BYTES = 0 if path == "views" else 1 << 62
    rng = np.random.default_rng(size * 1000 + partitions)
    spent = sum(one_call(rng, n, size, partitions) for _ in range(calls))
    return spent / (calls * n * size / 1e9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=16, help="values per call, MiB (coalesceBytes)")
    ap.add_argument("--calls", type=int, default=8, help="calls per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64,128,256,512,1024,4096", help="value sizes, bytes")
    ap.add_argument("--partitions", default="4,64,256")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    if not arrow._VIEW_JOIN:
        print(f"pyarrow {pa.__version__}: no views path (needs 19 or newer)", file=sys.stderr)
        return 2
    for path in ("copy", "views"):  # warm up: the first calls load kernels and grow the allocator
        measure(path, 4096, 256, 4, 2)
    rows = []
    print(f"{'value B':>8} {'parts':>6} {'copy s/GB':>10} {'views s/GB':>11} {'views/copy':>11}")
    for size in (int(s) for s in args.sizes.split(",")):
        for partitions in (int(p) for p in args.partitions.split(",")):
            n = args.mib * 1024 * 1024 // size
            got: dict[str, list[float]] = {"copy": [], "views": []}
            for r in range(args.rounds):
                for path in (("copy", "views", "views", "copy") if r % 2 == 0 else ("views", "copy", "copy", "views")):
                    got[path].append(measure(path, n, size, partitions, args.calls))
            copy, views = statistics.median(got["copy"]), statistics.median(got["views"])
            rows.append({"value_bytes": size, "partitions": partitions, "copy_cpu_s_per_gb": round(copy, 3),
                         "views_cpu_s_per_gb": round(views, 3), "views_over_copy": round(views / copy, 3)})
            print(f"{size:>8} {partitions:>6} {copy:>10.3f} {views:>11.3f} {views / copy:>11.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pyarrow": pa.__version__, "numpy": np.__version__, "mib_per_call": args.mib,
                       "calls": args.calls, "rounds": args.rounds, "cells": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
