"""sparkkafka_sink: a PySpark sink (format ``pyprod-kafka``) with its own Python Kafka producer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkkafka_sink.errors import (
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
from sparkkafka_sink.lazy_exports import lazy_exports
from sparkkafka_sink.version import __version__

if TYPE_CHECKING:  # what __getattr__ loads on first use, for type checkers and IDEs
    from sparkkafka_sink.otel.spans import traceparent
    from sparkkafka_sink.producer import (
        BulkFuture,
        BulkResult,
        BulkSendError,
        FutureRecordMetadata,
        PreparedTransaction,
        Producer,
        RecordMetadata,
        abort_lingering,
        complete_transaction,
    )
    from sparkkafka_sink.spark import SinkMetrics, register

__all__ = [
    "BrokerResponseError",
    "BufferExhaustedError",
    "BulkFuture",
    "BulkResult",
    "BulkSendError",
    "ConfigError",
    "FutureRecordMetadata",
    "InvalidHeaderError",
    "InvalidPartitionError",
    "InvalidRecordError",
    "InvalidRecordTimestampError",
    "InvalidTopicError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "PreparedTransaction",
    "Producer",
    "ProducerClosedError",
    "ProtocolError",
    "RecordMetadata",
    "RecordTooLargeError",
    "SerializationError",
    "SinkMetrics",
    "UnknownTopicError",
    "__version__",
    "abort_lingering",
    "complete_transaction",
    "register",
    "traceparent",
]

#: loaded on first use (``lazy_exports``): the producer's names from its package, which loads
#: each from its own module in turn
_LAZY = {
    **dict.fromkeys(("Producer", "RecordMetadata", "FutureRecordMetadata", "BulkFuture", "BulkResult",
                     "BulkSendError", "PreparedTransaction", "complete_transaction", "abort_lingering"),
                    "sparkkafka_sink.producer"),
    "register": "sparkkafka_sink.spark",
    "SinkMetrics": "sparkkafka_sink.spark",
    "traceparent": "sparkkafka_sink.otel.spans",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
