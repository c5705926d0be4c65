"""Our producer against a cluster with ACLs (the ``secured_kafka`` node runs Kafka's
StandardAuthorizer): ``carol`` may write one topic, may only describe another and may not see a
third.  A topic she may not see fails ``send`` at once with TOPIC_AUTHORIZATION_FAILED (the
Metadata answer's topic error), and so does a topic she may describe but not write (the topic's
authorized operations, asked for in every Metadata request, lack WRITE): nothing is sent that the
broker would refuse, which under exactly-once would doom the whole transaction.  Neither poisons
the producer: the permitted topic's records, sent before, between and after, all land (read back
by confluent-kafka as a super user)."""

from __future__ import annotations

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import Producer
from sparkkafka_sink.errors import BrokerResponseError

pytestmark = [pytest.mark.broker, pytest.mark.security]

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def carol_config(cluster, **settings) -> dict:
    return {"bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{_PLAIN_MODULE} required username="carol" password="carol-secret";',
            "max.block.ms": 15000, "request.timeout.ms": 10000, "delivery.timeout.ms": 30000, "linger.ms": 5,
            **settings}


@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
def test_refused_topics_fail_their_records_and_the_permitted_topic_still_lands(secured_kafka, acl_topics,
                                                                              idempotence):
    writable, describe_only, hidden = acl_topics["writable"], acl_topics["describe_only"], acl_topics["hidden"]
    producer = Producer(carol_config(secured_kafka, **{"enable.idempotence": idempotence}))
    try:
        first = [producer.send(writable, value=b"a%d" % i) for i in range(50)]
        with pytest.raises(BrokerResponseError) as refused:
            producer.send(hidden, value=b"never")
        assert refused.value.name == "TOPIC_AUTHORIZATION_FAILED" and repr(hidden) in str(refused.value)
        with pytest.raises(BrokerResponseError) as refused:
            producer.send_batch(describe_only, values=[b"d%d" % i for i in range(20)])
        assert refused.value.name == "TOPIC_AUTHORIZATION_FAILED"
        assert "no WRITE permission" in str(refused.value) and repr(describe_only) in str(refused.value)
        second = [producer.send(writable, value=b"b%d" % i) for i in range(50)]
        producer.flush(30)
        assert producer.metrics()["records_failed"] == 0  # nothing was sent to be refused
        offsets = [f.get(0).offset for f in first + second]
        assert min(offsets) >= 0
    finally:
        producer.close(30)
    landed = consume_all(secured_kafka.bootstrap(), writable, expected_count=100)
    assert sorted(r.value for r in landed) == sorted([b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)])
    assert consume_all(secured_kafka.bootstrap(), describe_only) == []
