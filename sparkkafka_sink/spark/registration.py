"""``register(spark)``: make the sink's metrics reachable from Spark's processes.

Why a subclass: ``DataSource.writer()`` runs in a separate Python process on
the driver, with no SparkContext, so the accumulator cannot be created there.
It is created here, on the driver, and stored as a class attribute of a
subclass made at run time.  cloudpickle pickles such a class by value (it is
not importable by name), so the accumulator travels with it to the process
that builds the writer, inside the pickled writer to every task, and the
tasks' ``add`` calls come back to this driver.  The subclass is registered in
the session under the same name, shadowing the auto-discovered class.

Where Spark refuses to shadow an auto-discovered source (pyspark 4.0 answers
``DATA_SOURCE_ALREADY_EXISTS``), the metrics come back in the commit messages
instead (``spark/metrics_drop.py``); that channel is the context's, so on such a
Spark every session of one context shares one metrics handle.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from typing import Any

from sparkkafka_sink.spark.datasource import PyprodKafkaDataSource
from sparkkafka_sink.spark.metrics_drop import MetricsDrop
from sparkkafka_sink.spark.sink_metrics import MetricsParam, SinkMetrics

_lock = threading.Lock()
_registered: dict = {}  # id(session) -> (session, SinkMetrics, registered DataSource class)
_by_context: dict = {}  # id(SparkContext) -> (SparkContext, SinkMetrics) where Spark refused the subclass


def _spark_context(spark: Any) -> Any:
    """The session's SparkContext, or None under Spark Connect (no driver-side context)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Connect raises its own "not supported" errors
        return None


def _already_exists(error: Exception) -> bool:
    """Spark refused to register a name auto-discovery registered first (pyspark 4.0)."""
    condition = getattr(error, "getCondition", None)
    return condition is not None and condition() == "DATA_SOURCE_ALREADY_EXISTS"


def register(spark: Any) -> SinkMetrics:
    """Register ``pyprod-kafka`` in ``spark`` and return its metrics handle.

    Optional: the format works without it (auto-discovery), only without
    metrics.  Calling it again for the same session returns the same handle.
    """
    with _lock:
        known = _registered.get(id(spark))
        if known is not None and known[0] is spark:
            return known[1]
        sc = _spark_context(spark)
        source_cls: type[PyprodKafkaDataSource] = PyprodKafkaDataSource
        if sc is None:
            metrics = SinkMetrics(None)
            try:
                spark.dataSource.register(source_cls)
            except Exception as refused:  # shadowing refused: the auto-discovered class is this one
                if not _already_exists(refused):
                    raise
        else:
            total = sc.accumulator({}, MetricsParam())
            source_cls = type(
                "PyprodKafkaDataSourceWithMetrics",
                (PyprodKafkaDataSource,),
                {
                    "metrics_total": total,
                    "__module__": PyprodKafkaDataSource.__module__,
                    # A qualname the module does not define: forces pickling by value.
                    "__qualname__": f"PyprodKafkaDataSource.registered_{total.aid}",
                    "__doc__": PyprodKafkaDataSource.__doc__,
                },
            )
            try:
                spark.dataSource.register(source_cls)
                metrics = SinkMetrics(total)
            except Exception as refused:  # shadowing refused: the accumulator goes by the context's files
                if not _already_exists(refused):
                    raise
                source_cls = PyprodKafkaDataSource
                metrics = _context_metrics(sc)
        _registered[id(spark)] = (spark, metrics, source_cls)
        return metrics


def _context_metrics(sc: Any) -> SinkMetrics:
    """The context's metrics carried by commit messages into a directory (``metrics_drop``)."""
    known = _by_context.get(id(sc))
    if known is not None and known[0] is sc:
        return known[1]
    drop = MetricsDrop.new()
    atexit.register(shutil.rmtree, drop.directory, True)  # executors fetch the pointer from here
    sc.addFile(drop.pointer())
    metrics = SinkMetrics(drop=drop)
    _by_context[id(sc)] = (sc, metrics)
    return metrics

