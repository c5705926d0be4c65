"""Where the producer's CPU goes, stage by stage: ``python -m benchmarks.profile``.

Starts its own Apache Kafka (``benchmarks.run.start_bench_broker``).  For each cell -- value size
x partitions x configuration (``tuned``: 256 KiB batches, linger 5 ms; ``defaults``: the
producer's own) -- a child process writes ``--megabytes`` of records with ``Producer.send_batch`` (Arrow
chunks of 10,000 rows, 10-byte keys, then ``flush``), sampled by py-spy (``--native``: the C
frames under each Python one; active samples only, so a sample is CPU, not waiting) and timed
with ``getrusage``.  Each sample is charged to the stage of the innermost frame of the package on
its stack (:data:`STAGES`, by module and function), so a C routine counts for the Python step that
called it; samples without a frame of the package are the harness's.  The stages' shares of the
samples scale the child's measured CPU seconds (py-spy misses a few), and each is given per GB of
record bytes (keys + values).

Beside them, in the same child and on the same bytes, what the work cannot avoid, per GB: one copy
into fresh memory, one CRC-32C pass (crc32c, as the record batches use), one write of the bytes
into a local socket whose other end a thread drains (the kernel's share of sending them).

``--spark``: the Spark sink's write tasks instead (:func:`profile_spark`): the same stages plus
the task's own, in the Python workers that run them, beside Spark's no-op sink (benchmarks/README.md,
"Where a Spark write task's CPU goes").

Writes ``profile-<date>.json`` (``profile-spark-<date>.json``; with the sink's commit and the rate
py-spy sampled at) in ``--out`` and prints a Markdown
table (benchmarks/README.md, "Where the producer's CPU goes").  Needs py-spy (``pip install
py-spy``; root, or ptrace allowed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

GB = 1e9
#: how often py-spy samples (Hz), and whether it reads the C frames too (slower; the Python frame
#: above a C routine already names the stage)
RATE = 500
#: the rate ``--spark`` samples the workers at (``benchmarks.contenders.spark.WorkerProfile``'s)
SPARK_RATE = 250
NATIVE = False
CHUNK = 10_000
KEY_SIZE = 10

#: the stages, each a (module pattern, function pattern) list matched against a frame of the
#: package (its path under sparkkafka_sink/ and its function); the first stage that matches the
#: innermost frame of the package on a sample's stack takes the sample
STAGES: list[tuple[str, list[tuple[str, str]]]] = [
    ("partitioning", [(r"producer/partitioner\.py", ""), (r"producer/bulk\.py", r"resolve_partitions")]),
    ("grouping rows by partition (a take)", [(r"record/arrow\.py", r"\btake\b"), (r"producer/bulk\.py", r"group_")]),
    ("compression", [(r"record/compression\.py", "")]),
    ("CRC", [(r"record/crc\.py", "")]),
    ("record encoding (varints, the join)", [(r"record/(arrow|batch)\.py", ""), (r"producer/bulk\.py", r"encode|plan_pieces|sub_calls|"
                                                                                    r"memory_bound|oversized")]),
    ("accumulator and buffers", [(r"producer/(accumulator|buffer_pool|producer_batch)\.py", "")]),
    ("futures and results", [(r"producer/(future|offset_ranges)\.py", ""), (r"producer/bulk\.py", "")]),
    ("requests and responses", [(r"protocol/", ""), (r"producer/(sender|idempotence|metrics)\.py", "")]),
    ("network", [(r"network/", "")]),
    ("send_batch's own steps", [(r"producer/producer\.py", "")]),
    # the Spark task's own steps (``--spark``)
    ("coalescing Spark's batches", [(r"spark/task/batches\.py", "")]),
    ("column checks and routing", [(r"spark/task/(routing|part)\.py", "")]),
    ("delivery tracking", [(r"spark/task/(delivery|dead_letters)\.py", "")]),
    ("the task's other steps", [(r"spark/", "")]),
    ("the rest of the package", [(r"", "")]),
]
#: a sample in pyspark below the package's innermost frame: the worker reading Spark's Arrow
#: stream (the write task's ``for batch in iterator``)
FROM_SPARK = "Arrow batches from Spark (pyspark, pyarrow)"
OUTSIDE = "harness and interpreter outside the package"
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<path>[^():]*?)(?::\d+)?\)$")
_PACKAGE = "sparkkafka_sink/"


@dataclass
class Cell:
    value_size: int
    partitions: int
    config: str  # "tuned" or "defaults"

    @property
    def name(self) -> str:
        return f"{self.value_size} B, {self.partitions} partitions, {self.config}"


#: a sample whose innermost frame is one of these is a thread waiting (py-spy cannot always tell
#: a thread blocked in a C call from one running): not CPU, left out
WAITING = re.compile(r"^(\S+\.)?(select|poll|wait|_say|sleep|readline|recv_into|accept)\b")


def stage_of(stack: list[str]) -> str | None:
    """The stage a sample's stack (root first) is charged to; None: a thread waiting."""
    if stack and WAITING.match(stack[-1]):
        return None
    below_is_spark = False  # a pyspark frame inside the frames seen so far (innermost first)
    for frame in reversed(stack):
        m = _FRAME.match(frame)
        if m is None or _PACKAGE not in m["path"]:
            below_is_spark = below_is_spark or (m is not None and "pyspark/" in m["path"])
            continue
        if below_is_spark:
            return FROM_SPARK
        module = m["path"].split(_PACKAGE, 1)[1]
        for stage, rules in STAGES:
            if any(re.search(mp, module) and re.search(fp, m["function"]) for mp, fp in rules):
                return stage
    return FROM_SPARK if below_is_spark else OUTSIDE


