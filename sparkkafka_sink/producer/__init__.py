"""The embedded Kafka producer: facade, accumulator, buffer pool, sender, partitioners.

Names are loaded on first use so that ``producer.config`` (validated on the Spark driver)
does not pull in numpy/pyarrow through the bulk path.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Producer": "sparkkafka_sink.producer.producer",
    "ProducerConfig": "sparkkafka_sink.producer.config",
    "FutureRecordMetadata": "sparkkafka_sink.producer.future",
    "RecordMetadata": "sparkkafka_sink.producer.future",
    "BulkFuture": "sparkkafka_sink.producer.bulk",
    "BulkResult": "sparkkafka_sink.producer.bulk",
    "BulkSendError": "sparkkafka_sink.producer.bulk",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sparkkafka_sink.producer' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
