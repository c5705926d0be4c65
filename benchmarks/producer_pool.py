"""The producer pool of ``pyprod-kafka``: ``python -m benchmarks.producer_pool [--batches N] [--rounds R]``.

Starts its own Apache Kafka with a SASL_SSL listener (SCRAM-SHA-512 over TLS, a throw-away test
CA) beside PLAINTEXT (``benchmarks.run.start_bench_broker(..., secured=True)``; the sink's
security options are ``benchmarks.run.secured_settings``'s), then in one Spark session
(local[2]) runs a Structured Streaming query per case: the ``rate-micro-batch`` source
(``rowsPerBatch`` 1,000, 2 partitions = 2 write tasks a micro-batch, trigger processingTime 0)
into ``pyprod-kafka`` for ``--batches`` micro-batches, with ``producerCacheTimeoutMs`` 0 (one
producer per task) and with the default (600000: the pool), over PLAINTEXT and over SASL_SSL.
Reports per case the median ``durationMs`` (``triggerExecution`` and ``addBatch``) of the
micro-batches after the first ``--warmup`` ones and the sink metrics ``producers_created`` /
``write_tasks`` of the query; the cases run in ``--rounds`` rounds that alternate their order,
and the figure is the median over rounds of each round's difference.  The two tasks of a
micro-batch run at once (one per core), so a micro-batch's difference with and without the pool
is the per-task overhead of creating a producer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from benchmarks.common import create_topic, delete_topic, log, new_topic
from benchmarks.run import start_bench_broker


def run_case(spark, metrics, options: dict, topic: str, batches: int, pool: bool, timeout: float = 600.0):
    before = metrics.snapshot()
    checkpoint = tempfile.mkdtemp(prefix="bench-pool-ckpt-")
    writer = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1000)
              .option("numPartitions", 2).load()
              .selectExpr("cast(value as string) as key", "concat(cast(value as string), repeat('x', 90)) as value")
              .writeStream.format("pyprod-kafka").option("topic", topic)
              .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds"))
    for k, v in options.items():
        writer = writer.option(k, v)
    if not pool:
        writer = writer.option("producerCacheTimeoutMs", "0")
    query = writer.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if query.exception():
                raise RuntimeError(f"query failed: {query.exception()}")
            p = query.lastProgress
            if p and p["batchId"] >= batches - 1:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("timed out")
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    after = metrics.snapshot()
    return progress, {k: after[k] - before[k] for k in ("producers_created", "write_tasks")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.producer_pool")
    ap.add_argument("--batches", type=int, default=40, help="micro-batches per case and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every case, alternating their order")
    ap.add_argument("--warmup", type=int, default=5, help="first micro-batches left out of the means")
    args = ap.parse_args(argv)

    broker = start_bench_broker("apache", secured=True)
    log(f"Apache Kafka {broker.version} at {broker.bootstrap} (+ {broker.security['bootstrap']} SASL_SSL)")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("sparkkafka-producer-pool")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import logging

    logging.getLogger("sparkkafka_sink").setLevel(logging.WARNING)
    import sparkkafka_sink

    metrics = sparkkafka_sink.register(spark)
    listeners = {
        "PLAINTEXT": {"kafka.bootstrap.servers": broker.bootstrap},
        "SASL_SSL": dict(broker.security["options"], **{"kafka.bootstrap.servers": broker.security["bootstrap"]}),
    }
    # rounds alternate which case runs first, so a machine getting busier or quieter during the
    # run does not favour one case; the figure is the median over rounds of each round's
    # difference of median addBatch (micro-batch) durations
    results: dict = {(listener, pool): [] for listener in listeners for pool in (False, True)}
    try:
        for r in range(args.rounds):
            for listener, options in listeners.items():
                for pool in ((False, True) if r % 2 == 0 else (True, False)):
                    topic = new_topic("pool")
                    create_topic(broker.bootstrap, topic, 2)
                    progress, m = run_case(spark, metrics, options, topic, args.batches, pool)
                    kept = [p for p in progress if p["batchId"] >= args.warmup]
                    trig = statistics.median(p["durationMs"]["triggerExecution"] for p in kept)
                    add = statistics.median(p["durationMs"]["addBatch"] for p in kept)
                    results[(listener, pool)].append((trig, add))
                    print(f"round {r + 1} {listener:9} pool={'on ' if pool else 'off'}: {len(progress)} micro-batches "
                          f"({len(kept)} after warm-up): median triggerExecution {trig:.0f} ms, addBatch {add:.0f} ms; "
                          f"producers_created {m['producers_created']} / write_tasks {m['write_tasks']}", flush=True)
                    delete_topic(broker.bootstrap, topic)
        for listener in listeners:
            off, on = results[(listener, False)], results[(listener, True)]
            add_diffs = [a0 - a1 for (_, a0), (_, a1) in zip(off, on, strict=True)]
            trig_diffs = [t0 - t1 for (t0, _), (t1, _) in zip(off, on, strict=True)]
            print(f"{listener:9} per-task overhead without the pool (2 tasks a micro-batch, side by side): "
                  f"median over {len(add_diffs)} rounds {statistics.median(add_diffs):+.0f} ms addBatch "
                  f"(rounds: {', '.join(f'{d:+.0f}' for d in add_diffs)}), "
                  f"{statistics.median(trig_diffs):+.0f} ms triggerExecution; "
                  f"addBatch pool on {statistics.median(a for _, a in on):.0f} ms vs off "
                  f"{statistics.median(a for _, a in off):.0f} ms", flush=True)
    finally:
        spark.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
