"""sparkkafka_sink: a PySpark sink (format ``pyprod-kafka``) with its own Python Kafka producer."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from sparkkafka_sink.version import __version__

if TYPE_CHECKING:  # what __getattr__ loads on first use, for type checkers and IDEs
    from sparkkafka_sink.producer.bulk import BulkFuture, BulkResult, BulkSendError
    from sparkkafka_sink.producer.future import FutureRecordMetadata, RecordMetadata
    from sparkkafka_sink.producer.handover import PreparedTransaction, abort_lingering, complete_transaction
    from sparkkafka_sink.producer.producer import Producer
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
]

#: Lazy: importing the package must not start Spark or pull in the producer's threads, numpy
#: and pyarrow; each name's module is imported when the name is first used.
_LAZY = {
    "Producer": "sparkkafka_sink.producer.producer",
    "RecordMetadata": "sparkkafka_sink.producer.future",
    "FutureRecordMetadata": "sparkkafka_sink.producer.future",
    "BulkFuture": "sparkkafka_sink.producer.bulk",
    "BulkResult": "sparkkafka_sink.producer.bulk",
    "BulkSendError": "sparkkafka_sink.producer.bulk",
    "PreparedTransaction": "sparkkafka_sink.producer.handover",
    "complete_transaction": "sparkkafka_sink.producer.handover",
    "abort_lingering": "sparkkafka_sink.producer.handover",
    "register": "sparkkafka_sink.spark",
    "SinkMetrics": "sparkkafka_sink.spark",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sparkkafka_sink' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
