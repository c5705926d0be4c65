"""The 3-node Apache Kafka cluster (KRaft, three combined nodes, a 3-voter quorum) of the failover
tests: started for this directory's modules and stopped after them, since three idle JVMs take a
good share of two cores from every other test."""

from __future__ import annotations

import pytest
from broker_kinds import running_apache_kafka

#: the 3-node cluster notices a dead node within seconds, and checks for expired producer state
#: every second (test 5 shortens producer.id.expiration.ms through the admin API)
FAILOVER_BROKER_CONFIG = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "producer.id.expiration.check.interval.ms": 1000,
}


@pytest.fixture(scope="module")
def failover_cluster():
    with running_apache_kafka(needs="the 3-node Apache Kafka cluster", nodes=3,
                              broker_config=FAILOVER_BROKER_CONFIG) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster(failover_cluster):
    """The module's 3-node Apache Kafka cluster (replication factor 3 by default); every node is
    up before and after the test, whatever the test stopped, killed or paused."""
    failover_cluster.ensure_all_up()
    yield failover_cluster
    failover_cluster.ensure_all_up()


