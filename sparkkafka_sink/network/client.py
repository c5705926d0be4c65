"""NetworkClient: every broker connection of one producer, driven by one thread.

Only the Sender thread calls it (``ready``/``send``/``poll``); other threads
may only ``wakeup()`` it, through a socketpair registered in the selector, so
``send()`` never waits for the I/O thread.  It owns the connections: their
states with exponential reconnect backoff, in-flight caps, request and
connection-setup timeouts (which close the connection so its requests are
retried) and idle closes.  Its helpers decide the rest: ``ConnectionSetup``
what a new connection asks before it is READY (ApiVersions, SASL),
``MetadataUpdater`` when metadata is asked for, ``HangUpDiagnosis`` what
hang-ups say about ``security.protocol``.  A failed authentication or
certificate check is fatal (``fatal_error``): it would fail the same way again,
so no connection is tried after it and every caller gets the error.
"""

from __future__ import annotations

import collections
import logging
import random
import selectors
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sparkkafka_sink.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    Message,
    ProtocolError,
    Setting,
    SslError,
    UnsupportedVersionError,
)
from sparkkafka_sink.network.broker_release import API_SINCE, kafka_release
from sparkkafka_sink.network.cluster import BrokerNode, Cluster
from sparkkafka_sink.network.connection import BrokerConnection, ConnectionState
from sparkkafka_sink.network.connection_setup import ConnectionSetup
from sparkkafka_sink.network.hang_ups import HangUpDiagnosis
from sparkkafka_sink.network.in_flight import ClientResponse, InFlightRequest, InFlightRequests
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.network.metadata_updater import MetadataUpdater
from sparkkafka_sink.protocol.api import ApiKey, negotiate
from sparkkafka_sink.protocol.broker_protocol import PendingRequest, Request

if TYPE_CHECKING:
    from sparkkafka_sink.network.sasl.settings import SaslSettings

log = logging.getLogger(__name__)

_WAKEUP = object()
_SETTING_UP = (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE,
               ConnectionState.CHECKING_API_VERSIONS, ConnectionState.AUTHENTICATING)


def now_ms() -> float:
    return time.monotonic() * 1000.0


