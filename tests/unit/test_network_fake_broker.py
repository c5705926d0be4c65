"""NetworkClient against the in-process fake broker: version negotiation, partial reads and
writes, correlation ids, reconnect backoff, request timeouts and wakeups."""

from __future__ import annotations

import logging
import os
import time

import pytest
from fake_broker import API_VERSIONS, INIT_PRODUCER_ID, METADATA, PRODUCE, Behavior, refusing_port

from sparkkafka_sink.errors import KafkaTimeoutError, UnsupportedVersionError
from sparkkafka_sink.network.client import NetworkClient, now_ms
from sparkkafka_sink.network.connection import BrokerConnection
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol


def versions(b, api_key):
    return [r.version for r in b.requests_of(api_key)]


# ---------------------------------------------------------------------------- version negotiation

@pytest.mark.parametrize("advertised, expected", [
    # an older broker: our highest version inside its range
    ({PRODUCE: (0, 7), METADATA: (0, 8), API_VERSIONS: (0, 3), INIT_PRODUCER_ID: (0, 4)},
     {PRODUCE: 7, METADATA: 8, INIT_PRODUCER_ID: 4}),
    # a newer broker: our own maximum
    ({PRODUCE: (3, 20), METADATA: (0, 15), API_VERSIONS: (0, 4), INIT_PRODUCER_ID: (0, 9)},
     {PRODUCE: 11, METADATA: 12, INIT_PRODUCER_ID: 5}),
    # ranges that only overlap in the middle
    ({PRODUCE: (5, 9), METADATA: (4, 9), API_VERSIONS: (0, 3), INIT_PRODUCER_ID: (3, 3)},
     {PRODUCE: 9, METADATA: 9, INIT_PRODUCER_ID: 3}),
])
def test_highest_common_version_per_api(make_broker, cluster, make_producer, advertised, expected):
    b = make_broker(api_versions=advertised)
    cluster.add_topic("t", 1, b.node_id)
    p = make_producer(b)
    md = p.send("t", b"x").get(5)
    assert md.offset == 0
    for api_key, version in expected.items():
        assert set(versions(b, api_key)) == {version}, api_key
    assert set(versions(b, API_VERSIONS)) == {min(3, advertised[API_VERSIONS][1])}


def test_api_versions_unsupported_version_falls_back_to_broker_range(make_broker, cluster, make_producer):
    b = make_broker(api_versions={PRODUCE: (0, 9), METADATA: (0, 9), API_VERSIONS: (0, 2),
                                  INIT_PRODUCER_ID: (0, 4)})
    cluster.add_topic("t", 1, b.node_id)
    p = make_producer(b)
    assert p.send("t", b"x").get(5).offset == 0
    first_conn = [r for r in b.requests_of(API_VERSIONS) if r.conn_id == 1]
    assert [r.version for r in first_conn] == [3, 2]
    assert set(versions(b, PRODUCE)) == {9}


def test_api_versions_unsupported_version_without_range_falls_back_to_v0(make_broker, cluster, make_producer):
    # Brokers before 2.4 answer an unknown ApiVersions version with UNSUPPORTED_VERSION and no
    # api keys at all: the client must retry with v0 (as Java's NetworkClient does).
    b = make_broker(api_versions={PRODUCE: (0, 7), METADATA: (0, 7), API_VERSIONS: (0, 0),
                                  INIT_PRODUCER_ID: (0, 3)})
    b.unsupported_version_includes_keys = False
    cluster.add_topic("t", 1, b.node_id)
    p = make_producer(b, max_block_ms=3000)
    assert p.send("t", b"x").get(5).offset == 0
    first_conn = [r.version for r in b.requests_of(API_VERSIONS) if r.conn_id == 1]
    assert first_conn == [3, 0]
    assert set(versions(b, PRODUCE)) == {7}


def test_no_common_produce_version_fails_the_records(make_broker, cluster, make_producer):
    b = make_broker(api_versions={PRODUCE: (0, 2), METADATA: (0, 9), API_VERSIONS: (0, 3),
                                  INIT_PRODUCER_ID: (0, 4)})
    cluster.add_topic("t", 1, b.node_id)
    p = make_producer(b)
    with pytest.raises(UnsupportedVersionError, match="PRODUCE"):
        p.send("t", b"x").get(5)
    assert b.requests_of(PRODUCE) == []


def test_no_common_metadata_version_is_reported(make_broker, cluster, make_producer):
    b = make_broker(api_versions={PRODUCE: (0, 9), METADATA: (0, 0), API_VERSIONS: (0, 3),
                                  INIT_PRODUCER_ID: (0, 4)})
    cluster.add_topic("t", 1, b.node_id)
    p = make_producer(b, max_block_ms=600)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as info:
        p.partitions_for("t")
    assert time.monotonic() - start < 3
    assert "METADATA" in str(info.value)  # says why, not only that it timed out


