"""What a pyspark line costs the sink: ``python -m benchmarks.pyspark_lines --line 4.0.0=PYTHON ...``.

pyspark 4.1 brought ``DataSourceStreamArrowWriter``; on 4.0 the sink's stream writer is also a
``DataSourceArrowWriter``, so Spark's write worker hands it Arrow batches there too
(``spark/stream_writer.py``).  This measures what is left of a difference: the same writes, a
batch ``save()`` and a ``writeStream`` (``trigger(availableNow=True)`` over the same rows as
Parquet files), each in a Spark of its own under each line's Python (a virtualenv per line, as
``.ci/pyspark-lines`` keeps them), the lines' runs alternating (ABBA) against one Apache Kafka
started here.  Each write goes to a fresh topic whose count is checked with confluent-kafka.
Prints a table of median seconds per line and mode and each line's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import count_landed, create_topic, delete_topic, log, new_topic

PARTITIONS = 4


def child(args) -> int:
    """One write in this Python's Spark; prints ``{"seconds": ...}`` (the clock starts with the
    write, after the rows are cached and the Python workers warmed by an untimed write)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rows = (spark.range(args.rows, numPartitions=2)
            .select(F.format_string("k%09d", "id").alias("key"),
                    F.concat(F.lit("v" * (args.value_size - 10)), F.format_string("%010d", "id")).alias("value")))

    def options(writer, topic):
        return (writer.format("pyprod-kafka").option("kafka.bootstrap.servers", args.bootstrap)
                .option("topic", topic))

    options(rows.limit(1000).write.mode("append"), args.warmup_topic).save()  # the workers start here
    if args.mode == "batch":
        data = rows.cache()
        data.count()
        started = time.perf_counter()
        options(data.write.mode("append"), args.topic).save()
    else:
        with tempfile.TemporaryDirectory(prefix="bench-lines-") as tmp:
            rows.write.parquet(f"{tmp}/rows")
            stream = spark.readStream.schema(rows.schema).parquet(f"{tmp}/rows")
            started = time.perf_counter()
            query = (options(stream.writeStream, args.topic).option("checkpointLocation", f"{tmp}/checkpoint")
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            if query.exception():
                raise query.exception()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "pyspark": pyspark.__version__}), flush=True)
    spark.stop()
    return 0


def run_once(python: str, bootstrap: str, mode: str, rows: int, value_size: int) -> float:
    topic, warmup = new_topic(f"lines-{mode}"), new_topic("lines-warmup")
    create_topic(bootstrap, topic, PARTITIONS)
    create_topic(bootstrap, warmup, 1)
    try:
        out = subprocess.run([python, "-m", "benchmarks.pyspark_lines", "--child", "--bootstrap", bootstrap,
                              "--topic", topic, "--warmup-topic", warmup, "--mode", mode, "--rows", str(rows),
                              "--value-size", str(value_size)],
                             capture_output=True, text=True, timeout=1800, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{python} {mode}: exit {out.returncode}\n{(out.stdout + out.stderr)[-3000:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        landed, how = count_landed(bootstrap, topic, PARTITIONS, "apache")
        if landed != rows:
            raise RuntimeError(f"{python} {mode}: {landed} records landed, {rows} written ({how})")
        return result["seconds"]
    finally:
        delete_topic(bootstrap, topic)
        delete_topic(bootstrap, warmup)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pyspark_lines")
    ap.add_argument("--line", action="append", default=[], metavar="NAME=PYTHON",
                    help="a pyspark line and the Python that has it (the first is the reference)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="batch,stream")
    ap.add_argument("--out", default=None, help="a JSON file for every run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--warmup-topic", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    lines = [spec.split("=", 1) for spec in args.line]
    if len(lines) < 2:
        ap.error("name two lines or more: --line 4.3.0=/path/to/python --line 4.0.0=/other/python")
    from benchmarks.run import start_bench_broker

    broker = start_bench_broker("apache")
    runs: dict[tuple[str, str], list[float]] = {}
    try:
        for mode in args.modes.split(","):
            for r in range(args.rounds):
                order = lines if r % 2 == 0 else lines[::-1]  # ABBA
                for name, python in order:
                    seconds = run_once(python, broker.bootstrap, mode, args.rows, args.value_size)
                    runs.setdefault((name, mode), []).append(seconds)
                    log(f"{mode} pyspark {name}: {seconds:.2f} s ({args.rows / seconds:,.0f} rows/s)")
    finally:
        broker.stop()
    reference = lines[0][0]
    print(f"\n{args.rows:,} rows of {args.value_size + 10} B, {PARTITIONS} partitions, 2 tasks, "
          f"median of {args.rounds} alternating runs")
    print("| mode | pyspark | median s | rows/s | ratio to " + reference + " |\n|---|---|---|---|---|")
    for mode in args.modes.split(","):
        ref = statistics.median(runs[(reference, mode)])
        for name, _ in lines:
            med = statistics.median(runs[(name, mode)])
            print(f"| {mode} | {name} | {med:.2f} | {args.rows / med:,.0f} | {ref / med:.2f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({f"{n} {m}": v for (n, m), v in runs.items()} | {"rows": args.rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
