"""Auto-discovery shim: Spark imports every top-level ``pyspark_*`` module and
registers its ``DefaultSource`` under ``DefaultSource.name()`` ("pyprod-kafka"),
so ``df.write.format("pyprod-kafka")`` works after ``pip install`` with no code."""

from sparkkafka_sink.spark.datasource import PyprodKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
