"""``retrying_spark``: one local SparkSession (``local[2,4]``: 2 cores, up to 4 attempts per task,
so a task failing on a broker fault is retried as on a cluster) shared by the modules outside
tests/spark that write through Spark (tests/compat, tests/failover, tests/faults).  A plugin of
the root conftest.

Started the first time a test asks for it and stopped right after the last test of the run that
uses it (``session_resources``): one start-up instead of one per module, and the SparkContext is
gone before tests/spark starts its own (``local[2]``: one attempt per task; one SparkContext per
process).
"""

from __future__ import annotations

import os
import sys

import pytest
from session_resources import stop_after_last_use


@pytest.fixture(scope="session")
def retrying_spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,4]")
               .appName("sparkkafka-sink-retrying-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    stop = stop_after_last_use("retrying_spark", session.stop)
    try:
        yield session
    finally:
        stop()
