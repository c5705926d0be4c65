"""An exactly-once batch write for tests/exactly_once/ (crash recovery and schedules), in a process
group of its own so a test can kill the whole driver (its JVM and its Python):
``python crash_job.py BOOTSTRAP TOPIC FIRST ROWS RECORDS_PER_SECOND [DELAY_S]`` writes the values
FIRST..FIRST+ROWS-1 in two tasks, each paced at RECORDS_PER_SECOND (0: no limit), with the sink's
default transactional id prefix (the target's), then prints DONE (or FAILED and the error).
DELAY_S puts a stage before the write whose tasks wait that long: the write is planned, then its
tasks begin DELAY_S later (behind a shuffle).  The driver's lease keeper leaves its files in
``$SPARKKAFKA_LEASE_DIR``; ``$JOB_LEASE_WINDOW_MS`` is the write's ``leaseWindowMs`` (how long
it watches a dead driver's lease before ending its writes)."""

import os
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession


def main(bootstrap: str, topic: str, first: int, rows: int, rate: int, delay_s: float = 0.0) -> int:
    spark = (SparkSession.builder.master("local[2]").appName("crash-recovery-test")
             .config("spark.ui.enabled", "false").config("spark.task.maxFailures", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(first, first + rows, numPartitions=2).selectExpr("cast(id as string) as value")
    if delay_s:
        def wait_first(batches):
            time.sleep(delay_s)
            yield from batches

        df = df.mapInArrow(wait_first, df.schema).repartition(2)
    writer = (df.write.format("pyprod-kafka").mode("append")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
              .option("deliveryGuarantee", "exactly-once"))
    if os.environ.get("JOB_LEASE_WINDOW_MS"):
        writer = writer.option("leaseWindowMs", os.environ["JOB_LEASE_WINDOW_MS"])
    if rate:
        writer = writer.option("maxRecordsPerSecond", str(rate))
    try:
        writer.save()
    except Exception as e:  # noqa: BLE001 - the test reads what failed
        print(f"FAILED {str(e)[-2000:]}", flush=True)
        spark.stop()
        return 2
    print("DONE", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                  *(float(a) for a in sys.argv[6:7])))
