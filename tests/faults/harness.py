"""Fault injection for failure-semantics tests: a Kafka-aware TCP proxy in front of a broker.

``FaultProxy`` forwards bytes between clients and one broker on 127.0.0.1 in a background thread
(one selector loop) and can cut connections, blackhole traffic, add latency, and truncate or
corrupt the next broker response.  It tracks Kafka frame boundaries in both directions, so
faults can target a response by API key (e.g. only the next Produce response).

Clients must reach the broker *only* through the proxy, so Metadata has to advertise the proxy:
  * tansu: ``TansuBroker(port=P, advertised_port=proxy.port)``;
  * noida (and Apache Kafka) advertise their own address, so use ``rewrite_metadata=True``: the
    proxy rewrites the broker/coordinator address in Metadata and FindCoordinator responses.
``start_proxied_broker(kind)`` does either and returns a ``ProxiedBroker``.
"""

from __future__ import annotations

import collections
import os
import random
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable

_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _repo not in sys.path:  # pragma: no cover - only when run outside pytest's rootdir
    sys.path.insert(0, _repo)

from sparkkafka_sink.errors import KafkaError, ProtocolError  # noqa: E402
from sparkkafka_sink.protocol import codec  # noqa: E402
from sparkkafka_sink.protocol.framing import FrameReader  # noqa: E402
from sparkkafka_sink.protocol.header import decode_response_header  # noqa: E402
from sparkkafka_sink.protocol.messages import schema_of  # noqa: E402
from sparkkafka_sink.testing.brokers import HOST, EmbeddedBroker, NoidaBroker, TansuBroker, free_port  # noqa: E402

__all__ = ["FaultProxy", "FaultHandle", "ProxiedBroker", "start_proxied_broker", "proxy_existing_broker",
           "PRODUCE", "METADATA", "FIND_COORDINATOR", "API_VERSIONS", "INIT_PRODUCER_ID"]

PRODUCE, METADATA, FIND_COORDINATOR, API_VERSIONS, INIT_PRODUCER_ID = 0, 3, 10, 18, 22

_MAX_BUFFER = 8 * 1024 * 1024  # per direction; stop reading the other side past this (backpressure)
_MAX_FRAME = 256 * 1024 * 1024
_SIZE = struct.Struct(">i")
_REQUEST_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id


class FaultHandle:
    """Returned by one-shot faults: ``wait(timeout)`` until the fault hit a response."""

    def __init__(self, kind: str, api_key: int | None, **params):
        self.kind = kind
        self.api_key = api_key
        self.params = params
        self.fired = threading.Event()
        self.hit_api_key: int | None = None
        self.hits = 0

    def wait(self, timeout: float = 10.0) -> bool:
        return self.fired.wait(timeout)

    def __repr__(self) -> str:
        return f"<FaultHandle {self.kind} api_key={self.api_key} fired={self.fired.is_set()}>"


class _Pair:
    """One client connection and its upstream connection, with per-direction state."""

    __slots__ = ("id", "client", "server", "out", "delayed", "delayed_bytes", "inflight",
                 "requests", "responses", "blackholed", "closing", "dead", "cut_on_response")

    def __init__(self, pid: int, client: socket.socket, server: socket.socket | None):
        self.id = pid
        self.client = client
        self.server = server
        # out[sock] = bytes ready to write to sock; delayed[sock] = (due, bytes) under latency
        self.out: dict[socket.socket, bytearray] = {client: bytearray()}
        self.delayed: dict[socket.socket, collections.deque[tuple[float, bytes]]] = {client: collections.deque()}
        self.delayed_bytes: dict[socket.socket, int] = {client: 0}
        if server is not None:
            self.out[server] = bytearray()
            self.delayed[server] = collections.deque()
            self.delayed_bytes[server] = 0
        self.inflight: dict[int, tuple[int, int]] = {}  # correlation id -> (api_key, version)
        # whole frames in each direction (the protocol layer's own frame reader)
        self.requests = FrameReader(_MAX_FRAME)
        self.responses = FrameReader(_MAX_FRAME)
        self.blackholed = server is None
        self.cut_on_response: set = set()  # correlation ids whose response cuts the pair
        self.closing = False       # close once everything queued for the client is written
        self.dead = False

    def other(self, sock: socket.socket) -> socket.socket | None:
        return self.server if sock is self.client else self.client

    def pending(self, sock: socket.socket) -> int:
        return len(self.out.get(sock, b"")) + self.delayed_bytes.get(sock, 0)


