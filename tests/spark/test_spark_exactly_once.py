"""deliveryGuarantee=exactly-once on Apache Kafka: read back with read_committed, exactly the
rows, no duplicates; a read_uncommitted control shows the aborted rows exist (the test bites).
Jobs run in their own process with task retries (``exactly_once_job.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kafka_helpers import consume_all
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.transactions, pytest.mark.spark]

JOB = Path(__file__).with_name("exactly_once_job.py")
ROWS = 8000


@pytest.fixture(scope="module")
def batch_jobs(apache_kafka):
    """Both batch scenarios in one Spark process (one start-up): ``{fault: (topic, output)}``."""
    faults = ("raise", "fail-job")
    topics = {fault: f"eos-{fault}-{uuid.uuid4().hex[:8]}" for fault in faults}
    create_topics(apache_kafka.bootstrap_servers, {t: 3 for t in topics.values()}, timeout=30)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, str(JOB), apache_kafka.bootstrap_servers, str(ROWS),
                           *(f"{topics[f]}:{f}" for f in faults)],
                          env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr[-3000:]
    return {fault: (topics[fault], out) for fault in faults}


@pytest.fixture
def topic(apache_kafka):
    name = f"eos-{uuid.uuid4().hex[:10]}"
    create_topics(apache_kafka.bootstrap_servers, {name: 3}, timeout=30)
    return name


def values(records):
    return [int(r.value) for r in records]


def test_task_failing_after_partial_send_is_retried_and_written_once(apache_kafka, batch_jobs):
    topic, out = batch_jobs["raise"]
    assert f"JOB OK {topic}" in out, out
    committed = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS, isolation_level="read_committed"))
    assert sorted(committed) == list(range(ROWS)), "not exactly the rows (lost or duplicated)"
    everything = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS + 1))
    assert len(everything) > ROWS, "the failed attempt wrote nothing: the test did not bite"


def test_failed_job_leaves_nothing_visible_and_nothing_hanging(apache_kafka, batch_jobs):
    topic, out = batch_jobs["fail-job"]
    assert f"JOB FAILED {topic}" in out, out
    # read_committed ends (the last stable offset moved past everything: no hanging transaction)
    assert consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed", timeout=30) == []
    assert len(consume_all(apache_kafka.bootstrap_servers, topic)) > 0, "nothing was written: the test did not bite"


STREAM_JOB = Path(__file__).with_name("exactly_once_stream_job.py")


def _stream(bootstrap, topic, checkpoint, min_batch, pause=None, timeout=300):
    """Run the streaming job; with ``pause`` ("before"/"after", batch, marker) kill its whole
    process group (the driver) once the commit of that batch stopped at that point."""
    import signal
    import time

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("SPARKKAFKA_SINK_TEST_PAUSE_COMMIT", None)
    if pause is not None:
        env["SPARKKAFKA_SINK_TEST_PAUSE_COMMIT"] = ":".join(str(x) for x in pause)
    proc = subprocess.Popen([sys.executable, str(STREAM_JOB), bootstrap, topic, str(checkpoint), str(min_batch)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        if pause is None:
            out, _ = proc.communicate(timeout=timeout)
            return out
        marker = Path(pause[2])
        deadline = time.monotonic() + timeout
        while not marker.exists():  # observed: the commit of that batch reached the point
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the commit never reached the pause point"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver dies there: JVM and Python alike
        proc.wait(30)
        return "KILLED"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_streaming_driver_killed_around_the_commit_then_restarted(apache_kafka, topic, tmp_path):
    """The driver is killed after the tasks of micro-batch 2 prepared but before its commit, then
    (restarted) after the commit of micro-batch 4 but before Spark recorded it; each restart
    replays the batch.  Every row once, none lost: read_committed shows exactly 0..n-1."""
    bootstrap = apache_kafka.bootstrap_servers
    checkpoint = tmp_path / "checkpoint"
    assert _stream(bootstrap, topic, checkpoint, 3, pause=("before", 2, tmp_path / "paused-2")) == "KILLED"
    assert _stream(bootstrap, topic, checkpoint, 5, pause=("after", 4, tmp_path / "paused-4")) == "KILLED"
    out = _stream(bootstrap, topic, checkpoint, 6)
    assert "REACHED" in out, out[-3000:]
    committed = values(consume_all(bootstrap, topic, isolation_level="read_committed", timeout=60))
    assert committed, "nothing committed"
    assert len(committed) == len(set(committed)), "a row was written twice"
    assert sorted(committed) == list(range(len(committed))), "rows were lost"
    assert (checkpoint / "pyprod-kafka" / "4.done").exists()
    everything = values(consume_all(bootstrap, topic, timeout=60))
    assert len(everything) > len(committed), "no replayed rows were written: the test did not bite"


def test_foreach_batch_with_batch_id_writes_a_replayed_batch_once(spark, apache_kafka, topic, tmp_path):
    """The documented foreachBatch pattern: the batch id (and the query's checkpoint) passed as
    options.  Spark replays a micro-batch after a crash by calling the function again with the
    same id: its rows are then aborted, not written twice."""
    from pyspark.sql import functions as F

    bootstrap = apache_kafka.bootstrap_servers
    checkpoint = str(tmp_path / "checkpoint")

    def write(batch_df, batch_id):
        (batch_df.write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("deliveryGuarantee", "exactly-once").option("batchId", batch_id)
         .option("checkpointLocation", checkpoint).save())

    first = spark.range(0, 300).select(F.col("id").cast("string").alias("value"))
    second = spark.range(300, 500).select(F.col("id").cast("string").alias("value"))
    write(first, 0)
    write(first, 0)   # the replay of micro-batch 0
    write(second, 1)
    committed = values(consume_all(bootstrap, topic, 500, isolation_level="read_committed"))
    assert sorted(committed) == list(range(500))
    assert len(values(consume_all(bootstrap, topic, 800))) == 800, "the replay wrote nothing: the test did not bite"


def test_transaction_timeout_above_the_brokers_cap_fails_on_the_driver(spark, apache_kafka, topic):
    from pyspark.sql import functions as F

    df = spark.range(10).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception) as info:
        (df.write.format("pyprod-kafka").mode("append")
         .option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers).option("topic", topic)
         .option("deliveryGuarantee", "exactly-once").option("kafka.transaction.timeout.ms", "3600000").save())
    assert "kafka.transaction.timeout.ms=3600000 is more than the brokers allow" in str(info.value)
    assert consume_all(apache_kafka.bootstrap_servers, topic) == []
