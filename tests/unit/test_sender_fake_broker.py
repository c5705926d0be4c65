"""The Sender (and the producer around it) against the in-process fake broker: leader changes,
metadata refresh, timeouts, in-flight caps, idempotence, non-retriable errors, wakeups and
bounded flush/close."""

from __future__ import annotations

import threading
import time

import pytest
from fake_broker import (
    CORRUPT_MESSAGE,
    DUPLICATE_SEQUENCE_NUMBER,
    INIT_PRODUCER_ID,
    INVALID_REQUIRED_ACKS,
    MESSAGE_TOO_LARGE,
    METADATA,
    NOT_LEADER_OR_FOLLOWER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCE,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
    Behavior,
)

from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError
from sparkkafka_sink.protocol import error_codes as perrors
from sparkkafka_sink.testing.waiting import wait_until

NOT_ENOUGH_REPLICAS = 19


def produce_calls(b, topic, partition):
    """``[(base_sequence, answered code, values)]`` of every Produce for one partition."""
    return [(batches[0].base_sequence, r.answered[(topic, partition)], [x.value for x in batches[0].records])
            for r, batches, _ in b.produce_batches(topic, partition)]


def sender_alive(p) -> bool:
    return any(t.name == f"sparkkafka-sink-sender-{p.client_id}" for t in threading.enumerate())


# ---------------------------------------------------------------------------- leaders and metadata

def test_not_leader_refreshes_metadata_and_retries_on_the_new_leader(make_broker, cluster, make_producer):
    a, b = make_broker(), make_broker()
    cluster.add_topic("t", 1, a.node_id)
    p = make_producer(a)
    assert p.partitions_for("t") == [0]
    cluster.set_leader("t", 0, b.node_id)  # the producer's metadata is now stale
    md = p.send("t", b"moved", partition=0).get(5)
    assert md.offset == 0
    # (a retry may beat the metadata refresh, which has its own backoff, and hit a again)
    assert {code for _, code, _ in produce_calls(a, "t", 0)} == {NOT_LEADER_OR_FOLLOWER}
    assert [code for _, code, _ in produce_calls(b, "t", 0)] == [0]
    assert b.log_values("t", 0) == [b"moved"]
    # the retry on b happened after a metadata refresh that followed the error
    failed_at = a.requests_of(PRODUCE)[0].time
    assert any(r.time > failed_at for r in a.requests_of(METADATA) + b.requests_of(METADATA))
    assert b.requests_of(PRODUCE)[0].time > failed_at


def test_leader_gone_refreshes_metadata_and_fails_over(make_broker, cluster, make_producer):
    a, b = make_broker(), make_broker()
    cluster.add_topic("t", 1, a.node_id)
    p = make_producer(b, reconnect_backoff_ms=20, retry_backoff_ms=20)
    assert p.send("t", b"before", partition=0).get(5).offset == 0
    a.close()  # the leader dies: its port now refuses connections
    cluster.set_leader("t", 0, b.node_id)
    start = time.monotonic()
    assert p.send("t", b"after", partition=0).get(5).offset == 1
    assert time.monotonic() - start < 3
    assert b.log_values("t", 0) == [b"before", b"after"]
    # the new leader knew the producer's sequences: no producer-id reset was needed
    assert [(seq, code) for seq, code, _ in produce_calls(b, "t", 0)] == [(1, 0)]
    assert len(a.requests_of(INIT_PRODUCER_ID) + b.requests_of(INIT_PRODUCER_ID)) == 1


def test_mixed_partition_outcomes_in_one_response(broker, make_producer):
    broker.produce_errors("t", 0, NOT_LEADER_OR_FOLLOWER)
    p = make_producer(broker, linger_ms=50, retry_backoff_ms=300)
    f0, f1 = p.send("t", b"p0", partition=0), p.send("t", b"p1", partition=1)
    assert f1.get(5).offset == 0
    first = broker.requests_of(PRODUCE)[0]
    assert first.answered == {("t", 0): NOT_LEADER_OR_FOLLOWER, ("t", 1): 0}  # one request, both
    assert not f0.done()  # partition 0 waits for its retry; partition 1 did not wait for it
    assert f0.get(5).offset == 0
    assert [r.answered for r in broker.requests_of(PRODUCE)[1:]] == [{("t", 0): 0}]


