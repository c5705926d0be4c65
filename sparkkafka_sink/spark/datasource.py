"""The ``pyprod-kafka`` DataSource: validates on the driver, hands out writers.

Spark finds it without registration through the top-level module
``pyspark_pyprod_kafka`` (its ``DefaultSource``).  ``register(spark)`` replaces
it in the session by a subclass carrying the metrics accumulator; see
``registration.py`` for why a subclass.  Writer modules (and pyarrow) are
imported only when a write starts: Spark imports this module in every
data-source lookup.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.validation import check_save_mode, validate_schema

FORMAT = "pyprod-kafka"


class PyprodKafkaDataSource(DataSource):
    """Write-only source.  See README for the options and the column contract."""

    #: Set on the per-session subclass made by ``register(spark)``.
    metrics_total = None

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _plan(self, schema, streaming: bool = False):
        from sparkkafka_sink.spark.write_task import WritePlan

        options = parse_options(self.options, streaming=streaming)
        layout = validate_schema(schema, options.topic)
        if not streaming:  # Spark plans a stream's writer again each micro-batch: a broker
            # restarting then must not stop the query (the tasks ride it out within their timeouts)
            from sparkkafka_sink.spark.cluster_check import check_cluster

            check_cluster(options)
        if options.exactly_once:
            from sparkkafka_sink.spark.transactions import check_transaction_timeout

            check_transaction_timeout(options)
        return WritePlan(options=options, layout=layout)

    def writer(self, schema, overwrite: bool):
        from sparkkafka_sink.spark.writer import PyprodKafkaWriter

        check_save_mode(overwrite)
        return PyprodKafkaWriter(self._plan(schema), type(self).metrics_total)

    def streamWriter(self, schema, overwrite: bool):
        from sparkkafka_sink.spark.stream_writer import PyprodKafkaStreamWriter

        # overwrite is True for output mode "complete": Kafka just receives the rows again.
        return PyprodKafkaStreamWriter(self._plan(schema, streaming=True), type(self).metrics_total)
