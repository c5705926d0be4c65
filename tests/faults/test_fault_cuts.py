"""Scenarios 1 and 2: 60,000 records while the proxy, each time two Produce requests have been
answered, cuts the connection of the next one, alternately as the request arrives (the broker
never sees it) and as its response arrives (the broker wrote it, the client never hears back).  Cuts are driven by the requests the
proxy sees, not by a timer, so every run cuts requests in flight however busy the machine is.

Idempotent: every record arrives exactly once and in order per key (the broker recognises the
resends of batches it already wrote by their sequence numbers).  Without idempotence: nothing
is lost; resends of batches whose answer was cut off arrive twice, and that is counted.
Everything is checked by reading the topic back with confluent-kafka.
"""

from __future__ import annotations

import collections
import time

import pytest
from kafka_helpers import consume_all

from .harness import PRODUCE
from .helpers import BROKERS, assert_no_sender_threads, fresh_topic, make_producer

N = 60_000
KEYS = 50
PARTITIONS = 3
CHUNK = 1000        # records between pauses: at least one Produce request per chunk
PAUSE_S = 0.05
CUT_EVERY = 2       # after every 2 answered Produce requests, cut the next one in flight
MIN_CUTS = 10       # 60 chunks make >= 60 Produce requests, so ~20 cuts
LATENCY_MS = 10     # keeps several requests in flight on the connection that is cut


def _value(i: int) -> bytes:
    return b"%d:%06d" % (i % KEYS, i)


def _key(i: int) -> bytes:
    return b"key-%d" % (i % KEYS)


def _run_cut_storm(pb, idempotent: bool, bulk: bool = False):
    topic = fresh_topic(pb, f"cuts-{'idem' if idempotent else 'plain'}-{'bulk' if bulk else 'rec'}", PARTITIONS)
    p = make_producer(pb.bootstrap_servers, **{
        "enable.idempotence": idempotent, "acks": "all", "delivery.timeout.ms": 60000,
        "request.timeout.ms": 2000, "max.in.flight.requests.per.connection": 5})
    futures = []
    pb.proxy.latency(LATENCY_MS)
    cutter = pb.proxy.cut_in_flight(PRODUCE, every=CUT_EVERY, at="alternate")
    try:
        if bulk:
            for start in range(0, N, CHUNK):
                idx = range(start, start + CHUNK)
                futures.append(p.send_batch(topic, values=[_value(i) for i in idx], keys=[_key(i) for i in idx]))
                time.sleep(PAUSE_S)
        else:
            for i in range(N):
                futures.append(p.send(topic, value=_value(i), key=_key(i)))
                if i % CHUNK == CHUNK - 1:
                    time.sleep(PAUSE_S)
        p.flush(60)
    finally:
        pb.proxy.stop_cutting()
        pb.proxy.latency(0)
    cuts = cutter.hits
    metrics = p.metrics()
    p.close(10)
    if bulk:
        errors = [e for f in futures for e, _, _ in f.errors()]
        assert all(f.done() for f in futures)
    else:
        errors = [f.exception(0) for f in futures if f.exception(0) is not None]
    assert not errors, f"{len(errors)} sends failed, e.g. {errors[:3]}"
    assert cuts >= MIN_CUTS, f"only {cuts} requests were cut in flight"
    # every cut dropped a connection with at least that request unanswered: it was resent
    assert metrics["retries"] >= cuts, (metrics["retries"], cuts)
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=N, timeout=60)
    return records, metrics, cuts


@pytest.mark.parametrize("kind", BROKERS)
def test_idempotent_sends_survive_connection_cuts_exactly_once_in_order(proxied_broker, kind):
    records, metrics, cuts = _run_cut_storm(proxied_broker(kind), idempotent=True)
    values = [r.value for r in records]
    counts = collections.Counter(values)
    duplicated = {v: c for v, c in counts.items() if c > 1}
    lost = {_value(i) for i in range(N)} - set(counts)
    assert not lost, f"{len(lost)} records lost, e.g. {sorted(lost)[:5]}"
    assert not duplicated, f"{len(duplicated)} records duplicated, e.g. {list(duplicated.items())[:5]}"
    assert len(records) == N
    assert metrics["records_sent"] == N and metrics["records_failed"] == 0
    # order per key: in offset order each key's records are exactly its send order
    by_key = collections.defaultdict(list)
    for r in records:  # sorted by (partition, offset); a key lives in one partition
        by_key[r.key].append(int(r.value.split(b":")[1]))
    assert len(by_key) == KEYS
    for key, seq in by_key.items():
        k = int(key.split(b"-")[1])
        assert seq == list(range(k, N, KEYS)), f"key {key!r} out of order or incomplete"
    assert_no_sender_threads()


@pytest.mark.parametrize("kind", BROKERS)
def test_non_idempotent_sends_survive_connection_cuts_without_loss(proxied_broker, kind, record_property):
    records, metrics, cuts = _run_cut_storm(proxied_broker(kind), idempotent=False)
    counts = collections.Counter(r.value for r in records)
    lost = {_value(i) for i in range(N)} - set(counts)
    assert not lost, f"{len(lost)} records lost, e.g. {sorted(lost)[:5]}"
    assert set(counts) == {_value(i) for i in range(N)}, "records that were never sent arrived"
    duplicates = len(records) - N
    record_property("duplicates", duplicates)
    record_property("retries", metrics["retries"])
    print(f"[{kind}] idempotence off: {duplicates} duplicates, {metrics['retries']} retries, {cuts} cuts")
    assert duplicates >= 0
    assert metrics["records_failed"] == 0
    assert_no_sender_threads()


@pytest.mark.parametrize("kind", BROKERS)
def test_idempotent_send_batch_survives_connection_cuts_exactly_once(proxied_broker, kind):
    records, metrics, cuts = _run_cut_storm(proxied_broker(kind), idempotent=True, bulk=True)
    counts = collections.Counter(r.value for r in records)
    assert set(counts) == {_value(i) for i in range(N)}, "records lost"
    assert max(counts.values()) == 1 and len(records) == N, "records duplicated"
    by_key = collections.defaultdict(list)
    for r in records:
        by_key[r.key].append(int(r.value.split(b":")[1]))
    for key, seq in by_key.items():
        assert seq == sorted(seq), f"key {key!r} out of order"
