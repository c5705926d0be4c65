"""BrokerConnection: one non-blocking TCP socket to one broker.

It only moves bytes: connecting without blocking, writing queued frames with
scatter-gather ``sendmsg`` (record batches are never copied into one buffer,
partial writes resume where they stopped) and reading what arrives.  Its
``protocol`` (a sans-I/O ``BrokerProtocol``, new for every connection) frames
requests and makes sense of the bytes read.
"""

from __future__ import annotations

import enum
import errno
import os
import logging
import selectors
import socket
from collections import deque
from typing import Callable

from sparkkafka_sink.errors import KafkaConnectionError
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol

log = logging.getLogger(__name__)

_IOV_MAX = 512
_RECV_CHUNK = 1 << 18
_MAX_READ_PER_POLL = 1 << 24


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"  # TCP handshake under way
    CHECKING_API_VERSIONS = "checking_api_versions"  # TCP up, ApiVersions not answered yet
    READY = "ready"


class BrokerConnection:
    def __init__(self, node_id: int, host: str, port: int, selector: selectors.BaseSelector, *,
                 client_id: str | None = None, send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1,
                 max_frame_bytes: int = 100 * 1024 * 1024):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.selector = selector
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.max_frame_bytes = max_frame_bytes
        self.client_id = client_id
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.state_since_ms = 0.0
        self.last_activity_ms = 0.0
        self._out: deque[tuple[memoryview, Callable[[], None] | None]] = deque()
        self._out_bytes = 0
        self.protocol = BrokerProtocol(client_id, max_frame_bytes)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address} {self.state.value}>"

    # -- connecting --------------------------------------------------------------------
    def connect(self, now_ms: float) -> None:
        """Start a non-blocking connect; completion shows up as writability."""
        infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        family, socktype, proto, _, addr = infos[0]
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
                                       f"({os.strerror(rc)})")
        self.sock = sock
        self._set_state(ConnectionState.CONNECTING, now_ms)
        self.protocol = BrokerProtocol(self.client_id, self.max_frame_bytes)
        self.selector.register(sock, selectors.EVENT_WRITE, self)

    def finish_connect(self, now_ms: float) -> None:
        """Called when the socket turned writable while CONNECTING."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise KafkaConnectionError(f"Connection to {self.address} failed: {os.strerror(err)}")
        self._set_state(ConnectionState.CHECKING_API_VERSIONS, now_ms)
        self._update_interest()

    def mark_ready(self, api_versions: dict[int, tuple[int, int]], now_ms: float) -> None:
        self.api_versions = api_versions
        self._set_state(ConnectionState.READY, now_ms)

    def _set_state(self, state: ConnectionState, now_ms: float) -> None:
        self.state = state
        self.state_since_ms = now_ms
        self.last_activity_ms = now_ms

    # -- writing -----------------------------------------------------------------------
    def enqueue(self, buffers, on_written: Callable[[], None] | None = None) -> None:
        """Queue one frame (a list of bytes-like parts); ``on_written`` fires once it is all on the wire."""
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
        return self._out_bytes > 0

    def write(self, now_ms: float) -> None:
        """Write as much of the queue as the socket takes without blocking."""
        out = self._out
        while out:
            bufs = [mv for mv, _ in (out[i] for i in range(min(len(out), _IOV_MAX)))]
            try:
                sent = self.sock.sendmsg(bufs)
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
                        cb()
                else:
                    out[0] = (mv[sent:], cb)
                    sent = 0
            # flush zero-length tails (frames whose callbacks sit on an empty part)
            while out and len(out[0][0]) == 0:
                _, cb = out.popleft()
                if cb is not None:
                    cb()
        self._update_interest()

    def _update_interest(self) -> None:
        if self.sock is None:
            return
        if self.state == ConnectionState.CONNECTING:
            events = selectors.EVENT_WRITE
        else:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)
        try:
            key = self.selector.get_key(self.sock)
            if key.events != events:
                self.selector.modify(self.sock, events, self)
        except (KeyError, ValueError):
            pass

    # -- reading -----------------------------------------------------------------------
    def read(self, now_ms: float) -> list[bytes]:
        """Read what is available without blocking (bounded per call)."""
        chunks: list[bytes] = []
        total = 0
        while total < _MAX_READ_PER_POLL:
            try:
                data = self.sock.recv(_RECV_CHUNK)
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
    def close(self) -> list[Callable[[], None]]:
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
        dropped = [cb for _, cb in self._out if cb is not None]
        self._out.clear()
        self._out_bytes = 0
        self.api_versions = {}
        return dropped


class _PeerClosed(KafkaConnectionError):
    """EOF from the broker; carries the bytes that arrived before it."""

    def __init__(self, chunks: list[bytes], message: str):
        super().__init__(message)
        self.chunks = chunks
