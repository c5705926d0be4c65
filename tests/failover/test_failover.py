"""Failover on a 3-node Apache Kafka cluster (KRaft, three combined nodes, a 3-voter quorum):
replication factor 3, min.insync.replicas 2, acks=all, idempotence on.

1. SIGKILL the leader of half the partitions in the middle of 200,000 sends, restart it.
2. Rolling restart (clean stop, wait, start, each node in turn) during a 1M-row Spark write.
3. Two of three nodes down: NOT_ENOUGH_REPLICAS until delivery.timeout.ms, a clear error,
   and a new send succeeds once they are back.
4. Leadership moved by a preferred-leader election through the admin API while writing.
5. The broker forgets our producer state (producer.id.expiration.ms) between sends.
6. The transaction coordinator SIGKILLed while the driver's EndTxn (exactly-once commit) is in
   flight: the commit completes on the coordinator elected after failover.

Every fault is triggered by what the test observes (records acknowledged, rows landed, leaders in
metadata), never by sleeping and hoping.  Everything is checked by reading the topic back with
confluent-kafka: nothing lost, nothing duplicated, order per partition kept.
"""

from __future__ import annotations

import collections
import functools
import os
import signal
import threading
import time
import uuid

import pytest
from broker_kinds import APACHE_SOURCE
from kafka_helpers import consume_all, describe_producers, produce_all, producer_for

from sparkkafka_sink.errors import KafkaTimeoutError
from sparkkafka_sink.producer.handover import PreparedTransaction, TransactionAdmin
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [
    pytest.mark.failover,
    pytest.mark.slow,
    pytest.mark.skipif(APACHE_SOURCE != "maven", reason="the 3-node cluster needs java and mvn"),
]

TOPIC_CONFIG = {"min.insync.replicas": "2", "retention.ms": "-1"}


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _admin(cluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "socket.timeout.ms": 10000})


def _running_bootstrap(cluster) -> str:
    return ",".join(n.bootstrap_servers for n in cluster.nodes if n.running and not n.paused)


#: ``_wait(what, predicate, timeout)``: the predicates here ask the cluster, ten times a second
_wait = functools.partial(wait_until, interval=0.1)


