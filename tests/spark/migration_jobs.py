"""The writes of ``test_spark_migration.py``: Spark's Kafka integration guide's producer examples and
a job configured from a Confluent Cloud Java client properties file, each a function of the format
name alone, so the test runs them with ``pyprod-kafka`` and, in a process of its own with
spark-sql-kafka on the class path, with Spark's own ``kafka``.

``python migration_jobs.py FORMAT SPEC.json`` runs the jobs SPEC names (the JVM sink's run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sparkkafka_sink.producer.config import read_properties

ROWS = 500
#: the guide's batch examples leave the save mode at its default, ErrorIfExists, which Spark's sink
#: takes; pyspark refuses it for every Python data source (UNSUPPORTED_DATA_SOURCE_SAVE_MODE: only
#: Append and Overwrite), so a job moving to pyprod-kafka says Append, which both sinks take
MODE = "append"


def rows_frame(spark, tag: str, rows: int = ROWS):
    """What the guide's examples write: ``key`` and ``value`` columns (and ``topic`` when the rows say it)."""
    return spark.range(rows).selectExpr(f"concat('{tag}-key-', id) AS key", f"concat('{tag}-value-', id) AS value")


def guide_batch_topic_option(spark, fmt: str, bootstrap: str, topic: str) -> None:
    """The guide: "Write key-value data from a DataFrame to a specific Kafka topic specified in an option"."""
    df = rows_frame(spark, "batch")
    (df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
     .write
     .format(fmt)
     .mode(MODE)
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic)
     .save())


def guide_batch_topic_column(spark, fmt: str, bootstrap: str, topic: str) -> None:
    """The guide: "Write key-value data from a DataFrame to Kafka using a topic specified in the data"."""
    df = rows_frame(spark, "column").selectExpr(f"'{topic}' AS topic", "key", "value")
    (df.selectExpr("topic", "CAST(key AS STRING)", "CAST(value AS STRING)")
     .write
     .format(fmt)
     .mode(MODE)
     .option("kafka.bootstrap.servers", bootstrap)
     .save())


def guide_stream_topic_option(spark, fmt: str, bootstrap: str, topic: str, source_dir: str, checkpoint: str) -> None:
    """The guide's streaming example (the rows from JSON files, every file once: availableNow)."""
    df = spark.readStream.schema("key STRING, value STRING").json(source_dir)
    query = (df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
             .writeStream
             .format(fmt)
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination(180)
    if query.exception() is not None:
        raise query.exception()


def confluent_cloud_job(spark, fmt: str, properties_file: str, topic: str) -> None:
    """A job reading its client settings from a Confluent Cloud Java client properties file,
    every entry as a ``kafka.`` option."""
    options = {f"kafka.{k}": v for k, v in read_properties(properties_file).items()}
    (rows_frame(spark, "cloud")
     .write
     .format(fmt)
     .mode(MODE)
     .options(**options)
     .option("topic", topic)
     .save())


def main(fmt: str, spec_path: str) -> int:
    from pyspark.sql import SparkSession

    spec = json.loads(Path(spec_path).read_text())
    spark = (SparkSession.builder.master("local[1]").appName("migration-jvm-sink")
             .config("spark.jars", ",".join(spec["jars"])).config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "768m").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        guide_batch_topic_option(spark, fmt, spec["bootstrap"], spec["topics"]["option"])
        guide_batch_topic_column(spark, fmt, spec["bootstrap"], spec["topics"]["column"])
        guide_stream_topic_option(spark, fmt, spec["bootstrap"], spec["topics"]["stream"], spec["source_dir"],
                                  spec["checkpoint"])
        confluent_cloud_job(spark, fmt, spec["properties_file"], spec["topics"]["cloud"])
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
