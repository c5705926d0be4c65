"""Tests of the fault harness itself: byte-exact faults against a fake server, and
confluent-kafka (a reference client) behaving as expected through the proxy."""

from __future__ import annotations

import functools
import socket
import struct
import threading
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from kafka_helpers import consume_all, produce_all, producer_for

from sparkkafka_sink.testing.brokers import _recv_exact, free_port
from sparkkafka_sink.testing.brokers import _request as request_frame

from .harness import FIND_COORDINATOR, METADATA, PRODUCE, FaultProxy, _rewrite_addresses
from .helpers import BROKERS, fresh_topic

# ---------------------------------------------------------------------------------------------
# A fake "broker" speaking only Kafka framing: answers each request with a fixed payload.
# ---------------------------------------------------------------------------------------------

class FakeServer:
    """Answers every request frame with ``[size][correlation id][payload]``."""

    def __init__(self, payload: bytes):
        self.payload = payload
        self.received: list = []  # correlation ids of the requests that reached the server
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            try:
                while True:
                    size = struct.unpack(">i", _recv_exact(conn, 4))[0]
                    req = _recv_exact(conn, size)
                    answer = self._answer(req)
                    conn.sendall(struct.pack(">i", 4 + len(answer)) + req[4:8] + answer)
            except (OSError, ConnectionError):
                return

    def _answer(self, req: bytes) -> bytes:
        """What follows the correlation id in the answer to the request frame ``req``."""
        self.received.append(struct.unpack(">i", req[4:8])[0])
        return self.payload

    def close(self):
        self.sock.close()


def _request(api_key: int, corr: int) -> bytes:
    """A version 0 request with an empty body, from client "c"."""
    return request_frame(api_key, 0, corr, b"c")


@pytest.fixture
def fake():
    server = FakeServer(bytes(range(40)))
    proxy = FaultProxy(0, "127.0.0.1", server.port)
    yield server, proxy
    proxy.close()
    server.close()


def _connect(proxy):
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    return s


def test_passthrough_and_counters(fake):
    server, proxy = fake
    with _connect(proxy) as s:
        for corr in (1, 2):
            s.sendall(_request(PRODUCE, corr))
            size, got_corr = struct.unpack(">ii", _recv_exact(s, 8))
            assert (size, got_corr) == (44, corr)
            assert _recv_exact(s, 40) == bytes(range(40))
    st = proxy.stats()
    assert st["connections"] == 1 and st["requests"] == 2 and st["responses"] == 2
    assert st["bytes_to_client"] == 2 * 48 and st["bytes_to_server"] == 2 * len(_request(0, 1))


def test_corrupt_flips_bytes_of_matching_response_only(fake):
    server, proxy = fake
    handle = proxy.corrupt_next_response(api_key=PRODUCE, offset=8, length=3)
    with _connect(proxy) as s:
        s.sendall(_request(METADATA, 7))  # not a Produce: untouched
        assert _recv_exact(s, 48)[8:] == bytes(range(40))
        s.sendall(_request(PRODUCE, 8))
        frame = _recv_exact(s, 48)
    assert struct.unpack(">ii", frame[:8]) == (44, 8)  # size and correlation id intact
    expected = bytearray(range(40))
    for i in range(3):
        expected[i] ^= 0xFF
    assert frame[8:] == bytes(expected)
    assert handle.wait(1) and handle.hit_api_key == PRODUCE
    assert proxy.stats()["corrupted"] == 1


def test_truncate_forwards_prefix_then_closes(fake):
    server, proxy = fake
    handle = proxy.truncate_next_response(13)
    with _connect(proxy) as s:
        s.sendall(_request(PRODUCE, 3))
        got = b""
        while True:
            chunk = s.recv(100)
            if not chunk:
                break
            got += chunk
    assert got == struct.pack(">ii", 44, 3) + bytes(range(5))
    assert handle.wait(1) and proxy.stats()["truncated"] == 1
    with _connect(proxy) as s:  # later connections are unaffected
        s.sendall(_request(PRODUCE, 4))
        assert len(_recv_exact(s, 48)) == 48


