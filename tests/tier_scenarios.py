"""The producer scenarios every Apache Kafka line of the compatibility tiers runs
(``tests/compat``: 3.9, and 3.3 and 2.8), each read back by confluent-kafka; each returns the
highest version of every request the producer sent, which the tier compares with what its
broker answers at most."""

from __future__ import annotations

import collections

from kafka_helpers import consume_all, describe_producers

from sparkkafka_sink import Producer, complete_transaction


def sent_versions(producer: Producer) -> dict:
    """``{api key: highest version sent}`` by the producer."""
    top: dict = {}
    for (key, version), _ in producer._sender.client.requests_sent.items():
        top[key] = max(version, top.get(key, -1))
    return top


def round_trip(bootstrap: str, topic: str, codec: str, n: int) -> dict:
    """``n`` records in ``codec`` -- null keys and values, headers (one without a value),
    timestamps of their own -- read back equal, each once."""
    sent = {}
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5}) as p:
        futures = []
        for i in range(n):
            key = None if i % 7 == 0 else b"key-%d" % (i % 50)
            value = None if i % 11 == 0 else b"value-%05d" % i
            headers = [("h", b"%d" % i), ("empty", None)] if i % 3 == 0 else []
            ts = 1_700_000_000_000 + i
            futures.append(p.send(topic, value=value, key=key, headers=headers or None, timestamp_ms=ts))
            sent[ts] = (key, value, headers)
        for f in futures:
            f.get(30)
        versions = sent_versions(p)
    got = consume_all(bootstrap, topic, expected_count=len(sent))
    assert len(got) == len(sent)
    assert {r.timestamp_ms: (r.key, r.value, list(r.headers)) for r in got} == sent  # timestamps are unique
    return versions


def idempotent_sends(bootstrap: str, topic: str, n: int) -> dict:
    """``n`` idempotent sends over the topic's 3 partitions: the broker holds the producer's id
    with the last sequence sent to each partition, and every record is there once, in order."""
    sent = collections.defaultdict(list)
    with Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "batch.size": 4096}) as p:
        futures = []
        for i in range(n):
            value = b"%06d" % i
            sent[i % 3].append(value)
            futures.append(p.send(topic, value=value, partition=i % 3))
        for f in futures:
            f.get(60)
        pid = p._sender.idempotence.producer_id
        assert pid >= 0
        versions = sent_versions(p)
        states = {part: describe_producers(bootstrap, topic, part) for part in range(3)}
    for part, state in states.items():
        assert [(x[0], x[2]) for x in state] == [(pid, len(sent[part]) - 1)], (part, state)
    got = collections.defaultdict(list)
    for r in consume_all(bootstrap, topic, expected_count=n):
        got[r.partition].append(r.value)
    assert dict(got) == dict(sent)
    return versions


def transactions_and_hand_over(bootstrap: str, topic: str, ids: tuple[str, str]) -> dict:
    """A transaction committed, one aborted (under ``ids[0]``), and one prepared by a producer
    (``ids[1]``) and committed from another client, all under transactions v1: read_committed
    sees the committed ones only, the aborted records exist."""
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": ids[0]}) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(300):
            p.send(topic, value=b"c%d" % i, partition=i % 3)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(100):
            p.send(topic, value=b"a%d" % i, partition=i % 3)
        p.abort_transaction()
        versions = sent_versions(p)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": ids[1]})
    p.init_transactions()
    p.begin_transaction()
    for i in range(200):
        p.send(topic, value=b"h%d" % i, partition=i % 3)
    prepared = p.prepare()
    p.close(10)
    assert not prepared.transaction_v2
    complete_transaction(prepared, True, {"bootstrap.servers": bootstrap})  # EndTxn only: no KIP-664 API
    got = consume_all(bootstrap, topic, expected_count=500, isolation_level="read_committed")
    assert sorted(r.value for r in got) == sorted([b"c%d" % i for i in range(300)] + [b"h%d" % i for i in range(200)])
    assert len(consume_all(bootstrap, topic, expected_count=600)) == 600  # the aborted ones exist
    return versions
