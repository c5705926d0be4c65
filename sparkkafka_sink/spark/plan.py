"""The plan of a write: decided on the driver, pickled into the writer, read by every task.

``SinkOptions`` (``options.py``) says where and how to write; ``ColumnLayout`` where each Kafka
column is in the Arrow batches Spark hands the tasks (``driver/validation.py`` finds them); a
``SerializerSpec`` how a key or value written as Avro, JSON or Protobuf becomes bytes
(``driver/schema_plan.py`` plans it, resolved unless its subject depends on the topic column).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkkafka_sink.serialization.serializer import SerializerSpec
from sparkkafka_sink.spark.options import SinkOptions


@dataclass(frozen=True)
class ColumnLayout:
    """Actual field names of the Kafka columns present (None when absent)."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None
    timestamp: str | None = None
    #: ``traceHeaders=column``: the string column of each row's W3C traceparent
    traceparent: str | None = None


@dataclass(frozen=True)
class WritePlan:
    """Everything a task needs, decided on the driver and pickled into the writer."""

    options: SinkOptions
    layout: ColumnLayout
    #: how the key and the value are serialized (None: written as they are); resolved on the
    #: driver, or by the tasks per topic when the subject depends on the topic column's values
    key_serializer: SerializerSpec | None = None
    value_serializer: SerializerSpec | None = None
    #: when the driver planned the write (wall clock, ms; 0: unknown): under exactly-once every
    #: task's transaction must still be open when the driver commits, ``transaction.timeout.ms``
    #: after it began at most
    planned_at_ms: float = 0.0
