"""Streaming writer: ``df.writeStream.format("pyprod-kafka")``.

Each micro-batch runs the same task as a batch write; ``commit``/``abort`` log
per micro-batch.  At-least-once (the default), a failed micro-batch is re-run by
Spark from the checkpoint, so its records can appear twice in Kafka, as with
Spark's Kafka sink.  Exactly-once, ``commit`` completes the batch's transactions
once, recording it beside the checkpoint (``spark.transactions.commit_micro_batch``).  Output mode ``complete`` re-sends the whole result every batch; that is
allowed, since nothing has to be truncated.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceStreamArrowWriter

from sparkkafka_sink.spark.commit import abort_summary, commit_summary, log_line
from sparkkafka_sink.spark.write_task import WritePlan, run_write_task


class PyprodKafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, plan: WritePlan, metrics_total=None):
        self.plan = plan
        self.metrics_total = metrics_total

    def write(self, iterator):
        return run_write_task(iterator, self.plan, self.metrics_total)

    def commit(self, messages, batchId):
        if self.plan is not None and self.plan.options.exactly_once:
            from sparkkafka_sink.spark.transactions import commit_micro_batch

            log_line(logging.INFO, "pyprod-kafka: exactly-once: " + commit_micro_batch(messages, batchId, self.plan.options))
        log_line(logging.INFO, commit_summary(messages, what=f"micro-batch {batchId}"))

    def abort(self, messages, batchId):
        if self.plan is not None and self.plan.options.exactly_once:
            from sparkkafka_sink.spark.transactions import abort_micro_batch

            log_line(logging.WARNING, "pyprod-kafka: exactly-once: " + abort_micro_batch(messages, batchId, self.plan.options))
            return
        log_line(logging.WARNING, abort_summary(messages, what=f"micro-batch {batchId}"))
