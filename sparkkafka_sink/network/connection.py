"""BrokerConnection: one non-blocking TCP socket to one broker, in the clear or over TLS.

It only moves bytes: connecting without blocking, writing queued frames with
scatter-gather ``sendmsg`` (record batches are never copied into one buffer,
partial writes resume where they stopped) and reading what arrives.  Its
``protocol`` (a sans-I/O ``BrokerProtocol``, new for every connection) frames
requests and makes sense of the bytes read.  With TLS a ``TlsChannel`` sits between
the two: frames are encrypted as the socket takes them (a bounded amount ahead), and
reads return plaintext; the handshake is driven by the same selector events.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import selectors
import socket
import ssl
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkkafka_sink.errors import KafkaConnectionError
from sparkkafka_sink.network.tls_channel import TlsChannel
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol

if TYPE_CHECKING:
    from sparkkafka_sink.network.authenticator import SaslAuthenticator

log = logging.getLogger(__name__)

_IOV_MAX = 512
_RECV_CHUNK = 1 << 18
_MAX_READ_PER_POLL = 1 << 24
#: encrypted bytes kept ready for the socket; more plaintext is encrypted as it drains
_TLS_WIRE_BUDGET = 1 << 20

#: a frame's callback: called with None once the frame is on the wire; ``close`` returns those
#: not called, for its caller to call with the error that kept their frames from leaving
OnWritten = Callable[[KafkaConnectionError | None], None]


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"  # TCP handshake under way
    TLS_HANDSHAKE = "tls_handshake"  # TCP up, TLS handshake under way
    CHECKING_API_VERSIONS = "checking_api_versions"  # ApiVersions not answered yet
    AUTHENTICATING = "authenticating"  # SaslHandshake/SaslAuthenticate under way
    READY = "ready"
    REAUTHENTICATING = "reauthenticating"  # KIP-368: a new SASL session before this one expires


class BrokerConnection:
    def __init__(self, node_id: int, host: str, port: int, selector: selectors.BaseSelector, *,
                 client_id: str | None = None, send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1,
                 max_frame_bytes: int = 100 * 1024 * 1024, ssl_context: ssl.SSLContext | None = None):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.selector = selector
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.max_frame_bytes = max_frame_bytes
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.tls: TlsChannel | None = None
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.state_since_ms = 0.0
        self.last_activity_ms = 0.0
        self._out: deque[tuple[memoryview, OnWritten | None]] = deque()
        self._out_bytes = 0
        #: TLS only: frames waiting to be encrypted into ``_out``
        self._plain: deque[tuple[list, OnWritten | None]] = deque()
        self.protocol = BrokerProtocol(client_id, max_frame_bytes)
        #: SASL: the exchange under way, and when the session must be renewed (KIP-368)
        self.authenticator: SaslAuthenticator | None = None
        self.reauthenticate_at_ms: float | None = None
        self.setup_started_ms = 0.0
        #: answers received once READY (none before a close hints at a listener wanting SASL)
        self.responses_after_ready = 0
        #: the addresses the host name resolved to, and the one tried last: an attempt that never
        #: became READY moves on to the next, the list is resolved again once all were tried
        #: (Java's client.dns.lookup=use_all_dns_ips, its default)
        self._addresses: list[tuple] = []
        self._address_index = 0
        self._reached_ready = True

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address} {self.state.value}>"

    # -- connecting --------------------------------------------------------------------
    def connect(self, now_ms: float) -> None:
        """Start a non-blocking connect; completion shows up as writability."""
        family, socktype, proto, addr = self._next_address()
        sock = socket.socket(family, socktype, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
        if self.receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
        rc = sock.connect_ex(addr)
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            raise KafkaConnectionError(f"Connection to {self.address} failed: {errno.errorcode.get(rc, rc)} "
                                       f"({os.strerror(rc)})", refused=rc == errno.ECONNREFUSED)
        self.sock = sock
        self._set_state(ConnectionState.CONNECTING, now_ms)
        self.setup_started_ms = now_ms
        self.responses_after_ready = 0
        self.protocol = BrokerProtocol(self.client_id, self.max_frame_bytes)
        self.selector.register(sock, selectors.EVENT_WRITE, self)

    def _next_address(self) -> tuple:
        """(family, type, proto, sockaddr) to connect to: the same address after a connection
        that became READY, else the next of the resolved ones (resolving again after the last)."""
        if not self._reached_ready:
            self._address_index += 1
        self._reached_ready = False
        if self._address_index >= len(self._addresses):
            infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            self._addresses = list(dict.fromkeys((f, t, p, a) for f, t, p, _, a in infos))
            self._address_index = 0
        return self._addresses[self._address_index]

    def finish_connect(self, now_ms: float) -> bool:
        """Called when the socket turned writable while CONNECTING; True when the connection
        can carry Kafka requests (False: a TLS handshake comes first)."""
        err = self._socket().getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise KafkaConnectionError(f"Connection to {self.address} failed: {os.strerror(err)}",
                                       refused=err == errno.ECONNREFUSED)
        if self.ssl_context is None:
            self._set_state(ConnectionState.CHECKING_API_VERSIONS, now_ms)
            self._update_interest()
            return True
        self.tls = TlsChannel(self.ssl_context, self.host, self.address)
        self._set_state(ConnectionState.TLS_HANDSHAKE, now_ms)
        return self.advance_tls_handshake(now_ms)

    def advance_tls_handshake(self, now_ms: float) -> bool:
        """Feed what arrived to the handshake and send what it answers; True once complete."""
        tls = self.tls
        assert tls is not None  # TLS_HANDSHAKE begins with the channel (finish_connect)
        try:
            for raw in self._recv(now_ms):
                tls.feed(raw)
        except _PeerClosed as closed:
            for raw in closed.chunks:
                tls.feed(raw)
            tls.do_handshake()  # an alert that came before the close says more than the close
            raise tls.eof_error() from None
        done = tls.do_handshake()
        out = tls.pending_output()
        if out:
            self._queue_wire(out, None)
        self._write_wire(now_ms)
        if done:
            self._set_state(ConnectionState.CHECKING_API_VERSIONS, now_ms)
        self._update_interest()
        return done

    def set_api_versions(self, api_versions: dict[int, tuple[int, int]], now_ms: float) -> None:
        """ApiVersions answered (SASL authentication may still follow)."""
        self.api_versions = api_versions
        self.last_activity_ms = now_ms

    def mark_ready(self, now_ms: float) -> None:
        self._set_state(ConnectionState.READY, now_ms)

    def mark_authenticating(self, authenticator: SaslAuthenticator, now_ms: float) -> None:
        self.authenticator = authenticator
        reauth = self.state is ConnectionState.READY
        self._set_state(ConnectionState.REAUTHENTICATING if reauth else ConnectionState.AUTHENTICATING, now_ms)

    def _socket(self) -> socket.socket:
        """The socket, for I/O that only a connection under way does."""
        if self.sock is None:
            raise KafkaConnectionError(f"Connection to {self.address} is closed")
        return self.sock

    def _set_state(self, state: ConnectionState, now_ms: float) -> None:
        if state is ConnectionState.READY:
            self._reached_ready = True
        self.state = state
        self.state_since_ms = now_ms
        self.last_activity_ms = now_ms

    # -- writing -----------------------------------------------------------------------
    def enqueue(self, buffers: list, on_written: OnWritten | None = None) -> None:
        """Queue one frame (a list of bytes-like parts); ``on_written(None)`` fires once it is all
        on the wire (``close`` returns it unfired when the connection closes first)."""
        if self.tls is not None:
            self._plain.append((buffers, on_written))
            self._update_interest()
            return
        last = len(buffers) - 1
        for i, buf in enumerate(buffers):
            mv = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
            if len(mv) == 0 and i != last:
                continue
            self._out.append((mv, on_written if i == last else None))
            self._out_bytes += len(mv)
        self._update_interest()

    @property
    def has_pending_writes(self) -> bool:
        return self._out_bytes > 0 or bool(self._plain)

    def _queue_wire(self, data: bytes, on_written: OnWritten | None) -> None:
        self._out.append((memoryview(data), on_written))
        self._out_bytes += len(data)

    def write(self, now_ms: float) -> None:
        """Write as much of the queue as the socket takes without blocking."""
        if self.tls is None:
            self._write_wire(now_ms)
        else:
            plain, tls = self._plain, self.tls
            while True:
                while plain and self._out_bytes < _TLS_WIRE_BUDGET:
                    parts, on_written = plain.popleft()
                    self._queue_wire(tls.encrypt(parts), on_written)
                self._write_wire(now_ms)
                if self._out or not plain:
                    break
        self._update_interest()

    def _write_wire(self, now_ms: float) -> None:
        out = self._out
        while out:
            bufs = [mv for mv, _ in (out[i] for i in range(min(len(out), _IOV_MAX)))]
            try:
                sent = self._socket().sendmsg(bufs)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                raise KafkaConnectionError(f"Write to {self.address} failed: {e}") from e
            self._out_bytes -= sent
            self.last_activity_ms = now_ms
            while sent and out:
                mv, cb = out[0]
                if sent >= len(mv):
                    sent -= len(mv)
                    out.popleft()
                    if cb is not None:
                        cb(None)
                else:
                    out[0] = (mv[sent:], cb)
                    sent = 0
            # flush zero-length tails (frames whose callbacks sit on an empty part)
            while out and len(out[0][0]) == 0:
                _, cb = out.popleft()
                if cb is not None:
                    cb(None)

    def _update_interest(self) -> None:
        if self.sock is None:
            return
        if self.state == ConnectionState.CONNECTING:
            events = selectors.EVENT_WRITE
        else:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out or self._plain else 0)
        try:
            key = self.selector.get_key(self.sock)
            if key.events != events:
                self.selector.modify(self.sock, events, self)
        except (KeyError, ValueError):
            pass

    # -- reading -----------------------------------------------------------------------
    def read(self, now_ms: float) -> list[bytes]:
        """Read what is available without blocking (bounded per call): the plaintext.  A close by
        the broker raises, carrying (as ``chunks``) the plaintext that came before it."""
        tls = self.tls
        if tls is None:
            return self._recv(now_ms)
        plain: list[bytes] = []
        try:
            for raw in self._recv(now_ms):
                plain.extend(tls.feed(raw))
        except _PeerClosed as closed:
            for raw in closed.chunks:
                plain.extend(tls.feed(raw))
            raise _PeerClosed(plain, tls.eof_error().args[0]) from None  # the Message, keys as data
        finally:
            out = tls.pending_output()  # e.g. a TLS 1.3 key update answered
            if out:
                self._queue_wire(out, None)
                self._update_interest()
        return plain

    def _recv(self, now_ms: float) -> list[bytes]:
        chunks: list[bytes] = []
        total = 0
        while total < _MAX_READ_PER_POLL:
            try:
                data = self._socket().recv(_RECV_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                raise KafkaConnectionError(f"Read from {self.address} failed: {e}") from e
            if not data:
                raise _PeerClosed(chunks, f"Connection to {self.address} was closed by the broker")
            total += len(data)
            self.last_activity_ms = now_ms
            chunks.append(data)
            if len(data) < _RECV_CHUNK:
                break
        return chunks

    # -- closing -----------------------------------------------------------------------
    def close(self) -> list[OnWritten]:
        """Close the socket; returns the write callbacks that will now never fire."""
        if self.sock is not None:
            try:
                self.selector.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.state = ConnectionState.DISCONNECTED
        dropped = [cb for _, cb in self._out if cb is not None] + [cb for _, cb in self._plain if cb is not None]
        self._out.clear()
        self._plain.clear()
        self._out_bytes = 0
        self.api_versions = {}
        self.tls = None
        self.authenticator = None
        self.reauthenticate_at_ms = None
        return dropped


class _PeerClosed(KafkaConnectionError):
    """EOF from the broker; carries the bytes that arrived before it."""

    def __init__(self, chunks: list[bytes], message: str):
        super().__init__(message)
        self.chunks = chunks
