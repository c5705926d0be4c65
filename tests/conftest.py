"""Shared fixtures: the ``kafka`` broker (parametrized over broker kinds) and ``fresh_broker``.

Broker choice, in order (see DEVELOPERS.md, "Test brokers"):
1. ``KAFKA_BOOTSTRAP_SERVERS`` set -> one "external" broker (no pause/kill: fault tests skip);
   ``KAFKA_BROKER_KIND`` may name its quirks ("apache" default, "tansu", "noida").
2. a Docker engine answers -> Apache Kafka (KRaft) via testcontainers;
3. otherwise the embedded brokers ``tansu`` and ``noida`` (test ids ``[tansu]``, ``[noida]``).
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import uuid
from typing import Callable, List, Optional

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `import kafka_helpers` from anywhere

from sparkkafka_sink.testing.brokers import (  # noqa: E402
    BROKER_KINDS, EmbeddedBroker, create_topics, start_broker)

# Broker quirks tests branch on.  Keys are capability flags exposed on BrokerHandle.
_QUIRKS = {
    "apache": dict(strict_errors=True, persistent=True, list_offsets_correct=True,
                   read_committed_correct=True, answers_acks0=False, duplicate_seq_is_error=False,
                   fetch_respects_byte_limits=True, init_producer_id_min_version=0),
    "tansu": dict(strict_errors=False, persistent=False, list_offsets_correct=False,
                  read_committed_correct=False, answers_acks0=True, duplicate_seq_is_error=True,
                  fetch_respects_byte_limits=True, init_producer_id_min_version=3),
    "noida": dict(strict_errors=True, persistent=True, list_offsets_correct=True,
                  read_committed_correct=True, answers_acks0=True, duplicate_seq_is_error=False,
                  fetch_respects_byte_limits=False, init_producer_id_min_version=0),
}


def pytest_configure(config):
    # Spark workers must run this interpreter, and Spark must not go looking for a LAN address.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if {"kafka", "fresh_broker"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)


class BrokerHandle:
    """What tests get from ``kafka``/``fresh_broker``: an address, topic creation and quirk flags.

    ``broker`` is the underlying EmbeddedBroker (None for external/Apache brokers);
    ``pause()/resume()/kill()/restart()`` skip the test when the broker cannot do that.
    """

    _counter = itertools.count(1)

    def __init__(self, kind: str, bootstrap_servers: str, broker: Optional[EmbeddedBroker] = None,
                 quirks: Optional[str] = None):
        self.kind = kind
        self.bootstrap_servers = bootstrap_servers
        self.broker = broker
        for flag, value in _QUIRKS[quirks or kind].items():
            setattr(self, flag, value)
        self.supports_pause = self.supports_kill = self.supports_restart = broker is not None
        self.current_test: Optional[str] = None

    def __repr__(self) -> str:
        return f"<BrokerHandle {self.kind} {self.bootstrap_servers}>"

    def create_topic(self, name: Optional[str] = None, partitions: int = 1, timeout: float = 30.0,
                     config: Optional[dict] = None) -> str:
        """Create a topic (a unique name per call when ``name`` is None) and return its name.
        Retention is infinite unless ``config`` says otherwise (see DEFAULT_TOPIC_CONFIG)."""
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9]+", "-", self.current_test or "t").strip("-")[-40:] or "t"
            name = f"{stem}-{next(self._counter)}-{uuid.uuid4().hex[:6]}"
        create_topics(self.bootstrap_servers, {name: partitions}, timeout=timeout, config=config)
        return name

    def _need(self, flag: str, what: str):
        if not getattr(self, flag):
            pytest.skip(f"{self.kind} broker cannot {what}")
        return self.broker

    def pause(self):
        self._need("supports_pause", "be paused").pause()

    def resume(self):
        self._need("supports_pause", "be resumed").resume()

    def kill(self):
        self._need("supports_kill", "be killed").kill()

    def restart(self):
        self._need("supports_restart", "be restarted").restart()
        self.bootstrap_servers = self.broker.bootstrap_servers


def _docker_answers() -> bool:
    """True when a Docker engine answers a ping within ~2 s (never raises)."""
    if os.environ.get("SPARKKAFKA_NO_DOCKER"):
        return False
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _broker_kinds() -> List[str]:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return ["external"]
    if _docker_answers():
        return ["apache"]
    return list(BROKER_KINDS)


KAFKA_KINDS = _broker_kinds()


@pytest.fixture(scope="session", params=KAFKA_KINDS)
def kafka(request):
    """A running broker shared by the session, one parametrization per broker kind."""
    kind = request.param
    if kind == "external":
        yield BrokerHandle("external", os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                           quirks=os.environ.get("KAFKA_BROKER_KIND", "apache"))
    elif kind == "apache":
        from testcontainers.kafka import KafkaContainer

        image = os.environ.get("KAFKA_TEST_IMAGE", "confluentinc/cp-kafka:7.6.0")
        with KafkaContainer(image).with_kraft() as container:
            yield BrokerHandle("apache", container.get_bootstrap_server())
    else:
        broker = start_broker(kind)
        try:
            yield BrokerHandle(kind, broker.bootstrap_servers, broker)
        finally:
            broker.stop()


@pytest.fixture(autouse=True)
def _name_topics_after_test(request):
    """Give ``kafka.create_topic()`` names that say which test made them."""
    if "kafka" in request.fixturenames:
        handle = request.getfixturevalue("kafka")
        handle.current_test = request.node.name
    yield


@pytest.fixture
def fresh_broker(request) -> Callable[..., BrokerHandle]:
    """Factory ``fresh_broker(kind="tansu", **broker_kwargs) -> BrokerHandle`` for tests that
    pause, kill or restart their broker; always embedded, stopped at the end of the test."""
    started: List[EmbeddedBroker] = []

    def factory(kind: str = "tansu", **kwargs) -> BrokerHandle:
        broker = start_broker(kind, **kwargs)
        started.append(broker)
        handle = BrokerHandle(kind, broker.bootstrap_servers, broker)
        handle.current_test = request.node.name
        return handle

    yield factory
    for broker in reversed(started):
        broker.stop()
