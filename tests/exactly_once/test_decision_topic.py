"""The decisions topic as exactly-once needs it, against Apache Kafka: a prefix's decisions are
found however the topic grows; before a write starts, a topic that would lose decisions
(deleted by age) or that the principal may not read or write is refused, naming what to change --
what ending a crashed write will need, asked while nothing depends on it."""

from __future__ import annotations

import time
import uuid

import pytest

from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.decision_log import SLOTS, DecisionLog, DecisionRecorder, DecisionTopicError
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.spark.driver import exactly_once_writes
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.sink_errors import SinkValidationError
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.transactions]


def topic_with(bootstrap: str, partitions: int, **configs: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"decisions-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config={"cleanup.policy": "compact", **configs})])
    futures[name].result(30)
    create_topics(bootstrap, {name: partitions}, timeout=30)  # (waits until every partition has a leader)
    return name


def test_a_prefixs_decision_is_found_after_the_topic_grew(apache_kafka):
    """Each prefix's decisions go to murmur2 modulo 16, whatever the partition count: growing
    the topic moves none of them (it used to: a reader then found "no decision", the rest of a
    decided batch write was aborted and a streaming replay committed twice)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    bootstrap = apache_kafka.bootstrap_servers
    topic = topic_with(bootstrap, SLOTS)
    config = {"bootstrap.servers": bootstrap}
    writes = [WriteId(f"grow-{i}-{uuid.uuid4().hex[:6]}", "0123abcd", "a1b2c3") for i in range(8)]
    deadline = time.monotonic() + 60
    with TransactionAdmin(config) as admin:
        log = DecisionLog(admin, topic)
        for write in writes:
            recorder = DecisionRecorder(config, write, topic, log.partitions(deadline))
            try:
                assert recorder.close(10) and recorder.record(Decision(write, ()), 10)
            finally:
                recorder.close_producer()
        grower = AdminClient({"bootstrap.servers": bootstrap})
        grower.create_partitions([NewPartitions(topic, 3 * SLOTS)])[topic].result(30)
        create_topics(bootstrap, {topic: 3 * SLOTS}, timeout=30)
        assert log.partitions(deadline) == 3 * SLOTS
        assert [log.decision_of(write, deadline) for write in writes] == [Decision(write, ()) for write in writes]


def start(apache_kafka, decision_topic: str):
    return exactly_once_writes.start_exactly_once(parse_options({
        "kafka.bootstrap.servers": apache_kafka.bootstrap_servers, "topic": "t", "deliveryGuarantee": "exactly-once",
        "decisionTopic": decision_topic, "leaseKeeper": "none", "transactionalIdPrefix": f"{decision_topic}-txn"}))


def test_a_topic_of_fewer_partitions_than_the_slots_is_refused_before_the_write(apache_kafka):
    topic = topic_with(apache_kafka.bootstrap_servers, 3)
    with pytest.raises(SinkValidationError) as info:
        start(apache_kafka, topic)
    text = str(info.value)
    assert f"the exactly-once decisions topic {topic!r} has 3 partitions: it needs at least 16" in text, text
    assert f"decisionTopic={topic!r}" in text


@pytest.mark.parametrize("configs, refused", [
    ({"cleanup.policy": "delete"}, True),
    ({"cleanup.policy": "compact,delete", "retention.ms": "604800000"}, True),
    ({"cleanup.policy": "compact,delete", "retention.ms": "-1"}, False),
    ({}, False),
])
def test_a_topic_that_deletes_decisions_by_age_is_refused_before_the_write(apache_kafka, configs, refused):
    topic = topic_with(apache_kafka.bootstrap_servers, SLOTS, **configs)
    if not refused:
        assert start(apache_kafka, topic).owner
        return
    with pytest.raises(SinkValidationError) as info:
        start(apache_kafka, topic)
    text = str(info.value)
    assert f"decisions topic {topic!r} has cleanup.policy={configs['cleanup.policy']}" in text, text
    assert "set cleanup.policy=compact" in text


@pytest.mark.parametrize("granted, missing", [(["WRITE", "DESCRIBE"], "READ"), (["READ", "DESCRIBE"], "WRITE")])
def test_a_topic_the_principal_may_not_read_or_write_is_refused(secured_kafka, secured_topic, granted, missing):
    from kafka_helpers import allow_on_topic
    from security_fixtures import CAROL

    topic = secured_topic(partitions=SLOTS)
    allow_on_topic(secured_kafka.bootstrap(), topic, CAROL, granted)
    carol = {"bootstrap.servers": secured_kafka.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "PLAIN", "sasl.username": "carol", "sasl.password": "carol-secret"}
    with TransactionAdmin(carol) as admin, pytest.raises(DecisionTopicError) as info:
        DecisionLog(admin, topic).check(time.monotonic() + 30)
    assert f"the principal may not {missing} the exactly-once decisions topic {topic!r}: grant {missing}" \
        in str(info.value), str(info.value)
