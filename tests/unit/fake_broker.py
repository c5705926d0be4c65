"""A scriptable in-process fake Kafka broker for network-client and Sender tests.

``FakeBroker`` listens on 127.0.0.1 (port 0), decodes request frames with our own protocol
codecs and answers ApiVersions, Metadata, InitProducerId and Produce.  Tests control it:

* ``api_versions``: the ``{api_key: (min, max)}`` it advertises (``supports_api_versions``
  caps the ApiVersions version it accepts: higher versions get the KIP-511 UNSUPPORTED_VERSION
  answer, with or without its own range per ``unsupported_version_includes_keys``);
* a ``FakeCluster`` shared by several brokers: brokers, topics and partition leaders, which
  Metadata answers describe and Produce routing checks (NOT_LEADER_OR_FOLLOWER when a partition
  is not led by this broker);
* ``produce_errors(topic, partition, *codes)``: per-call error codes for one partition (0 =
  process normally);  ``init_pid_errors``: the same for InitProducerId;
* ``reading.clear()`` / ``.set()``: stop and resume reading requests; ``drop_connections()``;
* ``script(api_key, *behaviors)``: how to deliver the next responses of an API (delay, held
  behind a gate, never, byte by byte with pauses, closing the connection part-way, a wrong
  correlation id); ``default_behavior[api_key]`` for every later one;
* a per-partition log with Kafka's idempotent sequence checks (OUT_OF_ORDER_SEQUENCE_NUMBER,
  DUPLICATE_SEQUENCE_NUMBER), so ordering and duplicates are observable.

Every request is recorded (``requests``): api key, version, correlation id, connection, decoded
body, and for Produce the raw and decoded record batches per partition.

Threads: one acceptor, and per connection one reader and one writer (so requests keep being read
while responses are held, and responses go out in request order as Kafka sends them).
``close()`` stops and joins all of them.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker_frames import decode_request_header, encode_response_header

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import DECLARED, ApiKey
from sparkkafka_sink.record.batch import decode_batches

PRODUCE, METADATA, API_VERSIONS, INIT_PRODUCER_ID = (
    int(ApiKey.PRODUCE), int(ApiKey.METADATA), int(ApiKey.API_VERSIONS), int(ApiKey.INIT_PRODUCER_ID))

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
TOPIC_AUTHORIZATION_FAILED = 29
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46

#: the fake broker reads requests and writes responses with the declared messages
HANDLED = (PRODUCE, METADATA, API_VERSIONS, INIT_PRODUCER_ID)


def _struct(message: str, struct: str):
    return messages.schema_of(message).structs[struct].cls

#: What a recent Apache Kafka advertises for the APIs we speak (and a few we do not).
DEFAULT_API_VERSIONS: dict[int, tuple[int, int]] = {
    PRODUCE: (0, 11),
    1: (0, 16),            # Fetch (never used by the producer)
    METADATA: (0, 12),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 5),
}

_SIZE = struct.Struct(">i")


@dataclass
class Behavior:
    """How one response is delivered (the request itself is always processed first)."""

    delay: float = 0.0                 # seconds after the request arrived
    gate: threading.Event | None = None  # held until the event is set
    drop: bool = False                 # never answer; later responses on the connection stall too
    chunk: int | None = None           # write the frame this many bytes at a time ...
    pause: float = 0.0                 # ... sleeping this long between pieces
    close_after: int | None = None     # write this many bytes of the frame, then close
    correlation_delta: int = 0         # answer with correlation id + delta
    close_instead: bool = False        # close the connection instead of answering


@dataclass
class Received:
    """One request as the broker saw it."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    conn_id: int
    time: float
    body: Any
    frame_size: int
    #: Produce only: ``{(topic, partition): raw record bytes}`` and the decoded batches
    raw: dict[tuple[str, int], bytes] = field(default_factory=dict)
    batches: dict[tuple[str, int], list] = field(default_factory=dict)
    #: Produce only: error code answered per partition
    answered: dict[tuple[str, int], int] = field(default_factory=dict)


