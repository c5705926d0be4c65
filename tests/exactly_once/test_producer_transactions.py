"""Producer transactions on Apache Kafka: commit, abort, fencing, and the hand-over that lets
another process (the Spark driver) commit what a task prepared.  Read back with read_committed;
a read_uncommitted control shows aborted records exist (the test bites).

Each runs on two Kafka 4 clusters: the session's node, formatted with Kafka's default
``transaction.version=2`` (transactions v2: partitions join through Produce v12, EndTxn v5 bumps
the epoch), and a node formatted with ``transaction.version=1`` (AddPartitionsToTxn, EndTxn v4)."""

from __future__ import annotations

import uuid

import pytest
from broker_kinds import running_apache_kafka
from kafka_helpers import consume_all

from sparkkafka_sink import Producer, abort_lingering, complete_transaction
from sparkkafka_sink.errors import KafkaError, ProducerFencedError
from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.transactions]


@pytest.fixture(scope="module")
def kafka_tv1(apache_kafka):
    """A Kafka 4 node whose storage was formatted with transactions v1 only."""
    with running_apache_kafka(" transaction.version=1", nodes=1, features={"transaction.version": 1}) as cluster:
        yield cluster


@pytest.fixture(params=["tv2", "tv1"])
def bootstrap(request, apache_kafka):
    cluster = apache_kafka if request.param == "tv2" else request.getfixturevalue("kafka_tv1")
    return cluster.bootstrap_servers


@pytest.fixture
def topic(bootstrap, request):
    name = f"txn-{request.node.name[-30:].strip('[]')}-{uuid.uuid4().hex[:6]}".replace("[", "-").replace("]", "")
    create_topics(bootstrap, {name: 3}, timeout=30)
    return name


def producer(bootstrap, txn_id=None, **extra):
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id or f"t-{uuid.uuid4().hex}",
                     "max.block.ms": 30000, "linger.ms": 5, **extra})


def committed(bootstrap, topic, n=None):
    return consume_all(bootstrap, topic, expected_count=n, isolation_level="read_committed", timeout=30)


def everything(bootstrap, topic, n=None):
    return consume_all(bootstrap, topic, expected_count=n, isolation_level="read_uncommitted", timeout=30)


def test_commit_and_abort(bootstrap, topic):
    with producer(bootstrap) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(300):
            p.send(topic, value=b"c%d" % i, key=b"k%d" % i)
        p.send_batch(topic, values=[b"b%d" % i for i in range(300)])
        p.commit_transaction()
        p.begin_transaction()
        for i in range(200):
            p.send(topic, value=b"a%d" % i)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, value=b"last", partition=0)
        p.commit_transaction()
    got = committed(bootstrap, topic, 601)
    values = sorted(r.value for r in got)
    assert values == sorted([b"c%d" % i for i in range(300)] + [b"b%d" % i for i in range(300)] + [b"last"])
    # the control read shows the aborted records were written (and kept invisible)
    assert sum(1 for r in everything(bootstrap, topic, 801) if r.value.startswith(b"a")) == 200


