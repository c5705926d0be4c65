"""The embedded Kafka producer: facade, accumulator, buffer pool, sender, partitioners.

Names are loaded on first use so that ``producer.config`` (validated on the Spark driver)
does not pull in numpy/pyarrow through the bulk path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkkafka_sink.lazy_exports import lazy_exports

if TYPE_CHECKING:  # what __getattr__ loads on first use, for type checkers and IDEs
    from sparkkafka_sink.producer.bulk import BulkFuture, BulkResult, BulkSendError
    from sparkkafka_sink.producer.config import ProducerConfig
    from sparkkafka_sink.producer.future import FutureRecordMetadata, RecordMetadata
    from sparkkafka_sink.producer.handover import PreparedTransaction, abort_lingering, complete_transaction
    from sparkkafka_sink.producer.producer import (
        ColumnLike,
        HeadersColumnLike,
        IntColumnLike,
        Producer,
        RecordHeaders,
        RecordValue,
    )

__all__ = [
    "BulkFuture",
    "BulkResult",
    "BulkSendError",
    "ColumnLike",
    "FutureRecordMetadata",
    "HeadersColumnLike",
    "IntColumnLike",
    "PreparedTransaction",
    "Producer",
    "ProducerConfig",
    "RecordHeaders",
    "RecordMetadata",
    "RecordValue",
    "abort_lingering",
    "complete_transaction",
]

_LAZY = {
    "Producer": "sparkkafka_sink.producer.producer",
    "RecordValue": "sparkkafka_sink.producer.producer",
    "RecordHeaders": "sparkkafka_sink.producer.producer",
    "ColumnLike": "sparkkafka_sink.producer.producer",
    "IntColumnLike": "sparkkafka_sink.producer.producer",
    "HeadersColumnLike": "sparkkafka_sink.producer.producer",
    "ProducerConfig": "sparkkafka_sink.producer.config",
    "FutureRecordMetadata": "sparkkafka_sink.producer.future",
    "RecordMetadata": "sparkkafka_sink.producer.future",
    "BulkFuture": "sparkkafka_sink.producer.bulk",
    "BulkResult": "sparkkafka_sink.producer.bulk",
    "BulkSendError": "sparkkafka_sink.producer.bulk",
    "PreparedTransaction": "sparkkafka_sink.producer.handover",
    "complete_transaction": "sparkkafka_sink.producer.handover",
    "abort_lingering": "sparkkafka_sink.producer.handover",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
