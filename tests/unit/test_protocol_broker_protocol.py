"""BrokerProtocol without sockets: correlation ids, answers in order, acks=0 replies some brokers
send anyway, malformed frames, KIP-511 fallback, a lost connection."""

from __future__ import annotations

import struct

import pytest
from broker_frames import encode_response_header

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import ApiKey, messages
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol
from sparkkafka_sink.protocol.produce import ProduceRequest


def answer(api_key: int, version: int, correlation_id: int, response) -> bytes:
    """A broker's response frame, as bytes on the wire."""
    return b"".join(bytes(p) for p in encode_response_header(
        api_key, version, correlation_id, messages.encode_body(response, version)))


def init_pid_response(pid: int):
    return messages.InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)


def test_answers_come_back_in_order_with_their_requests_whatever_the_chunking():
    proto = BrokerProtocol("c")
    sent = [proto.send(messages.InitProducerIdRequest(transaction_timeout_ms=1), 4)[0] for _ in range(3)]
    assert [p.correlation_id for p in sent] == [1, 2, 3] and len(proto.pending) == 3
    stream = b"".join(answer(ApiKey.INIT_PRODUCER_ID, 4, p.correlation_id, init_pid_response(i))
                      for i, p in enumerate(sent))
    got = []
    for i in range(0, len(stream), 7):  # 7-byte chunks: frames split anywhere
        got += proto.receive(stream[i:i + 7])
    assert [(p is s, r.producer_id) for (p, r), s in zip(got, sent, strict=True)] == [(True, 0), (True, 1), (True, 2)]
    assert not proto.pending


def test_a_malformed_frame_keeps_the_answers_before_it():
    proto = BrokerProtocol("c")
    first, _ = proto.send(messages.InitProducerIdRequest(transaction_timeout_ms=1), 4)
    second, _ = proto.send(messages.metadata_request(["t"]), 12)
    good = answer(ApiKey.INIT_PRODUCER_ID, 4, first.correlation_id, init_pid_response(7))
    bad_frame = struct.pack(">i", second.correlation_id) + b"\x00" + b"\x01\x02"  # header tags, then junk
    with pytest.raises(ProtocolError) as info:
        proto.receive(good + struct.pack(">i", len(bad_frame)) + bad_frame)
    ((request, response),) = info.value.answers
    assert request is first and response.producer_id == 7
    assert list(proto.pending) == [second]  # still awaited: the caller closes the connection
    assert proto.connection_lost() == [second] and not proto.pending


def test_unexpected_correlation_id_is_a_protocol_error_but_acks0_replies_are_ignored():
    proto = BrokerProtocol("c")
    acks0, _ = proto.send(ProduceRequest(None, 0, 1000, []), 9, expect_response=False)
    awaited, _ = proto.send(messages.InitProducerIdRequest(transaction_timeout_ms=1), 4)
    assert list(proto.pending) == [awaited]
    # tansu and noida answer acks=0 Produce requests: nobody waits for it, it is dropped
    produce = messages.ProduceResponse()
    frame = b"".join(bytes(p) for p in encode_response_header(
        ApiKey.PRODUCE, 9, acks0.correlation_id, messages.encode_body(produce, 9)))
    assert proto.receive(frame) == []
    with pytest.raises(ProtocolError, match="does not match"):
        proto.receive(answer(ApiKey.INIT_PRODUCER_ID, 4, 999, init_pid_response(1)))


@pytest.mark.parametrize("advertised, sent, expected", [
    ((0, 2), 3, 2),      # the broker says what it knows: the highest within ours
    (None, 3, 0),        # brokers before 2.4 say nothing: v0, as Java does
    ((0, 2), 2, None),   # nothing lower to try
])
def test_api_versions_retry_after_unsupported_version(advertised, sent, expected):
    keys = [] if advertised is None else [messages.schema_of("ApiVersionsResponse").structs["ApiVersion"].cls(
        ApiKey.API_VERSIONS, *advertised)]
    response = messages.ApiVersionsResponse(error_code=35, api_keys=keys)
    assert BrokerProtocol.api_versions_retry(response, sent) == expected
    assert BrokerProtocol.api_versions_retry(messages.ApiVersionsResponse(error_code=0), sent) is None
