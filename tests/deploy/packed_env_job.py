"""The job tests/deploy/test_packed_env.py submits to a Spark standalone cluster, run by the
packed environment's Python (docs/deployment.md, "The tested recipe").

On the executors it checks that their Python is the archive Spark unpacked from
``--archives env.tar.gz#env`` in their working directory, and that ``sparkkafka_sink`` comes from
it; then it writes through ``format("pyprod-kafka")`` twice, because Spark chooses the Python of
a Python data source differently in the two cases: the auto-discovered source (no
``register``), then the source ``sparkkafka_sink.register(spark)`` registers (with metrics).

Usage: ``packed_env_job.py BOOTSTRAP AUTO_TOPIC REGISTERED_TOPIC ROWS``; the last line printed
is ``DEPLOY_RESULT {json}``.
"""

import json
import os
import sys

from pyspark.sql import SparkSession

#: the name after ``#`` in ``--archives env.tar.gz#env``: the directory each executor unpacks it to
ARCHIVE_DIR = "env"


def where_python_runs() -> dict:
    import sparkkafka_sink

    return {"executable": sys.executable, "package": sparkkafka_sink.__file__, "cwd": os.getcwd()}


def check_executor_python(_rows):
    """Runs on an executor: fails the job unless this Python is the unpacked archive's."""
    info = where_python_runs()
    archive = os.path.join(info["cwd"], ARCHIVE_DIR)
    assert info["executable"] == os.path.join(archive, "bin", "python"), f"not the archive's Python: {info}"
    assert info["package"].startswith(archive + os.sep), f"sparkkafka_sink not from the archive: {info}"
    yield json.dumps(info)


def write(df, bootstrap: str, topic: str) -> None:
    (df.write.format("pyprod-kafka").mode("append")
       .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())


def main(bootstrap: str, auto_topic: str, registered_topic: str, rows: int) -> None:
    spark = SparkSession.builder.appName("pyprod-kafka-packed-env").getOrCreate()
    driver = where_python_runs()
    executors = spark.sparkContext.parallelize(range(2), 2).mapPartitions(check_executor_python).collect()
    df = spark.range(rows, numPartitions=2).selectExpr("cast(id as string) as key", "concat('v', id) as value")
    write(df, bootstrap, auto_topic)  # the source Spark found by itself (pyspark_pyprod_kafka)

    import sparkkafka_sink

    metrics = sparkkafka_sink.register(spark)
    write(df, bootstrap, registered_topic)
    result = {"driver": driver, "executors": [json.loads(e) for e in executors], "metrics": metrics.snapshot()}
    print("DEPLOY_RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
