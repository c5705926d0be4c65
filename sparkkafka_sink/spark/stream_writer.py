"""Streaming writer: ``df.writeStream.format("pyprod-kafka")``.

Each micro-batch runs the same task as a batch write; ``commit``/``abort`` log per
micro-batch.  At-least-once (the default), a failed micro-batch is re-run by Spark from the
checkpoint, so its records can appear twice in Kafka, as with Spark's Kafka sink.
Exactly-once, ``commit`` completes the batch's transactions once, recording it beside the
checkpoint (``driver/transactions.py``).  Output mode ``complete`` re-sends the whole result
every batch; that is allowed, since nothing has to be truncated.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamArrowWriter

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.spark.driver.commit import abort_write, commit_write
from sparkkafka_sink.spark.writer import SinkWriter


class PyprodKafkaStreamWriter(SinkWriter, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId):
        try:
            commit_write(messages, self.plan, batchId)
        except KafkaError as failed:
            raise failed.with_traceback(None) from None  # it says what is visible and what is not

    def abort(self, messages, batchId):
        abort_write(messages, self.plan, batchId)
