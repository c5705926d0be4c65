"""The driver's blocking questions on Apache Kafka, each a control-request handler run by
``BlockingAdmin``: may a write's topics be written (Metadata, ``TopicMetadata``), which
transactions are open under a prefix (ListTransactions on every broker)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from sparkkafka_sink import Producer
from sparkkafka_sink.producer.admin import BlockingAdmin
from sparkkafka_sink.producer.control_requests import TopicCheckError
from sparkkafka_sink.producer.handover import OPEN_OR_IDLE_STATES, TransactionAdmin
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker]


def _deadline(seconds: float = 30) -> float:
    return time.monotonic() + seconds


@pytest.fixture
def admin(apache_kafka):
    with BlockingAdmin({"bootstrap.servers": apache_kafka.bootstrap_servers}) as a:
        yield a


def test_topics_that_exist_are_writable_with_their_partition_counts(apache_kafka, admin):
    a, b = f"admin-a-{uuid.uuid4().hex[:8]}", f"admin-b-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {a: 3, b: 1}, timeout=30)
    assert admin.check_topics_writable([a, b, a], _deadline()) == {a: 3, b: 1}


def test_a_missing_topic_is_named_and_not_created(apache_kafka, admin):
    missing = f"admin-missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TopicCheckError, match=rf"topic '{missing}' does not exist \(allow.auto.create.topics is false\)"):
        admin.check_topics_writable([missing], _deadline())
    assert missing not in AdminClient({"bootstrap.servers": apache_kafka.bootstrap_servers}).list_topics(timeout=10).topics


def test_a_topic_auto_created_on_demand_is_waited_for(apache_kafka, admin):
    """The broker creates it (auto.create.topics.enable): the first answers say it is still being
    created (LEADER_NOT_AVAILABLE, or no partitions yet), asked again until it has its partitions."""
    created = f"admin-auto-{uuid.uuid4().hex[:8]}"
    found = admin.check_topics_writable([created], _deadline(), allow_auto_create=True)
    assert list(found) == [created] and found[created] >= 1


def test_an_invalid_topic_name_is_named(admin):
    with pytest.raises(TopicCheckError, match="'bad/name' is not a valid topic name"):
        admin.check_topics_writable(["bad/name"], _deadline())


def test_open_transactions_are_listed_by_prefix_and_state(apache_kafka):
    """ListTransactions asked of every broker: the open transactions under the prefix (Ongoing),
    and with ``OPEN_OR_IDLE_STATES`` the producers initialised but not in one (Empty)."""
    bootstrap = apache_kafka.bootstrap_servers
    topic = f"admin-txn-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: 1}, timeout=30)
    prefix = f"listed-{uuid.uuid4().hex[:8]}-"
    producers = [Producer({"bootstrap.servers": bootstrap, "transactional.id": prefix + name}) for name in "abc"]
    try:
        for p in producers:
            p.init_transactions()
        for p in producers[:2]:
            p.begin_transaction()
            p.send(topic, value=b"x", partition=0)
            p.flush(30)
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
            open_ = admin.open_transactions(prefix, _deadline())
            assert sorted((t, state) for t, _, state in open_) == [(prefix + "a", "Ongoing"), (prefix + "b", "Ongoing")]
            idle = admin.open_transactions(prefix, _deadline(), OPEN_OR_IDLE_STATES)
            assert sorted((t, state) for t, _, state in idle) == [
                (prefix + "a", "Ongoing"), (prefix + "b", "Ongoing"), (prefix + "c", "Empty")]
            assert admin.open_transactions(prefix + "z", _deadline()) == []
            assert sorted(admin.abort_lingering(prefix, _deadline())) == [prefix + "a", prefix + "b"]
            assert admin.open_transactions(prefix, _deadline()) == []
    finally:
        for p in producers:
            p.close(5)


def test_every_bootstrap_address_refusing_is_an_answer_not_a_timeout():
    """Nothing listens at the bootstrap addresses: the admin says so at once rather than waiting
    out its deadline (the driver's cluster check then fails in a moment, naming the address)."""
    from sparkkafka_sink.errors import KafkaConnectionError
    from sparkkafka_sink.testing.brokers import free_port

    addresses = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    with BlockingAdmin({"bootstrap.servers": addresses}) as admin:
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError, match="every address refused the connection") as refused:
            admin.brokers(time.monotonic() + 30)
        assert time.monotonic() - start < 5 and refused.value.refused
        assert all(a in str(refused.value) for a in addresses.split(","))


def test_a_node_the_metadata_no_longer_names_is_no_answer_not_a_timeout(apache_kafka):
    """Asking every broker while one leaves the cluster (killed, then fenced): the list of brokers
    was taken before it left, the question reaches it after the metadata dropped it.  Nothing
    can connect to a node the metadata no longer names: the admin says so at once (the caller
    asks again with fresh metadata) instead of waiting out its deadline -- a failover test's
    ListTransactions waited 60 s for the killed coordinator so."""
    from sparkkafka_sink.errors import KafkaConnectionError
    from sparkkafka_sink.producer.control_requests import ListTransactions

    with BlockingAdmin({"bootstrap.servers": apache_kafka.bootstrap_servers}) as admin:
        (node,) = admin.brokers(_deadline())
        gone = node + 1000  # not in the cluster's metadata, never connected to
        assert admin.client.connection_failures(gone) == 0
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError, match=f"node {gone} .*no longer in the cluster's metadata"):
            admin.call(gone, ListTransactions("x", ["Ongoing"]).build(), _deadline())
        assert time.monotonic() - start < 2
