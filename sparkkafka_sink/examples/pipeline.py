"""A spark-submit pipeline: generate events and write them to Kafka through ``pyprod-kafka``.

With the package installed (``pip install '.[spark]'`` from a checkout, or its wheel)::

    ex() { python -m sparkkafka_sink.examples "$1"; }    # where the installed files are
    spark-submit --properties-file "$(ex spark-defaults.conf)" "$(ex pipeline.py)" \\
        --bootstrap-servers localhost:9092 --topic events --rows 100000 \\
        --producer-config "$(ex producer.properties)"

``--producer-config`` is a Java-style properties file whose entries become
``kafka.<key>`` options.  The last stdout line is ``PIPELINE_RESULT {json}``
with the row count and the sink's metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092"))
    p.add_argument("--topic", default="events")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--spark-partitions", type=int, default=4, help="write tasks (one producer each)")
    p.add_argument("--producer-config", help="properties file of producer settings (kafka.* options)")
    p.add_argument("--no-register", action="store_true",
                   help="rely on auto-discovery of format('pyprod-kafka') only (no metrics)")
    return p.parse_args(argv)


def events(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    """Synthetic click events: key = user, JSON value, a trace header, event time."""
    from pyspark.sql import functions as F

    return spark.range(0, rows, numPartitions=partitions).select(
        F.concat(F.lit("user-"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.to_json(F.struct(F.col("id").alias("event_id"), (F.col("id") % 7).alias("page"))).alias("value"),
        F.array(F.struct(F.lit("source").alias("key"), F.lit(b"pipeline").alias("value"))).alias("headers"),
        F.timestamp_millis(F.lit(int(time.time() * 1000)) + F.col("id")).alias("timestamp"),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    import sparkkafka_sink
    from sparkkafka_sink.producer.config import read_properties

    spark = SparkSession.builder.getOrCreate()
    metrics = None if args.no_register else sparkkafka_sink.register(spark)
    writer = (events(spark, args.rows, args.spark_partitions).write.format("pyprod-kafka").mode("append")
              .option("kafka.bootstrap.servers", args.bootstrap_servers).option("topic", args.topic))
    if args.producer_config:
        for key, value in read_properties(args.producer_config).items():
            writer = writer.option(f"kafka.{key}", value)
    started = time.monotonic()
    writer.save()
    elapsed = time.monotonic() - started
    result = {"rows": args.rows, "topic": args.topic, "seconds": round(elapsed, 3),
              "metrics": metrics.snapshot() if metrics is not None else None,
              "package": os.path.dirname(sparkkafka_sink.__file__)}
    spark.stop()  # before the result: nothing Spark prints on stopping comes after it
    print("PIPELINE_RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
