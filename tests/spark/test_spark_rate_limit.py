"""maxRecordsPerSecond / maxBytesPerSecond on a real write: the task cannot be faster than the
limit (a lower bound, not a timing guess), every row lands, and the time held back is counted.
(The achieved rate against the limit is measured by the benchmark: benchmarks/README.md.)"""

from __future__ import annotations

import time

import pytest
from kafka_helpers import consume_all
from pyspark.sql import functions as F

pytestmark = [pytest.mark.broker, pytest.mark.spark]


@pytest.mark.pyspark_lines
@pytest.mark.parametrize("option, limit, rows, value_bytes", [
    ("maxRecordsPerSecond", 4000, 8_000, 8),
    ("maxBytesPerSecond", 200_000, 4_000, 100),
])
def test_rate_limit_holds_the_task_back(spark, sink_metrics, kafka, option, limit, rows, value_bytes):
    topic = kafka.create_topic(partitions=2)
    df = spark.range(rows, numPartitions=1).select(
        F.lpad(F.col("id").cast("string"), value_bytes, "0").alias("value"))
    seconds = (rows if option == "maxRecordsPerSecond" else rows * value_bytes) / limit
    before = sink_metrics.snapshot()
    start = time.monotonic()
    (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
     .option("topic", topic).option(option, str(limit)).save())
    took = time.monotonic() - start
    # one task: its first slice (a tenth of a second's allowance) goes at once, the rest wait
    assert took >= seconds - 0.1, f"{rows} rows in {took:.2f} s: faster than {option}={limit}"
    after = sink_metrics.snapshot()
    assert after["records_sent"] - before["records_sent"] == rows
    assert after["throttle_time_ms"] - before["throttle_time_ms"] >= (seconds - 0.1) * 1000 * 0.5
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=rows)
    assert sorted(int(r.value) for r in got) == list(range(rows))
