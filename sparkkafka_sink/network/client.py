"""NetworkClient: every broker connection of one producer, driven by one thread.

Only the Sender thread calls it (``ready``/``send``/``poll``); other threads
may only ``wakeup()`` it, through a socketpair registered in the selector, so
``send()`` never waits for the I/O thread.  It owns connection states with
exponential reconnect backoff, the set-up of each connection (TLS handshake,
ApiVersions -- versions are negotiated per broker -- and SASL authentication,
renewed before the broker's session expires), in-flight caps, request and
connection-setup timeouts (which close the connection so its requests are
retried), and the metadata refresh loop (bootstrap first, then periodic and
on demand).  A failed authentication or certificate check is fatal
(``fatal_error``): it would fail the same way again, so no connection is tried
after it and every caller gets the error.
"""

from __future__ import annotations

import collections
import logging
import random
import selectors
import socket
import ssl
import time
from typing import Any, Callable

from sparkkafka_sink.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    SslError,
    UnsupportedVersionError,
)
from sparkkafka_sink.network.authenticator import SaslAuthenticator
from sparkkafka_sink.network.cluster import BrokerNode, Cluster
from sparkkafka_sink.network.connection import BrokerConnection, ConnectionState
from sparkkafka_sink.network.in_flight import ClientResponse, InFlightRequest, InFlightRequests
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.network.tls_channel import TlsHandshakeClosed
from sparkkafka_sink.protocol.api import SUPPORTED_VERSIONS, ApiKey, negotiate
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol
from sparkkafka_sink.protocol.errors import error_for_code
from sparkkafka_sink.protocol.messages import ApiVersionsRequest, metadata_request

log = logging.getLogger(__name__)

