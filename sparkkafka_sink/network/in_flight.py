"""InFlightRequests: requests sent on a connection and not answered yet.

Kafka answers requests on one connection in order, so each node keeps a FIFO
and a response must match the oldest entry's correlation id.  The cap
(``max.in.flight.requests.per.connection``) bounds both memory and how many
batches a lost connection forces us to resend.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(eq=False)
class InFlightRequest:
    node_id: int
    correlation_id: int
    api_key: int
    api_version: int
    request: Any
    callback: Callable[["ClientResponse"], None] | None
    created_ms: float
    expect_response: bool = True
    sent_ms: float = 0.0
    context: Any = None


@dataclass(eq=False)
class ClientResponse:
    """What a request's callback receives: the decoded response or why there is none."""

    request: InFlightRequest
    response: Any = None
    received_ms: float = 0.0
    disconnected: bool = False
    error: BaseException | None = None
    extra: dict = field(default_factory=dict)

    @property
    def latency_ms(self) -> float:
        return self.received_ms - self.request.created_ms


class InFlightRequests:
    def __init__(self, max_per_connection: int):
        self.max_per_connection = max_per_connection
        self._requests: dict[int, deque[InFlightRequest]] = {}
        self._count = 0

    def add(self, req: InFlightRequest) -> None:
        self._requests.setdefault(req.node_id, deque()).append(req)
        self._count += 1

    def peek_oldest(self, node_id: int) -> InFlightRequest | None:
        q = self._requests.get(node_id)
        return q[0] if q else None

    def complete_next(self, node_id: int) -> InFlightRequest:
        req = self._requests[node_id].popleft()
        self._count -= 1
        return req

    def can_send_more(self, node_id: int) -> bool:
        q = self._requests.get(node_id)
        return not q or len(q) < self.max_per_connection

    def count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return self._count
        q = self._requests.get(node_id)
        return len(q) if q else 0

    def clear_all(self, node_id: int) -> list[InFlightRequest]:
        q = self._requests.pop(node_id, None)
        if not q:
            return []
        self._count -= len(q)
        return list(q)

    def nodes_with_timed_out_requests(self, now_ms: float, timeout_ms: float) -> list[int]:
        return [node for node, q in self._requests.items() if q and now_ms - q[0].sent_ms > timeout_ms]

    def nodes(self) -> list[int]:
        return [n for n, q in self._requests.items() if q]
