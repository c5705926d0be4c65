"""register(spark): one handle per session; under Spark Connect metrics are off, writes unaffected."""

from __future__ import annotations

import pytest

import sparkkafka_sink
from sparkkafka_sink.spark import PyprodKafkaDataSource


@pytest.mark.pyspark_lines
def test_register_is_idempotent_per_session(spark, sink_metrics):
    assert sparkkafka_sink.register(spark) is sink_metrics
    assert sink_metrics.enabled


def test_registered_class_pickles_by_value_with_its_accumulator(spark, sink_metrics, tmp_path):
    """Spark pickles the registered class with cloudpickle: it must travel by value (it is not
    importable by name), so another process gets the accumulator (as writer() and tasks do)."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from sparkkafka_sink.spark import registration

    acc = sink_metrics.total
    dynamic = registration._registered[id(spark)][2]  # the class register(spark) made
    assert dynamic.metrics_total is acc and dynamic is not PyprodKafkaDataSource
    (tmp_path / "cls.pkl").write_bytes(cloudpickle.dumps(dynamic))
    code = ("import pickle, sys; cls = pickle.loads(open(sys.argv[1], 'rb').read()); "
            "print(cls.name(), cls.metrics_total.aid, cls.__mro__[1].__name__)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cls.pkl")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pyprod-kafka", str(acc.aid), "PyprodKafkaDataSource"]


def test_where_spark_keeps_the_auto_discovered_source_metrics_travel_in_commit_messages(plain_session, kafka):
    """pyspark 4.0 refuses to shadow the auto-discovered name and gives its tasks no accumulator
    channel: register() then names a metrics directory in the context's files (what it does there,
    done here by hand on a Spark that would have let it shadow), and the plain class's writes --
    batch and streaming commits alike -- count in it exactly."""
    from pyspark.sql import functions as F
    from readback import read_records

    from sparkkafka_sink.spark.registration import _context_metrics

    metrics = _context_metrics(plain_session.sparkContext)
    assert metrics.enabled and metrics.total is None
    before = metrics.snapshot()
    topic = kafka.create_topic(partitions=2)
    (plain_session.range(250, numPartitions=3).select(F.col("id").cast("string").alias("value"))
     .write.format("pyprod-kafka").mode("append")
     .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", topic).save())
    assert len(read_records(kafka, topic, expected_count=250)) == 250
    after = metrics.snapshot()
    assert after["records_sent"] - before["records_sent"] == 250
    assert after["write_tasks"] - before["write_tasks"] == 3
    assert _context_metrics(plain_session.sparkContext) is metrics  # one per context


class _Recorder:
    def __init__(self):
        self.registered = []

    def register(self, cls):
        self.registered.append(cls)


def test_spark_connect_session_gets_disabled_metrics():
    ConnectSession = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    session = ConnectSession()
    session.dataSource = _Recorder()
    metrics = sparkkafka_sink.register(session)
    assert not metrics.enabled
    assert session.dataSource.registered == [PyprodKafkaDataSource]  # plain class: nothing to pickle
    assert metrics.snapshot()["records_sent"] == 0 and metrics.micro_batches() == []
