"""KIP-714 against Apache Kafka: a broker with a client-metrics subscription receives the
producer's pushed metrics -- read by a broker-side recorder of the tests' own
(``java/TelemetryRecorder.java``: a metrics reporter the broker hands every payload it accepted,
decompressed, which it decodes with the broker's own OpenTelemetry classes) -- with true values;
``enable.metrics.push=false`` and a broker without a subscription get no push.  The subscription
is set with Java's Admin client (``java/SubscribeClientMetrics.java``), as
``kafka-client-metrics.sh`` does."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from broker_kinds import running_apache_kafka
from kafka_helpers import consume_all
from session_resources import stop_after_last_use

from sparkkafka_sink import Producer
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.apache_kafka import KAFKA_VERSION, java_and_maven_available, resolve_kafka
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker]

JAVA = Path(__file__).with_name("java")
PREFIX = "org.apache.kafka.producer."


class TelemetryBroker:
    def __init__(self, cluster, recorded: Path, classes: Path, lib: Path):
        self.cluster, self.recorded, self.classes, self.lib = cluster, recorded, classes, lib

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def subscribe(self, name: str, metrics: str, interval_ms: int, client_ids: str) -> None:
        """A subscription ``name`` to the metrics named with ``metrics``' prefixes, for the clients
        whose id matches the regular expression ``client_ids``."""
        subprocess.run(["java", "-cp", f"{self.classes}:{self.lib}/*", "SubscribeClientMetrics",
                        self.bootstrap_servers, name, metrics, str(interval_ms), client_ids],
                       check=True, capture_output=True, timeout=120)

    def pushes(self, client_id: str) -> list[dict]:
        if not self.recorded.exists():
            return []
        lines = [json.loads(line) for line in self.recorded.read_text().splitlines() if line.strip()]
        return [p for p in lines if p["client_id"] == client_id]

    def wait_for(self, client_id: str, check: Callable[[list[dict]], bool], timeout: float = 30) -> list[dict]:
        """The pushes of ``client_id`` once ``check`` holds for them (they arrive every interval)."""
        deadline = time.monotonic() + timeout
        while True:
            pushes = self.pushes(client_id)
            if check(pushes):
                return pushes
            assert time.monotonic() < deadline, f"{client_id}: the broker recorded {pushes}"
            time.sleep(0.1)


@pytest.fixture(scope="session")
def telemetry_kafka(tmp_path_factory):
    if not java_and_maven_available():
        pytest.skip("the KIP-714 broker needs java and mvn on PATH (Kafka runs from its Maven jars)")
    work = tmp_path_factory.mktemp("client-telemetry")
    lib = resolve_kafka(KAFKA_VERSION)
    classes = work / "classes"
    subprocess.run(["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes),
                    *map(str, sorted(JAVA.glob("*.java")))], check=True)
    recorded = work / "pushes.jsonl"
    with running_apache_kafka(" client telemetry", nodes=1, classpath=[classes],
                              broker_config={"metric.reporters": "TelemetryRecorder",
                                             "telemetry.recorder.file": str(recorded)}) as cluster:
        stop_after_last_use("telemetry_kafka", cluster.close, "[client telemetry apache kafka stopped after its last test]")
        broker = TelemetryBroker(cluster, recorded, classes, lib)
        broker.subscribe("sparkkafka-producer", PREFIX, 1000, "(pushes|on)-.*")
        yield broker


def _sums(pushes: list[dict], name: str) -> int:
    """A delta counter's total over the pushes."""
    return sum(m["value"] for p in pushes for m in p["metrics"] if m["name"] == name)


def _last(pushes: list[dict], name: str) -> float:
    return [m["value"] for p in pushes for m in p["metrics"] if m["name"] == name][-1]


