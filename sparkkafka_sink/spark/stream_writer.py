"""Streaming writer: ``df.writeStream.format("pyprod-kafka")``.

Each micro-batch runs the same task as a batch write; ``commit``/``abort`` log per
micro-batch.  At-least-once (the default), a failed micro-batch is re-run by Spark from the
checkpoint, so its records can appear twice in Kafka, as with Spark's Kafka sink.
Exactly-once, ``commit`` completes the batch's transactions once, recording it beside the
checkpoint (``driver/exactly_once_writes.py``).  Output mode ``complete`` re-sends the whole result
every batch; that is allowed, since nothing has to be truncated.

The tasks take Arrow batches on every pyspark: from 4.1 through ``DataSourceStreamArrowWriter``;
before it (4.0) Spark's write worker hands Arrow batches to any writer that is a
``DataSourceArrowWriter``, a stream writer included, so the writer is both there -- no row of a
micro-batch is turned into a Python object and back.
"""

from __future__ import annotations

from pyspark.sql.datasource import WriterCommitMessage

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.spark.commit_message import task_messages
from sparkkafka_sink.spark.driver.write_end import abort_write, commit_write
from sparkkafka_sink.spark.writer import SinkWriter

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _ARROW_STREAM_WRITER: tuple[type, ...] = (DataSourceStreamArrowWriter,)
except ImportError:  # pyspark 4.0: the row-based stream writer, fed Arrow as an Arrow writer
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

    _ARROW_STREAM_WRITER = (DataSourceStreamWriter, DataSourceArrowWriter)


class PyprodKafkaStreamWriter(SinkWriter, *_ARROW_STREAM_WRITER):  # type: ignore[misc]
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        mine = task_messages(messages)
        self._drop_metrics(mine)
        try:
            commit_write(mine, self.plan, batchId)
        except KafkaError as failed:
            raise failed.with_traceback(None) from None  # it says what is visible and what is not

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        mine = task_messages(messages)
        self._drop_metrics(mine)
        abort_write(mine, self.plan, batchId)
