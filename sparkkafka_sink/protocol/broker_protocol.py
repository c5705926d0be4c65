"""BrokerProtocol: the conversation with one broker, without sockets (as h11 does for HTTP).

Bytes in, events out.  ``send`` numbers a request (correlation id), frames it with its header
and remembers what it was; ``receive`` cuts the incoming bytes into frames, matches each to the
oldest request awaiting an answer, reads the response header of the right version and decodes
the body.  Kafka answers requests of one connection in order, so any other correlation id is a
protocol error -- except an answer to an acks=0 Produce, which tansu and noida-db send although
nobody waits for it.  ``api_versions_retry`` is KIP-511's fallback when a broker does not know
our ApiVersions version.  The network layer owns sockets, timing and backoff.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import DECLARED, SUPPORTED_VERSIONS, ApiKey
from sparkkafka_sink.protocol.error_codes import UnsupportedVersionBrokerError as UnsupportedVersionAnswer
from sparkkafka_sink.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameReader
from sparkkafka_sink.protocol.header import decode_response_header, encode_request
from sparkkafka_sink.protocol.produce import ProduceRequest, decode_produce_response
from sparkkafka_sink.protocol.schema import ProtocolMessage

log = logging.getLogger(__name__)

#: how many unanswered acks=0 correlation ids to remember per connection
_UNANSWERED_MEMORY = 4096


#: a request as it is sent: a generated message, or the Produce fast path's own (``produce``)
Request = ProtocolMessage | ProduceRequest


@dataclass(eq=False)
class PendingRequest:
    """A request sent and awaiting its answer; ``context`` is the caller's (e.g. a callback)."""

    correlation_id: int
    api_key: int
    version: int
    request: Request
    context: Any = None


def encode_body(request: Request, version: int) -> list:
    """A request's body as buffers: the Produce fast path, else the generic codec."""
    if isinstance(request, ProduceRequest):
        return request.encode(version)
    return messages.encode_body(request, version)


def decode_response(api_key: int, body: bytes | bytearray | memoryview, version: int) -> ProtocolMessage:
    """A response body of a declared API: the Produce fast path, else the generic codec."""
    if api_key == ApiKey.PRODUCE:
        return decode_produce_response(body, version)
    return messages.decode_body(DECLARED[api_key].spec + "Response", body, version)


class BrokerProtocol:
    def __init__(self, client_id: str | None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.client_id = client_id
        self.pending: deque[PendingRequest] = deque()
        self._unanswered: deque[int] = deque(maxlen=_UNANSWERED_MEMORY)
        self._frames = FrameReader(max_frame_bytes)
        self._next_correlation_id = 1

    def send(self, request: Request, version: int, *, expect_response: bool = True,
             context: Any = None) -> tuple[PendingRequest, list]:
        """Number and frame ``request``: returns its ``PendingRequest`` and the frame's buffers
        (record batches by reference).  Without ``expect_response`` it is not awaited."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF or 1
        api_key = type(request).API_KEY
        frame = encode_request(api_key, version, correlation_id, self.client_id,
                               encode_body(request, version))
        pending = PendingRequest(correlation_id, api_key, version, request, context)
        if expect_response:
            self.pending.append(pending)
        else:
            self._unanswered.append(correlation_id)
        return pending, frame

    def receive(self, data: bytes | bytearray | memoryview) -> list[tuple[PendingRequest, Any]]:
        """Feed received bytes; returns ``(request, decoded response)`` for each answer
        completed by them, in order.  Raises ``ProtocolError`` on anything malformed; the
        answers decoded before it travel on the exception (``answers``), so none is lost."""
        answers = []
        try:
            for frame in self._frames.feed(data):
                answer = self._answer(frame)
                if answer is not None:
                    answers.append(answer)
        except ProtocolError as exc:
            exc.answers = answers
            raise
        return answers

    def _answer(self, frame: memoryview) -> tuple[PendingRequest, Any] | None:
        if len(frame) < 4:
            raise ProtocolError(f"response frame of {len(frame)} bytes is too short")
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        oldest = self.pending[0] if self.pending else None
        if oldest is None or oldest.correlation_id != correlation_id:
            if correlation_id in self._unanswered:
                self._unanswered.remove(correlation_id)  # an acks=0 answer nobody waits for
                log.debug("dropping unexpected response %s: an acks=0 request answered anyway", correlation_id)
                return None
            raise ProtocolError(f"response with correlation id {correlation_id} does not match the oldest "
                                f"request awaiting an answer ({oldest.correlation_id if oldest else 'none'})")
        _, offset = decode_response_header(frame, oldest.api_key, oldest.version)
        version = oldest.version
        if (oldest.api_key == ApiKey.API_VERSIONS and version > 0 and len(frame) >= offset + 2
                and int.from_bytes(frame[offset:offset + 2], "big", signed=True) == UnsupportedVersionAnswer.code):
            version = 0  # KIP-511: a version the broker does not know is answered with a v0 body
        response = decode_response(oldest.api_key, frame[offset:], version)
        self.pending.popleft()
        return oldest, response

    def connection_lost(self) -> list[PendingRequest]:
        """The connection is gone: every request awaiting an answer will never get one."""
        lost = list(self.pending)
        self.pending.clear()
        self._unanswered.clear()
        self._frames = FrameReader(self._frames.max_frame_bytes)
        return lost

    @staticmethod
    def api_versions_retry(response: ProtocolMessage, sent_version: int) -> int | None:
        """The ApiVersions version to ask again with after an UNSUPPORTED_VERSION answer (KIP-511):
        the highest the broker says it knows within ours, or v0 from brokers before 2.4, which
        do not say (as Java does); None when there is nothing lower to try."""
        if response.error_code != UnsupportedVersionAnswer.code:
            return None
        ours = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
        theirs = response.version_range(ApiKey.API_VERSIONS)
        fallback = max(min(theirs[1], ours[1]), ours[0]) if theirs is not None else ours[0]
        return fallback if sent_version > fallback else None