def test_unknown_topic_or_partition_refreshes_metadata_then_retries(broker, make_producer):
    broker.produce_errors("t", 0, UNKNOWN_TOPIC_OR_PARTITION)
    p = make_producer(broker)
    assert p.send("t", b"x", partition=0).get(5).offset == 0
    (first, _, _), (second, _, _) = broker.produce_batches("t", 0)
    assert [first.answered[("t", 0)], second.answered[("t", 0)]] == [UNKNOWN_TOPIC_OR_PARTITION, 0]
    # the error triggered a metadata refresh (it may land after the retry: each has its own backoff)
    assert broker.wait_for(lambda: any(m.time > first.time for m in broker.requests_of(METADATA)), 2)
    assert p.metrics()["retries"] == 1


def test_metadata_refreshed_periodically(make_broker, cluster, make_producer):
    a, b = make_broker(), make_broker()
    cluster.add_topic("t", 1, a.node_id)
    p = make_producer(a, metadata_max_age_ms=150)
    assert p.partitions_for("t") == [0]

    def metadata_count():
        return len(a.requests_of(METADATA)) + len(b.requests_of(METADATA))

    start = time.monotonic()
    n0 = metadata_count()
    assert a.wait_for(lambda: metadata_count() >= n0 + 4, 3)
    assert time.monotonic() - start >= 4 * 0.15 - 0.05  # not more often than the max age
    # a leader change with no error at all is picked up by the next periodic refresh
    cluster.set_leader("t", 0, b.node_id)
    n1 = metadata_count()
    assert a.wait_for(lambda: metadata_count() >= n1 + 2, 3)
    p.send("t", b"x", partition=0).get(5)
    assert a.requests_of(PRODUCE) == [] and len(b.requests_of(PRODUCE)) == 1
    assert b.log_values("t", 0) == [b"x"]


# ---------------------------------------------------------------------------- timeouts

def test_delivery_timeout_fails_futures_naming_the_partition(broker, make_producer):
    broker.default_behavior[PRODUCE] = Behavior(drop=True)
    p = make_producer(broker, request_timeout_ms=200, delivery_timeout_ms=600)
    p.partitions_for("t")
    start = time.monotonic()
    futs = [p.send("t", b"x", partition=i) for i in (0, 1)]
    for i, f in enumerate(futs):
        with pytest.raises(KafkaTimeoutError, match=rf"\bt-{i}\b.*delivery\.timeout\.ms"):
            f.get(5)
    elapsed = time.monotonic() - start
    assert 0.55 <= elapsed < 2.5, elapsed
    assert p.metrics()["records_failed"] == 2


def test_flush_with_timeout_returns_within_its_bound(broker, make_producer):
    broker.default_behavior[PRODUCE] = Behavior(drop=True)
    p = make_producer(broker)
    fut = p.send("t", b"x", partition=0)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="flush"):
        p.flush(timeout=0.5)
    assert 0.45 <= time.monotonic() - start < 1.5
    assert not fut.done()
    p.close(0.1)


def test_close_with_timeout_returns_within_its_bound_and_stops_the_sender(broker, make_producer):
    broker.default_behavior[PRODUCE] = Behavior(drop=True)
    p = make_producer(broker)
    fut = p.send("t", b"x", partition=0)
    assert broker.wait_for(lambda: len(broker.requests_of(PRODUCE)) == 1)
    assert sender_alive(p)
    start = time.monotonic()
    p.close(timeout=0.5)
    assert 0.45 <= time.monotonic() - start < 1.5
    assert not sender_alive(p)
    with pytest.raises(KafkaError):
        fut.get(0)


