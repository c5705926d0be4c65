"""Kafka record batch v2: varints, CRC-32C, codecs, the row builder and the Arrow encoder.

``arrow`` is not imported here, so the producer's row path does not pay for pyarrow's import.
"""

from __future__ import annotations

from sparkkafka_sink.record.batch import (  # noqa: F401
    BATCH_OVERHEAD,
    DecodedBatch,
    DecodedRecord,
    RecordBatchBuilder,
    decode_batches,
    estimate_batch_size_upper_bound,
    estimate_record_size,
    set_producer_state,
)
from sparkkafka_sink.record.compression import CompressionType, compress, decompress  # noqa: F401
