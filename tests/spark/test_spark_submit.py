"""The package as users get it: pip-installed (not the source tree), found by Spark's data-source
lookup, and a pipeline script run with spark-submit and the example configuration files, all
found in the installed package (``python -m sparkkafka_sink.examples``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from broker_kinds import KAFKA_KINDS
from readback import read_records

REPO = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")


pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark in processes of their own


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory):
    """``pip install --target`` of a copy of the project; returns the target directory."""
    base = tmp_path_factory.mktemp("installed")
    src, target = base / "src", base / "site"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, src / name)
    if not (src / "README.md").exists():
        (src / "README.md").write_text("sparkkafka-sink\n")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("sparkkafka_sink", "pyspark_pyprod_kafka"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(target), str(src)], check=True, timeout=300)
    return target


def _env(site: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(site)  # the install, not the source tree (cwd is elsewhere)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def test_installed_package_is_auto_discovered(installed_package, tmp_path):
    """What pyspark/sql/worker/lookup_data_sources.py does, in a process that only has the install."""
    code = (
        "import pkgutil, importlib, sparkkafka_sink\n"
        "from pyspark.sql.datasource import DataSource\n"
        "found = {}\n"
        "for info in pkgutil.iter_modules():\n"
        "    if info.name.startswith('pyspark_'):\n"
        "        mod = importlib.import_module(info.name)\n"
        "        if hasattr(mod, 'DefaultSource') and issubclass(mod.DefaultSource, DataSource):\n"
        "            found[mod.DefaultSource.name()] = mod.__file__\n"
        "print(found['pyprod-kafka']); print(sparkkafka_sink.__file__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(installed_package),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shim, package = out.stdout.split()
    assert shim.startswith(str(installed_package)) and package.startswith(str(installed_package))


def test_spark_submit_pipeline(installed_package, kafka, tmp_path):
    if kafka.kind != KAFKA_KINDS[0]:
        pytest.skip(f"packaging and spark-submit do not depend on the broker: run once, on {KAFKA_KINDS[0]}")
    topic = kafka.create_topic(partitions=2)
    rows = 5000

    def example(name: str) -> str:
        """The file as a pip user finds it: ``python -m sparkkafka_sink.examples NAME``."""
        out = subprocess.run([sys.executable, "-m", "sparkkafka_sink.examples", name], cwd=tmp_path,
                             env=_env(installed_package), capture_output=True, text=True, timeout=60, check=True)
        path = out.stdout.strip()
        assert path.startswith(str(installed_package)) and Path(path).is_file(), path
        return path

    cmd = [
        str(SPARK_SUBMIT), "--properties-file", example("spark-defaults.conf"), example("pipeline.py"),
        "--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic, "--rows", str(rows),
        "--producer-config", example("producer.properties"),
    ]
    out = subprocess.run(cmd, cwd=tmp_path, env=_env(installed_package), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-5000:]
    line = [ln for ln in out.stdout.splitlines() if ln.strip()][-1]  # the last line, as documented
    assert line.startswith("PIPELINE_RESULT "), out.stdout[-2000:]
    result = json.loads(line.split(" ", 1)[1])
    assert result["package"].startswith(str(installed_package))
    assert result["metrics"]["records_sent"] == rows and result["metrics"]["records_failed"] == 0
    records = read_records(kafka, topic, expected_count=rows)
    assert len(records) == rows
    assert {h for r in records for h in r.headers} == {("source", b"pipeline")}