def test_close_without_timeout_delivers_what_is_buffered(broker, make_producer):
    p = make_producer(broker, linger_ms=60_000)
    futs = [p.send("t", b"v%d" % i, partition=0) for i in range(5)]
    p.close()
    assert not sender_alive(p)
    assert [f.get(0).offset for f in futs] == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------- acks=0

def test_acks0_request_still_unwritten_when_its_connection_closes_is_sent_again(broker, make_producer):
    """acks=0 completes a request once it is on the wire; one still (partly) in the client's
    buffers when the connection closes never reached the broker, so it is sent again rather than
    reported delivered (only a request written whole can be lost, as acks=0 promises nothing)."""
    p = make_producer(broker, acks="0", enable_idempotence=False, max_request_size=64 << 20,
                      buffer_memory=64 << 20, batch_size=64 << 20)
    p.send("t", b"first", partition=0)
    p.flush(5)  # the leader's connection is set up
    assert broker.wait_for(lambda: broker.log_values("t", 0) == [b"first"])
    broker.reading.clear()  # the broker stops reading: its socket buffers fill, then ours
    value = b"x" * (24 << 20)  # far more than the socket buffers hold
    future = p.send("t", value, partition=0)
    node = broker.node_id
    wait_until("the request is stuck half-written", lambda: (c := p._client.connection(node)) is not None
               and c.has_pending_writes, timeout=10)
    broker.drop_connections()
    broker.reading.set()
    assert future.get(10).offset == -1  # acks=0: nothing is acknowledged
    assert broker.wait_for(lambda: len(broker.logs[("t", 0)].records) == 2, 10)
    assert broker.log_values("t", 0) == [b"first", value]  # sent again on a new connection, once


# ---------------------------------------------------------------------------- in-flight cap

@pytest.mark.parametrize("max_in_flight", [1, 2, 5])
def test_max_in_flight_requests_per_connection(broker, make_producer, max_in_flight):
    gate = threading.Event()
    p = make_producer(broker, max_in_flight_requests_per_connection=max_in_flight, batch_size=100)
    warm_up(p, "t", 2)
    broker.default_behavior[PRODUCE] = Behavior(gate=gate)
    values = [b"%03d" % i + b"." * 100 for i in range(12)]  # one record per batch
    futs = [p.send("t", v, partition=i % 2) for i, v in enumerate(values)]
    assert broker.wait_for(lambda: broker.outstanding() >= max_in_flight, 3)
    time.sleep(0.3)  # give a buggy client the chance to exceed the cap
    assert broker.outstanding() == max_in_flight
    gate.set()
    for f in futs:
        f.get(5)
    assert broker.max_outstanding == max_in_flight
    assert broker.log_values("t", 0)[1:] == values[0::2] and broker.log_values("t", 1)[1:] == values[1::2]


def test_sender_sleeps_while_the_in_flight_cap_is_reached(broker, make_producer):
    """Full batches waiting for a free in-flight slot must not make the Sender spin."""
    gate = threading.Event()
    p = make_producer(broker, max_in_flight_requests_per_connection=2, batch_size=100)
    warm_up(p, "t", 2)
    broker.default_behavior[PRODUCE] = Behavior(gate=gate)
    # one full batch per record: two requests fill the cap, the other batches wait for a slot
    futs = [p.send("t", b"%03d" % i + b"." * 100, partition=i % 2) for i in range(8)]
    assert broker.wait_for(lambda: broker.outstanding() >= 2, 3)
    client, polls = p._sender.client, [0]
    real_poll = client.poll

    def counting_poll(*args):
        polls[0] += 1
        return real_poll(*args)

    client.poll = counting_poll
    time.sleep(0.5)
    assert polls[0] < 50, f"{polls[0]} polls in 0.5 s while waiting for a response"
    gate.set()
    assert [f.get(5).offset for f in futs] == [1, 1, 2, 2, 3, 3, 4, 4]


# ---------------------------------------------------------------------------- idempotence