def _partitions(cluster, topic: str, bootstrap: str | None = None, timeout: float = 30.0) -> dict:
    """``{partition: (leader, replicas, isr)}`` from a fresh Metadata request.  Every caller asks
    about a topic that exists, so a broker whose metadata does not know it yet (a node that has
    not caught up with the controller's last records) is asked again: an empty answer would make
    every ``all(...)`` over the partitions true without checking anything."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap or _running_bootstrap(cluster)})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and t.partitions:
            return {p: (info.leader, list(info.replicas), list(info.isrs)) for p, info in t.partitions.items()}
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: not in the metadata of {bootstrap or 'the running nodes'} "
                                 f"after {timeout:.0f} s ({t.error if t is not None else 'unknown topic'})")
        time.sleep(0.1)


def _create_topic(cluster, partitions: int, config=None) -> str:
    """A fresh topic with replication factor 3, once every partition has a leader and a full ISR.
    (confluent-kafka 2.16 refuses explicit replica assignments, so tests pick their victims from
    the leaders Kafka chose.)"""
    from confluent_kafka.admin import NewTopic

    name = f"failover-{uuid.uuid4().hex[:10]}"
    cfg = dict(TOPIC_CONFIG, **(config or {}))
    new = NewTopic(name, num_partitions=partitions, replication_factor=3, config=cfg)
    admin = _admin(cluster)  # keep the handle alive until the future resolves
    admin.create_topics([new])[name].result(30)
    _wait(f"{name}: every partition led with 3 in-sync replicas",
          lambda: (lambda ps: len(ps) == partitions and all(
              leader >= 0 and len(isr) == 3 for leader, _, isr in ps.values()))(_partitions(cluster, name)), 60)
    return name


def _leaders(cluster, topic: str, bootstrap: str | None = None) -> dict:
    return {p: leader for p, (leader, _, _) in _partitions(cluster, topic, bootstrap).items()}


_producer = functools.partial(producer_for, defaults={
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "delivery.timeout.ms": 180000,
    "request.timeout.ms": 10000,
    "max.block.ms": 180000,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 500,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "socket.connection.setup.timeout.ms": 2000,
    "socket.connection.setup.timeout.max.ms": 4000,
})


def _assert_exactly_once_in_send_order(records, sent: dict):
    """``sent[partition]`` lists the values sent to that partition, in send order; ``records``
    (sorted by partition and offset) must hold each exactly once, in that order."""
    got = collections.defaultdict(list)
    for r in records:
        got[r.partition].append(r.value)
    for p in set(sent) | set(got):
        want, have = sent.get(p, []), got.get(p, [])
        if want == have:
            continue
        counts = collections.Counter(have)
        lost = set(want) - set(counts)
        dups = {v: c for v, c in counts.items() if c > 1}
        raise AssertionError(
            f"partition {p}: {len(have)} records read, {len(want)} sent; lost {len(lost)} "
            f"(e.g. {sorted(lost)[:3]}), duplicated {len(dups)} (e.g. {list(dups.items())[:3]})"
            + ("" if lost or dups else "; order differs from send order"))


# ---------------------------------------------------------------------------------------------
# 1. SIGKILL the leader of half the partitions mid-write
# ---------------------------------------------------------------------------------------------

def test_leader_killed_mid_write_nothing_lost_nothing_duplicated_order_kept(kafka_cluster):
    topic = _create_topic(kafka_cluster, 4)
    leaders = _leaders(kafka_cluster, topic)
    # four partitions on three nodes: one node leads at least half of them (pigeonhole)
    victim_id = collections.Counter(leaders.values()).most_common(1)[0][0]
    victim = kafka_cluster.node(victim_id)
    led_by_victim = {p for p, leader in leaders.items() if leader == victim_id}
    assert len(led_by_victim) >= 2

    n, kill_after = 200_000, 50_000
    lock = threading.Lock()
    acked = [0]
    acked_while_down = collections.Counter()  # partition -> acks between kill and restart
    state = {"down": False}
    killed = threading.Event()

    def on_ack(md):
        with lock:
            acked[0] += 1
            if state["down"]:
                acked_while_down[md.partition] += 1
            if acked[0] == kill_after:
                killed.set()

    events = {}

    def killer():
        if not killed.wait(120):
            return
        victim.kill()
        events["killed_at_ack"] = acked[0]
        state["down"] = True
        # restart once the cluster moved leadership away and the producer wrote to the new leaders
        _wait("leaders moved off the killed node", lambda: all(
            leader not in (victim_id, -1) for leader in _leaders(kafka_cluster, topic).values()), 60)
        _wait("acknowledgements from the new leaders",
              lambda: all(acked_while_down[p] > 0 for p in led_by_victim) or acked[0] >= n, 120)
        state["down"] = False
        victim.start()
        events["restarted_at_ack"] = acked[0]

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    sent = collections.defaultdict(list)
    futures = []
    with _producer(kafka_cluster) as p:
        for i in range(n):
            value = b"%07d" % i
            partition = i % 4
            sent[partition].append(value)
            f = p.send(topic, value=value, key=b"k%d" % (i % 997), partition=partition)
            f.add_callback(on_ack)
            futures.append(f)
        p.flush(300)
        errors = [f.exception(0) for f in futures if f.exception(0) is not None]
        metrics = p.metrics()
    t.join(180)
    assert not errors, f"{len(errors)} sends failed, e.g. {errors[:3]}"
    assert "killed_at_ack" in events and "restarted_at_ack" in events, events
    assert events["killed_at_ack"] < n, "the leader was killed only after everything was acknowledged"
    assert all(acked_while_down[p] > 0 for p in led_by_victim), (
        f"no record reached the new leaders of {sorted(led_by_victim)} while node {victim_id} was down: "
        f"{dict(acked_while_down)}")
    assert metrics["records_sent"] == n and metrics["records_failed"] == 0
    kafka_cluster.wait_for_brokers(3)
    records = consume_all(kafka_cluster.bootstrap_servers, topic, expected_count=n, timeout=120)
    _assert_exactly_once_in_send_order(records, sent)


# ---------------------------------------------------------------------------------------------
# 2. Rolling restart during a Spark write
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def spark(retrying_spark):
    """The run's local[2,4] session (2 cores, up to 4 attempts per task): tests/retrying_spark.py."""
    return retrying_spark


