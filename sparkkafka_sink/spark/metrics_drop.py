"""The sink's metrics where no accumulator can carry them: a directory on the driver's host.

``register(spark)`` makes an accumulator and shadows the auto-discovered source with a subclass
carrying it.  Where Spark refuses that (pyspark 4.0 answers ``DATA_SOURCE_ALREADY_EXISTS`` for a
name auto-discovery registered), the auto-discovered class is the one Spark runs, and Spark gives
its tasks no accumulator channel (their updates are dropped).  The metrics then travel in the
tasks' commit messages: the driver's ``commit()``/``abort()`` process, which runs on the driver's
host, puts the finished tasks' metrics (as the accumulator would count them) into a directory the
driver reads.  The directory's path reaches Spark's planning and commit processes through the
context's files (``SparkContext.addFile``, read back with ``SparkFiles``), as a JSON file named
:data:`POINTER_FILE`.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from sparkkafka_sink.spark.sink_metrics import merged

#: the file (among the context's ``SparkFiles``) naming the directory
POINTER_FILE = "sparkkafka-sink-metrics.json"


class MetricsDrop:
    """One context's metrics directory: one file per ended write, merged when read."""

    def __init__(self, directory: str):
        self.directory = Path(directory)

    def put(self, metrics: dict) -> None:
        """Add one write's metrics (atomically: a reader sees the file whole or not at all)."""
        if not metrics:
            return
        name = uuid.uuid4().hex
        partial = self.directory / f".{name}.partial"
        partial.write_bytes(pickle.dumps(metrics))
        partial.rename(self.directory / f"{name}.metrics")

    def total(self) -> dict:
        return merged(self._writes())

    def _writes(self) -> Iterator[dict]:
        for path in sorted(self.directory.glob("*.metrics")):
            try:
                yield pickle.loads(path.read_bytes())
            except FileNotFoundError:  # cleared meanwhile
                continue

    def clear(self) -> None:
        for path in self.directory.glob("*.metrics"):
            path.unlink(missing_ok=True)

    def pointer(self) -> str:
        """A new file naming this directory, to hand to ``SparkContext.addFile``."""
        path = self.directory / POINTER_FILE
        path.write_text(json.dumps({"directory": str(self.directory)}))
        return str(path)

    @classmethod
    def new(cls) -> MetricsDrop:
        return cls(tempfile.mkdtemp(prefix="sparkkafka-sink-metrics-"))


def drop_of_context() -> str | None:
    """In a Python process Spark started for the context (planning or ending a write): the
    directory ``register`` named in the context's files, or None (not registered that way)."""
    from pyspark import SparkFiles

    try:
        with open(SparkFiles.get(POINTER_FILE)) as f:
            directory = json.load(f)["directory"]
    except Exception:  # noqa: BLE001 - no such file (or no SparkFiles here): no metrics this way
        return None
    return directory if isinstance(directory, str) and os.path.isdir(directory) else None
