"""InFlightRequests: requests sent on a connection and not answered yet.

Each connection's ``BrokerProtocol`` keeps the FIFO of its requests awaiting an answer (Kafka
answers in order); this is the network layer's view across connections: the cap
(``max.in.flight.requests.per.connection``, which bounds both memory and how many batches a lost
connection forces us to resend) and request timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.protocol.broker_protocol import Request
from sparkkafka_sink.protocol.schema import ProtocolMessage


@dataclass(eq=False)
class InFlightRequest:
    node_id: int
    correlation_id: int
    api_key: int
    api_version: int
    request: Request
    callback: Callable[[ClientResponse], None] | None
    created_ms: float
    expect_response: bool = True
    sent_ms: float = 0.0
    context: Any = None


@dataclass(eq=False)
class ClientResponse:
    """What a request's callback receives: the decoded response or why there is none."""

    request: InFlightRequest
    response: ProtocolMessage | None = None
    received_ms: float = 0.0
    disconnected: bool = False
    error: KafkaError | None = None
    extra: dict = field(default_factory=dict)

    @property
    def latency_ms(self) -> float:
        return self.received_ms - self.request.created_ms


class InFlightRequests:
    """A view over the connections (``{node_id: BrokerConnection}``, shared with the client):
    each one's ``protocol.pending`` is its queue of requests awaiting an answer, each carrying
    its ``InFlightRequest`` as context."""

    def __init__(self, max_per_connection: int, connections: dict):
        self.max_per_connection = max_per_connection
        self._connections = connections

    def _pending(self, node_id: int) -> Sized:
        conn = self._connections.get(node_id)
        return conn.protocol.pending if conn is not None else ()

    def can_send_more(self, node_id: int) -> bool:
        return len(self._pending(node_id)) < self.max_per_connection

    def count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return sum(len(c.protocol.pending) for c in self._connections.values())
        return len(self._pending(node_id))

    def nodes_with_timed_out_requests(self, now_ms: float, timeout_ms: float) -> list[int]:
        return [node for node, c in self._connections.items()
                if c.protocol.pending and now_ms - c.protocol.pending[0].context.sent_ms > timeout_ms]
