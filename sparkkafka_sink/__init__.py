"""sparkkafka_sink: a PySpark sink (format ``pyprod-kafka``) with its own Python Kafka producer."""

from __future__ import annotations

from sparkkafka_sink.errors import (  # noqa: F401
    BrokerResponseError,
    BufferExhaustedError,
    ConfigError,
    InvalidHeaderError,
    InvalidPartitionError,
    InvalidRecordError,
    InvalidRecordTimestampError,
    InvalidTopicError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProtocolError,
    RecordTooLargeError,
    SerializationError,
    UnknownTopicError,
)

from sparkkafka_sink.version import __version__  # noqa: F401


def __getattr__(name):
    # Lazy: importing the package must not start Spark or pull in the producer's threads.
    if name in ("Producer", "RecordMetadata", "FutureRecordMetadata", "BulkFuture", "BulkResult",
                "BulkSendError"):
        from sparkkafka_sink import producer

        return getattr(producer, name)
    if name in ("PreparedTransaction", "complete_transaction", "abort_lingering"):
        from sparkkafka_sink.producer import handover

        return getattr(handover, name)
    if name in ("register", "SinkMetrics"):
        from sparkkafka_sink import spark

        return getattr(spark, name)
    raise AttributeError(f"module 'sparkkafka_sink' has no attribute {name!r}")
