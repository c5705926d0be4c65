"""Spark's driver JVM starts from an archive of its loaded classes (Java's class-data sharing):
every Spark driver the run starts -- the SparkSession of each test process, the jobs the crash,
schedule, submit and sign-in tests launch as processes of their own -- maps Spark's classes
instead of reading, parsing and verifying about ten thousand of them from its jars.  Measured on
the two-core machine (2026-12-07, a local[2] session, a 1,000-row job): 10 CPU s and 8 s wall per
start with the quick compiler alone, 5 CPU s and 4 s with the archive.

The archive is made once per pyspark installation and JDK (the key: ``java -version`` and the
names, sizes and times of pyspark's jars) by a driver that runs a small workload and dumps what
it loaded when it exits (``-XX:ArchiveClassesAtExit``), and kept beside the Maven jars
(``$SPARKKAFKA_CACHE_DIR`` or ``~/.cache/sparkkafka-sink``, ``spark-class-archive/``; the
:data:`KEEP` used last are kept).  A run
that finds none makes it in the background while its first tests run; the drivers that start
before it is in place start without it.  The JVM checks an archive against its class path
itself and ignores one that does not match (a driver with ``spark.driver.extraClassPath``): the
archive only ever saves time.

``python spark_class_archive.py PATH`` is the workload: it writes the archive to PATH.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from sparkkafka_sink.testing.apache_kafka import cache_dir

#: archives kept in the cache: the main suite's and each older pyspark line's, and a spare
KEEP = 6


def _key() -> str | None:
    """Which pyspark and JDK an archive is for, or None without either."""
    try:
        import pyspark
        env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")}
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, env=env).stderr
    except (ImportError, OSError, subprocess.SubprocessError):
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    if not jars.is_dir():
        return None
    digest = hashlib.sha256(java.encode())
    for jar in sorted(jars.iterdir()):
        stat = jar.stat()
        digest.update(f"{jar.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def start() -> tuple[str | None, subprocess.Popen | None]:
    """The JVM option that makes Spark's drivers use the archive (None without pyspark or
    Java), and the process making the archive when it is not made yet (stop it when the run
    ends before it does)."""
    key = _key()
    if key is None:
        return None, None
    path = cache_dir() / "spark-class-archive" / f"{key}.jsa"
    option = f"-XX:SharedArchiveFile={path}"
    if path.is_file():
        os.utime(path)  # used now: kept by the pruning below
        return option, None
    path.parent.mkdir(parents=True, exist_ok=True)
    for partial in path.parent.glob("*.partial"):  # a run ended (or was killed) before its archive was made
        if time.time() - partial.stat().st_mtime > 3600:
            partial.unlink(missing_ok=True)
    # ~160 MB each, and every fresh virtualenv (a CI clone's) is a new key: the ones used last are kept
    for old in sorted(path.parent.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP - 1:]:
        old.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    maker = subprocess.Popen([sys.executable, __file__, str(path)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    return option, maker


def _make(path: Path) -> None:
    """Run the workload in a driver that dumps its classes on exit, then put the archive at
    ``path`` (written beside it first: a driver starting meanwhile finds none, never half)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    os.environ["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={partial}"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceWriter, WriterCommitMessage

    class Discard(DataSource):
        @classmethod
        def name(cls):
            return "discard"

        def writer(self, schema, overwrite):
            return DiscardWriter()

    class DiscardWriter(DataSourceWriter):
        def write(self, iterator):
            for _ in iterator:
                pass
            return WriterCommitMessage()

    spark = (SparkSession.builder.master("local[2]").appName("spark-class-archive")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.dataSource.register(Discard)
    df = spark.range(0, 1000, numPartitions=2).selectExpr("cast(id as string) as value", "id % 3 as key")
    df.mapInArrow(lambda batches: batches, df.schema).groupBy("key").count().collect()
    df.write.format("discard").mode("append").save()
    spark.createDataFrame([("a", 1)], "k string, v int").collect()
    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the JVM writes the archive as it exits: wait for it
        proc.stdin.close()
        proc.wait(300)
    if partial.is_file() and partial.stat().st_size > 0:
        partial.replace(path)
    else:
        partial.unlink(missing_ok=True)


if __name__ == "__main__":
    _make(Path(sys.argv[1]))