class NetworkClient:
    def __init__(self, metadata: Metadata, *, client_id: str, request_timeout_ms: int,
                 max_in_flight: int, reconnect_backoff_ms: int, reconnect_backoff_max_ms: int,
                 connection_setup_timeout_ms: int, connection_setup_timeout_max_ms: int,
                 connections_max_idle_ms: int = -1, send_buffer_bytes: int = -1,
                 receive_buffer_bytes: int = -1, allow_auto_topic_creation: bool = True,
                 software_version: str = "0", ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslSettings | None = None):
        self.metadata = metadata
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = max(reconnect_backoff_max_ms, reconnect_backoff_ms)
        self.setup_timeout_ms = connection_setup_timeout_ms
        self.setup_timeout_max_ms = max(connection_setup_timeout_max_ms, connection_setup_timeout_ms)
        self.connections_max_idle_ms = connections_max_idle_ms
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.software_version = software_version
        self.ssl_context = ssl_context
        #: ``network.sasl.settings.SaslSettings`` when the listener wants SASL
        self.sasl = sasl
        #: an error no reconnect can cure (authentication, certificate): set once, then final
        self.fatal_error: KafkaError | None = None
        #: connections opened
        self.connections_created = 0
        self._conns: dict[int, BrokerConnection] = {}
        self.in_flight = InFlightRequests(max_in_flight, self._conns)
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, _WAKEUP)
        self._wakeup_pending = False
        self._bootstrap_nodes = Cluster.bootstrap(metadata.bootstrap).brokers
        self._failures: dict[int, int] = {}
        self._reconnect_at: dict[int, float] = {}
        self._completed: list[ClientResponse] = []
        #: requests sent, by ``(api key, version)``: which versions were negotiated in practice
        self.requests_sent: collections.Counter = collections.Counter()
        #: last connection error per broker address, so timeouts can say what went wrong
        self.connect_errors: dict[str, BaseException] = {}
        self.closed = False
        self._setup = ConnectionSetup(sasl, software_version, send=self.send, close=self._close,
                                      ready=self._connection_ready)
        self._metadata_updater = MetadataUpdater(self)
        self._hang_ups = HangUpDiagnosis(sasl is not None)

    @property
    def finalized_features(self) -> dict[str, int]:
        """The cluster's finalized features (name -> max level) from the newest ApiVersions answer."""
        return self._setup.finalized_features

    @property
    def reauthentications(self) -> int:
        """SASL sessions renewed on live connections (KIP-368)."""
        return self._setup.reauthentications

    # -- nodes and connections -----------------------------------------------------------
    def _node(self, node_id: int) -> BrokerNode | None:
        return self.metadata.cluster.broker(node_id) or self._bootstrap_nodes.get(node_id)

    def knows(self, node_id: int) -> bool:
        """Whether ``node_id`` is a node this client can connect to (a broker of the cluster's
        metadata or a bootstrap server)."""
        return self._node(node_id) is not None

    def known_nodes(self) -> list[int]:
        """The nodes to choose from: the cluster's brokers, else the bootstrap servers."""
        return list(self.metadata.cluster.brokers) or list(self._bootstrap_nodes)

    def connection(self, node_id: int) -> BrokerConnection | None:
        return self._conns.get(node_id)

    def ready(self, node_id: int, now: float) -> bool:
        """True if a request can go to ``node_id`` now; otherwise start connecting if allowed."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is ConnectionState.READY:
            if self._setup.reauthentication_due(conn, now):
                self._setup.authenticate(conn, now)
                return False
            return self.in_flight.can_send_more(node_id)
        if (conn is None or conn.state is ConnectionState.DISCONNECTED) and self._can_connect(node_id, now):
            self._initiate_connect(node_id, now)
        return False

    def connection_failures(self, node_id: int) -> int:
        """Failed connection attempts to ``node_id`` since it was last ready (0: none)."""
        return self._failures.get(node_id, 0)

    def connection_delay(self, node_id: int, now: float) -> float:
        """How long the caller may sleep before ``node_id`` is worth trying again.

        Disconnected: the reconnect backoff left.  Connecting or connected: infinity, since
        whatever changes next (connected, a response freeing an in-flight slot) is I/O that
        ends the poll anyway; 0 here made the Sender spin while max.in.flight was reached.
        """
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is not ConnectionState.DISCONNECTED:
            return float("inf")
        return max(self._reconnect_at.get(node_id, 0.0) - now, 0.0)

    def _can_connect(self, node_id: int, now: float) -> bool:
        return self.fatal_error is None and now >= self._reconnect_at.get(node_id, 0.0)

    def _initiate_connect(self, node_id: int, now: float) -> None:
        node = self._node(node_id)
        if node is None:
            return
        conn = self._conns.get(node_id)
        if conn is None or (conn.host, conn.port) != (node.host, node.port):
            conn = BrokerConnection(node_id, node.host, node.port, self.selector, client_id=self.client_id,
                                    send_buffer_bytes=self.send_buffer_bytes,
                                    receive_buffer_bytes=self.receive_buffer_bytes,
                                    ssl_context=self.ssl_context)
            self._conns[node_id] = conn
        log.debug("connecting to node %s at %s", node_id, conn.address)
        self.connections_created += 1
        try:
            conn.connect(now)
        except (OSError, KafkaError) as e:
            err = e if isinstance(e, KafkaError) else KafkaConnectionError(
                f"Connection to {conn.address} failed: {e}", refused=isinstance(e, ConnectionRefusedError))
            self._close(conn, err, now)

    def _backoff(self, node_id: int) -> float:
        failures = self._failures.get(node_id, 0)
        if failures <= 0:
            return 0.0
        base = min(self.reconnect_backoff_ms * (2 ** (failures - 1)), self.reconnect_backoff_max_ms)
        return base * random.uniform(0.8, 1.2)

    def _setup_timeout(self, node_id: int) -> float:
        failures = self._failures.get(node_id, 0)
        base = min(self.setup_timeout_ms * (2 ** failures), self.setup_timeout_max_ms)
        return base * random.uniform(0.8, 1.2)

    def least_loaded_node(self, now: float) -> int | None:
        """A node to ask for metadata: ready with the fewest in-flight, else connectable."""
        cluster = self.metadata.cluster
        candidates = self.known_nodes()
        random.shuffle(candidates)
        best, best_load = None, None
        connecting = None
        connectable = None
        for node_id in candidates:
            conn = self._conns.get(node_id)
            if conn is not None and conn.state is ConnectionState.READY:
                load = self.in_flight.count(node_id)
                if self.in_flight.can_send_more(node_id) and (best_load is None or load < best_load):
                    best, best_load = node_id, load
            elif conn is not None and conn.state is not ConnectionState.DISCONNECTED:
                connecting = node_id
            elif self._can_connect(node_id, now):
                connectable = node_id
        if best is not None:
            return best
        if connecting is not None:
            return connecting
        if connectable is not None:
            return connectable
        if not cluster.is_bootstrap and self._all_failing(candidates):
            # Every known broker is failing: fall back to the bootstrap list (brokers may have moved).
            for node_id in self._bootstrap_nodes:
                if self._can_connect(node_id, now):
                    return node_id
        return None

    def _all_failing(self, nodes: Iterable[int]) -> bool:
        return all(self._failures.get(n, 0) > 0 for n in nodes)

    # -- sending -----------------------------------------------------------------------
    def api_version(self, node_id: int, api_key: int, max_version: int | None = None) -> int:
        conn = self._conns[node_id]
        rng = conn.api_versions.get(api_key)
        if rng is None:
            since = f"; it arrived in Apache Kafka {API_SINCE[api_key]}" if api_key in API_SINCE else ""
            raise UnsupportedVersionError(f"Broker {conn.address} does not support {ApiKey(api_key).name} at all "
                                          f"(it answers as {kafka_release(conn.api_versions)} does{since})")
        try:
            return negotiate(api_key, rng[0], rng[1], max_version)
        except UnsupportedVersionError as e:
            raise UnsupportedVersionError(
                f"Broker {conn.address}: {e} (it answers as {kafka_release(conn.api_versions)} does)") from None

    def send(self, node_id: int, request: Request, callback: Callable[[ClientResponse], None] | None,
             now: float, *, expect_response: bool = True, context: Any = None,
             version: int | None = None, max_version: int | None = None) -> InFlightRequest:
        """Queue ``request`` to a READY node (check ``ready()`` first), at ``version`` or the
        highest both sides speak (at most ``max_version``)."""
        conn = self._conns[node_id]
        api_key = type(request).API_KEY
        if version is None:
            version = self.api_version(node_id, api_key, max_version)
        req = InFlightRequest(node_id, 0, api_key, version, request, callback, now, expect_response, now, context)
        pending, frame = conn.protocol.send(request, version, expect_response=expect_response, context=req)
        req.correlation_id = pending.correlation_id
        self.requests_sent[(api_key, version)] += 1
        if expect_response:
            conn.enqueue(frame)
        else:
            # no answer will come: the request is complete once written (or failed, if its
            # connection closes before that: see _close)
            conn.enqueue(frame, lambda error: self._completed.append(
                ClientResponse(req, None, now_ms(), disconnected=error is not None, error=error)))
        try:
            conn.write(now)
        except KafkaError as e:
            self._close(conn, e, now)
        return req

    # -- the poll loop -----------------------------------------------------------------
    def wakeup(self) -> None:
        """Interrupt a blocking ``poll`` (safe from any thread)."""
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass

    def poll(self, timeout_ms: float, now: float) -> list[ClientResponse]:
        """Do I/O for up to ``timeout_ms``; run and return the completed requests' responses."""
        metadata_timeout = self._metadata_updater.maybe_update(now)
        timeout = min(timeout_ms, metadata_timeout, self.request_timeout_ms,
                      self._setup.time_to_reauthentication(self._conns.values(), now))
        if self._completed:
            timeout = 0
        for key, mask in self.selector.select(max(timeout, 0) / 1000.0):
            if key.data is _WAKEUP:
                self._drain_wakeup()
                continue
            conn: BrokerConnection = key.data
            if conn.sock is None:
                continue
            now = now_ms()
            try:
                if conn.state is ConnectionState.CONNECTING:
                    if mask & selectors.EVENT_WRITE and conn.finish_connect(now):
                        self._setup.send_api_versions(conn, now)
                    continue
                if conn.state is ConnectionState.TLS_HANDSHAKE:
                    if conn.advance_tls_handshake(now):
                        self._setup.send_api_versions(conn, now)
                    continue
                if mask & selectors.EVENT_WRITE:
                    conn.write(now)
                if mask & selectors.EVENT_READ:
                    for data in conn.read(now):
                        self._receive(conn, data, now)
            except (KafkaError, OSError) as e:
                try:
                    for data in getattr(e, "chunks", ()):  # what came before the broker closed
                        self._receive(conn, data, now)
                except KafkaError as e2:
                    e = e2
                err = e if isinstance(e, KafkaError) else KafkaConnectionError(f"{conn.address}: {e}")
                self._close(conn, err, now)
        now = now_ms()
        self._handle_timeouts(now)
        completed, self._completed = self._completed, []
        for resp in completed:
            if resp.request.callback is not None:
                resp.request.callback(resp)
        return completed

    def _drain_wakeup(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        # Cleared only after draining: a wakeup() landing between a reset and the recv() would
        # have its byte swallowed while leaving the flag set, silencing every later wakeup().
        self._wakeup_pending = False

    def _receive(self, conn: BrokerConnection, data: bytes, now: float) -> None:
        self._hang_ups.check_plaintext_answer(conn, data)
        answers: Sequence[tuple[PendingRequest, Any]] = []
        try:
            answers = conn.protocol.receive(data)
        except ProtocolError as exc:  # deliver what came before the malformed frame, then close
            answers = exc.answers
            raise
        finally:
            self._hang_ups.answered(conn, len(answers))
            for pending, response in answers:
                self._completed.append(ClientResponse(pending.context, response, now))

    def _handle_timeouts(self, now: float) -> None:
        for node_id in self.in_flight.nodes_with_timed_out_requests(now, self.request_timeout_ms):
            conn = self._conns.get(node_id)
            if conn is not None:
                self._close(conn, KafkaTimeoutError(Message(
                    "Request to node {} ({}) timed out after {} ms ({}); closing the connection", node_id,
                    conn.address, self.request_timeout_ms, Setting("request.timeout.ms"))), now)
        for conn in list(self._conns.values()):
            if conn.state in _SETTING_UP:
                limit = self._setup_timeout(conn.node_id)
                if now - conn.setup_started_ms > limit:
                    self._close(conn, KafkaTimeoutError(Message(
                        "Connection to {} was not set up within {:.0f} ms ({}; stuck in {})", conn.address, limit,
                        Setting("socket.connection.setup.timeout.ms"), conn.state.value)), now)
            elif self._setup.reauthentication_due(conn, now):
                self._setup.authenticate(conn, now)
            elif (conn.state is ConnectionState.READY and self.connections_max_idle_ms >= 0
                  and now - conn.last_activity_ms > self.connections_max_idle_ms
                  and self.in_flight.count(conn.node_id) == 0 and not conn.has_pending_writes):
                log.debug("closing idle connection to %s", conn.address)
                self._close(conn, None, now)

    def _close(self, conn: BrokerConnection, error: KafkaError | None, now: float) -> None:
        """Close a connection; every request it carried completes as disconnected."""
        was_ready = conn.state in (ConnectionState.READY, ConnectionState.REAUTHENTICATING)
        error = self._hang_ups.tls_hang_up(conn.node_id, error)
        if isinstance(error, (AuthenticationError, SslError)) and not error.retriable and self.fatal_error is None:
            self._set_fatal(error)
        elif error is not None:
            error, fatal = self._hang_ups.explain(conn, error, was_ready)
            if fatal:
                self._set_fatal(error)
        for unsent in conn.close():  # acks=0 requests that never (fully) left: not delivered,
            # so they fail as disconnected and are sent again, as the Java client does
            unsent(KafkaConnectionError(f"Connection to {conn.address} closed before the request was sent"))
        if error is not None:
            self.connect_errors[conn.address] = error
            if not was_ready:
                self._failures[conn.node_id] = self._failures.get(conn.node_id, 0) + 1
            else:
                self._failures[conn.node_id] = max(self._failures.get(conn.node_id, 0), 1)
            log.info("connection to node %s (%s) closed: %s", conn.node_id, conn.address, error)
        self._reconnect_at[conn.node_id] = now + self._backoff(conn.node_id)
        for pending in conn.protocol.connection_lost():
            self._completed.append(ClientResponse(pending.context, None, now, disconnected=True,
                                                  error=error or KafkaConnectionError(
                                                      f"Connection to {conn.address} closed")))
        if error is not None:
            if self.fatal_error is not None:
                self.metadata.failed_update(now, self.fatal_error)
            self.metadata.request_update()

    def _set_fatal(self, error: KafkaError) -> None:
        self.fatal_error = error
        log.error("%s", error)

    def _connection_ready(self, conn: BrokerConnection, now: float) -> None:
        conn.mark_ready(now)
        self._failures[conn.node_id] = 0
        self._hang_ups.set_up(conn.node_id)
        self.connect_errors.pop(conn.address, None)
        log.debug("node %s (%s) ready", conn.node_id, conn.address)

    def close_bootstrap_connections(self) -> None:
        """Bootstrap connections (negative ids) are no longer needed once real brokers are known."""
        for node_id, conn in list(self._conns.items()):
            if node_id < 0 and self.in_flight.count(node_id) == 0:
                conn.close()
                del self._conns[node_id]

    # -- shutdown ----------------------------------------------------------------------
    def has_in_flight(self) -> bool:
        return self.in_flight.count() > 0

    def close(self) -> None:
        now = now_ms()
        for conn in list(self._conns.values()):
            self._close(conn, None, now)
        completed, self._completed = self._completed, []
        for resp in completed:
            if resp.request.callback is not None:
                resp.request.callback(resp)
        self._conns.clear()
        try:
            self.selector.unregister(self._wake_r)
        except (KeyError, ValueError):
            pass
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
        self.closed = True
