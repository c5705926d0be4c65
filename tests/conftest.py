"""Shared fixtures: the ``kafka`` broker (parametrized over broker kinds), ``fresh_broker`` and the
session's single Apache Kafka node ``apache_kafka`` (the 3-node cluster ``kafka_cluster`` lives
in tests/failover/conftest.py, only while those tests run: three idle JVMs cost CPU).

Broker choice (see README, "Tests and brokers"):
1. ``KAFKA_BOOTSTRAP_SERVERS`` set -> one "external" broker (no pause/kill: fault tests skip);
   ``KAFKA_BROKER_KIND`` may name its quirks ("apache" default, "tansu", "noida").
2. otherwise Apache Kafka, the reference broker (test id ``[apache]``): through testcontainers
   when a Docker engine answers, else from its Maven jars when ``java`` and ``mvn`` are on PATH
   (``sparkkafka_sink.testing.apache_kafka``: one node, started once per session); plus the
   embedded brokers ``tansu`` and ``noida`` (``[tansu]``, ``[noida]``) from PyPI.
``SPARKKAFKA_BROKERS=apache,tansu`` limits the kinds.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import sys
import uuid
from collections.abc import Callable

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `import kafka_helpers` from anywhere

from broker_kinds import APACHE_SOURCE, KAFKA_KINDS, running_apache_kafka

from sparkkafka_sink.testing.brokers import EmbeddedBroker, create_topics, start_broker

log = logging.getLogger("sparkkafka_sink.tests")

#: the run's own temporary directory (removed when the run ends), the shares of a run split over
#: two processes (``-n 2``), session resources stopped after their last user (the hooks behind
#: the two below), the secured Apache Kafka node and its PKI,
#: token endpoint and client settings, and ``retrying_spark``, the local[2,4] SparkSession of the
#: modules outside tests/spark
pytest_plugins = ["skip_policy", "run_environment", "parallel", "session_resources", "security_fixtures", "registry_fixtures", "retrying_spark"]

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

    def __init__(self, kind: str, bootstrap_servers: str, broker: EmbeddedBroker | None = None,
                 quirks: str | None = None, replication_factor: int = 1):
        self.kind = kind
        self.bootstrap_servers = bootstrap_servers
        self.broker = broker
        self.replication_factor = replication_factor
        for flag, value in _QUIRKS[quirks or kind].items():
            setattr(self, flag, value)
        self.supports_pause = self.supports_kill = self.supports_restart = broker is not None
        self.current_test: str | None = None

    def __repr__(self) -> str:
        return f"<BrokerHandle {self.kind} {self.bootstrap_servers}>"

    def create_topic(self, name: str | None = None, partitions: int = 1, timeout: float = 30.0,
                     config: dict | None = None) -> str:
        """Create a topic (a unique name per call when ``name`` is None) and return its name.
        Retention is infinite unless ``config`` says otherwise (see DEFAULT_TOPIC_CONFIG)."""
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9]+", "-", self.current_test or "t").strip("-")[-40:] or "t"
            name = f"{stem}-{next(self._counter)}-{uuid.uuid4().hex[:6]}"
        create_topics(self.bootstrap_servers, {name: partitions}, timeout=timeout, config=config,
                      replication_factor=self.replication_factor)
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


def pytest_report_header(config):
    return (f"brokers: {', '.join(KAFKA_KINDS)}"
            + (f" (Apache Kafka via {APACHE_SOURCE})" if "apache" in KAFKA_KINDS else ""))


@pytest.fixture(scope="session")
def apache_kafka():
    """One Apache Kafka node (KRaft, from Maven jars) shared by the whole session."""
    with running_apache_kafka(needs="Apache Kafka from Maven jars", nodes=1,
                              broker_config=SINGLE_NODE_BROKER_CONFIG) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka3():
    """One Apache Kafka 3.9 node (transactions v1: AddPartitionsToTxn, EndTxn keeping the epoch),
    started when a test asks for it and stopped after the last test of the process that uses it."""
    from session_resources import stop_after_last_use

    from sparkkafka_sink.testing.apache_kafka import KAFKA_3_VERSION

    with running_apache_kafka(" 3.9", needs="Apache Kafka 3.9 from Maven jars", nodes=1,
                              version=KAFKA_3_VERSION) as cluster:
        stop_after_last_use("kafka3", cluster.close, "[apache kafka 3.9 stopped after the last test that uses it]")
        yield cluster


@pytest.fixture(scope="session")
def kafka_zookeeper():
    """One Apache Kafka 2.8 node in ZooKeeper mode (the oldest line tested), started when a test
    asks for it."""
    from sparkkafka_sink.testing.apache_kafka import KAFKA_ZOOKEEPER_VERSION

    with running_apache_kafka(needs="Apache Kafka 2.8 from Maven jars", nodes=1,
                              version=KAFKA_ZOOKEEPER_VERSION) as cluster:
        yield cluster


@pytest.fixture
def apache_node(apache_kafka):
    """The session's Apache Kafka node for a test that may pause, kill or restart it; it is
    running and resumed again afterwards."""
    yield apache_kafka.nodes[0]
    apache_kafka.ensure_all_up()


#: expired producer state is looked for every second (tests shorten producer.id.expiration.ms
#: through the admin API and restore it)
SINGLE_NODE_BROKER_CONFIG = {"producer.id.expiration.check.interval.ms": 1000}

@pytest.fixture(scope="session", params=KAFKA_KINDS)
def kafka(request):
    """A running broker shared by the session, one parametrization per broker kind."""
    kind = request.param
    if kind == "external":
        yield BrokerHandle("external", os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                           quirks=os.environ.get("KAFKA_BROKER_KIND", "apache"))
    elif kind == "apache" and APACHE_SOURCE == "docker":
        from testcontainers.kafka import KafkaContainer

        image = os.environ.get("KAFKA_TEST_IMAGE", "apache/kafka:4.1.0")
        with KafkaContainer(image).with_kraft() as container:
            yield BrokerHandle("apache", container.get_bootstrap_server())
    elif kind == "apache":
        cluster = request.getfixturevalue("apache_kafka")
        yield BrokerHandle("apache", cluster.bootstrap_servers, cluster.nodes[0])
    else:
        broker = start_broker(kind)
        try:
            yield BrokerHandle(kind, broker.bootstrap_servers, broker)
        finally:
            broker.stop()


@pytest.fixture(autouse=True)
def _name_topics_after_test(request):
    """Give ``kafka.create_topic()`` names that say which test made them."""
    handle = None
    if "kafka" in request.fixturenames:
        handle = request.getfixturevalue("kafka")
        handle.current_test = request.node.name
    yield
    if handle is not None and handle.kind == "apache" and handle.broker is not None:
        handle.broker.cluster.ensure_all_up()  # a test paused or killed the shared node


@pytest.fixture(autouse=True)
def _no_pooled_producers_left():
    """Write tasks run in this process (tests calling ``run_write_task``) pool their producers;
    close them after each test so no Sender thread outlives it."""
    yield
    import sys

    pool = sys.modules.get("sparkkafka_sink.spark.task.producer_pool")
    if pool is not None:
        pool.POOL.close_all()


@pytest.fixture
def lease_dir(tmp_path):
    """Where a test's exactly-once Spark jobs keep their leases (``SPARKKAFKA_LEASE_DIR``); at its
    end whatever they started that still runs -- a keeper still ending a write -- is stopped by pid."""
    path = tmp_path / "leases"
    yield path
    from crash_support import stop_leftovers

    stop_leftovers(path)


@pytest.fixture
def fresh_broker(request) -> Callable[..., BrokerHandle]:
    """Factory ``fresh_broker(kind="tansu", **broker_kwargs) -> BrokerHandle`` for tests that
    pause, kill or restart their broker; always embedded, stopped at the end of the test."""
    started: list[EmbeddedBroker] = []

    def factory(kind: str = "tansu", **kwargs) -> BrokerHandle:
        broker = start_broker(kind, **kwargs)
        started.append(broker)
        handle = BrokerHandle(kind, broker.bootstrap_servers, broker)
        handle.current_test = request.node.name
        return handle

    yield factory
    for broker in reversed(started):
        broker.stop()
