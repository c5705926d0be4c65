"""The embedded Kafka producer: facade, accumulator, buffer pool, sender, partitioners."""

from sparkkafka_sink.producer.bulk import BulkFuture, BulkResult
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.future import FutureRecordMetadata, RecordMetadata
from sparkkafka_sink.producer.producer import Producer

__all__ = ["Producer", "BulkFuture", "BulkResult", "ProducerConfig", "FutureRecordMetadata", "RecordMetadata"]
