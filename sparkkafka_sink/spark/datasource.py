"""The ``pyprod-kafka`` DataSource: plans the write on the driver, hands out writers.

Spark finds it without registration through the top-level module
``pyspark_pyprod_kafka`` (its ``DefaultSource``).  ``register(spark)`` replaces
it in the session by a subclass carrying the metrics accumulator; see
``registration.py`` for why a subclass.  Spark imports this module in
every data-source lookup, in a Python process of its own, and plans a write in
another: the planning (options, the producer's configuration, the schema
checks, the writers) is imported when a write is planned, not here.

Spark shows a Python exception of the planning with its whole traceback: a refusal
(``SinkValidationError``, which says what to fix) is raised from here without the sink's
inner frames, so the user reads a few lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:  # imported where a write is planned, not at Spark's lookup
    from pyspark.sql.types import StructType

    from sparkkafka_sink.spark.stream_writer import PyprodKafkaStreamWriter
    from sparkkafka_sink.spark.writer import PyprodKafkaWriter

FORMAT = "pyprod-kafka"


class PyprodKafkaDataSource(DataSource):
    """Write-only source.  See README for the options and the column contract."""

    #: Set on the per-session subclass made by ``register(spark)``.
    metrics_total = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _metrics(self) -> dict:
        """Where the write's metrics go: the accumulator of the subclass ``register(spark)`` made,
        or the directory it named where Spark kept this class (``spark/metrics_drop.py``)."""
        if type(self).metrics_total is not None:
            return {"metrics_total": type(self).metrics_total}
        from sparkkafka_sink.spark.metrics_drop import drop_of_context

        return {"metrics_drop": drop_of_context()}

    def writer(self, schema: StructType, overwrite: bool) -> PyprodKafkaWriter:
        from sparkkafka_sink.spark.driver.planning import plan_write
        from sparkkafka_sink.spark.driver.validation import check_save_mode
        from sparkkafka_sink.spark.sink_errors import SinkValidationError
        from sparkkafka_sink.spark.writer import PyprodKafkaWriter

        try:
            check_save_mode(overwrite)
            return PyprodKafkaWriter(plan_write(self.options, schema), **self._metrics())
        except SinkValidationError as refused:
            raise refused.with_traceback(None) from None  # what to fix, not the sink's inner frames

    def streamWriter(self, schema: StructType, overwrite: bool) -> PyprodKafkaStreamWriter:
        from sparkkafka_sink.spark.driver.planning import plan_write
        from sparkkafka_sink.spark.sink_errors import SinkValidationError
        from sparkkafka_sink.spark.stream_writer import PyprodKafkaStreamWriter

        try:  # overwrite is True for output mode "complete": Kafka just receives the rows again
            return PyprodKafkaStreamWriter(plan_write(self.options, schema, streaming=True), **self._metrics())
        except SinkValidationError as refused:
            raise refused.with_traceback(None) from None  # what to fix, not the sink's inner frames