class FaultProxy:
    """TCP proxy ``127.0.0.1:listen_port -> target_host:target_port`` with injectable faults.

    Thread-safe controls: ``cut_all()``, ``cut_every(s)``/``stop_cutting()``, ``blackhole(on)``,
    ``blackhole_request(predicate)``, ``latency(ms)``, ``truncate_next_response(nbytes)``, ``corrupt_next_response()``,
    ``mutate_next_response(fn)``, ``mutate_next_request(fn)``;
    ``stats()`` returns counters.  ``close()`` stops the thread and closes every socket.
    """

    def __init__(self, listen_port: int = 0, target_host: str = HOST, target_port: int | None = None,
                 *, rewrite_metadata: bool = False, name: str = "proxy"):
        if target_port is None:
            raise ValueError("target_port is required")
        self.target = (target_host, int(target_port))
        self.rewrite_metadata = rewrite_metadata
        self.name = name
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, listen_port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._pairs: dict[int, _Pair] = {}
        self._by_sock: dict[socket.socket, _Pair] = {}
        self._events: dict[socket.socket, int] = {}
        self._commands: collections.deque[tuple[Callable[[], object], threading.Event, list]] = collections.deque()
        self._lock = threading.Lock()
        self._armed: list[FaultHandle] = []
        self._armed_requests: list[FaultHandle] = []
        self._hangs: list[FaultHandle] = []  # blackhole_request()
        self._cutter: FaultHandle | None = None   # cut_in_flight()
        self._blackhole_trigger: FaultHandle | None = None  # blackhole_after_next_request()
        self._blackhole_after: tuple | None = None  # (trigger, pair) once its request arrived
        self._blackhole = False
        self._latency = 0.0
        self._cut_interval: float | None = None
        self._next_cut = 0.0
        self._cut_reset = False
        self._cut_jitter = 0.0
        self._next_id = 0
        self._closed = False
        self._counters = collections.Counter()
        self._thread = threading.Thread(target=self._run, name=f"FaultProxy-{self.port}", daemon=True)
        self._thread.start()

    # -- public API -------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    bootstrap_servers = address

    def stats(self) -> dict[str, int]:
        """Counters: connections, active_connections, bytes_to_server, bytes_to_client,
        bytes_dropped, requests, responses, cuts (inflight_cuts of them by cut_in_flight),
        refused, truncated, corrupted, rewritten."""
        snap = dict(self._counters)
        snap["active_connections"] = len(self._pairs)
        for k in ("connections", "bytes_to_server", "bytes_to_client", "bytes_dropped", "requests",
                  "responses", "cuts", "refused", "truncated", "corrupted", "rewritten",
                  "rewrite_failures", "mutated", "mutated_requests", "inflight_cuts", "blackholed_requests"):
            snap.setdefault(k, 0)
        return snap

    def cut_all(self, reset: bool = False) -> int:
        """Close every live connection pair now (``reset=True`` sends RST); returns how many."""
        return self._call(lambda: self._cut_all(reset))

    def cut_every(self, seconds: float, reset: bool = False, jitter: float = 0.25) -> None:
        """Cut all connections every ``seconds`` (+/- ``jitter`` fraction, random) until
        ``stop_cutting()``.  Jitter avoids phase-locking with a client's fixed reconnect timers."""
        def go():
            self._cut_interval = float(seconds)
            self._cut_jitter = max(0.0, min(0.9, float(jitter)))
            self._cut_reset = reset
            self._next_cut = time.monotonic() + self._cut_delay()
        self._call(go)

    def _cut_delay(self) -> float:
        return self._cut_interval * (1.0 + random.uniform(-self._cut_jitter, self._cut_jitter))

    def stop_cutting(self) -> None:
        """Stop ``cut_every`` and ``cut_in_flight``."""
        def go():
            self._cut_interval = None
            self._cutter = None
        self._call(go)

    def cut_in_flight(self, api_key: int | None = None, every: int = 1, at: str = "alternate",
                      times: int | None = None, predicate: Callable[[bytes], bool] | None = None) -> FaultHandle:
        """Each time ``every`` requests (of ``api_key`` if given) have been answered, cut the
        connection of the next one while it is in flight -- driven by what the proxy sees, never
        by a timer, and never before ``every`` answers got through (a client that pipelines
        would otherwise lose every request of every connection):
        ``at="request"``: when its header arrives (the broker never gets it);
        ``at="response"``: when its response starts to arrive (the broker handled it, the client
        never hears back); ``"alternate"`` takes turns.  ``every=0`` cuts the very next request.
        ``handle.hits`` counts the cuts;
        ``times`` stops after that many; ``stop_cutting()`` stops it.  ``predicate``: only requests
        whose frame (without its size prefix) satisfies it count and are cut."""
        if at not in ("request", "response", "alternate"):
            raise ValueError(f"at must be request, response or alternate, got {at!r}")
        handle = FaultHandle("cut_in_flight", api_key, every=max(0, int(every)), at=at, times=times,
                             answered=0, next_at="response" if at == "response" else "request", predicate=predicate)
        self._call(lambda: setattr(self, "_cutter", handle))
        return handle

    def blackhole_after_next_request(self, api_key: int | None = None) -> FaultHandle:
        """Forward the next request (of ``api_key`` if given) whole to the broker, then blackhole
        everything: its response is lost in the network, as in a crash with a request in
        flight.  ``handle.wait()`` returns once the blackhole is on; ``blackhole(False)`` ends it."""
        handle = FaultHandle("blackhole_after", api_key)
        self._call(lambda: setattr(self, "_blackhole_trigger", handle))
        return handle

    def blackhole_request(self, predicate: Callable[[bytes], bool], api_key: int | None = None) -> FaultHandle:
        """The first request (of ``api_key`` if given) whose frame satisfies ``predicate`` hangs
        its connection: neither it nor anything after it on that connection reaches the broker,
        and nothing comes back (answers to earlier requests included) -- a network path that died
        under that request; other connections go on.  ``frame`` is the request without its size
        prefix (api key first; strings in it are plain bytes).  ``handle.wait()`` returns once it
        happened: the client is stuck at that request until its request.timeout.ms."""
        handle = FaultHandle("blackhole_request", api_key, predicate=predicate)
        with self._lock:
            self._hangs.append(handle)
        return handle

    def blackhole(self, on: bool = True) -> None:
        """On: accept and read everything, forward and answer nothing (a hung network path).
        Off: connections that lost bytes are cut (their Kafka streams are out of sync)."""
        self._call(lambda: self._set_blackhole(on))

    def _set_blackhole(self, on: bool) -> None:
        self._blackhole = bool(on)
        for pair in list(self._pairs.values()):
            if on:
                pair.blackholed = True
            elif pair.blackholed:
                self._close_pair(pair, cut=True)

    def latency(self, ms: float) -> None:
        """Delay every forwarded chunk by ``ms`` in each direction (a round trip gets 2x)."""
        self._call(lambda: setattr(self, "_latency", max(0.0, float(ms)) / 1000.0))

    def truncate_next_response(self, nbytes: int, api_key: int | None = None) -> FaultHandle:
        """Forward only the first ``nbytes`` (counted from the 4-byte size prefix) of the next
        broker response (of ``api_key`` if given), then close that connection."""
        return self._arm(FaultHandle("truncate", api_key, nbytes=int(nbytes)))

    def corrupt_next_response(self, api_key: int | None = None, offset: int = 8,
                              length: int = 4) -> FaultHandle:
        """XOR 0xFF ``length`` bytes of the next broker response (of ``api_key`` if given),
        starting ``offset`` bytes into the frame (8 = after size + correlation id)."""
        return self._arm(FaultHandle("corrupt", api_key, offset=int(offset), length=int(length)))

    def mutate_next_response(self, fn: Callable[[bytes, int | None, int | None], bytes],
                             api_key: int | None = None, times: int = 1) -> FaultHandle:
        """Replace the next ``times`` broker responses (of ``api_key`` if given) by
        ``fn(frame, api_key, version)``: ``frame`` is the response without its size prefix
        (correlation id first); the proxy writes the new size.  ``handle.hits`` counts them."""
        return self._arm(FaultHandle("mutate", api_key, fn=fn, times=int(times)))

    def mutate_next_request(self, fn: Callable[[bytes, int, int], bytes],
                            api_key: int | None = None, times: int = 1) -> FaultHandle:
        """Replace the next ``times`` client requests (of ``api_key`` if given) by
        ``fn(frame, api_key, version)`` before they reach the broker (``frame`` without its size
        prefix, api key first); e.g. flip a record byte so the broker sees a bad CRC."""
        handle = FaultHandle("mutate_request", api_key, fn=fn, times=int(times))
        with self._lock:
            self._armed_requests.append(handle)
        return handle

    def clear_faults(self) -> None:
        """Disarm pending one-shot faults, stop cutting, no latency, no blackhole."""
        with self._lock:
            self._armed.clear()
            self._armed_requests.clear()
            self._hangs.clear()
        self._call(lambda: setattr(self, "_blackhole_trigger", None))
        self.stop_cutting()
        self.latency(0)
        self.blackhole(False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake()
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FaultProxy {self.address} -> {self.target[0]}:{self.target[1]}>"

    # -- plumbing -----------------------------------------------------------------------------------
    def _arm(self, handle: FaultHandle) -> FaultHandle:
        with self._lock:
            self._armed.append(handle)
        return handle

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _call(self, fn: Callable[[], object], timeout: float = 10.0):
        if threading.current_thread() is self._thread:
            return fn()
        if self._closed:
            raise RuntimeError("proxy is closed")
        done, box = threading.Event(), []
        self._commands.append((fn, done, box))
        self._wake()
        if not done.wait(timeout):
            raise TimeoutError("proxy loop did not run the command")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    def _run(self) -> None:
        try:
            while not self._closed:
                self._update_interest()
                self._step(self._timeout())
        finally:
            for pair in list(self._pairs.values()):
                self._close_pair(pair, cut=False)
            for s in (self._listener, self._wake_r, self._wake_w):
                try:
                    s.close()
                except OSError:
                    pass
            self._sel.close()
            while self._commands:  # unblock callers racing with close()
                _, done, box = self._commands.popleft()
                box.append(RuntimeError("proxy is closed"))
                done.set()

    def _timeout(self) -> float:
        t = 0.5
        now = time.monotonic()
        if self._cut_interval is not None:
            t = min(t, max(0.0, self._next_cut - now))
        for pair in self._pairs.values():
            for q in pair.delayed.values():
                if q:
                    t = min(t, max(0.0, q[0][0] - now))
        return t

    def _step(self, timeout: float) -> None:
        for key, mask in self._sel.select(timeout):
            sock = key.fileobj
            if sock is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            elif sock is self._listener:
                self._accept()
            else:
                pair = self._by_sock.get(sock)
                if pair is None or pair.dead:
                    continue
                if mask & selectors.EVENT_WRITE:
                    self._flush(pair, sock)
                if mask & selectors.EVENT_READ and not pair.dead:
                    self._read(pair, sock)
        while self._commands:
            fn, done, box = self._commands.popleft()
            try:
                box.append(fn())
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append(e)
            done.set()
        now = time.monotonic()
        if self._cut_interval is not None and now >= self._next_cut:
            self._cut_all(self._cut_reset)
            self._next_cut = now + self._cut_delay()
        for pair in list(self._pairs.values()):
            for sock, q in pair.delayed.items():
                while q and q[0][0] <= now:
                    _, data = q.popleft()
                    pair.delayed_bytes[sock] -= len(data)
                    pair.out[sock] += data
                if pair.out[sock]:
                    self._flush(pair, sock)
            if pair.closing and not pair.dead and pair.pending(pair.client) == 0:
                self._close_pair(pair, cut=False)

    def _update_interest(self) -> None:
        for pair in self._pairs.values():
            for sock in (pair.client, pair.server):
                if sock is None:
                    continue
                ev = 0
                peer = pair.other(sock)
                if not pair.closing and (peer is None or pair.pending(peer) < _MAX_BUFFER):
                    ev |= selectors.EVENT_READ
                if pair.out[sock]:
                    ev |= selectors.EVENT_WRITE
                old = self._events.get(sock)
                if ev != old:
                    if old is None:
                        if ev:
                            self._sel.register(sock, ev)
                    elif ev == 0:
                        self._sel.unregister(sock)
                    else:
                        self._sel.modify(sock, ev)
                    if ev:
                        self._events[sock] = ev
                    else:
                        self._events.pop(sock, None)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self._counters["connections"] += 1
            server = None
            if not self._blackhole:
                try:
                    server = socket.create_connection(self.target, timeout=2.0)
                except OSError:
                    self._counters["refused"] += 1
                    client.close()  # broker down: the client sees the connection drop at once
                    continue
                server.setblocking(False)
                server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._next_id += 1
            pair = _Pair(self._next_id, client, server)
            self._pairs[pair.id] = pair
            self._by_sock[client] = pair
            if server is not None:
                self._by_sock[server] = pair

    def _read(self, pair: _Pair, sock: socket.socket) -> None:
        try:
            data = sock.recv(256 * 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if sock is pair.server and not pair.blackholed:
                pair.closing = True  # deliver what the broker already sent, then close
            else:
                self._close_pair(pair, cut=False)
            return
        if pair.blackholed:
            self._counters["bytes_dropped"] += len(data)
            return
        if sock is pair.client:
            self._counters["bytes_to_server"] += len(data)
            for frame in self._frames(pair, pair.requests, data):
                frame = self._request(pair, bytes(frame))
                if pair.dead or pair.blackholed:
                    return  # cut_in_flight cut it, or blackhole_request hung it, as this request arrived
                self._queue(pair, pair.server, _SIZE.pack(len(frame)) + frame)
                if self._blackhole_after is not None and self._blackhole_after[1] is pair:
                    handle, _ = self._blackhole_after
                    self._blackhole_after = None
                    self._set_blackhole(True)  # the request went out whole; its answer is lost
                    handle.fired.set()
                    return
        else:
            self._counters["bytes_to_client"] += len(data)
            for frame in self._frames(pair, pair.responses, data):
                self._response(pair, bytes(frame))
                if pair.dead or pair.closing:
                    return

    def _frames(self, pair: _Pair, reader: FrameReader, data: bytes) -> list:
        try:
            return reader.feed(data)
        except ProtocolError:  # not Kafka framing: pass nothing on, drop the connection
            self._close_pair(pair, cut=False)
            return []

    def _queue(self, pair: _Pair, sock: socket.socket, data) -> None:
        if not data:
            return
        q = pair.delayed[sock]
        if self._latency > 0 or q:
            q.append((time.monotonic() + self._latency, bytes(data)))
            pair.delayed_bytes[sock] += len(data)
        else:
            pair.out[sock] += data
            self._flush(pair, sock)

    def _flush(self, pair: _Pair, sock: socket.socket) -> None:
        buf = pair.out[sock]
        while buf:
            try:
                n = sock.send(buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close_pair(pair, cut=False)
                return
            del buf[:n]

    def _close_pair(self, pair: _Pair, cut: bool, reset: bool = False) -> None:
        if pair.dead:
            return
        pair.dead = True
        if cut:
            self._counters["cuts"] += 1
        for sock in (pair.client, pair.server):
            if sock is None:
                continue
            if self._events.pop(sock, None) is not None:
                try:
                    self._sel.unregister(sock)
                except (KeyError, ValueError):
                    pass
            self._by_sock.pop(sock, None)
            try:
                if reset:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            except OSError:
                pass
        self._pairs.pop(pair.id, None)

    def _cut_all(self, reset: bool) -> int:
        pairs = list(self._pairs.values())
        for pair in pairs:
            self._close_pair(pair, cut=True, reset=reset)
        return len(pairs)

    # -- Kafka frames -------------------------------------------------------------------------------
    def _request(self, pair: _Pair, frame: bytes) -> bytes:
        """A whole request from the client: note what it is, fire triggers, apply mutations."""
        api_key, version, corr = _REQUEST_PREFIX.unpack_from(frame)
        pair.inflight[corr] = (api_key, version)
        self._counters["requests"] += 1
        hang = self._take_hang(frame, api_key)
        if hang is not None:
            pair.blackholed = True  # this request and everything after it on the connection: dropped
            self._counters["blackholed_requests"] += 1
            hang.hit_api_key = api_key
            hang.fired.set()
            return frame
        if self._request_started(pair, api_key, corr, frame):
            return frame
        handle = self._take_armed(self._armed_requests, api_key)
        if handle is not None:
            frame = handle.params["fn"](frame, api_key, version)
            self._counters["mutated_requests"] += 1
            handle.fired.set()
        return frame

    def _request_started(self, pair: _Pair, api_key: int, corr: int, frame: bytes) -> bool:
        """Triggers that fire on a request: returns True when the pair was cut here."""
        trigger = self._blackhole_trigger
        if trigger is not None and trigger.api_key in (None, api_key):
            self._blackhole_after, self._blackhole_trigger = (trigger, pair), None
        h = self._cutter
        if h is None or h.api_key not in (None, api_key):
            return False
        if h.params["predicate"] is not None and not h.params["predicate"](frame):
            return False
        p = h.params
        if p["answered"] < p["every"]:
            return False
        p["answered"] = 0
        at = p["next_at"]
        if p["at"] == "alternate":
            p["next_at"] = "response" if at == "request" else "request"
        if at == "response":
            pair.cut_on_response.add(corr)
            return False
        self._in_flight_cut(pair, h)
        return True

    def _in_flight_cut(self, pair: _Pair, h: FaultHandle) -> None:
        h.hits += 1
        self._counters["inflight_cuts"] += 1
        times = h.params["times"]
        if times is not None and h.hits >= times and self._cutter is h:
            self._cutter = None
        self._close_pair(pair, cut=True)
        h.fired.set()

    def _take_hang(self, frame: bytes, api_key: int) -> FaultHandle | None:
        with self._lock:
            for h in self._hangs:
                if h.api_key in (None, api_key) and h.params["predicate"](frame):
                    self._hangs.remove(h)
                    h.hits += 1
                    return h
        return None

    def _take_armed(self, armed: list[FaultHandle], api_key: int | None) -> FaultHandle | None:
        with self._lock:
            for h in armed:
                if h.api_key is None or h.api_key == api_key:
                    h.hits += 1
                    if h.hits >= h.params.get("times", 1):
                        armed.remove(h)
                    h.hit_api_key = api_key
                    return h
        return None

    def _response(self, pair: _Pair, frame: bytes) -> None:
        """A whole response from the broker: apply the armed fault (or the address rewrite)."""
        corr = _SIZE.unpack_from(frame)[0]
        if corr in pair.cut_on_response:
            self._in_flight_cut(pair, self._cutter or FaultHandle("cut_in_flight", None, times=None))
            return  # the broker handled the request; its answer is lost with the connection
        api_key, version = pair.inflight.pop(corr, (None, None))
        self._counters["responses"] += 1
        h = self._cutter
        if h is not None and h.api_key in (None, api_key):
            h.params["answered"] += 1
        handle = self._take_armed(self._armed, api_key)
        wire = _SIZE.pack(len(frame)) + frame
        if handle is None:
            if self.rewrite_metadata and api_key in (METADATA, FIND_COORDINATOR):
                try:
                    frame = _rewrite_addresses(frame, api_key, version, self.host, self.port)
                    wire = _SIZE.pack(len(frame)) + frame
                    self._counters["rewritten"] += 1
                except (KafkaError, ValueError):
                    self._counters["rewrite_failures"] += 1
        elif handle.kind == "mutate":
            body = handle.params["fn"](frame, api_key, version)
            wire = _SIZE.pack(len(body)) + body
            self._counters["mutated"] += 1
        elif handle.kind == "corrupt":
            lo = handle.params["offset"]
            damaged = bytearray(wire)
            for j in range(lo, min(lo + handle.params["length"], len(damaged))):
                damaged[j] ^= 0xFF
            wire = bytes(damaged)
            self._counters["corrupted"] += 1
        elif handle.kind == "truncate":
            wire = wire[:handle.params["nbytes"]]
            pair.closing = True  # stop reading; close once the partial frame is written
            self._counters["truncated"] += 1
        self._queue(pair, pair.client, wire)
        if handle is not None:
            handle.fired.set()


# ---------------------------------------------------------------------------------------------
# Address rewriting in Metadata / FindCoordinator responses (single-broker clusters)
# ---------------------------------------------------------------------------------------------

def _rewrite_addresses(frame: bytes, api_key: int, version: int, host: str, port: int) -> bytes:
    """Every broker/coordinator host:port in a Metadata or FindCoordinator response frame
    (correlation id first) replaced by the proxy's: decoded and encoded with the protocol's own
    declarations, at whatever version the client asked for."""
    name = "MetadataResponse" if api_key == METADATA else "FindCoordinatorResponse"
    _, offset = decode_response_header(memoryview(frame), api_key, version)
    schema = schema_of(name)
    message = codec.decode(schema, frame[offset:], version, declared_versions_only=False)
    if api_key == METADATA:
        for node in message.brokers:
            node.host, node.port = host, port
    else:
        for node in message.coordinators if version >= 4 else [message]:
            if node.port >= 0:  # -1: no coordinator (an error answer)
                node.host, node.port = host, port
    body = codec.encode(schema, message, version, declared_versions_only=False)
    return frame[:offset] + b"".join(bytes(p) for p in body)


class ProxiedBroker:
    """A broker whose metadata routes clients through ``proxy``.

    ``owns_broker`` False: a shared broker (the session's Apache Kafka node) outlives the proxy.

    ``bootstrap_servers`` is the proxy's address; ``direct_bootstrap_servers`` bypasses it
    (for independent read-back that must not be disturbed by the faults).
    """

    def __init__(self, broker: EmbeddedBroker, proxy: FaultProxy, owns_broker: bool = True):
        self.broker = broker
        self.proxy = proxy
        self.kind = broker.kind
        self.owns_broker = owns_broker

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.address

    @property
    def direct_bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def stop(self) -> None:
        try:
            self.proxy.close()
        finally:
            if self.owns_broker:
                self.broker.stop()

    def __enter__(self) -> ProxiedBroker:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ProxiedBroker {self.kind} via {self.proxy.address} -> {self.broker.bootstrap_servers}>"


def proxy_existing_broker(broker: EmbeddedBroker) -> ProxiedBroker:
    """Put a new FaultProxy (rewriting metadata) in front of a broker that is already running and
    shared (Apache Kafka advertises its own address, so the proxy rewrites it)."""
    proxy = FaultProxy(0, HOST, broker.port, rewrite_metadata=True, name=f"{broker.kind}-{broker.port}")
    return ProxiedBroker(broker, proxy, owns_broker=False)


def start_proxied_broker(kind: str = "tansu", rewrite_metadata: bool | None = None,
                         **broker_kwargs) -> ProxiedBroker:
    """Start ``kind`` ("tansu" | "noida") behind a new FaultProxy.

    tansu advertises the proxy itself (``advertised_port``); noida cannot, so the proxy rewrites
    metadata.  Direct read-back of a noida broker behind the proxy still works: the rewrite only
    happens in responses that pass through the proxy.
    """
    if kind == "tansu" and not rewrite_metadata:
        port = broker_kwargs.pop("port", None) or free_port()
        proxy = FaultProxy(0, HOST, port, name=f"tansu-{port}")
        try:
            broker = TansuBroker(port=port, advertised_port=proxy.port, **broker_kwargs).start()
        except BaseException:
            proxy.close()
            raise
        return ProxiedBroker(broker, proxy)
    if kind not in ("tansu", "noida"):
        raise ValueError(f"unknown broker kind {kind!r}")
    cls = TansuBroker if kind == "tansu" else NoidaBroker
    broker = cls(**broker_kwargs).start()
    try:
        proxy = FaultProxy(0, HOST, broker.port, rewrite_metadata=True, name=f"{kind}-{broker.port}")
    except BaseException:
        broker.stop()
        raise
    return ProxiedBroker(broker, proxy)