def test_idempotent_batches_carry_producer_id_and_consecutive_sequences(broker, make_producer):
    p = make_producer(broker, linger_ms=20, batch_size=300)
    futs = [p.send("t", b"%02d" % i + b"-" * 60, partition=i % 2) for i in range(24)]
    p.flush(5)
    assert all(f.get(0) for f in futs)
    (init,) = broker.requests_of(INIT_PRODUCER_ID)
    assert init.version >= 3 and init.body.transactional_id is None
    assert (init.body.producer_id, init.body.producer_epoch) == (-1, -1)
    pid = 1000  # the fake's first producer id
    for part in (0, 1):
        seen = broker.produce_batches("t", part)
        assert len(seen) >= 3, "expected several batches per partition"
        expected_seq = 0
        for _, (batch,), _ in seen:
            assert (batch.producer_id, batch.producer_epoch) == (pid, 0)
            assert batch.base_sequence == expected_seq
            expected_seq += len(batch.records)
        assert expected_seq == 12
        assert broker.log_values("t", part) == [b"%02d" % i + b"-" * 60 for i in range(part, 24, 2)]


def test_retried_batch_is_resent_with_same_sequence_and_identical_bytes(broker, make_producer):
    broker.produce_errors("t", 0, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS)
    p = make_producer(broker, retry_backoff_ms=10, linger_ms=10)
    futs = [p.send("t", b"r%d" % i, key=b"k", headers=[("h", b"1")], partition=0) for i in range(3)]
    assert [f.get(5).offset for f in futs] == [0, 1, 2]
    sent = broker.produce_batches("t", 0)
    assert [r.answered[("t", 0)] for r, _, _ in sent] == [NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, 0]
    raws = {raw for _, _, raw in sent}
    assert len(raws) == 1, "a retry must resend byte-identical records"
    assert {batches[0].base_sequence for _, batches, _ in sent} == {0}
    assert broker.log_values("t", 0) == [b"r0", b"r1", b"r2"]
    assert p.metrics()["retries"] == 2


def test_duplicate_sequence_number_counts_as_success(broker, make_producer):
    broker.check_sequences = False
    broker.produce_errors("t", 0, DUPLICATE_SEQUENCE_NUMBER)
    p = make_producer(broker)
    md = p.send("t", b"dup", partition=0).get(5)
    assert md.offset == -1 and md.topic == "t" and md.partition == 0
    assert len(broker.requests_of(PRODUCE)) == 1  # not retried
    assert p.metrics()["records_failed"] == 0
    assert p.send("t", b"next", partition=0).get(5).offset == 0


def test_out_of_order_after_an_earlier_retriable_failure_delivers_both_in_order(broker, make_producer):
    p = make_producer(broker, batch_size=100, retry_backoff_ms=20)
    # producer id known, connection up, and the broker holds our sequence for partition 0
    p.send("t", b"warm-up", partition=0).get(5)
    broker.produce_errors("t", 0, NOT_LEADER_OR_FOLLOWER)
    broker.script(PRODUCE, Behavior(delay=0.2))  # keep the failing answer back until batch 2 is sent
    first = p.send("t", b"A" * 100, partition=0)
    second = p.send("t", b"B" * 100, partition=0)
    assert first.get(5).offset == 1 and second.get(5).offset == 2
    calls = produce_calls(broker, "t", 0)
    assert [(seq, code) for seq, code, _ in calls] == [
        (0, 0), (1, NOT_LEADER_OR_FOLLOWER), (2, OUT_OF_ORDER_SEQUENCE_NUMBER), (1, 0), (2, 0)]
    assert broker.log_values("t", 0) == [b"warm-up", b"A" * 100, b"B" * 100]
    assert len(broker.requests_of(INIT_PRODUCER_ID)) == 1  # no producer-id reset was needed


