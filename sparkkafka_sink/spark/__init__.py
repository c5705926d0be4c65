"""Spark layer: the ``pyprod-kafka`` DataSource, its writers, validation and metrics.

Spark's entry points are here (``datasource``, ``writer``, ``stream_writer``, ``registration``);
below them ``driver/`` holds what runs on the driver (planning and checking a write, ending it:
commit summaries and the exactly-once transactions), ``task/`` what runs in a write task (rows
to the producer, delivery, bad rows, pacing, the producer pool); neither imports the other
(``tests/unit/test_layers.py``).  Both read the modules beside this one: the plan the driver pickles into the tasks (``plan``, ``options``), what a task reports
back (``commit_message``), the metrics accumulator (``sink_metrics``) and the errors.
"""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # say which extra brings it, not just "No module named 'pyspark'"
    raise ImportError(
        "sparkkafka_sink.spark needs pyspark (>= 4.0): pip install 'sparkkafka-sink[spark]' for the sink, "
        "or 'sparkkafka-sink[demo]' to also run the demo and examples on an embedded broker "
        f"(from a checkout: pip install '.[spark]'); the producer alone works without it ({exc})") from exc

from sparkkafka_sink.spark.datasource import FORMAT, PyprodKafkaDataSource
from sparkkafka_sink.spark.registration import register
from sparkkafka_sink.spark.sink_errors import SinkValidationError, SinkWriteError
from sparkkafka_sink.spark.sink_metrics import SinkMetrics

__all__ = ["FORMAT", "PyprodKafkaDataSource", "SinkMetrics", "SinkValidationError", "SinkWriteError", "register"]
