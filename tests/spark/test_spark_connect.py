"""Under Spark Connect there is no SparkContext: register() turns metrics off, writes still work and
validation errors still reach the client.  Runs in its own process (a local Connect server cannot
share this test session's JVM); needs the pyspark[connect] client libraries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from broker_kinds import KAFKA_KINDS
from readback import read_records

SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession, functions as F
    import sparkkafka_sink

    bootstrap, topic = sys.argv[1], sys.argv[2]
    # the local Connect server on 127.0.0.1 and an ephemeral port (SPARK_TESTING makes pyspark
    # bind port 0 and read back the port it got), so lines tested side by side never collide
    spark = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
             .config("spark.connect.grpc.binding.address", "127.0.0.1").getOrCreate())
    metrics = sparkkafka_sink.register(spark)
    print("CONNECT", type(spark).__module__, metrics.enabled)
    (spark.range(100).select(F.col("id").cast("string").alias("value"))
     .write.format("pyprod-kafka").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    print("RECORDS_SENT", metrics.snapshot()["records_sent"])
    try:
        (spark.range(1).selectExpr("cast(id as string) value").write.format("pyprod-kafka")
         .mode("overwrite").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    except Exception as e:
        print("OVERWRITE_REFUSED", "Kafka topics cannot be truncated" in str(e))
    spark.stop()
""")


pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark in processes of their own


@pytest.mark.pyspark_lines
def test_spark_connect_writes_without_metrics(kafka, tmp_path):
    if kafka.kind != KAFKA_KINDS[0]:
        pytest.skip(f"Spark Connect does not depend on the broker: run once, on {KAFKA_KINDS[0]}")
    pytest.importorskip("grpc", reason="Spark Connect client needs pyspark[connect] (grpcio)")
    pytest.importorskip("google.rpc", reason="Spark Connect client needs grpcio-status")
    topic = kafka.create_topic()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_TESTING="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, kafka.bootstrap_servers, topic],
                         capture_output=True, text=True, timeout=300, env=env, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr[-4000:]
    keys = {"CONNECT", "RECORDS_SENT", "OVERWRITE_REFUSED"}
    lines = {k: v for k, _, v in (ln.partition(" ") for ln in out.stdout.splitlines()) if k in keys}
    assert lines["CONNECT"] == "pyspark.sql.connect.session False"
    assert lines["RECORDS_SENT"] == "0"
    assert lines["OVERWRITE_REFUSED"] == "True"
    assert len(read_records(kafka, topic, expected_count=100)) == 100
