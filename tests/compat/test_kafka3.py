"""Compatibility pass against the newest Apache Kafka 3.9 (``pytest -m kafka3``): many users still
run 3.x.  One node from Maven jars (``KAFKA_3_VERSION``), started once for this module: a
producer round trip with every codec, idempotence (the broker holds our producer id and
sequences; a resend after a lost answer is not written twice), transactions (v1 only on 3.9:
AddPartitionsToTxn, Produce v11, EndTxn v4; the driver-side hand-over), and Spark writes at
least once and exactly once."""

from __future__ import annotations

import collections

import pytest

from broker_kinds import APACHE_SOURCE, running_apache_kafka
from kafka_helpers import consume_all, describe_producers
from sparkkafka_sink import Producer, complete_transaction
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.apache_kafka import KAFKA_3_VERSION
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [
    pytest.mark.kafka3,
    pytest.mark.skipif(APACHE_SOURCE != "maven", reason="Apache Kafka 3.9 from Maven jars needs java and mvn"),
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def kafka3():
    with running_apache_kafka(nodes=1, version=KAFKA_3_VERSION) as cluster:
        yield cluster


def _topic(kafka3, name: str, partitions: int) -> str:
    create_topics(kafka3.bootstrap_servers, {name: partitions})
    return name


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(kafka3, codec):
    topic = _topic(kafka3, f"k3-roundtrip-{codec}", 3)
    sent = []
    with Producer({"bootstrap.servers": kafka3.bootstrap_servers, "compression.type": codec,
                   "linger.ms": 5}) as p:
        futures = []
        for i in range(2000):
            key = None if i % 7 == 0 else b"key-%d" % (i % 50)
            value = None if i % 11 == 0 else b"value-%05d" % i
            headers = [("h", b"%d" % i), ("empty", None)] if i % 3 == 0 else None
            futures.append(p.send(topic, value=value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i))
            sent.append((key, value, headers or [], 1_700_000_000_000 + i))
        for f in futures:
            f.get(30)
        client = p._sender.client
        node = p._metadata.cluster.leader_for(topic, 0)
        assert client.api_version(node, ApiKey.PRODUCE) == 11  # 3.9's maximum is ours too
    got = consume_all(kafka3.bootstrap_servers, topic, expected_count=len(sent))
    assert len(got) == len(sent)
    by_ts = {ts: (k, v, list(h)) for k, v, h, ts in sent}  # timestamps are unique
    assert {r.timestamp_ms: (r.key, r.value, list(r.headers)) for r in got} == by_ts


def test_idempotence_exactly_once_and_in_order(kafka3):
    topic = _topic(kafka3, "k3-idempotent", 3)
    n = 20_000
    sent = collections.defaultdict(list)
    with Producer({"bootstrap.servers": kafka3.bootstrap_servers, "acks": "all", "linger.ms": 2,
                   "batch.size": 4096}) as p:
        futures = []
        for i in range(n):
            value = b"%06d" % i
            sent[i % 3].append(value)
            futures.append(p.send(topic, value=value, partition=i % 3))
        for f in futures:
            f.get(60)
        pid = p._sender.idempotence.producer_id
        assert pid >= 0
        leader = kafka3.bootstrap_servers
        states = {part: describe_producers(leader, topic, part) for part in range(3)}
    for part, state in states.items():
        # the broker tracks our producer id with the last sequence we sent to that partition
        assert [(x[0], x[2]) for x in state] == [(pid, len(sent[part]) - 1)], (part, state)
    got = collections.defaultdict(list)
    for r in consume_all(kafka3.bootstrap_servers, topic, expected_count=n):
        got[r.partition].append(r.value)
    assert dict(got) == dict(sent)


def test_transactions_v1_commit_abort_and_hand_over(kafka3):
    topic = _topic(kafka3, "k3-txn", 3)
    with Producer({"bootstrap.servers": kafka3.bootstrap_servers, "transactional.id": "k3-txn-a"}) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(300):
            p.send(topic, value=b"c%d" % i, partition=i % 3)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(100):
            p.send(topic, value=b"a%d" % i, partition=i % 3)
        p.abort_transaction()
        sent = p._sender.client.requests_sent
    assert max(v for k, v in sent if k == ApiKey.PRODUCE) == 11 and max(v for k, v in sent if k == ApiKey.END_TXN) <= 4
    assert any(k == ApiKey.ADD_PARTITIONS_TO_TXN for k, _ in sent)
    p = Producer({"bootstrap.servers": kafka3.bootstrap_servers, "transactional.id": "k3-txn-b"})
    p.init_transactions()
    p.begin_transaction()
    for i in range(200):
        p.send(topic, value=b"h%d" % i, partition=i % 3)
    prepared = p.prepare()
    p.close(10)
    assert not prepared.transaction_v2
    complete_transaction(prepared, True, {"bootstrap.servers": kafka3.bootstrap_servers})
    got = consume_all(kafka3.bootstrap_servers, topic, expected_count=500, isolation_level="read_committed")
    assert sorted(r.value for r in got) == sorted([b"c%d" % i for i in range(300)] + [b"h%d" % i for i in range(200)])
    assert len(consume_all(kafka3.bootstrap_servers, topic, expected_count=600)) == 600  # the aborted ones exist


def test_spark_write(kafka3, retrying_spark):
    spark = retrying_spark  # tests/retrying_spark.py: the run's local[2,4] session
    topic = _topic(kafka3, "k3-spark", 4)
    n = 50_000
    df = spark.range(0, n, 1, 4).selectExpr("cast(id % 100 as string) as key", "cast(id as string) as value")
    (df.write.format("pyprod-kafka").mode("append")
     .option("kafka.bootstrap.servers", kafka3.bootstrap_servers).option("topic", topic)
     .option("kafka.compression.type", "lz4").save())
    got = consume_all(kafka3.bootstrap_servers, topic, expected_count=n)
    assert sorted(int(r.value) for r in got) == list(range(n))
    eos = _topic(kafka3, "k3-spark-eos", 4)
    (df.write.format("pyprod-kafka").mode("append")
     .option("kafka.bootstrap.servers", kafka3.bootstrap_servers).option("topic", eos)
     .option("deliveryGuarantee", "exactly-once").save())
    got = consume_all(kafka3.bootstrap_servers, eos, expected_count=n, isolation_level="read_committed")
    assert sorted(int(r.value) for r in got) == list(range(n))

