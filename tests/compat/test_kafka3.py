"""Compatibility pass against the newest Apache Kafka 3.9 (``pytest -m kafka3``): many users still
run 3.x.  One node from Maven jars (the session's ``kafka3``, ``KAFKA_3_VERSION``): a
producer round trip with every codec, idempotence (the broker holds our producer id and
sequences; a resend after a lost answer is not written twice), transactions (v1 only on 3.9:
AddPartitionsToTxn, Produce v11, EndTxn v4; the driver-side hand-over), and Spark writes at
least once and exactly once."""

from __future__ import annotations

import pytest
from broker_kinds import APACHE_SOURCE
from kafka_helpers import assert_in_transactions, consume_all
from tier_scenarios import idempotent_sends, round_trip, transactions_and_hand_over

from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [
    pytest.mark.kafka3,
    pytest.mark.skipif(APACHE_SOURCE != "maven", reason="Apache Kafka 3.9 from Maven jars needs java and mvn"),
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _topic(kafka3, name: str, partitions: int) -> str:
    create_topics(kafka3.bootstrap_servers, {name: partitions})
    return name


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(kafka3, codec):
    versions = round_trip(kafka3.bootstrap_servers, _topic(kafka3, f"k3-roundtrip-{codec}", 3), codec, 2000)
    assert versions[ApiKey.PRODUCE] == 11  # 3.9's maximum is ours too


def test_idempotence_exactly_once_and_in_order(kafka3):
    idempotent_sends(kafka3.bootstrap_servers, _topic(kafka3, "k3-idempotent", 3), 20_000)


def test_transactions_v1_commit_abort_and_hand_over(kafka3):
    versions = transactions_and_hand_over(kafka3.bootstrap_servers, _topic(kafka3, "k3-txn", 3),
                                          ("k3-txn-a", "k3-txn-b"))
    assert versions[ApiKey.PRODUCE] == 11 and versions[ApiKey.END_TXN] <= 4
    assert ApiKey.ADD_PARTITIONS_TO_TXN in versions


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
    assert_in_transactions(kafka3.bootstrap_servers, eos, n)

