"""A write of the chaos harness (tests/chaos.py), in a process group of its own so the harness can
kill the whole driver: ``python chaos_job.py SPEC`` with SPEC a JSON object --

``bootstrap``, ``topic``, ``prefix`` (the write's ``transactionalIdPrefix``), ``tag`` (every row's
value starts ``<tag>-``), ``kind``: ``batch`` (the values ``<tag>-0`` .. ``<tag>-<rows-1>`` in two
tasks, paced at ``rate`` rows per second each) or ``foreachBatch`` (the rate source, 40 rows a
second, each micro-batch written exactly-once inside foreachBatch with its batch id, values
``<tag>:<batch>:<n>``, until micro-batch ``min_batch`` is done, checkpointing at ``checkpoint``);
``fail_task``: the first attempt of partition 1 fails half way (Spark retries it); ``timeout_ms``:
the write's ``kafka.transaction.timeout.ms``; ``lease_window_ms``: its ``leaseWindowMs``.

It prints ``DONE`` (or ``REACHED <batch>``), or ``FAILED <the error>``."""

import json
import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark import TaskContext
from pyspark.sql import SparkSession


def options(spec: dict) -> dict:
    found = {"kafka.bootstrap.servers": spec["bootstrap"], "topic": spec["topic"],
             "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": spec["prefix"],
             "leaseWindowMs": str(spec.get("lease_window_ms", 4000)), "kafka.max.block.ms": "20000"}
    if spec.get("timeout_ms"):
        found["kafka.transaction.timeout.ms"] = str(spec["timeout_ms"])
    if spec.get("rate"):
        found["maxRecordsPerSecond"] = str(spec["rate"])
    return found


def fail_first_attempt(batches):
    """Partition 1's first attempt fails after its first batches went to the sink."""
    ctx = TaskContext.get()
    for n, batch in enumerate(batches):
        if ctx is not None and ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and n == 2:
            raise RuntimeError("chaos: this task attempt fails half way")
        yield batch


def batch(spark: SparkSession, spec: dict) -> int:
    rows = int(spec["rows"])
    df = spark.range(0, rows, numPartitions=2).selectExpr(f"concat('{spec['tag']}-', cast(id as string)) as value")
    if spec.get("fail_task"):
        df = df.mapInArrow(lambda it: fail_first_attempt(b for b in it), df.schema)
    try:
        df.write.format("pyprod-kafka").mode("append").options(**options(spec)).option("coalesceBytes", "0").save()
    except Exception as e:  # noqa: BLE001 - the harness reads what failed
        print("FAILED " + " ".join(str(e).split())[-3000:], flush=True)
        return 2
    print("DONE", flush=True)
    return 0


def stream(spark: SparkSession, spec: dict) -> int:
    rows = spark.readStream.format("rate").option("rowsPerSecond", 40).option("numPartitions", 2).load()

    def write(batch_df, batch_id):
        (batch_df.selectExpr(f"concat('{spec['tag']}:{batch_id}:', cast(value as string)) as value")
         .write.format("pyprod-kafka").mode("append").options(**options(spec))
         .option("batchId", batch_id).option("checkpointLocation", spec["checkpoint"]).save())

    query = (rows.writeStream.foreachBatch(write).option("checkpointLocation", spec["checkpoint"])
             .trigger(processingTime="250 milliseconds").start())
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if query.exception():
                print("FAILED " + " ".join(str(query.exception()).split())[-3000:], flush=True)
                return 3
            progress = query.lastProgress
            if progress and progress["batchId"] >= int(spec["min_batch"]):
                print(f"REACHED {progress['batchId']}", flush=True)
                return 0
            time.sleep(0.2)
        print("FAILED the query did not reach its micro-batch in time", flush=True)
        return 4
    finally:
        query.stop()


def main(spec: dict) -> int:
    master = "local[2,2]" if spec.get("fail_task") else "local[2]"  # one retry of a failed task
    spark = (SparkSession.builder.master(master).appName("chaos").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return batch(spark, spec) if spec["kind"] == "batch" else stream(spark, spec)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
