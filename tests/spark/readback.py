"""Read topics back with confluent-kafka (``kafka_helpers.consume_all``) into Spark DataFrames
shaped like the sink's input, so chispa can compare what was written with what arrived."""

from __future__ import annotations

from kafka_helpers import consume_all
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
READ_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("headers", ArrayType(HEADER)),
    StructField("timestamp_ms", LongType()),
])
COLUMNS = ["key", "value", "topic", "partition", "headers", "timestamp"]


def read_records(kafka, topics, expected_count=None, timeout=60):
    """All records of ``topics`` (a name or list), one consumer per topic."""
    topics = [topics] if isinstance(topics, str) else list(topics)
    out = []
    for t in topics:
        out += consume_all(kafka.bootstrap_servers, t, timeout=timeout,
                           expected_count=expected_count if len(topics) == 1 else None)
    return out


def records_df(spark, records):
    """Records as a DataFrame with the sink's columns (empty header lists become null)."""
    rows = [(r.key, r.value, r.topic, r.partition, r.offset,
             [(k, v) for k, v in r.headers] or None, r.timestamp_ms) for r in records]
    df = spark.createDataFrame(rows, READ_SCHEMA)
    return df.withColumn("timestamp", F.timestamp_millis("timestamp_ms")).select(*COLUMNS)


def as_written(df):
    """What Kafka should hold for ``df``: strings as UTF-8 bytes, empty header arrays as null."""
    cols = {c: F.col(c) for c in df.columns}
    value = F.col("value").cast("binary")
    key = F.col("key").cast("binary") if "key" in cols else F.lit(None).cast("binary")
    headers = (F.when(F.size("headers") > 0, F.col("headers")) if "headers" in cols
               else F.lit(None).cast(ArrayType(HEADER)))
    return df.select(key.alias("key"), value.alias("value"), F.col("topic"),
                     F.col("partition").cast("int").alias("partition"), headers.alias("headers"),
                     F.col("timestamp"))