def test_first_batch_of_a_partition_travels_alone_until_the_broker_stored_it(broker, make_producer):
    """A broker without state for our producer id takes any first sequence.  If batch 0 bounced
    while batch 1 landed, batch 0 could never follow in order (Apache Kafka right after
    CreateTopics): so batch 1 leaves only once batch 0 is acknowledged."""
    p = make_producer(broker, batch_size=100, retry_backoff_ms=20)
    p.partitions_for("t")
    broker.accept_any_first_sequence = True
    broker.produce_errors("t", 0, NOT_LEADER_OR_FOLLOWER)
    broker.script(PRODUCE, Behavior(delay=0.2))  # keep the failing answer back a while
    values = [b"%d" % i + b"." * 100 for i in range(4)]  # one batch each
    futs = [p.send("t", v, partition=0) for v in values]
    assert [f.get(5).offset for f in futs] == [0, 1, 2, 3]
    calls = produce_calls(broker, "t", 0)
    assert [(seq, code) for seq, code, _ in calls][:2] == [(0, NOT_LEADER_OR_FOLLOWER), (0, 0)]
    assert broker.log_values("t", 0) == values
    assert len(broker.requests_of(INIT_PRODUCER_ID)) == 1


def test_after_the_broker_forgot_our_state_the_next_batch_travels_alone(broker, make_producer, monkeypatch):
    """producer.id.expiration.ms of silence: the broker drops our state and again takes any
    sequence as the first.  The batch after the silence must be stored before the next one goes
    (STATE_FRESH_MS = -1 stands for "every acknowledgement is already too old")."""
    from sparkkafka_sink.producer import idempotence

    p = make_producer(broker, batch_size=100, retry_backoff_ms=20)
    p.send("t", b"before", partition=0).get(5)
    monkeypatch.setattr(idempotence, "STATE_FRESH_MS", -1.0)
    broker.logs[("t", 0)].producers.clear()  # the broker expired our producer state
    broker.accept_any_first_sequence = True
    broker.produce_errors("t", 0, NOT_LEADER_OR_FOLLOWER)
    broker.script(PRODUCE, Behavior(delay=0.2))
    values = [b"%d" % i + b"." * 100 for i in range(4)]
    futs = [p.send("t", v, partition=0) for v in values]
    assert [f.get(5).offset for f in futs] == [1, 2, 3, 4]
    assert broker.log_values("t", 0) == [b"before"] + values
    assert len(broker.requests_of(INIT_PRODUCER_ID)) == 1


def warm_up(p, topic: str, partitions: int) -> None:
    """One acknowledged record per partition: the producer id is known and later batches may
    be pipelined (a partition's first batch travels alone)."""
    for i in range(partitions):
        p.send(topic, b"warm-up", partition=i).get(5)


@pytest.mark.parametrize("strict, idempotence", [(True, True), (False, True), (False, False)],
                         ids=["sequence-checking-broker", "lenient-broker", "lenient-not-idempotent"])
def test_partition_order_kept_under_retries_and_lost_responses(broker, make_producer, strict, idempotence):
    broker.produce_errors("t", 0, 0, NOT_LEADER_OR_FOLLOWER, 0, 0, NOT_ENOUGH_REPLICAS, 0, 0, 0,
                          NOT_LEADER_OR_FOLLOWER)
    if strict:
        # The 4th Produce response is cut off half-way: the connection dies with requests in
        # flight; the broker's sequence checks turn their resends into duplicates.
        broker.script(PRODUCE, Behavior(), Behavior(), Behavior(), Behavior(close_after=9))
        max_in_flight = 5
    else:
        # A broker that checks nothing (as tansu): order rests on the client alone.
        broker.check_sequences = False
        max_in_flight = 1
    p = make_producer(broker, batch_size=100, retry_backoff_ms=5, reconnect_backoff_ms=5,
                      max_in_flight_requests_per_connection=max_in_flight, enable_idempotence=idempotence)
    p.partitions_for("t")
    values = [b"%03d" % i + b"." * 100 for i in range(30)]
    futs = [p.send("t", v, partition=0) for v in values]
    mds = [f.get(10) for f in futs]
    assert broker.log_values("t", 0) == values  # every record once, in send order
    offsets = [m.offset for m in mds]
    assert all(o in (i, -1) for i, o in enumerate(offsets)), offsets  # -1: acknowledged as duplicate
    assert p.metrics()["records_failed"] == 0
    if strict:
        assert len(broker.connections) >= 3  # the cut-off response forced a reconnect