def _landed(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-hw"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(partitions))
    finally:
        c.close()


def test_rolling_restart_during_a_spark_write_of_600k_rows(spark, kafka_cluster, tmp_path):
    topic = _create_topic(kafka_cluster, 8)
    n, spark_partitions = 600_000, 4
    gate = str(tmp_path / "rolling-restart-done")

    def hold_until_restarts_done(batches):
        """Pass the rows through; before each task's second half, wait for the rolling restart to
        finish, so the write surely spans it however fast the machine is."""
        import os as _os
        import time as _time

        seen = 0
        for batch in batches:
            if seen >= n // spark_partitions // 2:
                deadline = _time.monotonic() + 600
                while not _os.path.exists(gate) and _time.monotonic() < deadline:
                    _time.sleep(0.05)
            seen += batch.num_rows
            yield batch

    # 100-byte values: each task's first half is two bulk sends of 4 MiB (coalesceBytes, below),
    # which reach the broker while the second half waits for the restarts
    df = (spark.range(0, n, 1, spark_partitions)
          .selectExpr("cast(id % 1000 as string) as key", "lpad(cast(id as string), 100, '.') as value")
          .mapInArrow(hold_until_restarts_done, "key string, value string"))
    restarted = []

    def rolling_restart():
        try:
            _wait("the write is under way", lambda: _landed(kafka_cluster.bootstrap_servers, topic, 8) > 10_000,
                  300, interval=0.05)
            for node in kafka_cluster.nodes:
                node.stop()  # clean: controlled shutdown moves its leaderships away
                others = ",".join(o.bootstrap_servers for o in kafka_cluster.nodes if o is not node)
                _wait(f"node {node.node_id} out of every ISR", lambda node=node, others=others: all(
                    node.node_id not in isr for _, _, isr in _partitions(kafka_cluster, topic, others).values()), 60)
                node.start()
                kafka_cluster.wait_for_brokers(3)
                _wait(f"node {node.node_id} back in every ISR", lambda: all(
                    len(isr) == 3 for _, _, isr in _partitions(kafka_cluster, topic).values()), 120)
                restarted.append(node.node_id)
        finally:
            open(gate, "w").close()

    t = threading.Thread(target=rolling_restart, daemon=True)
    t.start()
    (df.write.format("pyprod-kafka").mode("append")
     .option("kafka.bootstrap.servers", kafka_cluster.bootstrap_servers).option("topic", topic)
     .option("coalesceBytes", str(4 << 20))
     .option("kafka.acks", "all").option("kafka.request.timeout.ms", "10000")
     .option("kafka.delivery.timeout.ms", "180000").option("kafka.max.block.ms", "180000")
     .option("kafka.retry.backoff.ms", "50").option("kafka.reconnect.backoff.max.ms", "500")
     .save())
    t.join(60)
    assert restarted == [1, 2, 3], f"rolling restart incomplete: {restarted}"
    records = consume_all(kafka_cluster.bootstrap_servers, topic, expected_count=n, timeout=300)
    counts = collections.Counter(int(r.value.lstrip(b".")) for r in records)
    missing = n - len(counts)
    assert missing == 0, f"{missing} rows missing after the rolling restart"
    assert set(counts) == set(range(n))
    print(f"rolling restart: {len(records) - n} duplicate rows (task retries resend a partition)")


# ---------------------------------------------------------------------------------------------
# 3. Two of three nodes down
# ---------------------------------------------------------------------------------------------

def test_two_nodes_down_not_enough_replicas_until_delivery_timeout_then_recovers(kafka_cluster):
    topic = _create_topic(kafka_cluster, 1)
    survivor_id = _leaders(kafka_cluster, topic)[0]
    with _producer(kafka_cluster, delivery_timeout_ms=6000, request_timeout_ms=2000,
                   linger_ms=0) as p:
        assert p.send(topic, b"before", partition=0).get(30).offset == 0
        down = [n for n in kafka_cluster.nodes if n.node_id != survivor_id]
        for node in down:
            node.stop()
        survivor = kafka_cluster.node(survivor_id).bootstrap_servers
        assert _leaders(kafka_cluster, topic, survivor) == {0: survivor_id}
        start = time.monotonic()
        future = p.send(topic, b"during", partition=0)
        with pytest.raises(KafkaTimeoutError) as info:
            future.get(60)
        elapsed = time.monotonic() - start
        message = str(info.value)
        assert f"{topic}-0" in message and "delivery.timeout.ms=6000" in message, message
        assert "NOT_ENOUGH_REPLICAS" in message, message  # the broker's answer, named
        assert 5.0 <= elapsed < 30, elapsed
        assert p.metrics()["retries"] > 0
        for node in down:
            node.start()
        kafka_cluster.wait_for_brokers(3)
        _wait("a full ISR again", lambda: all(
            len(isr) >= 2 for _, _, isr in _partitions(kafka_cluster, topic).values()), 120)
        assert p.send(topic, b"after", partition=0).get(60).offset >= 1
    values = [r.value for r in consume_all(kafka_cluster.bootstrap_servers, topic, partitions=[0])]
    assert values[0] == b"before" and values[-1] == b"after"
    # "during" may or may not have been appended before min.insync.replicas refused it
    assert set(values) <= {b"before", b"during", b"after"}


# ---------------------------------------------------------------------------------------------
# 4. Leadership moved while writing
# ---------------------------------------------------------------------------------------------

def test_preferred_leader_election_while_writing_is_followed_without_loss(kafka_cluster):
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    topic = _create_topic(kafka_cluster, 3)
    preferred = {p: replicas[0] for p, (_, replicas, _) in _partitions(kafka_cluster, topic).items()}
    # move leadership off one preferred leader with a clean restart, then write and hand it back
    # through the admin API while the producer is sending
    moved = preferred[0]
    node = kafka_cluster.node(moved)
    node.stop()
    node.start()
    kafka_cluster.wait_for_brokers(3)
    _wait(f"node {moved} in sync but not leading", lambda: (lambda ps: all(
        len(isr) == 3 and leader != moved for leader, _, isr in ps.values()))(_partitions(kafka_cluster, topic)), 120)
    before = _leaders(kafka_cluster, topic)

    n = 60_000
    sent = collections.defaultdict(list)
    acked = [0]
    elect = threading.Event()
    lock = threading.Lock()

    def on_ack(md):
        with lock:
            acked[0] += 1
            if acked[0] == n // 3:
                elect.set()

    result = {}

    def elector():
        if not elect.wait(120):
            return
        admin = _admin(kafka_cluster)
        future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(3)])
        result["errors"] = future.result(30)
        result["at_ack"] = acked[0]

    t = threading.Thread(target=elector, daemon=True)
    t.start()
    with _producer(kafka_cluster, metadata_max_age_ms=60000) as p:
        futures = []
        for i in range(n):
            value = b"%06d" % i
            sent[i % 3].append(value)
            f = p.send(topic, value=value, partition=i % 3)
            f.add_callback(on_ack)
            futures.append(f)
            if i % 2000 == 1999:
                time.sleep(0.005)  # spread the sends: the election lands in the middle
        t.join(60)
        p.flush(120)
        errors = [f.exception(0) for f in futures if f.exception(0) is not None]
        leaders_seen = {pt: p._metadata.cluster.leader_for(topic, pt) for pt in range(3)}
    assert not errors, errors[:3]
    assert "at_ack" in result and result["at_ack"] < n, result
    # partitions still led by their preferred leader answer ELECTION_NOT_NEEDED
    assert all(e is None or e.code() == KafkaError.ELECTION_NOT_NEEDED for e in result["errors"].values()), \
        result["errors"]
    after = _leaders(kafka_cluster, topic)
    assert after == preferred and before != after, (before, after, preferred)
    assert leaders_seen == after, f"the producer still routes to {leaders_seen}, leaders are {after}"
    records = consume_all(kafka_cluster.bootstrap_servers, topic, expected_count=n, timeout=120)
    _assert_exactly_once_in_send_order(records, sent)


