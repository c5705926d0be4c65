"""A Spark job for tests/spark/test_spark_exactly_once.py, in a process of its own: a master
with task retries (``local[2,4]``), which the suite's shared session (``local[2]``) does not have.

``python exactly_once_job.py BOOTSTRAP ROWS TOPIC:FAULT ...`` writes rows 0..ROWS-1 to each TOPIC
(one write each, one Spark session for all) with deliveryGuarantee=exactly-once; FAULT says how
the first attempt of partition 1 fails:
``raise`` (a row for a partition that does not exist fails the task after three Arrow batches
were sent; the task aborts its transaction and Spark retries it),
``none``, or ``fail-job`` (every attempt of partition 1 raises: the job fails).
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark import TaskContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402


def main(bootstrap: str, rows: int, jobs: list) -> int:
    spark = (SparkSession.builder.master("local[2,4]").appName("exactly-once-test")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for topic, fault in jobs:
            write(spark, bootstrap, rows, topic, fault)
    finally:
        spark.stop()
    return 0


def write(spark, bootstrap: str, rows: int, topic: str, fault: str) -> None:
    def failing(batches):
        """Partition 1's first attempt (or every attempt, for fail-job) sends a row to partition
        999 in its fourth Arrow batch: the sink fails that task after it sent three batches."""
        import pyarrow as pa

        ctx = TaskContext.get()
        bad = ctx.partitionId() == 1 and (fault == "fail-job" or (fault == "raise" and ctx.attemptNumber() == 0))
        for i, batch in enumerate(batches):
            n = batch.num_rows
            partition = pa.array([999 if bad and i == 3 else None] * n, pa.int32())
            yield pa.RecordBatch.from_arrays([batch.column(0), partition], ["value", "partition"])

    df = (spark.range(0, rows, numPartitions=4).selectExpr("cast(id as string) as value")
          .mapInArrow(failing, "value string, partition int"))
    try:
        (df.write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("deliveryGuarantee", "exactly-once")
         .option("coalesceBytes", "0")
         .save())
    except Exception as e:  # noqa: BLE001
        print(f"JOB FAILED {topic}: {str(e)[-400:]}", flush=True)
        return
    print(f"JOB OK {topic}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), [tuple(a.split(":", 1)) for a in sys.argv[3:]]))