def test_cut_all_blackhole_latency(fake):
    server, proxy = fake
    s1, s2 = _connect(proxy), _connect(proxy)
    s1.sendall(_request(PRODUCE, 1))
    _recv_exact(s1, 48)
    assert proxy.cut_all() == 2
    assert s1.recv(10) == b"" and s2.recv(10) == b""
    s1.close(), s2.close()

    proxy.blackhole(True)
    with _connect(proxy) as s:
        s.sendall(_request(PRODUCE, 2))
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(10)
        proxy.blackhole(False)  # the desynchronised connection is cut
        s.settimeout(2)
        assert s.recv(10) == b""
    assert proxy.stats()["bytes_dropped"] > 0

    proxy.latency(100)
    with _connect(proxy) as s:
        t = time.monotonic()
        s.sendall(_request(PRODUCE, 3))
        _recv_exact(s, 48)
        assert time.monotonic() - t >= 0.19  # 100 ms each way
    proxy.latency(0)


def test_cut_every_and_refused_target():
    dead_port = free_port()
    with FaultProxy(0, "127.0.0.1", dead_port) as proxy:
        with _connect(proxy) as s:
            assert s.recv(10) == b""  # broker down: connection dropped at once
        assert proxy.stats()["refused"] == 1
    server = FakeServer(b"x")
    try:
        with FaultProxy(0, "127.0.0.1", server.port) as proxy:
            proxy.cut_every(0.1)
            with _connect(proxy) as s:
                s.settimeout(3)
                assert s.recv(10) == b""
            proxy.stop_cutting()
            assert proxy.stats()["cuts"] >= 1
            with _connect(proxy) as s:
                s.sendall(_request(PRODUCE, 1))
                assert len(_recv_exact(s, 9)) == 9
    finally:
        server.close()


def _answered(proxy, corr: int, api_key: int = PRODUCE) -> bool:
    """Send one request on a new connection: True if answered, False if the proxy cut it."""
    with _connect(proxy) as s:
        s.sendall(_request(api_key, corr))
        try:
            _recv_exact(s, 48)
            return True
        except (ConnectionError, OSError):
            return False


def test_cut_in_flight_cuts_at_the_request_or_at_its_response_by_count(fake):
    server, proxy = fake
    handle = proxy.cut_in_flight(api_key=PRODUCE, every=1, at="alternate")
    assert _answered(proxy, 1, api_key=METADATA)  # another api key does not count
    outcomes = [_answered(proxy, corr) for corr in range(10, 16)]
    assert outcomes == [True, False, True, False, True, False]  # one answered, the next cut
    assert handle.hits == 3 and proxy.stats()["inflight_cuts"] == 3
    # alternating: cut at the 1st request's header (never reached the broker), at the 2nd's
    # response (the broker handled it), at the 3rd's header again
    assert 11 not in server.received and 13 in server.received and 15 not in server.received
    proxy.stop_cutting()
    assert all(_answered(proxy, corr) for corr in range(20, 24))


def test_cut_in_flight_stops_after_times(fake):
    server, proxy = fake
    handle = proxy.cut_in_flight(api_key=PRODUCE, every=2, at="response", times=1)
    assert _answered(proxy, 1) and _answered(proxy, 2)
    assert not _answered(proxy, 3)
    assert 3 in server.received
    assert all(_answered(proxy, corr) for corr in (4, 5, 6)) and handle.hits == 1


def test_blackhole_after_next_request_forwards_it_then_drops_its_answer(fake):
    server, proxy = fake
    handle = proxy.blackhole_after_next_request(api_key=PRODUCE)
    assert _answered(proxy, 1, api_key=METADATA)
    with _connect(proxy) as s:
        s.sendall(_request(PRODUCE, 2))
        assert handle.wait(2)
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(10)
        proxy.blackhole(False)
    deadline = time.monotonic() + 2
    while 2 not in server.received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 2 in server.received  # the broker got the request; only its answer was lost
    assert _answered(proxy, 3)


def test_blackhole_request_hangs_the_connection_at_the_matching_request(fake):
    """Driven by what the request says: the connection goes silent at the first match, that
    request and the ones after it never reach the broker; other connections go on."""
    server, proxy = fake
    handle = proxy.blackhole_request(lambda frame: struct.unpack(">i", frame[4:8])[0] == 2, api_key=PRODUCE)
    with _connect(proxy) as s:
        s.sendall(_request(METADATA, 2))  # matches, but not of the api key
        assert len(_recv_exact(s, 48)) == 48
        s.sendall(_request(PRODUCE, 1))  # of the api key, does not match
        assert len(_recv_exact(s, 48)) == 48
        s.sendall(_request(PRODUCE, 2) + _request(PRODUCE, 3))
        assert handle.wait(2) and handle.hits == 1 and handle.hit_api_key == PRODUCE
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(10)
        assert _answered(proxy, 4)  # another connection, while the hung one stays open
    assert server.received == [2, 1, 4]
    assert proxy.stats()["blackholed_requests"] == 1