# ---------------------------------------------------------------------------------------------
# 5. The broker forgets our producer state
# ---------------------------------------------------------------------------------------------

def test_producer_state_expired_on_the_broker_is_recovered_without_loss(kafka_cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic = _create_topic(kafka_cluster, 2)
    admin = _admin(kafka_cluster)
    leader = kafka_cluster.node(_leaders(kafka_cluster, topic)[0]).bootstrap_servers

    def set_expiration(ms):
        op = AlterConfigOpType.SET if ms is not None else AlterConfigOpType.DELETE
        entry = ConfigEntry("producer.id.expiration.ms", str(ms) if ms is not None else None,
                            incremental_operation=op)
        for node in kafka_cluster.nodes:  # (confluent-kafka cannot name the cluster-wide default)
            res = ConfigResource(ResourceType.BROKER, str(node.node_id), incremental_configs=[entry])
            admin.incremental_alter_configs([res])[res].result(30)

    sent = collections.defaultdict(list)
    set_expiration(1500)
    try:
        with _producer(kafka_cluster, linger_ms=0) as p:
            for round_ in range(3):
                futures = []
                for i in range(3000):
                    value = b"%d:%05d" % (round_, i)
                    sent[i % 2].append(value)
                    futures.append(p.send(topic, value=value, partition=i % 2))
                for f in futures:
                    f.get(60)
                pid = p._sender.idempotence.producer_id
                assert pid in {x[0] for x in describe_producers(leader, topic, 0)}
                # silence until the broker forgot us (checked every second: see the cluster config)
                _wait("the broker expired our producer state",
                      lambda pid=pid: pid not in {x[0] for x in describe_producers(leader, topic, 0)}, 60,
                      interval=0.25)
            metrics = p.metrics()
    finally:
        set_expiration(None)
    assert metrics["records_failed"] == 0
    records = consume_all(kafka_cluster.bootstrap_servers, topic, expected_count=9000, timeout=60)
    _assert_exactly_once_in_send_order(records, sent)


# ---------------------------------------------------------------------------------------------
# 6. The transaction coordinator killed during the driver's commit
# ---------------------------------------------------------------------------------------------

#: a coordinator's own states of a transaction whose EndTxn(commit) it took
_TOOK_THE_COMMIT = ("PrepareCommit", "CompleteCommit")
#: states of a transaction not ended (nothing of a write may stay in one)
_NOT_ENDED = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
_ADMIN_CONFIG = {"request.timeout.ms": 10000, "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500}


class _CoordinatorKiller:
    """Kills ``victim``, a transaction coordinator, at the first request ``api_key`` about
    ``transactional_id`` that ``admin`` sends it -- the fault is driven by that request, never by
    a timer:

    * ``"unread"``: the victim is paused (SIGSTOP, every thread stopped) before the request goes
      out, then SIGKILLed while stopped: it never reads the request.
    * ``"taken"``: the request goes out; the admin's thread, the only one that reads its
      connections, is held in ``send`` while ``observer`` -- a second admin, with connections of
      its own -- asks the victim (DescribeTransactions) until the victim itself says the
      transaction is PrepareCommit or CompleteCommit (``victim_state``); then the victim is
      SIGKILLed and the admin's connection to it closed unread.  Kafka answers an EndTxn the moment
      its PrepareCommit is replicated, and DescribeTransactions shows a state only once it is (an
      append waiting on its followers still reads Ongoing), so there is no instant at which the
      coordinator "wrote PrepareCommit but has not answered" to pause it at; its answer is lost
      on the way instead, as when the coordinator's host dies before the answer is delivered:
      the admin never hears it (``answer`` None: its request ended disconnected).

    ``sent_to``: the node each such request went to, in order (the retries after the kill go to
    whoever coordinates then)."""

    def __init__(self, admin, victim, api_key: int, how: str, transactional_id: str, observer=None):
        assert how in ("unread", "taken") and (how == "unread" or observer is not None)
        self.admin, self.victim, self.api_key, self.how = admin, victim, api_key, how
        self.transactional_id, self.observer = transactional_id, observer
        self.killed = False
        self.victim_state = None
        self.answer: object = "no answer yet"
        self.sent_to: list[int] = []
        self._send = admin.client.send
        admin.client.send = self._send_then_kill

    def _about(self, request) -> bool:
        ids = getattr(request, "transactional_ids", None) or [getattr(request, "transactional_id", None)]
        return type(request).API_KEY == self.api_key and self.transactional_id in ids

    def _send_then_kill(self, node_id, request, callback, *args, **kwargs):
        if not self._about(request):
            return self._send(node_id, request, callback, *args, **kwargs)
        self.sent_to.append(node_id)
        if self.killed or node_id != self.victim.node_id:
            return self._send(node_id, request, callback, *args, **kwargs)

        def heard(response):
            self.answer = response.response  # None: the request ended with its connection
            callback(response)

        if self.how == "unread":
            self.victim.pause()  # so it cannot answer before the kill lands (a fast one did, once)
            in_flight = self._send(node_id, request, heard, *args, **kwargs)
            # the request is on the wire: SIGKILL to the stopped process, whose threads then never
            # run again -- kill() alone would SIGCONT it first, and a broker resumed for that moment
            # can answer (one did)
            os.kill(self.victim.pid, signal.SIGKILL)
            self.victim.kill()  # its bookkeeping: the process reaped, the node down
        else:
            in_flight = self._send(node_id, request, heard, *args, **kwargs)
            self.victim_state = _wait(
                f"node {node_id} to say it took the commit of {self.transactional_id}",
                lambda: self._took_it(request.producer_id), 60)
            self.victim.kill()
            from sparkkafka_sink.errors import KafkaConnectionError
            from sparkkafka_sink.network.client import now_ms

            conn = self.admin.client.connection(node_id)
            self.admin.client._close(conn, KafkaConnectionError(
                f"node {node_id} was killed before its answer was read"), now_ms())
        self.killed = True
        return in_flight

    def _took_it(self, producer_id: int):
        assert self.observer.coordinator(self.transactional_id, time.monotonic() + 30) == self.victim.node_id
        described = self.observer.describe(self.transactional_id, time.monotonic() + 30)
        if described is not None and described.producer_id == producer_id and described.state in _TOOK_THE_COMMIT:
            return described
        return None


def _after_failover(observer, transactional_id: str, victim_id: int):
    """``(node, description)`` of ``transactional_id`` by its coordinator once that is not the
    killed node (a broker whose metadata has not caught up with the new leadership may still name
    it for a moment) and the transaction is complete there."""
    def complete():
        node = observer.coordinator(transactional_id, time.monotonic() + 30)
        if node == victim_id:
            return None
        described = observer.describe(transactional_id, time.monotonic() + 30)
        return (node, described) if described is not None and described.state == "CompleteCommit" else None

    return _wait(f"{transactional_id} CompleteCommit on a running coordinator", complete, 60, interval=0.2)


@pytest.mark.transactions
@pytest.mark.parametrize("how", ["unread", "taken"], ids=["before-it-reads-the-end", "after-it-took-the-end"])
def test_transaction_coordinator_killed_during_commit_completes_after_failover(kafka_cluster, how):
    """What the Spark driver does with a task's prepared transaction (TransactionAdmin.end), with
    its coordinator killed while the EndTxn is in flight (``_CoordinatorKiller``): before it reads
    the EndTxn (``unread``), or once it took it -- its own DescribeTransactions says PrepareCommit
    or CompleteCommit -- and before the admin hears its answer (``taken``: the case of a
    coordinator that wrote PrepareCommit and failed over without answering).  Either way the
    admin asks again, the commit completes on the coordinator elected after failover (which
    finishes a commit taken, or takes it), and every row is visible once to read_committed."""
    topic = _create_topic(kafka_cluster, 3)
    n = 3000
    p = _producer(kafka_cluster, transactional_id=f"failover-{uuid.uuid4().hex[:8]}")
    p.init_transactions()
    victim = kafka_cluster.node(p._transactions.coordinator)
    p.begin_transaction()
    for i in range(n):
        p.send(topic, value=b"%05d" % i, partition=i % 3)
    prepared = p.prepare()
    p.close(10)
    txn_id = prepared.transactional_id
    assert len(prepared.partitions) == 3
    assert consume_all(kafka_cluster.bootstrap_servers, topic, isolation_level="read_committed",
                       timeout=10) == []

    config = dict(_ADMIN_CONFIG, **{"bootstrap.servers": kafka_cluster.bootstrap_servers})
    with TransactionAdmin(config) as admin, TransactionAdmin(config) as observer:
        killer = _CoordinatorKiller(admin, victim, ApiKey.END_TXN, how, txn_id, observer)
        admin.end(prepared, True, time.monotonic() + 120)
        new_coordinator, described = _after_failover(observer, txn_id, victim.node_id)
        # the rest of the driver's commit, the node still down: nothing else of the write is open
        assert admin.abort_lingering(txn_id, time.monotonic() + 60, exclude=[txn_id]) == []
    print(f"EndTxn sent to nodes {killer.sent_to} (node {victim.node_id} killed"
          + (f" once it said {killer.victim_state.state})" if killer.victim_state else ")"))
    assert killer.killed and not victim.running
    assert killer.answer is None, f"the admin heard the killed coordinator's answer: {killer.answer!r}"
    if how == "taken":
        assert killer.victim_state.state in _TOOK_THE_COMMIT, killer.victim_state
    # the EndTxn went to the victim first; the one answered went to the coordinator after failover
    assert killer.sent_to[0] == victim.node_id and killer.sent_to[-1] == new_coordinator != victim.node_id, (
        killer.sent_to, new_coordinator)
    assert described.producer_id == prepared.producer_id
    got = consume_all(_running_bootstrap(kafka_cluster), topic, expected_count=n,
                      isolation_level="read_committed", timeout=60)
    assert sorted(r.value for r in got) == [b"%05d" % i for i in range(n)]


@pytest.mark.transactions
@pytest.mark.parametrize("moment", ["describe", "end"])
def test_the_drivers_commit_completes_whole_with_a_winners_coordinator_killed(kafka_cluster, monkeypatch, moment):
    """The driver's whole commit of an exactly-once write of three tasks
    (``spark.driver.exactly_once_writes.commit_all``: close, describe the winners, list, fence, record
    the decision, EndTxn per winner), with the coordinator of a winner killed while the commit is
    in flight -- at its DescribeTransactions, before anything is decided (``describe``: the node
    never reads it), or at its EndTxn, after the decision (``end``: the node took the commit, its
    answer never heard).  The write ends whole: every row once to read_committed, every winner
    CompleteCommit on its coordinator after failover, nothing of the write open.  Should the
    commit raise, Spark's abort follows it (``abort_all``) and must complete the write as decided."""
    import pyarrow as pa

    from sparkkafka_sink.spark.driver import exactly_once_writes
    from sparkkafka_sink.spark.options import parse_options
    from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
    from sparkkafka_sink.spark.task.task_info import TaskInfo
    from sparkkafka_sink.spark.task.write_task import run_write_task

    topic = _create_topic(kafka_cluster, 3)
    prefix = f"{topic}-txn"
    options = exactly_once_writes.start_exactly_once(parse_options({
        "kafka.bootstrap.servers": kafka_cluster.bootstrap_servers, "topic": topic,
        "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": prefix, "leaseKeeper": "none",
        "kafka.acks": "all", **{f"kafka.{k}": str(v) for k, v in _ADMIN_CONFIG.items()}}))
    plan = WritePlan(options, ColumnLayout("value"))
    tasks, per_task = 3, 1000

    def task(t: int):
        """Task ``t`` writes its rows in a transaction of its own and hands it over (prepared)."""
        values = pa.array([f"{i:05d}" for i in range(t * per_task, (t + 1) * per_task)])
        return run_write_task(iter([pa.record_batch({"value": values})]), plan, None,
                              TaskInfo(0, t, 0, attempt_id=100 + t))

    messages = [task(t) for t in range(tasks)]
    winners = [PreparedTransaction.from_json(m.transaction) for m in messages]
    assert len({w.transactional_id for w in winners}) == tasks
    target = winners[0]

    config = dict(_ADMIN_CONFIG, **{"bootstrap.servers": kafka_cluster.bootstrap_servers})
    with TransactionAdmin(config) as observer:
        victim = kafka_cluster.node(observer.coordinator(target.transactional_id, time.monotonic() + 30))
        real_admin, killers = exactly_once_writes.TransactionAdmin, []

        def commit_admin(admin_config):
            """The commit's admin with the killer; Spark's abort after it gets a plain one."""
            admin = real_admin(admin_config)
            if not killers:
                killers.append(_CoordinatorKiller(
                    admin, victim, ApiKey.DESCRIBE_TRANSACTIONS if moment == "describe" else ApiKey.END_TXN,
                    "unread" if moment == "describe" else "taken", target.transactional_id, observer))
            return admin

        monkeypatch.setattr(exactly_once_writes, "TransactionAdmin", commit_admin)
        try:
            said, failed = exactly_once_writes.commit_all(messages, options), None
        except exactly_once_writes.TransactionCommitError as e:
            failed = e
            said = exactly_once_writes.abort_all(messages, options)  # what Spark does after a failed commit
        monkeypatch.undo()
        (killer,) = killers
        print(f"node {victim.node_id} killed at the {moment} of {target.transactional_id} (requests to "
              f"{killer.sent_to}{', it said ' + killer.victim_state.state if killer.victim_state else ''}); "
              f"the commit {'raised ' + str(failed) + '; the abort said: ' if failed else 'said: '}{said}")
        assert killer.killed and not victim.running, f"the commit never asked node {victim.node_id}: {said}"
        assert killer.answer is None, f"the commit heard the killed coordinator's answer: {killer.answer!r}"
        if moment == "end":
            assert killer.victim_state.state in _TOOK_THE_COMMIT, killer.victim_state
        for w in winners:
            node, described = _after_failover(observer, w.transactional_id, victim.node_id)
            assert described.producer_id == w.producer_id, (w, described)
        # a transaction whose EndTxn was answered may be PrepareCommit a moment longer (its
        # coordinator still writing the markers); one Ongoing would stay until it timed out
        left = []

        def nothing_open():
            left[:] = observer.open_transactions(prefix, time.monotonic() + 60, _NOT_ENDED)
            return not left

        try:
            _wait("nothing of the write left open", nothing_open, 60, interval=0.5)
        except AssertionError:
            raise AssertionError(f"the write left transactions open: {left}") from None
    got = consume_all(_running_bootstrap(kafka_cluster), topic, expected_count=tasks * per_task,
                      isolation_level="read_committed", timeout=60)
    assert sorted(r.value for r in got) == [b"%05d" % i for i in range(tasks * per_task)]


@pytest.mark.transactions
def test_open_transactions_are_found_whichever_broker_coordinates_them(kafka_cluster):
    """ListTransactions on every broker (``BlockingAdmin.run_on_every_broker``): each broker lists
    only the transactions it coordinates, so the driver's sweep must ask them all."""
    topic = _create_topic(kafka_cluster, 1)
    prefix = f"spread-{uuid.uuid4().hex[:8]}-"
    producers, coordinators = [], set()
    try:
        while len(coordinators) < 3 and len(producers) < 12:  # ids until every broker coordinates one
            p = _producer(kafka_cluster, transactional_id=f"{prefix}{len(producers)}")
            producers.append(p)
            p.init_transactions()
            coordinators.add(p._transactions.coordinator)
            p.begin_transaction()
            p.send(topic, value=b"open", partition=0)
            p.flush(30)
        assert len(coordinators) >= 2, coordinators
        ids = sorted(f"{prefix}{i}" for i in range(len(producers)))
        with TransactionAdmin({"bootstrap.servers": kafka_cluster.bootstrap_servers}) as admin:
            deadline = time.monotonic() + 60
            assert sorted(t for t, _, _ in admin.open_transactions(prefix, deadline)) == ids
            assert sorted(admin.abort_lingering(prefix, deadline)) == ids
            assert admin.open_transactions(prefix, deadline) == []
    finally:
        for p in producers:
            p.close(5)


# ---------------------------------------------------------------------------------------------
# The cluster itself
# ---------------------------------------------------------------------------------------------

def test_three_node_cluster_replicates_and_survives_a_node_loss(kafka_cluster):
    from confluent_kafka.admin import AdminClient

    assert len(kafka_cluster.nodes) == 3
    topic = f"infra-rf3-{os.getpid()}-{time.monotonic_ns()}"
    create_topics(kafka_cluster.bootstrap_servers, {topic: 3}, replication_factor=3)
    md = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers}).list_topics(topic, timeout=10)
    assert len(md.brokers) == 3
    assert all(len(p.replicas) == 3 for p in md.topics[topic].partitions.values())
    assert produce_all(kafka_cluster.bootstrap_servers, topic, [b"%d" % i for i in range(30)],
                       config={"acks": "all"}) == 30
    kafka_cluster.nodes[0].kill()
    survivors = ",".join(n.bootstrap_servers for n in kafka_cluster.nodes[1:])
    assert len(consume_all(survivors, topic, 30, timeout=60)) == 30
