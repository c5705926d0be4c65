"""``retrying_spark``: one local SparkSession (``local[2,4]``: 2 cores, up to 4 attempts per task,
so a task failing on a broker fault is retried as on a cluster) shared by the modules outside
tests/spark that write through Spark (tests/compat, tests/failover, tests/faults).  A plugin of
the root conftest.

Started the first time a test asks for it and stopped right after the last test of the run that
uses it: one start-up instead of one per module, and the SparkContext is gone before
tests/spark starts its own (``local[2]``: one attempt per task; one SparkContext per process).
"""

from __future__ import annotations

import os
import sys

import pytest

_state: dict = {"session": None, "last_user": None}


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
    _state["session"] = session
    try:
        yield session
    finally:
        _stop()


def _stop() -> None:
    session, _state["session"] = _state["session"], None
    if session is not None:
        session.stop()


def pytest_collection_finish(session):
    users = [it for it in session.items if "retrying_spark" in getattr(it, "fixturenames", ())]
    _state["last_user"] = users[-1].nodeid if users else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if _state["session"] is not None and item.nodeid == _state["last_user"]:
        _stop()