# ---------------------------------------------------------------------------- non-retriable errors

@pytest.mark.parametrize("code, cls", [
    (MESSAGE_TOO_LARGE, perrors.MessageTooLargeError),
    (CORRUPT_MESSAGE, perrors.CorruptMessageError),
    (TOPIC_AUTHORIZATION_FAILED, perrors.TopicAuthorizationFailedError),
    (INVALID_REQUIRED_ACKS, perrors.InvalidRequiredAcksError),
])
def test_non_retriable_error_fails_with_its_class_naming_the_partition(broker, make_producer, code, cls):
    broker.produce_errors("t", 1, code)
    p = make_producer(broker)
    start = time.monotonic()
    with pytest.raises(KafkaError) as info:
        p.send("t", b"bad", partition=1).get(5)
    assert type(info.value) is cls
    assert "t-1" in str(info.value)
    assert time.monotonic() - start < 2
    assert len(broker.requests_of(PRODUCE)) == 1, "a non-retriable error must not be retried"
    assert p.metrics()["records_failed"] == 1
    # the producer carries on: later records of that partition are delivered
    assert p.send("t", b"good", partition=1).get(5).offset == 0
    assert broker.log_values("t", 1) == [b"good"]


# ---------------------------------------------------------------------------- wakeup

def test_full_batch_is_sent_promptly_while_the_sender_lingers(broker, make_producer):
    p = make_producer(broker, linger_ms=30_000, batch_size=200)
    p.partitions_for("t")
    assert broker.wait_for(lambda: broker.requests_of(INIT_PRODUCER_ID), 3)
    first = p.send("t", b"1" * 100, partition=0)
    time.sleep(0.3)
    assert broker.requests_of(PRODUCE) == [] and not first.done()  # lingering, as configured
    start = time.monotonic()
    second = p.send("t", b"2" * 100, partition=0)  # does not fit: the first batch is now full
    assert first.get(2).offset == 0
    assert time.monotonic() - start < 5.0  # not the 30 s linger (a loaded machine may take seconds)
    assert not second.done()


# ---------------------------------------------------------------------------- producer id

COORDINATOR_NOT_AVAILABLE = 15
CLUSTER_AUTHORIZATION_FAILED = 31


def test_retriable_init_producer_id_error_is_retried(broker, make_producer):
    broker.init_pid_errors.extend([COORDINATOR_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE])
    p = make_producer(broker, retry_backoff_ms=20)
    assert p.send("t", b"x", partition=0).get(5).offset == 0
    inits = broker.requests_of(INIT_PRODUCER_ID)
    assert len(inits) == 3
    assert all(b.time - a.time >= 0.015 for a, b in zip(inits, inits[1:], strict=False))  # backed off
    (_, (batch,), _), = broker.produce_batches("t", 0)
    assert batch.producer_id == 1000 and batch.base_sequence == 0


def test_init_producer_id_refused_disables_default_idempotence(broker, make_producer):
    broker.init_pid_errors.append(CLUSTER_AUTHORIZATION_FAILED)
    p = make_producer(broker)
    assert p.send("t", b"x", partition=0).get(5).offset == 0
    (_, (batch,), _), = broker.produce_batches("t", 0)
    assert batch.producer_id == -1 and batch.base_sequence == -1


def test_init_producer_id_refused_with_explicit_idempotence_fails_without_hammering(broker, make_producer):
    broker.init_pid_errors.extend([CLUSTER_AUTHORIZATION_FAILED] * 10_000)
    p = make_producer(broker, enable_idempotence=True, retry_backoff_ms=100)
    with pytest.raises(KafkaError, match="enable.idempotence"):
        p.send("t", b"x", partition=0).get(5)
    n = len(broker.requests_of(INIT_PRODUCER_ID))
    time.sleep(0.5)
    # a refused producer id is not re-requested in a tight loop
    assert len(broker.requests_of(INIT_PRODUCER_ID)) - n <= 7
    assert broker.requests_of(PRODUCE) == []
