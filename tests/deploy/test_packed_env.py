"""Deployment on a cluster whose Python does not have the package (issue 29): the project's wheel
in a venv packed with venv-pack, shipped with ``spark-submit --archives env.tar.gz#env`` to a Spark
standalone cluster (client mode), written to Apache Kafka through ``format("pyprod-kafka")`` and
read back with confluent-kafka.  The commands are docs/deployment.md's, "The tested recipe".

What proves the executors ran the archive's Python: the worker's own Python cannot import the
package (checked first); the job asserts, in a ``mapPartitions`` on the executors, that
``sys.executable`` is ``<executor dir>/env/bin/python`` and that ``sparkkafka_sink`` comes from
there; and every Python process the executors started, the sink's write tasks included, recorded
the same (``executor_probe/sitecustomize.py``, on the worker's PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink.testing.brokers import create_topics

SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
JOB = Path(__file__).with_name("packed_env_job.py")
ROWS = 1000

pytestmark = [
    pytest.mark.spark,  # in processes of their own: a standalone cluster and spark-submit
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None,
                       reason="java is not on PATH: the Spark standalone master, worker and executors are JVMs"),
]


def submit_env(cluster) -> dict:
    """The shell spark-submit runs in: ``PYSPARK_PYTHON=./env/bin/python`` and no other Python
    setting (the suite's own PYSPARK_DRIVER_PYTHON would send the sink's tasks to this venv)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_") and k != "PYTHONPATH"}
    return dict(env, PYSPARK_PYTHON="./env/bin/python", SPARK_HOME=str(cluster.spark_home), SPARK_LOCAL_IP="127.0.0.1")


def probe_records(cluster) -> list:
    """What each Python process the executors started recorded (``executor_probe``)."""
    return [json.loads(p.read_text()) for p in sorted(cluster.probe_dir.glob("*.json"))]


def check_worker_python_lacks_the_package(cluster) -> None:
    """The premise: a task that does not run the archive's Python cannot import the sink."""
    env = {k: v for k, v in cluster.env.items() if k != "SPARKKAFKA_PYTHON_PROBE"}
    python3 = shutil.which("python3", path=env["PATH"])
    assert python3 == f"{cluster.default_python}3", python3
    for python in (env["PYSPARK_PYTHON"], python3):
        out = subprocess.run([python, "-c", "import sparkkafka_sink"], env=env, cwd=cluster.work_dir,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "No module named 'sparkkafka_sink'" in out.stderr, (python, out.stderr)


def test_packed_venv_on_standalone_cluster(packed_env, standalone_cluster, apache_kafka, tmp_path):
    check_worker_python_lacks_the_package(standalone_cluster)
    bootstrap = apache_kafka.bootstrap_servers
    auto_topic, registered_topic = f"deploy-auto-{tmp_path.name}", f"deploy-registered-{tmp_path.name}"
    create_topics(bootstrap, {auto_topic: 2, registered_topic: 2})
    submit_dir = tmp_path / "submit"
    submit_dir.mkdir()
    (submit_dir / "env").symlink_to(packed_env.venv, target_is_directory=True)  # the driver's ./env

    cmd = [str(SPARK_SUBMIT), "--master", standalone_cluster.url, "--deploy-mode", "client",
           "--archives", f"{packed_env.archive}#env", "--conf", "spark.ui.enabled=false",
           str(JOB), bootstrap, auto_topic, registered_topic, str(ROWS)]
    out = subprocess.run(cmd, cwd=submit_dir, env=submit_env(standalone_cluster), capture_output=True, text=True,
                         timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-8000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("DEPLOY_RESULT ")][-1]
    result = json.loads(line.split(" ", 1)[1])

    # the driver: the venv, reached as ./env where spark-submit ran
    assert result["driver"]["executable"] == str(submit_dir / "env" / "bin" / "python")
    assert result["driver"]["package"].startswith(str(submit_dir / "env") + os.sep)
    # the executors (the job asserted it on them too): the archive, unpacked in their directory
    work = str(standalone_cluster.work_dir) + os.sep
    for where in result["executors"]:
        assert where["cwd"].startswith(work)
        assert where["executable"] == os.path.join(where["cwd"], "env", "bin", "python")
    # every Python the executors started, the sink's write tasks included
    records = probe_records(standalone_cluster)
    assert any("pyspark.daemon" in r["argv"] or "pyspark.worker" in r["argv"] for r in records), records
    for r in records:
        archive = os.path.join(r["cwd"], "env")
        assert r["cwd"].startswith(work) and r["executable"] == os.path.join(archive, "bin", "python"), r
        assert r["package"].startswith(archive + os.sep), r

    assert result["metrics"]["records_sent"] == ROWS and result["metrics"]["records_failed"] == 0
    for topic in (auto_topic, registered_topic):
        records = consume_all(bootstrap, topic, expected_count=ROWS, timeout=60)
        assert sorted(int(r.key) for r in records) == list(range(ROWS))
        assert all(r.value == b"v" + r.key for r in records)
