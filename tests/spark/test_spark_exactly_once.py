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


def run_job(bootstrap: str, topic: str, fault: str) -> str:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, str(JOB), bootstrap, topic, str(ROWS), fault], env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.stdout + proc.stderr[-3000:]


@pytest.fixture
def topic(apache_kafka):
    name = f"eos-{uuid.uuid4().hex[:10]}"
    create_topics(apache_kafka.bootstrap_servers, {name: 3}, timeout=30)
    return name


def values(records):
    return [int(r.value) for r in records]


def test_task_failing_after_partial_send_is_retried_and_written_once(apache_kafka, topic):
    out = run_job(apache_kafka.bootstrap_servers, topic, "raise")
    assert "JOB OK" in out, out
    committed = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS, isolation_level="read_committed"))
    assert sorted(committed) == list(range(ROWS)), "not exactly the rows (lost or duplicated)"
    everything = values(consume_all(apache_kafka.bootstrap_servers, topic, ROWS + 1))
    assert len(everything) > ROWS, "the failed attempt wrote nothing: the test did not bite"


def test_failed_job_leaves_nothing_visible_and_nothing_hanging(apache_kafka, topic):
    out = run_job(apache_kafka.bootstrap_servers, topic, "fail-job")
    assert "JOB FAILED" in out, out
    # read_committed ends (the last stable offset moved past everything: no hanging transaction)
    assert consume_all(apache_kafka.bootstrap_servers, topic, isolation_level="read_committed", timeout=30) == []
    assert len(consume_all(apache_kafka.bootstrap_servers, topic)) > 0, "nothing was written: the test did not bite"
