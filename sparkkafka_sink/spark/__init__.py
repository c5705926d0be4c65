"""Spark layer: the ``pyprod-kafka`` DataSource, its writers, validation and metrics."""

from __future__ import annotations

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
