"""Spark fixtures: one local SparkSession for the whole run, and the sink's metrics handle.

``spark`` is plain (the format resolves through auto-discovery of ``pyspark_pyprod_kafka``);
``sink_metrics`` registers the sink with metrics in that session.  Tests that must see the
unregistered, auto-discovered source use ``spark.newSession()``, whose runtime registry is empty.
"""

from __future__ import annotations

import os
import sys

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparkkafka-sink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def sink_metrics(spark):
    import sparkkafka_sink

    return sparkkafka_sink.register(spark)


@pytest.fixture(scope="session")
def plain_session(spark):
    """A session without runtime registrations: ``pyprod-kafka`` comes from auto-discovery."""
    return spark.newSession()
