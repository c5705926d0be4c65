"""The 3-node Apache Kafka cluster (KRaft, three combined nodes, a 3-voter quorum) of the failover
tests: started for this directory's modules and stopped after them, since three idle JVMs take a
good share of two cores from every other test."""

from __future__ import annotations

import sys

import pytest

from broker_kinds import APACHE_SOURCE
from sparkkafka_sink.testing.apache_kafka import ApacheKafka

#: the 3-node cluster notices a dead node within seconds, and checks for expired producer state
#: every second (test 5 shortens producer.id.expiration.ms through the admin API)
FAILOVER_BROKER_CONFIG = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "producer.id.expiration.check.interval.ms": 1000,
}


@pytest.fixture(scope="module")
def failover_cluster():
    if APACHE_SOURCE != "maven":
        pytest.skip("the 3-node Apache Kafka cluster needs java and mvn on PATH")
    cluster = ApacheKafka(nodes=3, broker_config=FAILOVER_BROKER_CONFIG).start()
    print(f"\n[apache kafka {cluster.version}: 3 nodes up in {cluster.startup_seconds:.1f} s]",
          file=sys.stderr)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def kafka_cluster(failover_cluster):
    """The module's 3-node Apache Kafka cluster (replication factor 3 by default); every node is
    up before and after the test, whatever the test stopped, killed or paused."""
    failover_cluster.ensure_all_up()
    yield failover_cluster
    failover_cluster.ensure_all_up()