def read_stacks(path: Path) -> Counter:
    """py-spy's raw output (``frame;frame;... count`` a line) as samples per stage."""
    samples: Counter = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        stage = stage_of(stack.split(";")) if stack and count.isdigit() else None
        if stage is not None:
            samples[stage] += int(count)
    return samples


# -- the child: the producer alone ----------------------------------------------------------------
def _arrow_chunks(records: int, value_size: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(42)
    pool = 100_000
    values = rng.integers(0, 256, size=(pool, value_size), dtype=np.uint8)
    value_array = pa.Array.from_buffers(pa.binary(), pool, [None, pa.py_buffer(
        np.arange(0, (pool + 1) * value_size, value_size, dtype=np.int32)), pa.py_buffer(values.tobytes())])
    key_array = pa.array([b"%010d" % i for i in range(pool)], pa.binary())
    chunks = []
    for start in range(0, records, CHUNK):
        n = min(CHUNK, records - start)
        at = start % (pool - CHUNK)
        chunks.append((key_array.slice(at, n), value_array.slice(at, n)))
    return chunks, records * (KEY_SIZE + value_size)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _page_faults() -> int:
    """Minor page faults of this process so far: each is a page of memory touched for the first
    time since the allocator had it from the kernel (or since it gave it back)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _per_gb(seconds: float, nbytes: int) -> float:
    return seconds / (nbytes / GB)


def unavoidable(nbytes: int) -> dict[str, float]:
    """CPU seconds per GB of one copy, one CRC-32C pass and one socket write of ``nbytes``."""
    import crc32c
    import numpy as np

    block = np.random.default_rng(1).integers(0, 256, size=64 << 20, dtype=np.uint8)
    passes = max(1, nbytes // block.nbytes)
    total = passes * block.nbytes
    started = _cpu_s()
    for _ in range(passes):
        np.array(block, copy=True)
    copy = _per_gb(_cpu_s() - started, total)
    started = _cpu_s()
    for _ in range(passes):
        crc32c.crc32c(block)
    crc = _per_gb(_cpu_s() - started, total)
    left, right = socket.socketpair()
    drained = threading.Thread(target=lambda: [None for _ in iter(lambda: right.recv(1 << 20), b"")], daemon=True)
    drained.start()
    piece = memoryview(block)[: 1 << 20]
    started = _cpu_s()
    for _ in range(total // len(piece)):
        left.sendall(piece)
    left.close()
    drained.join()
    right.close()
    write = _per_gb(_cpu_s() - started, total)  # (the drain's reads are in it too: the receiving side's)
    return {"copy": copy, "crc32c": crc, "socket write and read": write}


def child(spec: dict) -> None:
    """The measured child: prepares, says ``READY``, waits for ``GO`` (the sampler attached), writes,
    says ``DONE``, waits for ``GO`` again (the sampler detached), measures the unavoidable work."""
    from sparkkafka_sink import Producer

    chunks, nbytes = _arrow_chunks(spec["records"], spec["value_size"])
    config = {"bootstrap.servers": spec["bootstrap"], **spec["settings"]}
    with Producer(config) as producer:
        producer.partitions_for(spec["topic"])  # metadata and connections outside the measure
        producer.send_batch(spec["topic"], values=chunks[0][1].slice(0, 10), keys=chunks[0][0].slice(0, 10))
        producer.flush(60)
        _say("READY")
        started, wall, faults = _cpu_s(), time.perf_counter(), _page_faults()
        futures = [producer.send_batch(spec["topic"], values=values, keys=keys) for keys, values in chunks]
        producer.flush(300)
        cpu, wall, faults = _cpu_s() - started, time.perf_counter() - wall, _page_faults() - faults
        _say("DONE")
        failed = sum(f.failed_count() for f in futures)
    result = {"cpu_s": cpu, "wall_s": wall, "bytes": nbytes, "failed": failed, "page_faults": faults,
              "unavoidable_s_per_gb": unavoidable(nbytes)}
    Path(spec["result"]).write_text(json.dumps(result))


def _say(word: str) -> None:
    """Tell the parent, then wait for its ``GO``."""
    print(word, flush=True)
    assert sys.stdin.readline().strip() == "GO"


# -- the parent -------------------------------------------------------------------------------------
def _settings(cell: Cell) -> dict:
    if cell.config == "tuned":
        return {"linger.ms": 5, "batch.size": 262_144, "buffer.memory": max(128 << 20, cell.partitions * 262_144)}
    return {}


def profile_cell(cell: Cell, bootstrap: str, records: int, work: Path) -> dict:
    from benchmarks.common import create_topic, delete_topic, new_topic, py_spy_record, py_spy_stop

    topic = new_topic("profile")
    create_topic(bootstrap, topic, cell.partitions)
    stacks, result = work / f"{topic}.stacks", work / f"{topic}.json"
    spec = {"bootstrap": bootstrap, "topic": topic, "records": records, "value_size": cell.value_size,
            "settings": _settings(cell), "result": str(result)}
    worker = subprocess.Popen([sys.executable, "-m", "benchmarks.profile", "--child", json.dumps(spec)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert worker.stdin is not None and worker.stdout is not None
    assert worker.stdout.readline().strip() == "READY"
    sampler = py_spy_record(worker.pid, stacks, RATE, *(["--native"] if NATIVE else []))
    time.sleep(2)  # attached
    worker.stdin.write("GO\n")
    worker.stdin.flush()
    assert worker.stdout.readline().strip() == "DONE"
    py_spy_stop([sampler])
    worker.stdin.write("GO\n")
    worker.stdin.flush()
    assert worker.wait(600) == 0
    delete_topic(bootstrap, topic)
    measured = json.loads(result.read_text())
    samples = read_stacks(stacks)
    total = sum(samples.values()) or 1
    gb = measured["bytes"] / GB
    stages = {stage: measured["cpu_s"] * count / total / gb for stage, count in samples.most_common()}
    return {"cell": cell.__dict__, "samples": total, "cpu_s_per_gb": measured["cpu_s"] / gb,
            "wall_s": measured["wall_s"], "failed": measured["failed"], "stages_s_per_gb": stages,
            "page_faults_per_gb": measured["page_faults"] / gb,
            "unavoidable_s_per_gb": measured["unavoidable_s_per_gb"]}


def table(results: list[dict], measured: str = "getrusage") -> str:
    stages = [FROM_SPARK] + [s for s, _ in STAGES] + [OUTSIDE]
    head = "| stage (CPU s per GB) | " + " | ".join(
        f"{r['cell']['value_size']} B, {r['cell']['partitions']} p, {r['cell']['config']}" for r in results) + " |"
    lines = [head, "|---|" + "---:|" * len(results)]
    for stage in stages:
        if any(stage in r["stages_s_per_gb"] for r in results):
            lines.append(f"| {stage} | " + " | ".join(f"{r['stages_s_per_gb'].get(stage, 0.0):.2f}"
                                                       for r in results) + " |")
    lines.append(f"| **all ({measured})** | " + " | ".join(f"**{r['cpu_s_per_gb']:.2f}**" for r in results) + " |")
    for name in results[0]["unavoidable_s_per_gb"]:
        lines.append(f"| *unavoidable: {name}* | " + " | ".join(f"*{r['unavoidable_s_per_gb'][name]:.2f}*"
                                                                 for r in results) + " |")
    return "\n".join(lines)


def profile_spark(cells: list[Cell], rows: int, work: Path) -> list[dict]:
    """The Spark sink's write tasks: ``benchmarks.run`` writes ``rows`` rows per cell (two
    rounds, the second counted; Spark's no-op sink beside it: the floor, Spark handing the same
    Arrow batches to a worker that only counts them) with its workers sampled
    (``--profile-workers``); each run's samples are charged to stages as above and scaled by the
    CPU its Python workers burnt (``/proc``)."""
    from benchmarks.common import log

    stacks = work / "spark-stacks"
    shutil.rmtree(stacks, ignore_errors=True)
    stacks.mkdir(parents=True)
    cmd = [sys.executable, "-m", "benchmarks.run", "--contenders", "spark-pyprod,spark-noop", "--spark-rounds", "2",
           "--spark-rows", str(rows), "--value-sizes", ",".join(str(v) for v in sorted({c.value_size for c in cells})),
           "--partitions", ",".join(str(p) for p in sorted({c.partitions for c in cells})),
           "--configs", ",".join(sorted({c.config for c in cells})), "--compression", "none",
           "--profile-workers", str(stacks.resolve()), "--out", str((work / "spark-run").resolve()), "--no-chart"]
    log("running " + " ".join(cmd[2:]))
    subprocess.run(cmd, check=True)
    doc = json.loads((work / "spark-run" / "results.json").read_text())
    # each cell's second round: the first of the first cell pays the workers' start-up
    floors = {(r["value_size"], r["partitions"], r["config"]): r for r in doc["runs"]
              if r["contender"] == "spark-noop" and r.get("status") == "ok" and r.get("round") == 2}
    results = []
    for r in doc["runs"]:
        if r["contender"] != "spark-pyprod" or r.get("status") != "ok" or r.get("round") != 2:
            continue
        samples: Counter = Counter()
        for path in r.get("profile_stacks", []):
            samples.update(read_stacks(Path(path)))
        total = sum(samples.values()) or 1
        gb = rows * (doc["meta"].get("key_size", KEY_SIZE) + r["value_size"]) / GB
        cpu = r.get("cpu_split_s", {}).get("python_workers", 0.0)
        floor = floors.get((r["value_size"], r["partitions"], r["config"]), {})
        results.append({"cell": {"value_size": r["value_size"], "partitions": r["partitions"], "config": r["config"]},
                        "samples": total, "cpu_s_per_gb": cpu / gb, "wall_s": r.get("elapsed_s"),
                        "stages_s_per_gb": {stage: cpu * count / total / gb for stage, count in samples.most_common()},
                        "unavoidable_s_per_gb": {
                            "the floor: Spark's no-op sink (the worker only counts the batches)":
                                floor.get("cpu_split_s", {}).get("python_workers", float("nan")) / gb}})
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--megabytes", type=float, default=1000, help="record bytes (keys + values) each cell writes")
    ap.add_argument("--value-sizes", default="1024,100")
    ap.add_argument("--partitions", default="4,64")
    ap.add_argument("--configs", default="tuned,defaults")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--spark", action="store_true",
                    help="profile the Spark sink's write tasks (their Python workers) instead of the producer alone")
    ap.add_argument("--spark-rows", type=int, default=1_000_000, help="--spark: rows per cell")
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    from benchmarks.common import log, versions
    from benchmarks.run import start_bench_broker

    cells = [Cell(int(v), int(p), c) for v in args.value_sizes.split(",") for p in args.partitions.split(",")
             for c in args.configs.split(",")]
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    if args.spark:
        results = profile_spark(cells, args.spark_rows, work)
    else:
        broker = start_bench_broker("apache")
        try:
            results = []
            for cell in cells:
                log(f"profiling {cell.name}")
                records = max(CHUNK, int(args.megabytes * 1e6) // (KEY_SIZE + cell.value_size))  # the same bytes each
                results.append(profile_cell(cell, broker.bootstrap, records, work))
                log(f"  {results[-1]['cpu_s_per_gb']:.2f} CPU s/GB ({results[-1]['samples']} samples), "
                    f"{results[-1]['page_faults_per_gb']:,.0f} page faults per GB")
        finally:
            broker.stop()
    stamp = time.strftime("%Y-%m-%d")
    out = work / f"profile-{'spark-' if args.spark else ''}{stamp}.json"
    try:  # the sink measured (benchmarks.run's meta records it the same way)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(Path(__file__).resolve().parents[1]),
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):  # git is optional
        commit = None
    out.write_text(json.dumps({"date": stamp, "git_commit": commit, "versions": versions(),
                               "rate_hz": SPARK_RATE if args.spark else RATE, "results": results}, indent=1))
    print(table(results, "the workers' CPU, /proc" if args.spark else "getrusage"))
    print(f"\n(written to {out})")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
