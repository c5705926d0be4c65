"""What the sink raises: the driver refuses to start a write, or a task could not deliver.

Both sides raise them (``options`` and the driver's checks the first, the write tasks the
second), and users catch them by ``sparkkafka_sink.spark``'s names.
"""

from __future__ import annotations

from sparkkafka_sink.errors import ConfigError, KafkaError

#: every message of the sink starts with it, so a line in Spark's log says where it came from
PREFIX = "pyprod-kafka: "


class SinkValidationError(ConfigError):
    """The write cannot start: bad schema, options or save mode."""

    def __init__(self, message: str):
        super().__init__(PREFIX + message)


class SinkWriteError(KafkaError):
    """A write task could not deliver every record; the message says which and where."""
