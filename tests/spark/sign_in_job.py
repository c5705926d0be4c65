"""A batch job as a user submits one, for the sign-in tests (tests/spark/test_spark_cloud_sign_in.py):
``python sign_in_job.py OPTIONS_JSON ROWS`` writes the values 0..ROWS-1 with
``df.write.format("pyprod-kafka")`` and the options of the JSON file (each write of the list in
turn), printing ``DONE`` or ``FAILED <error>`` per write.  Its environment (AWS keys, Kerberos
files) is the job's, as the executors' Python workers inherit it; ``SIGN_IN_JOB_FILES`` (paths,
comma-separated) are shipped with the job (``addFile``, as ``spark-submit --files`` does)."""

import json
import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession


def main(options_file: str, rows: int) -> int:
    spark = (SparkSession.builder.master("local[2]").appName("sign-in-test")
             .config("spark.ui.enabled", "false").config("spark.task.maxFailures", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for path in filter(None, os.environ.get("SIGN_IN_JOB_FILES", "").split(",")):
        spark.sparkContext.addFile(path)
    df = spark.range(rows, numPartitions=2).selectExpr("cast(id as string) as value")
    for options in json.loads(open(options_file).read()):
        try:
            df.write.format("pyprod-kafka").mode("append").options(**options).save()
            print("DONE", flush=True)
        except Exception as e:  # noqa: BLE001 - the test reads what failed
            print("FAILED " + " ".join(str(e).split())[-3000:], flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
