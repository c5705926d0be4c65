"""The old-broker tier (``pytest -m old_brokers``): Apache Kafka 2.8 (ZooKeeper mode) and 3.3 (the
first production KRaft), which Amazon MSK and Confluent Platform clusters still run.  One node per
version from Maven jars, started once for this module (the 2.8 node with a SASL_PLAINTEXT
listener and SCRAM users in ZooKeeper).  Both answer Produce v9 at most, InitProducerId v4,
EndTxn v3: the producer negotiates down from its own versions.  Proven on each: a round trip
with every codec read back by confluent-kafka (check.crcs), idempotence (the broker holds our
producer id and sequences), transactions (commit, abort, hand-over; read_committed readback),
Spark writes; SCRAM on 2.8.  Exactly-once through Spark needs ListTransactions and
DescribeTransactions (Kafka 3.0): it works on 3.3 and is refused on the driver on 2.8, naming
the broker's release."""

from __future__ import annotations

import pytest
from broker_kinds import APACHE_SOURCE, running_apache_kafka
from kafka_helpers import consume_all
from tier_scenarios import idempotent_sends, round_trip, transactions_and_hand_over

from sparkkafka_sink import Producer, abort_lingering
from sparkkafka_sink.errors import AuthenticationError, UnsupportedVersionError
from sparkkafka_sink.producer.handover import HANDOVER_APIS, TransactionAdmin
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.apache_kafka import KAFKA_FIRST_KRAFT_VERSION, KAFKA_ZOOKEEPER_VERSION
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.security import BrokerSecurity