def test_send_outside_a_transaction_is_refused(bootstrap, topic):
    with producer(bootstrap) as p:
        with pytest.raises(KafkaError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(KafkaError, match="begin_transaction"):
            p.send(topic, value=b"x")


def test_a_refused_batch_dooms_the_transaction_naming_the_broker_answer(bootstrap):
    """A record the broker refuses (over the topic's max.message.bytes) fails its future; the
    transaction can then only be aborted, and the refusal says why (the broker's answer, not a
    follow-on symptom).  After the abort the producer carries on."""
    name = f"txn-refused-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, {name: 1}, config={"max.message.bytes": "2048"}, timeout=30)
    # small batches, several in flight behind the refused one, more queued: every record must
    # resolve long before delivery.timeout.ms (10 min here)
    with producer(bootstrap, **{"max.request.size": 100_000, "batch.size": 1024, "linger.ms": 0,
                                "delivery.timeout.ms": 600_000}) as p:
        p.init_transactions()
        p.begin_transaction()
        ok = p.send(name, value=b"fits")
        too_big = p.send(name, value=b"x" * 10_000)
        behind, refused_at_send = [], 0
        for i in range(2000):
            try:
                behind.append(p.send(name, value=b"b%04d" % i + b"." * 200))
            except KafkaError as e:  # the refusal is known: send() says so at once
                assert "must be aborted" in str(e) and "MESSAGE_TOO_LARGE" in str(e)
                refused_at_send += 1
        p.flush(60)
        ok.get(0)
        with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
            too_big.get(0)
        outcomes = []
        for f in behind:
            try:
                f.get(0)
                outcomes.append("sent")
            except KafkaError:
                outcomes.append("failed")
        assert "failed" in outcomes or refused_at_send  # all of them are aborted with the rest
        with pytest.raises(KafkaError, match="Cannot commit .*: a batch of the transaction failed: .*MESSAGE_TOO_LARGE.*abort it"):
            p.commit_transaction()
        p.abort_transaction()
        p.begin_transaction()
        p.send(name, value=b"after")
        p.commit_transaction()
    assert [r.value for r in committed(bootstrap, name, 1)] == [b"after"]


def test_a_newer_producer_fences_the_older_and_aborts_its_transaction(bootstrap, topic):
    txn_id = f"fence-{uuid.uuid4().hex}"
    old = producer(bootstrap, txn_id)
    old.init_transactions()
    old.begin_transaction()
    old.send(topic, value=b"old", partition=0).get(30)
    new = producer(bootstrap, txn_id)
    new.init_transactions()  # fences old; its open transaction is aborted
    with pytest.raises(ProducerFencedError, match="fenced"):
        old.commit_transaction()
    new.begin_transaction()
    new.send(topic, value=b"new", partition=0)
    new.commit_transaction()
    old.close(5)
    new.close(5)
    assert [r.value for r in committed(bootstrap, topic, 1)] == [b"new"]


def test_prepared_transaction_committed_from_elsewhere(bootstrap, topic):
    """The hand-over: a producer prepares, closes; another client commits under its epoch."""
    p = producer(bootstrap)
    p.init_transactions()
    p.begin_transaction()
    for i in range(500):
        p.send(topic, value=b"h%d" % i, partition=i % 3)  # every partition (null keys stick to one)
    prepared = p.prepare()
    p.close(10)
    assert isinstance(prepared, PreparedTransaction) and len(prepared.partitions) == 3
    assert committed(bootstrap, topic) == []  # nothing visible before the commit
    again = PreparedTransaction.from_json(prepared.to_json())
    complete_transaction(again, True, {"bootstrap.servers": bootstrap})
    complete_transaction(again, True, {"bootstrap.servers": bootstrap})  # a retried commit is harmless
    assert len(committed(bootstrap, topic, 500)) == 500


def test_prepared_transaction_aborted_from_elsewhere(bootstrap, topic):
    p = producer(bootstrap)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, value=b"gone", partition=1)
    prepared = p.prepare()
    p.close(10)
    complete_transaction(prepared, False, {"bootstrap.servers": bootstrap})
    p2 = producer(bootstrap)
    p2.init_transactions()
    p2.begin_transaction()
    p2.send(topic, value=b"kept", partition=1)
    p2.commit_transaction()
    p2.close(5)
    assert [r.value for r in committed(bootstrap, topic, 1)] == [b"kept"]
    assert b"gone" in [r.value for r in everything(bootstrap, topic, 2)]