class FakeCluster:
    """Brokers, topics and leaders shared by the FakeBrokers of one test."""

    def __init__(self):
        self.brokers: dict[int, FakeBroker] = {}
        self.topics: dict[str, dict[int, int]] = {}     # topic -> {partition: leader node id}
        self.topic_errors: dict[str, int] = {}          # topic -> error code in Metadata
        #: topic -> authorized operations answered when a Metadata request asks for them
        self.topic_operations: dict[str, int] = {}
        self.lock = threading.RLock()
        self._pids = itertools.count(1000)
        self.auto_create_partitions = 0                 # >0: unknown topics get created on Metadata
        #: partition logs, shared by all brokers (as if replicated): a new leader knows the
        #: records and producer sequences the old one wrote
        self.logs: dict[tuple[str, int], PartitionLog] = defaultdict(PartitionLog)

    def add_topic(self, topic: str, partitions: int = 1, leader: int | None = None) -> None:
        with self.lock:
            leader = next(iter(self.brokers)) if leader is None else leader
            self.topics[topic] = {p: leader for p in range(partitions)}

    def set_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.lock:
            self.topics[topic][partition] = leader

    def leader(self, topic: str, partition: int) -> int | None:
        with self.lock:
            return self.topics.get(topic, {}).get(partition)

    def next_producer_id(self) -> int:
        return next(self._pids)


class PartitionLog:
    def __init__(self):
        self.records: list = []                      # DecodedRecord, in offset order
        self.batches: list = []                      # DecodedBatch, in append order
        # pid -> (epoch, last sequence, deque of (base_seq, last_seq, base_offset))
        self.producers: dict[int, tuple[int, int, deque]] = {}


class _Conn:
    def __init__(self, conn_id: int, sock: socket.socket):
        self.id = conn_id
        self.sock = sock
        self.out: deque = deque()
        self.cond = threading.Condition()
        self.closed = False
        self.stalled = False
        self.outstanding = 0
        self.reader: threading.Thread | None = None
        self.writer: threading.Thread | None = None