_WAKEUP = object()
#: consecutive hang-ups of one broker (in the TLS handshake, or at the first request after set-up)
#: that make it a listener wanting another security.protocol, not bad luck
_HANG_UPS_FATAL = 3
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
                 sasl: Any = None):
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
        #: ``network.sasl.SaslSettings`` when the listener wants SASL
        self.sasl = sasl
        #: an error no reconnect can cure (authentication, certificate): set once, then final
        self.fatal_error: KafkaError | None = None
        #: SASL sessions renewed on live connections (KIP-368), and connections opened
        self.reauthentications = 0
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
        self._tls_hang_ups: dict[int, int] = {}
        self._hang_ups_after_setup: dict[int, int] = {}
        self._completed: list[ClientResponse] = []
        self._metadata_in_flight = False
        self._api_versions_version: dict[int, int] = {}
        #: the cluster's finalized features (name -> max level) from the newest ApiVersions answer
        self.finalized_features: dict[str, int] = {}
        #: requests sent, by ``(api key, version)``: which versions were negotiated in practice
        self.requests_sent: collections.Counter = collections.Counter()
        self._features_epoch = -1
        #: last connection error per broker address, so timeouts can say what went wrong
        self.connect_errors: dict[str, BaseException] = {}
        self.closed = False

    # -- nodes and connections -----------------------------------------------------------
    def _node(self, node_id: int) -> BrokerNode | None:
        return self.metadata.cluster.broker(node_id) or self._bootstrap_nodes.get(node_id)

    def connection(self, node_id: int) -> BrokerConnection | None:
        return self._conns.get(node_id)

    def is_ready(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return conn is not None and conn.state is ConnectionState.READY and self.in_flight.can_send_more(node_id)

    def ready(self, node_id: int, now: float) -> bool:
        """True if a request can go to ``node_id`` now; otherwise start connecting if allowed."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is ConnectionState.READY:
            if conn.reauthenticate_at_ms is not None and now >= conn.reauthenticate_at_ms:
                self._start_authentication(conn, now)
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
                f"Connection to {conn.address} failed: {e}")
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
        candidates = list(cluster.brokers) or list(self._bootstrap_nodes)
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

    def _all_failing(self, nodes) -> bool:
        return all(self._failures.get(n, 0) > 0 for n in nodes)

    # -- sending -----------------------------------------------------------------------
    def api_version(self, node_id: int, api_key: int, max_version: int | None = None) -> int:
        conn = self._conns[node_id]
        rng = conn.api_versions.get(api_key)
        if rng is None:
            raise UnsupportedVersionError(
                f"Broker {conn.address} does not support {ApiKey(api_key).name} at all")
        return negotiate(api_key, rng[0], rng[1], max_version)

    def send(self, node_id: int, request: Any, callback: Callable[[ClientResponse], None] | None,
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
            conn.enqueue(frame, lambda: self._completed.append(ClientResponse(req, None, now_ms())))
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
        metadata_timeout = self._maybe_update_metadata(now)
        timeout = min(timeout_ms, metadata_timeout, self.request_timeout_ms, self._time_to_reauthentication(now))
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
                        self._send_api_versions(conn, now)
                    continue
                if conn.state is ConnectionState.TLS_HANDSHAKE:
                    if conn.advance_tls_handshake(now):
                        self._send_api_versions(conn, now)
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
        if (conn.tls is None and conn.state is ConnectionState.CHECKING_API_VERSIONS
                and data[:1] in (b"\x15", b"\x16") and data[1:2] == b"\x03"):
            raise SslError(f"Broker {conn.address} answered with TLS: this listener wants TLS; set "
                           "security.protocol=SSL (or SASL_SSL)")
        answers: list = []
        try:
            answers = conn.protocol.receive(data)
        except ProtocolError as exc:  # deliver what came before the malformed frame, then close
            answers = exc.answers
            raise
        finally:
            if conn.state is ConnectionState.READY and answers:
                conn.responses_after_ready += len(answers)
                self._hang_ups_after_setup.pop(conn.node_id, None)
            for pending, response in answers:
                self._completed.append(ClientResponse(pending.context, response, now))

    def _handle_timeouts(self, now: float) -> None:
        for node_id in self.in_flight.nodes_with_timed_out_requests(now, self.request_timeout_ms):
            conn = self._conns.get(node_id)
            if conn is not None:
                self._close(conn, KafkaTimeoutError(
                    f"Request to node {node_id} ({conn.address}) timed out after "
                    f"{self.request_timeout_ms} ms (request.timeout.ms); closing the connection"), now)
        for conn in list(self._conns.values()):
            if conn.state in _SETTING_UP:
                limit = self._setup_timeout(conn.node_id)
                if now - conn.setup_started_ms > limit:
                    self._close(conn, KafkaTimeoutError(
                        f"Connection to {conn.address} was not set up within {limit:.0f} ms "
                        f"(socket.connection.setup.timeout.ms; stuck in {conn.state.value})"), now)
            elif (conn.state is ConnectionState.READY and conn.reauthenticate_at_ms is not None
                  and now >= conn.reauthenticate_at_ms):
                self._start_authentication(conn, now)
            elif (conn.state is ConnectionState.READY and self.connections_max_idle_ms >= 0
                  and now - conn.last_activity_ms > self.connections_max_idle_ms
                  and self.in_flight.count(conn.node_id) == 0 and not conn.has_pending_writes):
                log.debug("closing idle connection to %s", conn.address)
                self._close(conn, None, now)

    def _close(self, conn: BrokerConnection, error: BaseException | None, now: float) -> None:
        """Close a connection; every request it carried completes as disconnected."""
        was_ready = conn.state in (ConnectionState.READY, ConnectionState.REAUTHENTICATING)
        if isinstance(error, TlsHandshakeClosed):
            hang_ups = self._tls_hang_ups[conn.node_id] = self._tls_hang_ups.get(conn.node_id, 0) + 1
            if hang_ups >= _HANG_UPS_FATAL:
                error = SslError(f"{error} (it hung up {hang_ups} times in a row)")
        if isinstance(error, (AuthenticationError, SslError)) and not error.retriable and self.fatal_error is None:
            self.fatal_error = error
            log.error("%s", error)
        elif (error is not None and was_ready and self.sasl is None and conn.responses_after_ready == 0
              and isinstance(error, KafkaConnectionError) and not isinstance(error, KafkaTimeoutError)):
            hang_ups = self._hang_ups_after_setup[conn.node_id] = self._hang_ups_after_setup.get(conn.node_id, 0) + 1
            hint = (f"{error} right after the connection was set up: if this listener wants SASL, set "
                    "security.protocol=SASL_PLAINTEXT or SASL_SSL and sasl.mechanism")
            if hang_ups >= _HANG_UPS_FATAL:
                error = AuthenticationError(f"{hint} (it hung up {hang_ups} times in a row)")
                self.fatal_error = error
                log.error("%s", error)
            else:
                error = KafkaConnectionError(hint)
        elif (error is not None and conn.state is ConnectionState.CHECKING_API_VERSIONS and conn.tls is None
              and isinstance(error, KafkaConnectionError) and not isinstance(error, SslError)):
            error = KafkaConnectionError(f"{error} before answering ApiVersions: if this listener wants TLS, "
                                         "set security.protocol=SSL or SASL_SSL")
        dropped = conn.close()
        for cb in dropped:
            cb()  # acks=0 sends that never left: completed (as Java does, data may be lost)
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

    # -- ApiVersions handshake ---------------------------------------------------------
    def _send_api_versions(self, conn: BrokerConnection, now: float) -> None:
        version = self._api_versions_version.get(conn.node_id, SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1])
        request = ApiVersionsRequest(client_software_name="sparkkafka-sink",
                                     client_software_version=self.software_version)
        self.send(conn.node_id, request, lambda resp: self._handle_api_versions(conn, resp), now,
                  version=version)

    def _handle_api_versions(self, conn: BrokerConnection, resp: ClientResponse) -> None:
        if resp.response is None or conn.sock is None:
            return  # the close path already accounted for it
        body = resp.response
        now = resp.received_ms
        retry = BrokerProtocol.api_versions_retry(body, resp.request.api_version)
        if retry is not None:
            self._api_versions_version[conn.node_id] = retry
            self._send_api_versions(conn, now)
            return
        if body.error_code:
            self._close(conn, error_for_code(body.error_code, f"ApiVersions from {conn.address}"), now)
            return
        conn.set_api_versions({k.api_key: (k.min_version, k.max_version) for k in body.api_keys}, now)
        epoch = getattr(body, "finalized_features_epoch", -1)
        if epoch is not None and epoch >= 0 and epoch >= self._features_epoch:
            self._features_epoch = epoch
            self.finalized_features = {f.name: f.max_version_level for f in body.finalized_features or ()}
        if self.sasl is not None:
            self._start_authentication(conn, now)
        else:
            self._connection_ready(conn, now)

    def _connection_ready(self, conn: BrokerConnection, now: float) -> None:
        conn.mark_ready(now)
        self._failures[conn.node_id] = 0
        self._tls_hang_ups.pop(conn.node_id, None)
        self.connect_errors.pop(conn.address, None)
        log.debug("node %s (%s) ready", conn.node_id, conn.address)

    # -- SASL (KIP-152), renewed before the session expires (KIP-368) -------------------------
    def _start_authentication(self, conn: BrokerConnection, now: float) -> None:
        reauth = conn.state is ConnectionState.READY
        auth = SaslAuthenticator(self.sasl, conn.address, reauthentication=reauth, now_ms=now)
        conn.mark_authenticating(auth, now)
        if reauth:
            log.debug("re-authenticating to %s before its SASL session expires", conn.address)
        if conn.api_versions.get(ApiKey.SASL_HANDSHAKE, (0, 0))[1] < 1:
            self._close(conn, AuthenticationError(
                f"Broker {conn.address} cannot authenticate with SASL over Kafka requests (SaslHandshake v1, "
                "Kafka 1.0 or newer): is security.protocol right for this listener?"), now)
            return
        self._send_sasl(conn, auth, auth.handshake_request(), self._handle_sasl_handshake, now)

    def _send_sasl(self, conn: BrokerConnection, auth: SaslAuthenticator, request: Any,
                   handler: Callable, now: float) -> None:
        try:
            self.send(conn.node_id, request, lambda resp: handler(conn, auth, resp), now)
        except UnsupportedVersionError as e:
            self._close(conn, AuthenticationError(f"SASL with broker {conn.address}: {e}"), now)

    def _sasl_answer(self, conn: BrokerConnection, auth: SaslAuthenticator, resp: ClientResponse) -> bool:
        return resp.response is not None and conn.sock is not None and conn.authenticator is auth

    def _handle_sasl_handshake(self, conn: BrokerConnection, auth: SaslAuthenticator, resp: ClientResponse) -> None:
        if not self._sasl_answer(conn, auth, resp):
            return
        try:
            request = auth.on_handshake(resp.response)
        except AuthenticationError as e:
            self._close(conn, e, resp.received_ms)
            return
        self._send_sasl(conn, auth, request, self._handle_sasl_authenticate, resp.received_ms)

    def _handle_sasl_authenticate(self, conn: BrokerConnection, auth: SaslAuthenticator,
                                  resp: ClientResponse) -> None:
        if not self._sasl_answer(conn, auth, resp):
            return
        now = resp.received_ms
        try:
            request = auth.on_authenticate(resp.response)
        except AuthenticationError as e:
            self._close(conn, e, now)
            return
        if request is not None:
            self._send_sasl(conn, auth, request, self._handle_sasl_authenticate, now)
            return
        conn.authenticator = None
        conn.reauthenticate_at_ms = auth.reauthenticate_at(now)
        if conn.state is ConnectionState.REAUTHENTICATING:
            self.reauthentications += 1
            conn.mark_ready(now)
        else:
            self._connection_ready(conn, now)

    def _time_to_reauthentication(self, now: float) -> float:
        due = [c.reauthenticate_at_ms for c in self._conns.values()
               if c.reauthenticate_at_ms is not None and c.state is ConnectionState.READY]
        return max(min(due) - now, 0.0) if due else float("inf")

    # -- metadata ----------------------------------------------------------------------
    def _maybe_update_metadata(self, now: float) -> float:
        """Send a Metadata request when one is due; returns ms until the next check."""
        md = self.metadata
        wait = md.time_to_next_update(now)
        if wait > 0 or self._metadata_in_flight:
            return wait if wait > 0 else self.request_timeout_ms
        node_id = self.least_loaded_node(now)
        if node_id is None:
            # nothing to connect to yet: wait for the shortest reconnect backoff
            delays = [self.connection_delay(n, now) for n in (list(md.cluster.brokers) or
                                                              list(self._bootstrap_nodes))]
            if not self._conns and not delays:
                return self.reconnect_backoff_ms
            self._note_unreachable(now)
            return max(min(delays, default=self.reconnect_backoff_ms), 1.0)
        if self.ready(node_id, now):
            topics = md.topics(now)
            # authorized operations: a topic we may see but not write fails its sends at once
            # (under exactly-once a refused Produce would doom the whole transaction)
            request = metadata_request(topics, self.allow_auto_topic_creation)
            request.include_topic_authorized_operations = True
            try:
                self.send(node_id, request, self._handle_metadata, now)
            except UnsupportedVersionError as e:
                # Keep the reason, so a metadata timeout in send() can say why.
                self.metadata.failed_update(now, e)
                return self.metadata.refresh_backoff_ms
            self._metadata_in_flight = True
            return self.request_timeout_ms
        conn = self._conns.get(node_id)
        if conn is None or conn.state is ConnectionState.DISCONNECTED:
            self._note_unreachable(now)
            return max(self.connection_delay(node_id, now), 1.0)
        return self.reconnect_backoff_ms

    def _note_unreachable(self, now: float) -> None:
        if self.connect_errors:
            addresses = "; ".join(f"{a}: {e}" for a, e in self.connect_errors.items())
            self.metadata.failed_update(now, KafkaConnectionError(f"No broker reachable ({addresses})"))

    def _handle_metadata(self, resp: ClientResponse) -> None:
        self._metadata_in_flight = False
        if resp.response is None:
            self.metadata.failed_update(resp.received_ms, resp.error or KafkaConnectionError("metadata request failed"))
            return
        self.metadata.update(resp.response, resp.received_ms)
        # Bootstrap connections (negative ids) are no longer needed once real brokers are known.
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