def test_a_producer_asks_the_coordinator_about_another_transactional_id(bootstrap, topic):
    """``transaction_state``: another id's state from its coordinator, asked through the producer's
    own Sender and connections (what an exactly-once Spark task asks of its write's closed
    marker), before or after its own ``init_transactions``, without disturbing its own
    transactions."""
    other_id = f"other-{uuid.uuid4().hex[:8]}"
    with producer(bootstrap) as asker:
        assert asker.transaction_state(other_id) is None  # unknown to the coordinator
        with producer(bootstrap, other_id) as other:
            other.init_transactions()
            asker.init_transactions()
            assert asker.transaction_state(other_id) == "Empty"
            other.begin_transaction()
            other.send(topic, value=b"theirs", partition=0)
            other.flush(30)
            asker.begin_transaction()
            asker.send(topic, value=b"mine", partition=1)
            assert asker.transaction_state(other_id) == "Ongoing"  # asked inside its own transaction
            other.commit_transaction()
            assert asker.transaction_state(other_id) in ("PrepareCommit", "CompleteCommit")
            asker.commit_transaction()
    assert sorted(r.value for r in committed(bootstrap, topic, 2)) == [b"mine", b"theirs"]


def test_abort_lingering_by_prefix(bootstrap, topic):
    prefix = f"job-{uuid.uuid4().hex[:8]}-"
    keep_id = prefix + "keep"
    prepared = {}
    for name in ("a", "b", "keep"):
        p = producer(bootstrap, prefix + name)
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, value=name.encode(), partition=2)
        prepared[name] = p.prepare()
        p.close(5)
    aborted = abort_lingering(prefix, {"bootstrap.servers": bootstrap}, exclude=[keep_id])
    assert sorted(aborted) == [prefix + "a", prefix + "b"]
    complete_transaction(prepared["keep"], True, {"bootstrap.servers": bootstrap})
    # the partition's last stable offset moved past everything: a read_committed read ends
    assert [r.value for r in committed(bootstrap, topic, 1)] == [b"keep"]


@pytest.mark.parametrize("bootstrap", ["tv2"], indirect=True)
def test_transaction_timeout_above_the_brokers_cap_is_a_clear_error(bootstrap):
    with producer(bootstrap, **{"transaction.timeout.ms": 3_600_000}) as p:
        with pytest.raises(KafkaError, match=r"transaction.timeout.ms=3600000 is more than the brokers allow"):
            p.init_transactions()


def test_transaction_version_negotiated(bootstrap, topic, request):
    """Transactions v2 where the cluster finalized it: Produce v12 adds the partitions (no
    AddPartitionsToTxn), EndTxn v5 bumps the epoch at every end; v1 otherwise (Produce <= 11,
    AddPartitionsToTxn, EndTxn <= 4, one epoch).  Read back either way."""
    v2 = request.node.callspec.params["bootstrap"] == "tv2"
    with producer(bootstrap) as p:
        p.init_transactions()
        first_epoch = p._transactions.producer_epoch
        for round_ in range(3):
            p.begin_transaction()
            for i in range(90):
                p.send(topic, value=b"%d-%d" % (round_, i), partition=i % 3)
            p.commit_transaction() if round_ != 1 else p.abort_transaction()
        sent = p._sender.client.requests_sent
        epochs = p._transactions.producer_epoch - first_epoch
    produce = {v for (k, v) in sent if k == ApiKey.PRODUCE}
    end_txn = {v for (k, v) in sent if k == ApiKey.END_TXN}
    added = sum(n for (k, _), n in sent.items() if k == ApiKey.ADD_PARTITIONS_TO_TXN)
    if v2:
        assert (produce, end_txn, added, epochs) == ({12}, {5}, 0, 3)
    else:
        assert max(produce) <= 11 and max(end_txn) <= 4 and added >= 3 and epochs == 0
    assert sorted(r.value for r in committed(bootstrap, topic, 180)) == sorted(
        b"%d-%d" % (r, i) for r in (0, 2) for i in range(90))
    assert len(everything(bootstrap, topic, 270)) == 270  # the aborted round is there, unseen