def test_the_broker_receives_the_producers_metrics_with_true_values(telemetry_kafka):
    topic = f"telemetry-{uuid.uuid4().hex[:8]}"
    create_topics(telemetry_kafka.bootstrap_servers, {topic: 3}, timeout=30)
    client_id = f"pushes-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": telemetry_kafka.bootstrap_servers, "client.id": client_id,
                         "linger.ms": 5, "buffer.memory": 8 * 1024 * 1024})
    sent = 0
    try:
        for round_ in range(2):  # records before each of two pushes
            producer.send_batch(topic, values=[b"v%d" % i for i in range(500)]).get(30)
            sent += 500
            telemetry_kafka.wait_for(client_id, lambda p, n=round_ + 1: len(p) >= n)
    finally:
        producer.close(30)
    pushes = telemetry_kafka.wait_for(client_id, lambda p: any(x["terminating"] for x in p))
    assert len(consume_all(telemetry_kafka.bootstrap_servers, topic, expected_count=sent)) == sent

    assert [p["terminating"] for p in pushes] == [False] * (len(pushes) - 1) + [True]  # the last, on close
    # OpenTelemetry's protobuf, as the broker names it, every interval the subscription asked for
    assert all(p["content_type"] == "OTLP" and p["push_interval_ms"] == 1000 for p in pushes), \
        [(p["content_type"], p["push_interval_ms"]) for p in pushes]
    assert len({p["client_instance_id"] for p in pushes}) == 1  # the broker's id for this producer, kept
    assert pushes[0]["resource"]["client_id"] == client_id
    names = {m["name"] for p in pushes for m in p["metrics"]}
    assert names == {PREFIX + n for n in ("record.send.total", "record.error.total", "record.retry.total",
                                          "batch.split.total", "bufferpool.wait.time.ns.total", "request.latency.avg", "request.latency.max",
                                          "batch.size.avg", "buffer.available.bytes", "buffer.total.bytes")}
    counters = [m for p in pushes for m in p["metrics"] if m["kind"] == "sum"]
    # the broker asks for deltas (Apache Kafka always does): each push counts what came since the last
    assert counters and all(m["temporality"] == "AGGREGATION_TEMPORALITY_DELTA" and m["monotonic"] for m in counters)
    assert _sums(pushes, PREFIX + "record.send.total") == sent
    assert _sums(pushes, PREFIX + "record.error.total") == 0
    assert _last(pushes, PREFIX + "buffer.total.bytes") == 8 * 1024 * 1024
    assert 0 < _last(pushes, PREFIX + "request.latency.max") < 30_000
    assert _last(pushes, PREFIX + "batch.size.avg") > 500  # bytes of a batch of these records
    metrics = producer.metrics()
    assert _last(pushes, PREFIX + "request.latency.max") == pytest.approx(metrics["request_latency_max_ms"])
    for m in counters:
        assert 0 < m["start_ns"] <= m["time_ns"]


def test_a_narrower_subscription_gets_only_its_metrics(telemetry_kafka):
    telemetry_kafka.subscribe("sparkkafka-record-only", f"{PREFIX}record.send,{PREFIX}buffer.", 500, "narrow-.*")
    client_id = f"narrow-{uuid.uuid4().hex[:6]}"
    with Producer({"bootstrap.servers": telemetry_kafka.bootstrap_servers, "client.id": client_id}):
        pushes = telemetry_kafka.wait_for(client_id, lambda p: len(p) >= 2)
    assert {m["name"] for p in pushes for m in p["metrics"]} == {
        PREFIX + "record.send.total", PREFIX + "buffer.available.bytes", PREFIX + "buffer.total.bytes"}
    assert {p["push_interval_ms"] for p in pushes} == {500}


def test_no_push_when_turned_off(telemetry_kafka):
    topic = f"telemetry-off-{uuid.uuid4().hex[:8]}"
    bootstrap = telemetry_kafka.bootstrap_servers
    create_topics(bootstrap, {topic: 1}, timeout=30)
    on, off = f"on-{uuid.uuid4().hex[:6]}", f"off-{uuid.uuid4().hex[:6]}"
    with Producer({"bootstrap.servers": bootstrap, "client.id": off, "enable.metrics.push": False}) as quiet, \
            Producer({"bootstrap.servers": bootstrap, "client.id": on}):
        quiet.send_batch(topic, values=[b"v"] * 10).get(30)
        telemetry_kafka.wait_for(on, lambda p: len(p) >= 1)  # the other producer pushed meanwhile
        sent = quiet._client.requests_sent
        assert not any(key in (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY) for key, _ in sent)
    assert telemetry_kafka.pushes(off) == []


def _wait(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_client_no_subscription_names_is_asked_and_pushes_nothing(telemetry_kafka):
    """The broker has subscriptions, none for this client: it names no metrics, so the producer
    asks (GetTelemetrySubscriptions), keeps the id the broker gave it, and pushes nothing."""
    client_id = f"unsubscribed-{uuid.uuid4().hex[:6]}"
    with Producer({"bootstrap.servers": telemetry_kafka.bootstrap_servers, "client.id": client_id}) as producer:
        telemetry = producer._sender.telemetry
        _wait(lambda: telemetry.subscription is not None, "no subscription answer")
        assert telemetry.subscription.requested == () and telemetry.subscription.client_instance_id.int != 0
        sent = producer._client.requests_sent
        assert any(key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS for key, _ in sent)
    assert not any(key == ApiKey.PUSH_TELEMETRY for key, _ in sent) and telemetry.pushes == 0
    assert telemetry_kafka.pushes(client_id) == []


def test_a_broker_without_a_telemetry_plugin_is_not_asked(apache_kafka):
    """Apache Kafka offers the telemetry APIs only with a plugin to hand the metrics to: without
    one it does not name them in ApiVersions, and the producer sends neither."""
    with Producer({"bootstrap.servers": apache_kafka.bootstrap_servers}) as producer:
        telemetry = producer._sender.telemetry
        _wait(lambda: not telemetry.enabled, "telemetry still on")
        sent = producer._client.requests_sent
        assert any(key == ApiKey.API_VERSIONS for key, _ in sent)
        assert not any(key in (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY) for key, _ in sent)
