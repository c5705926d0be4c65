"""MetadataUpdater: when a Metadata request goes out, to which broker, and what its answer does.

Java's DefaultMetadataUpdater.  ``Metadata`` says when a refresh is due (bootstrap first, then
periodic and on demand); this sends one request at a time to the least loaded broker, connecting
to it first if need be, and installs the answer.  While no broker can be reached it records why,
so a ``send()`` waiting for metadata can say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sparkkafka_sink.errors import KafkaConnectionError, Message, UnsupportedVersionError
from sparkkafka_sink.network.connection import BrokerConnection, ConnectionState
from sparkkafka_sink.network.in_flight import ClientResponse
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.protocol.messages import metadata_request
from sparkkafka_sink.protocol.schema import ProtocolMessage


class UpdatedClient(Protocol):
    """What the updater uses of the client that owns it (``NetworkClient``): its metadata, its
    timeouts, which broker to ask and the way to ask it."""

    metadata: Metadata
    request_timeout_ms: int
    reconnect_backoff_ms: int
    allow_auto_topic_creation: bool
    connect_errors: dict[str, BaseException]

    def least_loaded_node(self, now: float) -> int | None: ...

    def known_nodes(self) -> list[int]: ...

    def connection(self, node_id: int) -> BrokerConnection | None: ...

    def connection_delay(self, node_id: int, now: float) -> float: ...

    def ready(self, node_id: int, now: float) -> bool: ...

    def send(self, node_id: int, request: ProtocolMessage, callback: Callable[[ClientResponse], None] | None,
             now: float) -> object: ...

    def close_bootstrap_connections(self) -> None: ...


class MetadataUpdater:
    def __init__(self, client: UpdatedClient):
        self._client = client
        self._in_flight = False

    def maybe_update(self, now: float) -> float:
        """Send a Metadata request when one is due; returns ms until the next check."""
        client = self._client
        md = client.metadata
        wait = md.time_to_next_update(now)
        if wait > 0 or self._in_flight:
            return wait if wait > 0 else client.request_timeout_ms
        node_id = client.least_loaded_node(now)
        if node_id is None:
            # nothing to connect to yet: wait for the shortest reconnect backoff
            delays = [client.connection_delay(n, now) for n in client.known_nodes()]
            if not delays:  # no broker known at all (so no connection either)
                return client.reconnect_backoff_ms
            self._note_unreachable(now)
            return max(min(delays), 1.0)
        if client.ready(node_id, now):
            request = metadata_request(md.topics(now), client.allow_auto_topic_creation)
            try:
                client.send(node_id, request, self._handle_metadata, now)
            except UnsupportedVersionError as e:
                # Keep the reason, so a metadata timeout in send() can say why.
                md.failed_update(now, e)
                return md.refresh_backoff_ms
            self._in_flight = True
            return client.request_timeout_ms
        conn = client.connection(node_id)
        if conn is None or conn.state is ConnectionState.DISCONNECTED:
            self._note_unreachable(now)
            return max(client.connection_delay(node_id, now), 1.0)
        return client.reconnect_backoff_ms

    def _note_unreachable(self, now: float) -> None:
        errors = self._client.connect_errors
        if errors:
            # each error a part, not its text: the keys it names (security.protocol) stay data
            addresses = Message("; ".join("{}: {}" for _ in errors), *(p for pair in errors.items() for p in pair))
            self._client.metadata.failed_update(now, KafkaConnectionError(Message("No broker reachable ({})", addresses)))

    def _handle_metadata(self, resp: ClientResponse) -> None:
        self._in_flight = False
        md = self._client.metadata
        if resp.response is None:
            md.failed_update(resp.received_ms, resp.error or KafkaConnectionError("metadata request failed"))
            return
        md.update(resp.response, resp.received_ms)
        self._client.close_bootstrap_connections()