pytestmark = [
    pytest.mark.old_brokers,
    pytest.mark.skipif(APACHE_SOURCE != "maven", reason="Apache Kafka 2.8/3.3 from Maven jars needs java and mvn"),
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
#: what each version answers at most (its ApiVersions), which the producer must come down to
MAX_VERSIONS = {ApiKey.PRODUCE: 9, ApiKey.INIT_PRODUCER_ID: 4, ApiKey.END_TXN: 3, ApiKey.ADD_PARTITIONS_TO_TXN: 3}
SCRAM_ON_KRAFT_3_3 = ("Apache Kafka 3.3 in KRaft mode cannot hold SCRAM credentials: KRaft stores them from 3.5 "
                      "on (KIP-900; its storage format's --add-scram and AlterUserScramCredentials under KRaft), "
                      "so SCRAM is tested on 2.8 in ZooKeeper mode")


@pytest.fixture(scope="module", params=[KAFKA_ZOOKEEPER_VERSION, KAFKA_FIRST_KRAFT_VERSION])
def old_kafka(request, pki):
    version = request.param
    zookeeper = version == KAFKA_ZOOKEEPER_VERSION
    security = BrokerSecurity(pki, listeners=("SASL_PLAINTEXT",)) if zookeeper else None
    with running_apache_kafka(" (old-broker tier)", nodes=1, version=version, security=security) as cluster:
        assert cluster.zookeeper_mode == zookeeper
        yield cluster


def _topic(cluster, name: str, partitions: int) -> str:
    name = f"{name}-{cluster.version}"
    create_topics(cluster.bootstrap_servers, {name: partitions})
    return name


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(old_kafka, codec):
    versions = round_trip(old_kafka.bootstrap_servers, _topic(old_kafka, f"old-roundtrip-{codec}", 3), codec, 1500)
    assert versions[ApiKey.PRODUCE] == MAX_VERSIONS[ApiKey.PRODUCE]


def test_idempotence_broker_holds_producer_id_and_sequences(old_kafka):
    versions = idempotent_sends(old_kafka.bootstrap_servers, _topic(old_kafka, "old-idempotent", 3), 6000)
    assert versions[ApiKey.INIT_PRODUCER_ID] == MAX_VERSIONS[ApiKey.INIT_PRODUCER_ID]


def test_transactions_commit_abort_and_hand_over(old_kafka):
    versions = transactions_and_hand_over(old_kafka.bootstrap_servers, _topic(old_kafka, "old-txn", 3),
                                          (f"old-txn-a-{old_kafka.version}", f"old-txn-b-{old_kafka.version}"))
    for key in (ApiKey.PRODUCE, ApiKey.END_TXN, ApiKey.ADD_PARTITIONS_TO_TXN):
        assert versions[key] == MAX_VERSIONS[key], (key, versions)


def test_the_hand_over_apis_and_the_release_the_broker_answers_as(old_kafka):
    """The driver's check: 2.8 lacks KIP-664's ListTransactions and DescribeTransactions and is
    named as Apache Kafka 2.8; 3.3 has them."""
    import time

    with TransactionAdmin({"bootstrap.servers": old_kafka.bootstrap_servers}) as admin:
        assert admin.brokers_lacking(HANDOVER_APIS) == []  # connected to none yet: none judged
        admin.fence(f"old-probe-{old_kafka.version}", time.monotonic() + 30)
        lacking = admin.brokers_lacking(HANDOVER_APIS)
    if old_kafka.version == KAFKA_ZOOKEEPER_VERSION:
        assert [(b.address, b.release, b.missing, b.needed) for b in lacking] == [
            (old_kafka.bootstrap_servers, "Apache Kafka 2.8", ("ListTransactions", "DescribeTransactions"), "3.0")]
        # the library's own call says the same
        with pytest.raises(UnsupportedVersionError) as info:
            abort_lingering("old-nothing-", {"bootstrap.servers": old_kafka.bootstrap_servers}, timeout=20)
        assert (f"Broker {old_kafka.bootstrap_servers} does not support LIST_TRANSACTIONS at all (it answers as "
                "Apache Kafka 2.8 does; it arrived in Apache Kafka 3.0)") in str(info.value), info.value
    else:
        assert lacking == []
        assert abort_lingering("old-nothing-", {"bootstrap.servers": old_kafka.bootstrap_servers}, timeout=20) == []


def test_spark_writes(old_kafka, retrying_spark):
    """At least once on both; exactly-once on 3.3, and on 2.8 refused on the driver before any
    task runs, naming the broker's release and the one needed."""
    spark = retrying_spark
    bootstrap = old_kafka.bootstrap_servers
    n = 20_000
    df = spark.range(0, n, 1, 4).selectExpr("cast(id % 100 as string) as key", "cast(id as string) as value")

    def write(topic: str, **options):
        w = (df.write.format("pyprod-kafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic))
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    plain = _topic(old_kafka, "old-spark", 4)
    write(plain, **{"kafka.compression.type": "zstd"})
    assert sorted(int(r.value) for r in consume_all(bootstrap, plain, expected_count=n)) == list(range(n))
    eos = _topic(old_kafka, "old-spark-eos", 4)
    if old_kafka.version == KAFKA_ZOOKEEPER_VERSION:
        with pytest.raises(Exception) as info:
            write(eos, deliveryGuarantee="exactly-once")
        text = str(info.value)
        assert ("deliveryGuarantee=exactly-once needs brokers of Apache Kafka 3.0 or newer" in text
                and f"the broker at {bootstrap} answers as Apache Kafka 2.8 does, without ListTransactions and "
                    "DescribeTransactions" in text), text
        assert consume_all(bootstrap, eos) == []  # refused before any task wrote
    else:
        write(eos, deliveryGuarantee="exactly-once")
        got = consume_all(bootstrap, eos, expected_count=n, isolation_level="read_committed")
        assert sorted(int(r.value) for r in got) == list(range(n))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram(old_kafka, mechanism):
    if old_kafka.security is None:
        pytest.skip(SCRAM_ON_KRAFT_3_3)
    topic = _topic(old_kafka, f"old-scram-{mechanism.lower()}", 1)
    user, password = old_kafka.security.credentials(mechanism)
    config = {"bootstrap.servers": old_kafka.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": mechanism, "sasl.username": user}
    with Producer({**config, "sasl.password": password}) as p:
        for i in range(100):
            p.send(topic, value=b"s%d" % i)
        p.flush(30)
    got = consume_all(old_kafka.bootstrap_servers, topic, expected_count=100)
    assert [r.value for r in got] == [b"s%d" % i for i in range(100)]
    with pytest.raises(AuthenticationError) as info:
        with Producer({**config, "sasl.password": old_kafka.security.wrong_password, "max.block.ms": 10_000}) as p:
            p.send(topic, value=b"never").get(15)
    assert mechanism in str(info.value) and repr(user) in str(info.value), info.value
