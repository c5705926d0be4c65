"""Spark layer: the ``pyprod-kafka`` DataSource, its writers, validation and metrics."""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # say which extra brings it, not just "No module named 'pyspark'"
    raise ImportError(
        "sparkkafka_sink.spark needs pyspark (>= 4.0): pip install 'sparkkafka-sink[spark]' for the sink, "
        "or 'sparkkafka-sink[demo]' to also run the demo and examples on an embedded broker "
        f"(from a checkout: pip install '.[spark]'); the producer alone works without it ({exc})") from exc

from sparkkafka_sink.spark.datasource import FORMAT, PyprodKafkaDataSource
from sparkkafka_sink.spark.sink_metrics import SinkMetrics
from sparkkafka_sink.spark.registration import register
from sparkkafka_sink.spark.validation import SinkValidationError

__all__ = ["FORMAT", "PyprodKafkaDataSource", "SinkMetrics", "SinkValidationError", "SinkWriteError", "register"]


def __getattr__(name):
    if name == "SinkWriteError":  # lazy: pulls in the task module and pyarrow
        from sparkkafka_sink.spark.write_task import SinkWriteError

        return SinkWriteError
    raise AttributeError(f"module 'sparkkafka_sink.spark' has no attribute {name!r}")
