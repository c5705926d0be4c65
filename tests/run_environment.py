"""What every process the run starts inherits: one temporary directory, removed when the run
ends, and JVMs that start cheaply.  A plugin of the root conftest, configured before any other.

* The temporary directory: this process and every Python child (``TMPDIR``, ``tempfile``:
  pytest's ``tmp_path``, the brokers' data directories), Spark's local directories
  (``SPARK_LOCAL_DIRS``: ``spark-*``, ``blockmgr-*``) and every JVM
  (``JAVA_TOOL_OPTIONS=-Djava.io.tmpdir``: Apache Kafka, Spark's driver, master and workers, the
  Java oracle -- their ``artifacts-*`` directories and the lz4 and snappy native libraries they
  unpack) write their temporary files under it: nothing is left in /tmp.
* The JVMs: the run starts more than 150 (process accounting of a run on 2026-12-07: Spark
  drivers, brokers, a Connect server, the registry, the Java oracle), most living a minute or less, on two cores that the
  suite keeps busy.  Every one compiles with the quick compiler only
  (``-XX:TieredStopAtLevel=1``: measured 2026-12-07, a Spark driver's start 15 -> 10 CPU s, a
  broker's 7.8 -> 4.6, the crash-recovery, failover and batch-write modules 17 % less wall time
  and a third less CPU), and Spark's drivers map their classes from an archive
  (``SPARK_SUBMIT_OPTS``; :mod:`spark_class_archive`).  The benchmarks start their JVMs
  without any of this.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import spark_class_archive

_ENV = ("TMPDIR", "SPARK_LOCAL_DIRS", "JAVA_TOOL_OPTIONS", "SPARK_SUBMIT_OPTS")
_saved: dict = {}
#: every JVM of the run: no optimising compiler (see above); no hsperfdata file left by a JVM
#: the tests kill (a Spark driver, a broker)
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    root = tempfile.mkdtemp(prefix="sparkkafka-tests-")
    _saved.update(root=root, tempdir=tempfile.tempdir, **{k: os.environ.get(k) for k in _ENV})
    os.environ["TMPDIR"] = root
    os.environ["SPARK_LOCAL_DIRS"] = root
    java_options = os.environ.get("JAVA_TOOL_OPTIONS", "")
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join([java_options, f"-Djava.io.tmpdir={root}", *JVM_OPTIONS]).strip()
    tempfile.tempdir = root  # pytest's tmp_path root too (it asks tempfile on first use)
    if not hasattr(config, "workerinput"):  # the run's first process (-n 2: its workers inherit it)
        option, maker = spark_class_archive.start()
        _saved["archive_maker"] = maker
        if option is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = " ".join([os.environ.get("SPARK_SUBMIT_OPTS", ""), option]).strip()


def pytest_unconfigure(config):
    root = _saved.pop("root", None)
    if root is None:
        return
    maker = _saved.pop("archive_maker", None)
    if maker is not None and maker.poll() is None:  # a short run: the archive is made by the next one
        os.killpg(maker.pid, 9)
        maker.wait()
    tempfile.tempdir = _saved.pop("tempdir")
    for key in _ENV:
        value = _saved.pop(key)
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    shutil.rmtree(root, ignore_errors=True)
