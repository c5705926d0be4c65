"""Batch writer: ``df.write.format("pyprod-kafka").mode("append").save()``.

Built on the driver by ``DataSource.writer()`` and pickled into every task: ``write()`` runs in
the tasks (``task/``), ``commit()``/``abort()`` back on the driver (``driver/write_end.py``), in a
process that unpickles the writer and so imports this module -- which therefore imports the
task package only inside ``write()``: the driver's processes never load pyarrow, numpy or the
producer.

Spark shows an exception raised here with its whole Python traceback: the sink's errors say what
happened and what to do, so they are raised from these entry points without the inner frames.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.spark.commit_message import CommitMessages, TaskCommitMessage, task_messages
from sparkkafka_sink.spark.driver.write_end import abort_write, commit_write
from sparkkafka_sink.spark.plan import WritePlan
from sparkkafka_sink.spark.sink_errors import SinkWriteError

if TYPE_CHECKING:  # the driver's processes load neither
    import pyarrow as pa
    from pyspark.accumulators import Accumulator


class SinkWriter:
    """What the batch and the streaming writer share: the plan, the accumulator, the task.

    ``metrics_total`` is the session's metrics accumulator when the source was registered
    with ``sparkkafka_sink.register(spark)``, else None; ``metrics_drop`` the directory the
    driver's end of the write puts the tasks' metrics in where Spark gave the registration no
    accumulator channel (``metrics_drop.py``), else None.
    """

    def __init__(self, plan: WritePlan, metrics_total: Accumulator | None = None, metrics_drop: str | None = None):
        self.plan = plan
        self.metrics_total = metrics_total
        self.metrics_drop = metrics_drop

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommitMessage:
        from sparkkafka_sink.spark.task.task_info import TaskInfo  # in a task: the heavy half
        from sparkkafka_sink.spark.task.write_task import run_write_task

        try:
            return run_write_task(iterator, self.plan, self.metrics_total, TaskInfo.current())
        except SinkWriteError as failed:
            raise failed.with_traceback(None) from None  # it names the rows and the cause

    def _drop_metrics(self, messages: CommitMessages) -> None:
        """Without an accumulator: the finished tasks' metrics, as the accumulator counts them."""
        if self.metrics_drop is not None:
            from sparkkafka_sink.spark.metrics_drop import MetricsDrop
            from sparkkafka_sink.spark.sink_metrics import merged

            MetricsDrop(self.metrics_drop).put(merged(m.metrics for m in messages if m is not None))


class PyprodKafkaWriter(SinkWriter, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        mine = task_messages(messages)
        self._drop_metrics(mine)
        try:
            commit_write(mine, self.plan)
        except KafkaError as failed:
            raise failed.with_traceback(None) from None  # it says what is visible and what is not

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        mine = task_messages(messages)
        self._drop_metrics(mine)
        abort_write(mine, self.plan)
