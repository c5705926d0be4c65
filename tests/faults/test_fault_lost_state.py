"""The broker forgets our producer state (``producer.id.expiration.ms`` of silence), and then the
first Produce request after the silence goes wrong: Apache Kafka, one node, behind the fault proxy.

A broker without state for a producer id takes any sequence as the first.  If the batch after
the silence were refused (here: its partition index rewritten, so the broker answers
UNKNOWN_TOPIC_OR_PARTITION without writing it) while the next one landed, it could never be
written in order after it: the broker answers its resend with OUT_OF_ORDER_SEQUENCE_NUMBER.  A
connection cut as the request arrives (never written) or as its answer arrives (written, answer
lost: the resend must be recognised as a duplicate against the fresh state) must not lose,
duplicate or reorder anything either.
"""

from __future__ import annotations

import collections

import pytest
from broker_kinds import FAULT_KINDS
from kafka_helpers import consume_all, describe_producers

from sparkkafka_sink.testing.waiting import wait_until

from .harness import PRODUCE
from .helpers import fresh_topic, make_producer, retarget_first_partition

pytestmark = pytest.mark.skipif("apache" not in FAULT_KINDS, reason="needs Apache Kafka from Maven jars")


def _set_expiration(bootstrap: str, ms) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    op = AlterConfigOpType.SET if ms is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry("producer.id.expiration.ms", None if ms is None else str(ms), incremental_operation=op)
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])
    admin.incremental_alter_configs([res])[res].result(30)


def _wait_forgotten(bootstrap: str, topic: str, pid: int, timeout: float = 60.0) -> None:
    wait_until("the broker to forget our producer state",
               lambda: pid not in {x[0] for x in describe_producers(bootstrap, topic, 0)}, timeout, 0.25)


@pytest.mark.parametrize("lost", ["refused", "request", "response"])
def test_request_lost_right_after_the_broker_forgot_our_state(proxied_broker, lost):
    pb = proxied_broker("apache")
    topic = fresh_topic(pb, f"lost-state-{lost}", 1)
    direct = pb.direct_bootstrap_servers
    sent = []
    _set_expiration(direct, 1500)
    try:
        with make_producer(pb.bootstrap_servers, **{"delivery.timeout.ms": 30000, "linger.ms": 20,
                                                    "batch.size": 2000}) as p:
            for round_ in range(2):
                values = [b"%d:%04d:" % (round_, i) + b"x" * 100 for i in range(300)]  # ~16 batches
                if round_ == 1:
                    _wait_forgotten(direct, topic, p._sender.idempotence.producer_id)
                    if lost == "refused":
                        fault = pb.proxy.mutate_next_request(retarget_first_partition(topic, 99), PRODUCE)
                    else:
                        fault = pb.proxy.cut_in_flight(PRODUCE, every=0, at=lost, times=1)
                futures = [p.send(topic, value=v, partition=0) for v in values]
                sent += values
                for f in futures:
                    f.get(30)
            metrics = p.metrics()
    finally:
        _set_expiration(direct, None)
    assert fault.hits == 1 and metrics["retries"] >= 1
    assert metrics["records_failed"] == 0
    got = [r.value for r in consume_all(direct, topic, expected_count=len(sent))]
    counts = collections.Counter(got)
    assert not [v for v, c in counts.items() if c > 1], "duplicates"
    assert got == sent, "lost or out of order"
