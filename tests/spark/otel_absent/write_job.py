"""A write with OpenTelemetry absent (run by spark-submit with ``sitecustomize`` of this directory
on ``PYTHONPATH``): ``--rows`` rows to ``--topic`` with a ``traceParent`` given, then the same write
with ``traceHeaders=task``, which must be refused.  Prints one line, ``ABSENT_RESULT <json>``."""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import sparkkafka_sink

ap = argparse.ArgumentParser()
ap.add_argument("--bootstrap-servers", required=True)
ap.add_argument("--topic", required=True)
ap.add_argument("--rows", type=int, required=True)
ap.add_argument("--trace-parent", required=True)
args = ap.parse_args()

spark = SparkSession.builder.master("local[2]").appName("otel-absent").getOrCreate()
df = spark.range(args.rows).select(F.col("id").cast("string").alias("value")).repartition(3)


def writer(**more: str):
    w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", args.bootstrap_servers)
         .option("topic", args.topic).option("traceParent", args.trace_parent))
    for k, v in more.items():
        w = w.option(k, v)
    return w


writer().save()
try:
    writer(traceHeaders="task").save()
    refused = None
except Exception as exc:  # noqa: BLE001 -- the driver's refusal, as whichever of its classes Spark hands back
    refused = str(exc)
result = {"refused": refused, "traceparent": sparkkafka_sink.traceparent(),
          "imported": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")}
spark.stop()
print("ABSENT_RESULT " + json.dumps(result))
