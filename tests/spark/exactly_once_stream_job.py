"""A streaming query for tests/spark/test_spark_exactly_once.py, in a process (group) of its own
so the test can kill the whole driver: ``python exactly_once_stream_job.py BOOTSTRAP TOPIC
CHECKPOINT MIN_BATCH [foreachBatch]`` runs rate -> pyprod-kafka (exactly-once; as the sink, or
inside foreachBatch with the batch id) until micro-batch MIN_BATCH is done, then stops cleanly
(``$STREAM_JOB_CONF``: more Spark settings, as JSON; ``$JOB_LEASE_WINDOW_MS``: the sink's
``leaseWindowMs``).  The rate source numbers rows 0, 1, 2, ...: a replayed batch has the
same rows.  The test stops the driver's commit at a chosen request with a FaultProxy in front of
the broker (BOOTSTRAP is the proxy), then kills the process group."""

import json
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession

WINDOW = {"leaseWindowMs": os.environ["JOB_LEASE_WINDOW_MS"]} if os.environ.get("JOB_LEASE_WINDOW_MS") else {}


def main(bootstrap: str, topic: str, checkpoint: str, min_batch: int, foreach_batch: bool = False) -> int:
    builder = SparkSession.builder.master("local[2]").appName("exactly-once-stream-test").config("spark.ui.enabled", "false")
    for key, value in json.loads(os.environ.get("STREAM_JOB_CONF", "{}")).items():  # e.g. a checkpoint's file system
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 40).option("numPartitions", 2).load()
            .selectExpr("cast(value as string) as value"))
    if foreach_batch:  # the documented pattern: the batch id and the query's checkpoint as options
        def write(batch_df, batch_id):
            (batch_df.write.format("pyprod-kafka").mode("append")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("deliveryGuarantee", "exactly-once").option("batchId", batch_id)
             .options(**WINDOW)
             .option("checkpointLocation", checkpoint)
             .option("maxRecordsPerSecond", "10").save())  # each batch's transactions open for a while

        query = (rows.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint)
                 .trigger(processingTime="250 milliseconds").start())
    else:
        query = (rows.writeStream.format("pyprod-kafka")
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                 .option("deliveryGuarantee", "exactly-once").options(**WINDOW)
                 .option("checkpointLocation", checkpoint)
                 .trigger(processingTime="250 milliseconds").start())
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if query.exception():
                print(f"QUERY FAILED: {query.exception()}", flush=True)
                return 3
            progress = query.lastProgress
            if progress and progress["batchId"] >= min_batch:
                print(f"REACHED batch {progress['batchId']}", flush=True)
                return 0
            time.sleep(0.2)
        print("TIMEOUT", flush=True)
        return 4
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:] == ["foreachBatch"]))
