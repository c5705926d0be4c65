"""What exactly-once asks of the transaction coordinators, counted by the broker.

``python -m benchmarks.exactly_once_cost [--out DIR]`` starts Apache Kafka (one node, its JMX
opened for Kafka's own request metrics, ``broker_requests``), then in one Spark application:

* batch writes of 2 and of 8 tasks: the requests of each write, by type (so: what a write costs,
  and what each task adds);
* a streaming query (``writeStream``, two partitions) over 10 micro-batches: the requests per
  micro-batch;
* the driver idle after its writes: the requests per second while its keeper still beats, and
  once it exited;
* the transactional ids each kind of write leaves in the coordinators (listed before and after:
  each is kept for ``transactional.id.expiration.ms``, 7 days by default).

Writes ``exactly-once-cost.json`` in DIR (default ``benchmarks/results``) and prints the table
docs/delivery.md quotes.  About 4 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

#: the request types the tables show (every other type is in the JSON)
SHOWN = ("InitProducerId", "EndTxn", "AddPartitionsToTxn", "FindCoordinator", "DescribeTransactions",
         "ListTransactions", "Produce", "Fetch", "FetchConsumer", "ListOffsets", "Metadata", "CreateTopics")
IDLE_WINDOWS = ((0, 40), (80, 110))  # seconds after the last write: keeper beating, then gone


def _delta(before: dict, after: dict) -> dict[str, int]:
    b, a = before["requests"], after["requests"]
    return {k: int(a[k] - b.get(k, 0)) for k in a if a[k] - b.get(k, 0)}


def _ids(admin, prefix: str) -> int:
    """How many transactional ids under ``prefix`` the coordinators keep (every state)."""
    states = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
              "PrepareEpochFence")
    return len(admin.open_transactions(prefix, time.monotonic() + 30, states))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.exactly_once_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--micro-batches", type=int, default=10)
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession

    from benchmarks.broker_requests import RequestProbe, enable_jmx
    from sparkkafka_sink.producer.handover import TransactionAdmin
    from sparkkafka_sink.testing.apache_kafka import ApacheKafka
    from sparkkafka_sink.testing.brokers import create_topics

    results: dict = {"what": __doc__.splitlines()[0], "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    with ApacheKafka(nodes=1) as kafka, RequestProbe(enable_jmx(kafka.nodes[0].pid)) as probe, \
            TransactionAdmin({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        results["broker"] = kafka.version
        spark = (SparkSession.builder.master("local[2]").appName("exactly-once-cost")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        bootstrap = kafka.bootstrap_servers

        def batch_write(tasks: int) -> dict:
            topic = f"eos-cost-{uuid.uuid4().hex[:8]}"
            create_topics(bootstrap, {topic: tasks})
            prefix = f"{topic}-txn"
            df = spark.range(0, 10_000 * tasks, numPartitions=tasks).selectExpr("cast(id as string) as value")
            before, ids_before = probe.snapshot(), _ids(admin, prefix)
            (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("deliveryGuarantee", "exactly-once")
             .option("transactionalIdPrefix", prefix).save())
            after = probe.snapshot()
            return {"tasks": tasks, "requests": _delta(before, after), "new_ids": _ids(admin, prefix) - ids_before}

        batch_write(2)  # warm-up: the decisions topic created, the keeper started, the JVM warm
        results["batch"] = [batch_write(2), batch_write(8)]

        topic = f"eos-cost-stream-{uuid.uuid4().hex[:8]}"
        create_topics(bootstrap, {topic: 2})
        checkpoint = Path(os.environ.get("TMPDIR", "/tmp")) / f"eos-cost-{uuid.uuid4().hex[:8]}"
        rows = (spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 2).load()
                .selectExpr("cast(value as string) as value"))
        query = (rows.writeStream.format("pyprod-kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", topic).option("deliveryGuarantee", "exactly-once")
                 .option("checkpointLocation", str(checkpoint)).trigger(processingTime="1 second").start())
        while (query.lastProgress or {}).get("batchId", -1) < 2:  # warmed up
            time.sleep(0.2)
        first = query.lastProgress["batchId"]
        before = probe.snapshot()
        prefix = None
        while query.lastProgress["batchId"] < first + args.micro_batches:
            time.sleep(0.1)
        after = probe.snapshot()
        last = query.lastProgress["batchId"]
        query.stop()
        from sparkkafka_sink.spark.options import parse_options

        prefix = parse_options({"kafka.bootstrap.servers": bootstrap, "deliveryGuarantee": "exactly-once",
                                "checkpointLocation": str(checkpoint)}, streaming=True).transactional_id_prefix
        batches = last - first
        results["streaming"] = {"micro_batches": batches, "partitions": 2, "requests": _delta(before, after),
                                "ids_kept": _ids(admin, prefix), "micro_batches_run": last + 1}

        idle_from = time.monotonic()
        idle = []
        for start, end in IDLE_WINDOWS:
            time.sleep(max(0.0, idle_from + start - time.monotonic()))
            before = probe.snapshot()
            time.sleep(end - start)
            idle.append({"window_s": [start, end], "requests": _delta(before, probe.snapshot()),
                         "seconds": end - start})
        results["idle_driver"] = idle
        spark.stop()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "exactly-once-cost.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    return 0


def table(results: dict) -> str:
    """The Markdown table of the run: requests by type per write, per micro-batch, per idle second."""
    cols = [("batch write, 2 tasks", results["batch"][0]["requests"], 1),
            ("batch write, 8 tasks", results["batch"][1]["requests"], 1),
            ("per micro-batch (2 tasks)", results["streaming"]["requests"], results["streaming"]["micro_batches"])]
    cols += [(f"idle driver, per s ({w['window_s'][0]}-{w['window_s'][1]} s after)", w["requests"], w["seconds"])
             for w in results["idle_driver"]]
    lines = ["| request | " + " | ".join(c[0] for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for name in SHOWN:
        cells = [c[1].get(name, 0) / c[2] for c in cols]
        if any(cells):
            lines.append(f"| {name} | " + " | ".join(f"{v:.1f}".rstrip("0").rstrip(".") for v in cells) + " |")
    lines.append("| transactional ids left | " + " | ".join(
        [str(results["batch"][0]["new_ids"]), str(results["batch"][1]["new_ids"]),
         f"{results['streaming']['ids_kept'] / results['streaming']['micro_batches_run']:.1f}"]
        + ["" for _ in results["idle_driver"]]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
