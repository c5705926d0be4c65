"""Spark fixtures: one local SparkSession for the whole run, and the sink's metrics handle.

``spark`` is plain (the format resolves through auto-discovery of ``pyspark_pyprod_kafka``);
``sink_metrics`` registers the sink with metrics in that session.  Tests that must see the
unregistered, auto-discovered source use ``spark.newSession()``, whose runtime registry is empty.
"""

from __future__ import annotations

import os
import sys

import pytest
from session_resources import stop_after_last_use

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_event_log(tmp_path_factory):
    """Where the session's event log goes: every plan, SQL execution, job and streaming progress
    Spark records, uncompressed, so tests can prove no secret reaches it."""
    return tmp_path_factory.mktemp("spark-events")


def _spark_avro_jars() -> list[str]:
    """spark-avro's jar (``from_avro`` reads back what the sink writes as Avro), resolved with
    Maven once and cached; none without java and mvn (those tests then skip, saying why)."""
    from sparkkafka_sink.testing.spark_jars import SparkModuleUnavailable, resolve_spark_avro

    try:
        return resolve_spark_avro()["jars"]
    except SparkModuleUnavailable:
        return []


@pytest.fixture(scope="session")
def spark(spark_event_log):
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(_spark_avro_jars()))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", str(spark_event_log))
        .config("spark.eventLog.compress", "false")
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
    stop = stop_after_last_use("spark", session.stop)
    try:
        yield session
    finally:
        stop()


@pytest.fixture(scope="session")
def sink_metrics(spark):
    import sparkkafka_sink

    return sparkkafka_sink.register(spark)


@pytest.fixture(scope="session")
def plain_session(spark):
    """A session without runtime registrations: ``pyprod-kafka`` comes from auto-discovery."""
    return spark.newSession()
