"""register(spark): one handle per session; under Spark Connect metrics are off, writes unaffected."""

from __future__ import annotations

import sparkkafka_sink
from sparkkafka_sink.spark import PyprodKafkaDataSource


def test_register_is_idempotent_per_session(spark, sink_metrics):
    assert sparkkafka_sink.register(spark) is sink_metrics
    assert sink_metrics.enabled


def test_registered_class_pickles_by_value_with_its_accumulator(spark, sink_metrics, tmp_path):
    """Spark pickles the registered class with cloudpickle: it must travel by value (it is not
    importable by name), so another process gets the accumulator (as writer() and tasks do)."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from sparkkafka_sink.spark.driver.registration import registered_source

    acc = sink_metrics.total
    dynamic = registered_source(spark)
    assert dynamic.metrics_total is acc and dynamic is not PyprodKafkaDataSource
    (tmp_path / "cls.pkl").write_bytes(cloudpickle.dumps(dynamic))
    code = ("import pickle, sys; cls = pickle.loads(open(sys.argv[1], 'rb').read()); "
            "print(cls.name(), cls.metrics_total.aid, cls.__mro__[1].__name__)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cls.pkl")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pyprod-kafka", str(acc.aid), "PyprodKafkaDataSource"]


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
