"""Batch writer: ``df.write.format("pyprod-kafka").mode("append").save()``."""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceArrowWriter

from sparkkafka_sink.spark.commit import abort_summary, commit_summary, log_line
from sparkkafka_sink.spark.write_task import WritePlan, run_write_task


class PyprodKafkaWriter(DataSourceArrowWriter):
    """Built on the driver by ``DataSource.writer()``, pickled into every task.

    ``metrics_total`` is the session's metrics accumulator when the source was
    registered with ``sparkkafka_sink.register(spark)``, else None.
    """

    def __init__(self, plan: WritePlan, metrics_total=None):
        self.plan = plan
        self.metrics_total = metrics_total

    def write(self, iterator):
        return run_write_task(iterator, self.plan, self.metrics_total)

    def commit(self, messages):
        options = self.plan.options if self.plan is not None else None
        if options is not None and options.exactly_once:
            from sparkkafka_sink.spark import transactions

            text = (transactions.commit_all(messages, options) if options.batch_id is None
                    else transactions.commit_micro_batch(messages, options.batch_id, options))
            log_line(logging.INFO, "pyprod-kafka: exactly-once: " + text)
        log_line(logging.INFO, commit_summary(messages))

    def abort(self, messages):
        options = self.plan.options if self.plan is not None else None
        if options is not None and options.exactly_once:
            from sparkkafka_sink.spark import transactions

            text = (transactions.abort_all(messages, options) if options.batch_id is None
                    else transactions.abort_micro_batch(messages, options.batch_id, options))
            log_line(logging.WARNING, "pyprod-kafka: exactly-once: " + text)
            return
        log_line(logging.WARNING, abort_summary(messages))
