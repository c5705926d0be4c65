"""An exactly-once batch write for tests/transactions/test_crash_recovery.py, in a process group of
its own so a test can kill the whole driver (its JVM and its Python):
``python crash_job.py BOOTSTRAP TOPIC FIRST ROWS RECORDS_PER_SECOND`` writes the values
FIRST..FIRST+ROWS-1 in two tasks, each paced at RECORDS_PER_SECOND (0: no limit), with the sink's
default transactional id prefix (the target's), then prints DONE.  The driver's lease keeper
leaves its files in ``$SPARKKAFKA_LEASE_DIR``."""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession


def main(bootstrap: str, topic: str, first: int, rows: int, rate: int) -> int:
    spark = (SparkSession.builder.master("local[2]").appName("crash-recovery-test")
             .config("spark.ui.enabled", "false").config("spark.task.maxFailures", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    writer = (spark.range(first, first + rows, numPartitions=2).selectExpr("cast(id as string) as value")
              .write.format("pyprod-kafka").mode("append")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
              .option("deliveryGuarantee", "exactly-once"))
    if rate:
        writer = writer.option("maxRecordsPerSecond", str(rate))
    writer.save()
    print("DONE", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
