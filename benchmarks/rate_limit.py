"""Rate limits of ``pyprod-kafka``: ``python -m benchmarks.rate_limit [--rows N]``.

Starts its own Apache Kafka (``benchmarks.run.start_bench_broker``), then writes one DataFrame
of ``--rows`` rows (10-byte keys, 100-byte values = 110 bytes a record) in ONE partition, so one
write task, to a fresh one-partition topic: once with ``maxRecordsPerSecond`` and once with
``maxBytesPerSecond`` (the same target rate in bytes).  The achieved rate is measured on the
broker, not around the Spark job: all records are read back with confluent-kafka and

    achieved records/s = (n - 1) / (last CreateTime - first CreateTime)

(the producer stamps CreateTime when a record is sent, so job start-up and the final flush are
outside the span).  Prints one line per limit with the achieved/limit ratio (goal: within 5 %).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from benchmarks.common import create_topic, delete_topic, log, new_topic
from benchmarks.run import start_bench_broker

KEY_SIZE, VALUE_SIZE = 10, 100


def read_timestamps(bootstrap: str, topic: str, expected: int, timeout: float = 120.0) -> list[int]:
    """CreateTime (ms) of every record of partition 0 of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rl-{topic}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[int] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if m.error():
                    continue
                out.append(m.timestamp()[1])
        return out
    finally:
        c.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.rate_limit")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--records-per-second", type=int, default=20_000)
    args = ap.parse_args(argv)
    rps = args.records_per_second
    record_bytes = KEY_SIZE + VALUE_SIZE
    limits = [("maxRecordsPerSecond", rps, rps), ("maxBytesPerSecond", rps * record_bytes, rps)]

    broker = start_bench_broker("apache")
    log(f"Apache Kafka {broker.version} at {broker.bootstrap}")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("sparkkafka-rate-limit")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.local.dir", tempfile.gettempdir()).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import sparkkafka_sink

    metrics = sparkkafka_sink.register(spark)
    rc = 0
    try:
        df = (spark.range(0, args.rows, 1, 1)   # one partition: one write task
              .selectExpr(f"lpad(cast(id as string), {KEY_SIZE}, '0') as key",
                          f"concat(lpad(cast(id as string), {KEY_SIZE}, '0'), repeat('x', {VALUE_SIZE - KEY_SIZE})) as value")
              .cache())
        df.count()
        for option, limit, target_rps in limits:
            topic = new_topic("ratelimit")
            create_topic(broker.bootstrap, topic, 1)
            before = metrics.snapshot()
            t0 = time.monotonic()
            (df.write.format("pyprod-kafka").mode("append")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
             .option("kafka.linger.ms", "5").option(option, str(limit)).save())
            wall = time.monotonic() - t0
            after = metrics.snapshot()
            ts = read_timestamps(broker.bootstrap, topic, args.rows)
            span_s = (max(ts) - min(ts)) / 1000.0
            achieved = (len(ts) - 1) / span_s
            ratio = achieved / target_rps
            throttle_s = (after["throttle_time_ms"] - before["throttle_time_ms"]) / 1000.0
            unit = "records/s" if option == "maxRecordsPerSecond" else "B/s"
            achieved_unit = achieved if option == "maxRecordsPerSecond" else achieved * record_bytes
            ok = len(ts) == args.rows and abs(ratio - 1) <= 0.05
            rc |= 0 if ok else 1
            print(f"{option}={limit}: {len(ts)} records, CreateTime span {span_s:.3f} s -> "
                  f"{achieved_unit:,.0f} {unit} = {ratio:.4f} x limit ({'ok' if ok else 'MISSED'}); "
                  f"job wall {wall:.2f} s, throttle_time_ms {throttle_s:.2f} s", flush=True)
            delete_topic(broker.bootstrap, topic)
    finally:
        spark.stop()
        broker.stop()
    return rc


if __name__ == "__main__":
    sys.exit(main())