def test_close_joins_thread(fake):
    server, proxy = fake
    s = _connect(proxy)
    proxy.close()
    assert not proxy._thread.is_alive()
    s.settimeout(2)
    assert s.recv(10) == b""
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()


# ---------------------------------------------------------------------------------------------
# Address rewriting (hand-built responses)
# ---------------------------------------------------------------------------------------------

def _rewritten(name: str, api_key: int, version: int, seed: int):
    """A full response (every field the version has) before and after the rewrite."""
    from message_values import sample

    from sparkkafka_sink.protocol import codec
    from sparkkafka_sink.protocol.header import response_header_version
    from sparkkafka_sink.protocol.messages import schema_of

    schema = schema_of(name)
    message = sample(schema, version, seed)
    if api_key == METADATA and not message.brokers:
        message.brokers = [schema.structs["MetadataResponseBroker"].cls(node_id=1, host="far", port=9092)]
    if api_key == FIND_COORDINATOR and version >= 4 and not message.coordinators:
        message.coordinators = [schema.structs["Coordinator"].cls(key="k", node_id=1, host="far", port=9092)]
    header = struct.pack(">i", 5) + (b"\x00" if response_header_version(api_key, version) else b"")
    body = b"".join(bytes(p) for p in codec.encode(schema, message, version, declared_versions_only=False))
    out = _rewrite_addresses(header + body, api_key, version, "127.0.0.1", 4242)
    assert out[:len(header)] == header
    return message, codec.decode(schema, out[len(header):], version, declared_versions_only=False)


@pytest.mark.parametrize("version", range(0, 14))
def test_rewrite_metadata(version):
    before, after = _rewritten("MetadataResponse", METADATA, version, seed=version)
    assert before.brokers and all((b.host, b.port) == ("127.0.0.1", 4242) for b in after.brokers)
    for b in before.brokers:
        b.host, b.port = "127.0.0.1", 4242
    assert after == before  # nothing else changed


@pytest.mark.parametrize("version", range(0, 7))
def test_rewrite_find_coordinator(version):
    before, after = _rewritten("FindCoordinatorResponse", FIND_COORDINATOR, version, seed=version)
    nodes_before = before.coordinators if version >= 4 else [before]
    nodes_after = after.coordinators if version >= 4 else [after]
    for b, a in zip(nodes_before, nodes_after, strict=True):
        want = ("127.0.0.1", 4242) if b.port >= 0 else (b.host, b.port)  # -1: no coordinator
        assert (a.host, a.port) == want
        b.host, b.port = want
    assert after == before


# ---------------------------------------------------------------------------------------------
# confluent-kafka through the proxy, against the real embedded brokers
# ---------------------------------------------------------------------------------------------

KINDS = BROKERS


