"""deliveryGuarantee=exactly-once on Apache Kafka: read back with read_committed, exactly the
rows, no duplicates; a read_uncommitted control shows the aborted rows exist (the test bites).
Batch jobs run in their own process, on a standalone cluster of two executors on two hosts, with
task retries and speculation (``exactly_once_job.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka_helpers import consume_all, open_transactions

from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.transactions, pytest.mark.spark]

JOB = Path(__file__).with_name("exactly_once_job.py")
ROWS = 8000
#: four partitions of 2000 rows, in Arrow batches of 500
BATCH_ROWS = 500


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    """The batch jobs' directory: ``markers/`` (what partition 1's attempts did, where) and
    ``cluster/`` (the master's, workers' and executors' logs)."""
    return tmp_path_factory.mktemp("eos-jobs")


@pytest.fixture(scope="module")
def batch_jobs(apache_kafka, job_dir):
    """Every batch scenario in one Spark application (one start-up): ``{fault: (topic, output)}``.
    ``speculation`` goes first: the two executors are free then."""
    faults = ("speculation", "kill", "raise", "fail-job")
    topics = {fault: f"eos-{fault}-{uuid.uuid4().hex[:8]}" for fault in faults}
    create_topics(apache_kafka.bootstrap_servers, {t: 3 for t in topics.values()}, timeout=30)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    # a session of its own: on a timeout its whole group goes (the job, the master, the workers
    # and their executors)
    proc = subprocess.Popen([sys.executable, str(JOB), apache_kafka.bootstrap_servers, str(ROWS), str(job_dir),
                             *(f"{topics[f]}:{f}" for f in faults)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=420)
    except BaseException as e:
        os.killpg(proc.pid, signal.SIGKILL)  # still running (not reaped): its group is its own
        stdout, stderr = proc.communicate(timeout=30)
        if isinstance(e, subprocess.TimeoutExpired):
            pytest.fail(f"the batch jobs did not end within 420 s (logs: {job_dir}):\n{(stdout + stderr)[-3000:]}")
        raise
    out = stdout + stderr
    return {fault: (topics[fault], out) for fault in faults}


def executors(job_dir: Path, event: str) -> set:
    """The executors where a task attempt left the marker ``event``."""
    return {p.suffix[1:] for p in (job_dir / "markers").glob(f"{event}.*")}


@pytest.fixture
def topic(apache_kafka):
    name = f"eos-{uuid.uuid4().hex[:10]}"
    create_topics(apache_kafka.bootstrap_servers, {name: 3}, timeout=30)
    return name


def values(records):
    return [int(r.value) for r in records]


def assert_rows_once_losers_aborted(bootstrap: str, topic: str, uncommitted_at_least: int, bite: str) -> None:
    """read_committed shows exactly rows 0..ROWS-1; read_uncommitted at least
    ``uncommitted_at_least`` (the losing attempts' rows exist: the test bites); nothing is open."""
    committed = values(consume_all(bootstrap, topic, ROWS, isolation_level="read_committed"))
    assert sorted(committed) == list(range(ROWS)), "not exactly the rows (lost or duplicated)"
    everything = values(consume_all(bootstrap, topic, uncommitted_at_least))
    assert len(everything) >= uncommitted_at_least, bite
    assert open_transactions(bootstrap, f"{topic}-txn") == []


def test_task_failing_after_partial_send_is_retried_and_written_once(apache_kafka, batch_jobs):
    topic, out = batch_jobs["raise"]
    assert f"JOB OK {topic}" in out, out[-3000:]
    committed = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS, isolation_level="read_committed"))
    assert sorted(committed) == list(range(ROWS)), "not exactly the rows (lost or duplicated)"
    everything = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS + 1))
    assert len(everything) > ROWS, "the failed attempt wrote nothing: the test did not bite"
    assert open_transactions(apache_kafka.bootstrap_servers, f"{topic}-txn") == []


def test_failed_job_leaves_nothing_visible_and_nothing_hanging(apache_kafka, batch_jobs):
    topic, out = batch_jobs["fail-job"]
    assert f"JOB FAILED {topic}" in out, out[-3000:]
    assert consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed", timeout=30) == []
    assert len(consume_all(apache_kafka.bootstrap_servers, topic)) > 0, "nothing was written: the test did not bite"
    # nothing hanging: read_committed ending above does not show it (it stops at the last stable
    # offset, which an open transaction holds back); the coordinator's list does.  A task of
    # another partition that Spark was still killing when the driver aborted either saw the
    # write's closed marker and wrote nothing, or was fenced by the driver's sweep
    assert open_transactions(apache_kafka.bootstrap_servers, f"{topic}-txn") == []


def test_python_worker_killed_mid_write_is_retried_on_another_executor(apache_kafka, batch_jobs, job_dir):
    """The sink's Python worker of partition 1's first attempt flushes three Arrow batches and is
    SIGKILLed: it never aborts, nor returns a commit message.  Spark retries the task on the other
    executor; the driver commits the four tasks' transactions and aborts the killed one's."""
    bootstrap = apache_kafka.bootstrap_servers
    topic, out = batch_jobs["kill"]
    assert f"JOB OK {topic}" in out, out[-3000:]
    killed, retried = executors(job_dir, "kill-p1-a0-flushed"), executors(job_dir, "kill-p1-a1-start")
    assert len(killed) == 1 and len(retried) == 1 and killed != retried, f"killed on {killed}, retried on {retried}"
    assert f"4 transactions committed under '{topic}-txn', 1 left by failed or losing attempts aborted" in out, out[-3000:]
    assert_rows_once_losers_aborted(bootstrap, topic, ROWS + 3 * BATCH_ROWS,
                                    "the killed attempt's rows are not in Kafka: the test did not bite")


def test_speculative_copy_and_original_both_write_one_is_committed(apache_kafka, batch_jobs, job_dir):
    """Partition 1's first attempt waits, its rows partly sent, until Spark's speculative copy of
    it (on the other host) sent all of its own; then it goes on.  Two attempts wrote the
    partition in two open transactions; Spark keeps the first to finish, kills the other or
    denies its commit, and the driver commits the winner's and aborts the loser's."""
    bootstrap = apache_kafka.bootstrap_servers
    topic, out = batch_jobs["speculation"]
    assert f"JOB OK {topic}" in out, out[-3000:]
    original, copy = executors(job_dir, "spec-p1-a0-paused"), executors(job_dir, "spec-p1-copy-sent")
    assert len(original) == 1 and len(copy) == 1 and original != copy, f"original on {original}, copy on {copy}"
    assert f"4 transactions committed under '{topic}-txn'" in out, out[-3000:]
    assert_rows_once_losers_aborted(bootstrap, topic, ROWS + 1, "the losing attempt wrote nothing: the test did not bite")


@pytest.mark.pyspark_lines
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