# ---------------------------------------------------------------------------- partial reads / writes

def test_responses_delivered_byte_by_byte(broker, make_producer, monkeypatch):
    for api_key in (API_VERSIONS, METADATA, INIT_PRODUCER_ID, PRODUCE):
        broker.default_behavior[api_key] = Behavior(chunk=1, pause=0.0003)
    reads = {"partial": 0, "frames": 0}
    orig_receive = BrokerProtocol.receive

    def spy_receive(self, data):
        answers = orig_receive(self, data)
        reads["frames" if answers else "partial"] += 1
        return answers

    monkeypatch.setattr(BrokerProtocol, "receive", spy_receive)
    p = make_producer(broker, linger_ms=20)
    futs = [p.send("t", b"v%d" % i, partition=i % 2) for i in range(20)]
    mds = [f.get(10) for f in futs]
    assert [(m.partition, m.offset) for m in mds] == [(i % 2, i // 2) for i in range(20)]
    assert broker.log_values("t", 0) == [b"v%d" % i for i in range(0, 20, 2)]
    assert broker.log_values("t", 1) == [b"v%d" % i for i in range(1, 20, 2)]
    assert len(broker.connections) == 2  # bootstrap + node connection; no reconnects
    assert reads["partial"] > 5 * reads["frames"], reads  # responses really arrived in pieces


def test_multi_megabyte_request_written_across_partial_writes(make_broker, cluster, make_producer,
                                                              monkeypatch):
    b = make_broker(rcvbuf=16384, recv_chunk=16384)
    cluster.add_topic("big", 3, b.node_id)
    partial = []
    orig_write = BrokerConnection.write

    def spy_write(self, now):
        orig_write(self, now)
        if self.has_pending_writes:
            partial.append(self._out_bytes)

    monkeypatch.setattr(BrokerConnection, "write", spy_write)
    p = make_producer(b, linger_ms=200, batch_size=3 << 20, max_request_size=8 << 20,
                      send_buffer_bytes=16384)
    values = {part: [os.urandom(500_000) + bytes([part, i]) for i in range(4)] for part in range(3)}
    futs = [p.send("big", v, partition=part) for part, vs in values.items() for v in vs]
    p.flush(15)  # all three batches at once (lingering, each would go on its own)
    for f in futs:
        f.get(15)
    produces = b.requests_of(PRODUCE)
    assert max(r.frame_size for r in produces) > 4 << 20, "expected one multi-megabyte request"
    assert partial, "the socket never took a partial write: the test did not exercise resumption"
    for part, vs in values.items():
        assert b.log_values("big", part) == vs
        (_, batches, _), = b.produce_batches("big", part)
        assert [r.value for r in batches[0].records] == vs


# ---------------------------------------------------------------------------- correlation ids

def test_unexpected_correlation_id_closes_connection_and_retries(broker, make_producer, caplog):
    broker.script(PRODUCE, Behavior(correlation_delta=7))
    p = make_producer(broker)
    with caplog.at_level(logging.INFO, logger="sparkkafka_sink.network.client"):
        md = p.send("t", b"once", partition=0).get(5)
    sent = broker.produce_batches("t", 0)
    assert len(sent) == 2
    (r1, b1, raw1), (r2, b2, raw2) = sent
    assert r1.conn_id != r2.conn_id, "the retry must use a new connection"
    assert raw1 == raw2 and b1[0].base_sequence == b2[0].base_sequence == 0
    # the first attempt was written: the resend is recognised as a duplicate, not written twice
    assert broker.log_values("t", 0) == [b"once"]
    assert md.offset == -1
    assert any("correlation id" in r.getMessage() for r in caplog.records)


def test_acks0_responses_are_dropped_quietly(broker, cluster, make_producer, caplog):
    p = make_producer(broker, acks=0)
    with caplog.at_level(logging.DEBUG, logger="sparkkafka_sink"):
        for i in range(10):
            md = p.send("t", b"v%d" % i, partition=0).get(5)
            assert md.offset == -1
            p.flush(5)
        broker.wait_for(lambda: len(broker.requests_of(PRODUCE)) == 10)
        # the connection is still healthy: a metadata request for a new topic works on it
        cluster.add_topic("t2", 3, broker.node_id)
        assert p.partitions_for("t2") == [0, 1, 2]
        p.send("t", b"last", partition=0).get(5)
        p.flush(5)
    assert broker.wait_for(lambda: len(broker.log_values("t", 0)) == 11)
    assert broker.log_values("t", 0) == [b"v%d" % i for i in range(10)] + [b"last"]
    assert all(r.body.acks == 0 for r in broker.requests_of(PRODUCE))
    dropped = [r for r in caplog.records if "dropping unexpected response" in r.getMessage()]
    assert dropped and all(r.levelno == logging.DEBUG for r in dropped)
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and "closed" in r.getMessage()]
    assert len(broker.connections) == 2


# ---------------------------------------------------------------------------- reconnect backoff

def test_reconnect_backoff_grows_exponentially_and_is_capped(make_producer, monkeypatch):
    sock, port = refusing_port()
    attempts: list[float] = []
    orig_connect = BrokerConnection.connect

    def spy_connect(self, now):
        attempts.append(time.monotonic())
        return orig_connect(self, now)

    monkeypatch.setattr(BrokerConnection, "connect", spy_connect)
    try:
        make_producer(f"127.0.0.1:{port}", reconnect_backoff_ms=20, reconnect_backoff_max_ms=160,
                      retry_backoff_ms=1)
        deadline = time.monotonic() + 5
        while len(attempts) < 9 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sock.close()
    assert len(attempts) >= 9
    gaps = [(b - a) * 1000 for a, b in zip(attempts, attempts[1:], strict=False)][:8]
    expected = [20, 40, 80, 160, 160, 160, 160, 160]
    for gap, exp in zip(gaps, expected, strict=True):
        assert gap >= 0.8 * exp - 2, (gaps, expected)      # never earlier than the backoff allows
        assert gap <= 1.2 * exp + 120, (gaps, expected)    # and not much later (scheduling slack)
    assert gaps[3] > 2.5 * gaps[0], gaps


# ---------------------------------------------------------------------------- request timeout

def test_request_timeout_closes_connection_and_retries(broker, make_producer):
    broker.script(PRODUCE, Behavior(drop=True))
    p = make_producer(broker, request_timeout_ms=300)
    start = time.monotonic()
    md = p.send("t", b"x", partition=1).get(10)
    elapsed = time.monotonic() - start
    assert 0.28 <= elapsed < 5
    (r1, _, raw1), (r2, _, raw2) = broker.produce_batches("t", 1)
    assert r1.conn_id != r2.conn_id and raw1 == raw2
    first = next(c for c in broker.connections if c.id == r1.conn_id)
    assert broker.wait_for(lambda: first.closed, 2), "the client did not close the timed-out connection"
    assert broker.log_values("t", 1) == [b"x"] and md.offset == -1  # duplicate recognised


# ---------------------------------------------------------------------------- wakeup

class _RacingSocket:
    """Wraps the wakeup socket's read end: another thread's wakeup() lands while the I/O thread
    is draining (after it cleared its flag, before its recv())."""

    def __init__(self, sock, client):
        self._sock, self._client, self.fired = sock, client, False

    def recv(self, n):
        if not self.fired:
            self.fired = True
            self._client.wakeup()
        return self._sock.recv(n)

    def fileno(self):
        return self._sock.fileno()

    def close(self):
        self._sock.close()


def test_wakeup_is_not_lost_when_it_races_with_the_drain():
    md = Metadata([("127.0.0.1", 9)], max_age_ms=600_000, refresh_backoff_ms=600_000, max_idle_ms=600_000)
    md.update(type("R", (), {"brokers": [], "topics": []})(), now_ms())  # nothing to refresh
    client = NetworkClient(md, client_id="t", request_timeout_ms=30_000, max_in_flight=5,
                           reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000,
                           connection_setup_timeout_ms=10_000, connection_setup_timeout_max_ms=30_000)
    try:
        client._wake_r = _RacingSocket(client._wake_r, client)
        client.wakeup()
        client.poll(2000, now_ms())           # drains; the racing wakeup fires inside the drain
        assert client._wake_r.fired
        client.wakeup()                       # a later wakeup must still interrupt a long poll
        start = time.monotonic()
        client.poll(3000, now_ms())
        assert time.monotonic() - start < 1.0, "wakeup() was lost: poll slept its whole timeout"
    finally:
        client.close()


# ---------------------------------------------------------------------------- connection setup

def test_connection_setup_timeout_when_api_versions_is_never_answered(broker, make_producer):
    broker.script(API_VERSIONS, Behavior(drop=True))
    p = make_producer(broker, socket_connection_setup_timeout_ms=200,
                      socket_connection_setup_timeout_max_ms=1000, reconnect_backoff_ms=10)
    start = time.monotonic()
    assert p.send("t", b"x", partition=0).get(5).offset == 0
    assert 0.15 <= time.monotonic() - start < 3
    first, second = broker.requests_of(API_VERSIONS)[:2]
    assert first.conn_id != second.conn_id
    assert broker.connections[0].closed


def test_bootstrap_skips_a_refusing_address(make_broker, cluster, make_producer):
    sock, port = refusing_port()
    try:
        b = make_broker()
        cluster.add_topic("t", 1, b.node_id)
        p = make_producer(f"127.0.0.1:{port},{b.address}")
        start = time.monotonic()
        assert p.send("t", b"x").get(5).offset == 0
        assert time.monotonic() - start < 2
    finally:
        sock.close()


def test_connections_closed_by_the_broker_are_reopened(broker, make_producer):
    p = make_producer(broker)
    assert p.send("t", b"a", partition=0).get(5).offset == 0
    n = len(broker.connections)
    broker.drop_connections()
    assert p.send("t", b"b", partition=0).get(5).offset == 1
    assert len(broker.connections) > n
    assert broker.log_values("t", 0) == [b"a", b"b"]


def test_producer_lifecycle_leaks_no_sockets(broker, make_producer):
    def open_fds():
        return len(os.listdir("/proc/self/fd"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc")
    # one warm-up round (imports, logging handlers) before measuring
    for round_ in range(4):
        if round_ == 1:
            baseline = open_fds()
        p = make_producer(broker)
        p.send("t", b"x", partition=round_ % 2).get(5)
        p.close(2)
    # the fake broker closes its ends asynchronously: wait for them (a real leak never settles)
    assert broker.wait_for(lambda: all(c.closed for c in broker.connections) and open_fds() <= baseline, 3), \
        sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))


# ---------------------------------------------------------------------------- authorized operations

DESCRIBE_ONLY = (1 << 3) | (1 << 8)          # READ, DESCRIBE
WRITE_AND_DESCRIBE = (1 << 4) | (1 << 8)     # WRITE, DESCRIBE


@pytest.mark.parametrize("metadata_max", [12, 7], ids=["metadata-v12", "metadata-v7-cannot-ask"])
def test_a_topic_without_write_permission_fails_send_before_anything_is_sent(make_broker, cluster, make_producer,
                                                                             metadata_max):
    from fake_broker import DEFAULT_API_VERSIONS

    from sparkkafka_sink.protocol.error_codes import TopicAuthorizationFailedError

    b = make_broker(api_versions={**DEFAULT_API_VERSIONS, METADATA: (0, metadata_max)})
    for name in ("ro", "rw", "unknown-ops", "zero-ops"):
        cluster.add_topic(name, 1, b.node_id)
    cluster.topic_operations.update({"ro": DESCRIBE_ONLY, "rw": WRITE_AND_DESCRIBE,
                                     "unknown-ops": -2147483648, "zero-ops": 0})
    p = make_producer(b)
    for name in ("rw", "unknown-ops", "zero-ops"):
        p.send(name, b"v").get(5)
    if metadata_max >= 8:
        with pytest.raises(TopicAuthorizationFailedError, match="'ro': this principal may describe it but has no WRITE"):
            p.send("ro", b"v")
        with pytest.raises(TopicAuthorizationFailedError):
            p.send_batch("ro", values=[b"a", b"b"])
        assert ("ro", 0) not in {tp for r in b.requests_of(PRODUCE) for tp in r.raw}
        assert all(r.body.include_topic_authorized_operations for r in b.requests_of(METADATA))
        cluster.topic_operations["ro"] = WRITE_AND_DESCRIBE   # WRITE granted: a refusal asked for fresh metadata
        deadline = time.monotonic() + 5
        while True:
            try:
                p.send("ro", b"v")
                break
            except TopicAuthorizationFailedError:
                assert time.monotonic() < deadline, "the grant was never seen"
                time.sleep(0.05)
    p.send("ro", b"v").get(5)  # a broker that cannot say (Metadata < v8) refuses nothing up front


def test_cluster_leaders_name_only_partitions_led_by_a_known_broker():
    from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo

    cluster = Cluster(brokers={1: BrokerNode(1, "127.0.0.1", 9092), 2: BrokerNode(2, "127.0.0.1", 9093)},
                      partitions={"t": {0: PartitionInfo("t", 0, 1), 1: PartitionInfo("t", 1, 2),
                                        2: PartitionInfo("t", 2, -1), 3: PartitionInfo("t", 3, None),
                                        4: PartitionInfo("t", 4, 7)},  # 7: not among the brokers
                                  "u": {0: PartitionInfo("u", 0, 2)}})
    assert cluster.leaders == {("t", 0): 1, ("t", 1): 2, ("u", 0): 2}
    assert [cluster.leader_for("t", p) for p in range(6)] == [1, 2, None, None, None, None]
    assert cluster.leader_for("v", 0) is None
