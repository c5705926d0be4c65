"""One temporary directory per test run, removed when the run ends: nothing left in /tmp.

Everything the suite starts writes its temporary files under it: this process and every
Python child (``TMPDIR``, ``tempfile``: pytest's ``tmp_path``, the brokers' data directories),
Spark's local directories (``SPARK_LOCAL_DIRS``: ``spark-*``, ``blockmgr-*``) and every JVM
(``JAVA_TOOL_OPTIONS=-Djava.io.tmpdir``: Apache Kafka, Spark's driver, master and workers, the
Java oracle -- their ``artifacts-*`` directories and the lz4 and snappy native libraries they
unpack).  A plugin of the root conftest, configured before any other.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_ENV = ("TMPDIR", "SPARK_LOCAL_DIRS", "JAVA_TOOL_OPTIONS")
_saved: dict = {}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    root = tempfile.mkdtemp(prefix="sparkkafka-tests-")
    _saved.update(root=root, tempdir=tempfile.tempdir, **{k: os.environ.get(k) for k in _ENV})
    os.environ["TMPDIR"] = root
    os.environ["SPARK_LOCAL_DIRS"] = root
    java_options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    # -XX:-UsePerfData: a JVM the tests kill (a Spark driver, a broker) leaves no hsperfdata file
    os.environ["JAVA_TOOL_OPTIONS"] = f"{java_options} -Djava.io.tmpdir={root} -XX:-UsePerfData".strip()
    tempfile.tempdir = root  # pytest's tmp_path root too (it asks tempfile on first use)


def pytest_unconfigure(config):
    root = _saved.pop("root", None)
    if root is None:
        return
    tempfile.tempdir = _saved.pop("tempdir")
    for key in _ENV:
        value = _saved.pop(key)
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    shutil.rmtree(root, ignore_errors=True)