class FakeBroker:
    def __init__(self, cluster: FakeCluster | None = None, node_id: int | None = None, *,
                 api_versions: dict[int, tuple[int, int]] | None = None,
                 rcvbuf: int | None = None, recv_chunk: int = 1 << 16, recv_pause: float = 0.0,
                 answer_acks0: bool = True, check_sequences: bool = True):
        self.cluster = cluster if cluster is not None else FakeCluster()
        self.node_id = node_id if node_id is not None else (max(self.cluster.brokers, default=0) + 1)
        self.api_versions = dict(DEFAULT_API_VERSIONS if api_versions is None else api_versions)
        #: highest ApiVersions request version understood (defaults to the advertised max)
        self.supports_api_versions = self.api_versions.get(API_VERSIONS, (0, 3))[1]
        self.unsupported_version_includes_keys = True
        self.answer_acks0 = answer_acks0
        self.check_sequences = check_sequences
        #: Apache Kafka takes any first sequence from a producer it holds no state for
        self.accept_any_first_sequence = False
        self.duplicate_answer = DUPLICATE_SEQUENCE_NUMBER
        self.recv_chunk = recv_chunk
        self.recv_pause = recv_pause
        #: cleared: the broker stops reading (socket buffers fill, the client's writes back up)
        self.reading = threading.Event()
        self.reading.set()
        self.requests: list[Received] = []
        self.logs = self.cluster.logs
        self.default_behavior: dict[int, Behavior] = {}
        self.handlers: dict[int, Callable[[FakeBroker, Received], Any]] = {}
        self.init_pid_errors: deque[int] = deque()
        self.connections: list[_Conn] = []
        self.max_outstanding = 0
        self.errors: list[BaseException] = []        # exceptions inside the fake (tests assert empty)
        self._scripts: dict[int, deque[Behavior]] = defaultdict(deque)
        self._produce_errors: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._conn_ids = itertools.count(1)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self.host, self.port = self._listener.getsockname()
        with self.cluster.lock:
            self.cluster.brokers[self.node_id] = self
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"fake-broker-{self.node_id}",
                                          daemon=True)
        self._acceptor.start()

    # -- test-facing API --------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def script(self, api_key: int, *behaviors: Behavior) -> None:
        """Deliver the next responses of ``api_key`` as ``behaviors`` (one each, in order)."""
        with self._lock:
            self._scripts[int(api_key)].extend(behaviors)

    def produce_errors(self, topic: str, partition: int, *codes: int) -> None:
        """Answer the next Produce calls for ``topic-partition`` with these codes (0 = normal)."""
        with self._lock:
            self._produce_errors[(topic, partition)].extend(codes)

    def requests_of(self, api_key: int) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.api_key == api_key]

    def produce_batches(self, topic: str, partition: int) -> list[tuple[Received, list, bytes]]:
        """``(request, decoded batches, raw bytes)`` for every Produce carrying this partition."""
        out = []
        for r in self.requests_of(PRODUCE):
            if (topic, partition) in r.raw:
                out.append((r, r.batches[(topic, partition)], r.raw[(topic, partition)]))
        return out

    def log_values(self, topic: str, partition: int) -> list[bytes | None]:
        """Values in the partition's (cluster-wide) log."""
        with self.cluster.lock:
            return [rec.value for rec in self.logs[(topic, partition)].records]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` (evaluated under the broker lock after each request)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.05))
            return True

    def outstanding(self) -> int:
        with self._lock:
            return sum(c.outstanding for c in self.connections if not c.closed)

    def drop_connections(self) -> None:
        """Close every open client connection from the broker's side."""
        for c in list(self.connections):
            self._close_conn(c)

    def close(self) -> None:
        self._stop.set()
        try:
            self._listener.close()
        except OSError:
            pass
        self._acceptor.join(5)
        for c in list(self.connections):
            self._close_conn(c)
        for c in list(self.connections):
            for t in (c.reader, c.writer):
                if t is not None and t is not threading.current_thread():
                    t.join(5)
        with self.cluster.lock:
            if self.cluster.brokers.get(self.node_id) is self:
                del self.cluster.brokers[self.node_id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- threads ------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(next(self._conn_ids), sock)
            with self._lock:
                if self._stop.is_set():
                    sock.close()
                    return
                self.connections.append(conn)
                self._changed.notify_all()
            conn.reader = threading.Thread(target=self._read_loop, args=(conn,), daemon=True,
                                           name=f"fake-broker-{self.node_id}-r{conn.id}")
            conn.writer = threading.Thread(target=self._write_loop, args=(conn,), daemon=True,
                                           name=f"fake-broker-{self.node_id}-w{conn.id}")
            conn.reader.start()
            conn.writer.start()

    def _recv_exact(self, conn: _Conn, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            while not self.reading.wait(0.05):
                if self._stop.is_set() or conn.closed:
                    return None
            try:
                data = conn.sock.recv(min(n - len(buf), self.recv_chunk))
            except OSError:
                return None
            if not data:
                return None
            buf += data
            if self.recv_pause:
                time.sleep(self.recv_pause)
        return bytes(buf)

    def _read_loop(self, conn: _Conn) -> None:
        try:
            while not self._stop.is_set() and not conn.closed:
                head = self._recv_exact(conn, 4)
                if head is None:
                    break
                (size,) = _SIZE.unpack(head)
                frame = self._recv_exact(conn, size)
                if frame is None:
                    break
                self._handle(conn, frame)
        except Exception as e:  # noqa: BLE001 - surfaced through broker.errors
            self.errors.append(e)
        finally:
            self._close_conn(conn)

    def _write_loop(self, conn: _Conn) -> None:
        while True:
            with conn.cond:
                while not conn.out and not conn.closed:
                    conn.cond.wait(0.1)
                if conn.closed:
                    return
                due, behavior, frame, counted = conn.out.popleft()
            if conn.stalled:
                continue
            while not conn.closed and time.monotonic() < due:
                time.sleep(min(due - time.monotonic(), 0.01))
            if behavior.gate is not None:
                while not conn.closed and not behavior.gate.wait(0.02):
                    pass
            if conn.closed:
                return
            if behavior.drop:
                conn.stalled = True
                continue
            if behavior.close_instead:
                self._close_conn(conn)
                return
            if counted:
                # Answered from here on: the client cannot send its next request before it has
                # read this whole response, so counting it down only after sendall() would race.
                with self._lock:
                    conn.outstanding -= 1
                    self._changed.notify_all()
            data = frame
            limit = len(data) if behavior.close_after is None else behavior.close_after
            try:
                if behavior.chunk:
                    for i in range(0, limit, behavior.chunk):
                        conn.sock.sendall(data[i:min(i + behavior.chunk, limit)])
                        if behavior.pause:
                            time.sleep(behavior.pause)
                else:
                    conn.sock.sendall(data[:limit])
            except OSError:
                self._close_conn(conn)
                return
            if behavior.close_after is not None:
                self._close_conn(conn)
                return

    def _close_conn(self, conn: _Conn) -> None:
        with conn.cond:
            if conn.closed:
                return
            conn.closed = True
            conn.cond.notify_all()
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            conn.sock.close()
        except OSError:
            pass
        with self._lock:
            self._changed.notify_all()

    # -- request handling ---------------------------------------------------------------
    def _handle(self, conn: _Conn, frame: bytes) -> None:
        api_key, version, cid, client_id, offset = decode_request_header(frame)
        body_bytes = memoryview(frame)[offset:]
        if api_key not in HANDLED and api_key not in self.handlers:
            raise ProtocolError(f"fake broker does not handle api key {api_key}")
        body = messages.decode_body(DECLARED[api_key].spec + "Request", body_bytes, version)
        rec = Received(api_key, version, cid, client_id, conn.id, time.monotonic(), body, len(frame))
        expects = not (api_key == PRODUCE and body.acks == 0 and not self.answer_acks0)
        with self._lock:
            behavior = (self._scripts[api_key].popleft() if self._scripts[api_key]
                        else self.default_behavior.get(api_key, Behavior()))
            if api_key in self.handlers:
                resp_version, parts = self.handlers[api_key](self, rec)
            elif api_key == API_VERSIONS:
                resp_version, parts = self._api_versions(rec)
            elif api_key == METADATA:
                resp_version, parts = version, messages.encode_body(self._metadata(rec), version)
            elif api_key == INIT_PRODUCER_ID:
                resp_version, parts = version, messages.encode_body(self._init_pid(rec), version)
            else:
                resp_version, parts = version, messages.encode_body(self._produce(rec), version)
            self.requests.append(rec)
            if expects:
                conn.outstanding += 1
                self.max_outstanding = max(self.max_outstanding, conn.outstanding)
            self._changed.notify_all()
        if not expects:
            return
        frame_parts = encode_response_header(api_key, resp_version,
                                             (cid + behavior.correlation_delta) & 0x7FFFFFFF, parts)
        data = b"".join(bytes(p) for p in frame_parts)
        with conn.cond:
            conn.out.append((rec.time + behavior.delay, behavior, data, True))
            conn.cond.notify_all()

    def _api_versions(self, rec: Received):
        api_version = _struct("ApiVersionsResponse", "ApiVersion")
        keys = [api_version(k, lo, hi) for k, (lo, hi) in sorted(self.api_versions.items())]
        if rec.version > self.supports_api_versions:
            # KIP-511: answer a version we do not know with a v0 body and UNSUPPORTED_VERSION.
            body = messages.ApiVersionsResponse(
                error_code=UNSUPPORTED_VERSION, api_keys=keys if self.unsupported_version_includes_keys else [])
            return 0, messages.encode_body(body, 0)
        return rec.version, messages.encode_body(messages.ApiVersionsResponse(error_code=0, api_keys=keys),
                                                 rec.version)

    def _metadata(self, rec: Received):
        broker_cls = _struct("MetadataResponse", "MetadataResponseBroker")
        topic_cls = _struct("MetadataResponse", "MetadataResponseTopic")
        partition_cls = _struct("MetadataResponse", "MetadataResponsePartition")
        c = self.cluster
        with c.lock:
            brokers = [broker_cls(node_id=b.node_id, host=b.host, port=b.port) for b in c.brokers.values()]
            names = list(c.topics) if rec.body.topics is None else [t.name for t in rec.body.topics]
            topics = []
            for name in names:
                if name not in c.topics and c.auto_create_partitions and rec.body.allow_auto_topic_creation:
                    c.add_topic(name, c.auto_create_partitions, self.node_id)
                if name in c.topic_errors:
                    topics.append(topic_cls(error_code=c.topic_errors[name], name=name))
                elif name not in c.topics:
                    topics.append(topic_cls(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name))
                else:
                    parts = [partition_cls(error_code=0, partition_index=p, leader_id=leader, leader_epoch=0,
                                           replica_nodes=[leader], isr_nodes=[leader])
                             for p, leader in sorted(c.topics[name].items())]
                    topic = topic_cls(error_code=0, name=name, partitions=parts)
                    if rec.body.include_topic_authorized_operations and name in c.topic_operations:
                        topic.topic_authorized_operations = c.topic_operations[name]
                    topics.append(topic)
            controller = min(c.brokers) if c.brokers else -1
        return messages.MetadataResponse(brokers=brokers, topics=topics, cluster_id="fake-cluster",
                                          controller_id=controller)

    def _init_pid(self, rec: Received):
        if self.init_pid_errors:
            code = self.init_pid_errors.popleft()
            if code:
                return messages.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
        return messages.InitProducerIdResponse(error_code=0, producer_id=self.cluster.next_producer_id(),
                                               producer_epoch=0)

    def _produce(self, rec: Received):
        topic_cls = _struct("ProduceResponse", "TopicProduceResponse")
        partition_cls = _struct("ProduceResponse", "PartitionProduceResponse")
        responses = []
        for topic in rec.body.topic_data:
            presps = []
            for partition in topic.partition_data:
                index, records = partition.index, partition.records
                tp = (topic.name, index)
                raw = bytes(records) if records is not None else b""
                rec.raw[tp] = raw
                try:
                    rec.batches[tp] = decode_batches(raw)
                except ProtocolError:
                    rec.batches[tp] = None
                with self.cluster.lock:
                    code, base_offset = self._produce_partition(tp, rec.batches[tp])
                rec.answered[tp] = code
                presps.append(partition_cls(index=index, error_code=code, base_offset=base_offset,
                                            log_append_time_ms=-1, log_start_offset=0))
            responses.append(topic_cls(name=topic.name, partition_responses=presps))
        return messages.ProduceResponse(responses=responses)

    def _produce_partition(self, tp, batches) -> tuple[int, int]:
        scripted = self._produce_errors[tp]
        if scripted:
            code = scripted.popleft()
            if code:
                return code, -1
        leader = self.cluster.leader(*tp)
        if leader is None:
            return UNKNOWN_TOPIC_OR_PARTITION, -1
        if leader != self.node_id:
            return NOT_LEADER_OR_FOLLOWER, -1
        if batches is None:
            return CORRUPT_MESSAGE, -1
        log = self.logs[tp]
        first_offset = None
        for b in batches:
            if b.producer_id >= 0 and self.check_sequences:
                state = log.producers.get(b.producer_id)
                last_seq = b.base_sequence + len(b.records) - 1
                if state is not None:
                    epoch, prev_last, recent = state
                    dup = next((off for s, _, off in recent if s == b.base_sequence), None)
                    if dup is not None:
                        return self.duplicate_answer, (dup if self.duplicate_answer == NONE else -1)
                    if b.base_sequence != prev_last + 1:
                        return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
                elif b.base_sequence != 0 and not self.accept_any_first_sequence:
                    return OUT_OF_ORDER_SEQUENCE_NUMBER, -1
                else:
                    recent = deque(maxlen=5)
                base = len(log.records)
                recent.append((b.base_sequence, last_seq, base))
                log.producers[b.producer_id] = (b.producer_epoch, last_seq, recent)
            base = len(log.records)
            first_offset = base if first_offset is None else first_offset
            log.records.extend(b.records)
            log.batches.append(b)
        return NONE, (first_offset if first_offset is not None else len(log.records))


def refusing_port() -> tuple[socket.socket, int]:
    """A bound, non-listening socket: connections to its port are refused.  Close it after use."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


# ---------------------------------------------------------------------------------- fixtures
# Test modules import these (``from fake_broker import cluster, make_broker, make_producer``).

import pytest  # noqa: E402


@pytest.fixture
def cluster():
    return FakeCluster()


@pytest.fixture
def make_broker(cluster):
    """``make_broker(**kwargs) -> FakeBroker`` in the test's cluster; all closed at teardown."""
    made: list[FakeBroker] = []

    def make(**kwargs) -> FakeBroker:
        b = FakeBroker(cluster, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
    for b in made:
        assert not b.errors, f"fake broker {b.node_id} failed: {b.errors!r}"
    leftover = [t.name for t in threading.enumerate() if t.name.startswith("fake-broker-")]
    assert not leftover, f"fake broker threads still running: {leftover}"


@pytest.fixture
def broker(make_broker, cluster):
    """One broker leading topic ``t`` (2 partitions)."""
    b = make_broker()
    cluster.add_topic("t", 2, b.node_id)
    return b


@pytest.fixture
def make_producer():
    """``make_producer(broker_or_address, **config) -> Producer`` (config keys with '_' for '.');
    every producer is closed at teardown and its Sender thread must be gone."""
    from sparkkafka_sink import Producer

    made = []

    def make(target, config: dict | None = None, **kwargs):
        address = target.address if isinstance(target, FakeBroker) else target
        conf = {"bootstrap.servers": address, "linger.ms": 0, "max.block.ms": 5000}
        conf.update({k.replace("_", "."): v for k, v in kwargs.items()})
        conf.update(config or {})
        p = Producer(conf)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(timeout=2)
    for p in made:
        alive = [t for t in threading.enumerate() if t.name == f"sparkkafka-sink-sender-{p.client_id}"]
        assert not alive, f"sender thread still alive after close(): {alive}"