#: confluent-kafka, the reference client, through the proxy
_producer = functools.partial(producer_for, client=Producer, defaults={
    "linger.ms": 2, "enable.idempotence": True, "retry.backoff.ms": 50, "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200, "message.timeout.ms": 20000})


@pytest.mark.parametrize("kind", KINDS)
def test_metadata_routes_clients_through_proxy(proxied_broker, kind):
    pb = proxied_broker(kind)
    md = AdminClient({"bootstrap.servers": pb.bootstrap_servers}).list_topics(timeout=10)
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [pb.proxy.address]
    routed_topic = fresh_topic(pb, "routed", 2)
    produce_all(pb.bootstrap_servers, routed_topic, [b"v" * 1000] * 200)
    assert pb.proxy.stats()["bytes_to_server"] > 200_000  # the data went through the proxy
    assert len(consume_all(pb.direct_bootstrap_servers, routed_topic, 200)) == 200


def _wait_for_answer(proxy, producer, answered_before: int, timeout: float = 15.0) -> None:
    """Until a response newer than ``answered_before`` passed a live connection of ``proxy``."""
    deadline = time.monotonic() + timeout
    while True:
        stats = proxy.stats()
        if stats["active_connections"] and stats["responses"] > answered_before:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no answer through the proxy within {timeout} s: {stats}")
        producer.poll(0.005)


def _cut_live(proxy, producer, timeout: float = 30.0) -> int:
    """Cut every connection once at least one live connection was cut.

    A connection seen carrying an answer may still close by itself before the cut lands
    (the client dropping an idle one), so try again on the next answer until a cut hit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _wait_for_answer(proxy, producer, proxy.stats()["responses"])
        cut = proxy.cut_all()
        if cut:
            return cut
    raise AssertionError(f"no live connection to cut within {timeout} s: {proxy.stats()}")


@pytest.mark.parametrize("kind", KINDS)
def test_cut_all_mid_stream_confluent_still_delivers(proxied_broker, kind):
    pb = proxied_broker(kind)
    cut_topic = fresh_topic(pb, "cut", 3)
    p = _producer(pb.bootstrap_servers)
    errors, n = [], 3000
    cuts = 0
    for i in range(n):
        p.produce(cut_topic, b"%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
        if i % 1000 == 500:
            # cut when the proxy has seen an answer go through since the last cut (a live
            # connection carrying traffic), not after a guessed pause
            cuts += _cut_live(pb.proxy, p)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(20) == 0 and not errors
    assert cuts >= 3
    got = consume_all(pb.direct_bootstrap_servers, cut_topic, n)
    assert {r.value for r in got} == {b"%d" % i for i in range(n)}
    if kind in ("noida", "apache"):  # strict idempotence: a resent batch is not stored twice
        assert len(got) == n


@pytest.mark.parametrize("kind", KINDS)
def test_cut_every_confluent_still_delivers(proxied_broker, kind):
    pb = proxied_broker(kind)
    flappy_topic = fresh_topic(pb, "flappy", 1)
    p = _producer(pb.bootstrap_servers)
    p.produce(flappy_topic, b"warmup")
    assert p.flush(10) == 0
    errors, sent = [], []
    pb.proxy.cut_every(0.2)
    deadline = time.monotonic() + 30
    # produce steadily while connections keep dropping, until three cuts happened
    while pb.proxy.stats()["cuts"] < 3 and time.monotonic() < deadline:
        sent.append(b"%d" % len(sent))
        p.produce(flappy_topic, sent[-1], on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0.002)
    pb.proxy.stop_cutting()
    assert p.flush(20) == 0 and not errors
    assert pb.proxy.stats()["cuts"] >= 3
    got = consume_all(pb.direct_bootstrap_servers, flappy_topic, len(sent) + 1)
    assert {r.value for r in got} == set(sent) | {b"warmup"}


@pytest.mark.parametrize("kind", KINDS)
def test_blackhole_confluent_times_out(proxied_broker, kind):
    pb = proxied_broker(kind)
    void_topic = fresh_topic(pb, "void", 1)
    pb.proxy.blackhole(True)
    p = _producer(pb.bootstrap_servers, **{"message.timeout.ms": 1000, "enable.idempotence": False})
    results = []
    for _ in range(5):
        p.produce(void_topic, b"x", on_delivery=lambda err, msg: results.append(err))
    start = time.monotonic()
    p.flush(10)
    assert time.monotonic() - start < 8
    assert len(results) == 5 and all(e is not None and e.code() == KafkaError._MSG_TIMED_OUT for e in results)
    assert pb.proxy.stats()["bytes_dropped"] > 0
    pb.proxy.blackhole(False)
    assert produce_all(pb.bootstrap_servers, void_topic, [b"y"] * 5) == 5
    assert [r.value for r in consume_all(pb.direct_bootstrap_servers, void_topic, 5)] == [b"y"] * 5


@pytest.mark.parametrize("kind", KINDS)
def test_truncated_produce_response_is_retried(proxied_broker, kind):
    pb = proxied_broker(kind)
    trunc_topic = fresh_topic(pb, "trunc", 1)
    p = _producer(pb.bootstrap_servers)
    p.produce(trunc_topic, b"warmup")
    assert p.flush(10) == 0
    handle = pb.proxy.truncate_next_response(10, api_key=PRODUCE)
    errors = []
    p.produce(trunc_topic, b"after", on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(20) == 0 and not errors
    assert handle.wait(1) and pb.proxy.stats()["truncated"] == 1
    values = [r.value for r in consume_all(pb.direct_bootstrap_servers, trunc_topic, 2)]
    assert values[0] == b"warmup" and set(values[1:]) == {b"after"}
    if kind in ("noida", "apache"):
        assert values == [b"warmup", b"after"]


def test_corrupted_produce_response_does_not_hang_confluent(proxied_broker):
    pb = proxied_broker("noida")
    garbled_topic = fresh_topic(pb, "garbled", 1)
    p = _producer(pb.bootstrap_servers, **{"message.timeout.ms": 5000})
    p.produce(garbled_topic, b"warmup")
    assert p.flush(10) == 0
    handle = pb.proxy.corrupt_next_response(api_key=PRODUCE, length=16)
    outcome = []
    p.produce(garbled_topic, b"x", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(15)
    assert handle.wait(1) and len(outcome) == 1  # delivered or failed, but reported
