"""Round trips of every message at every supported version, and fuzzing of every decoder:
random bytes and mutated valid messages may only decode or raise ``ProtocolError``."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderIdAndEpoch,
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from sparkkafka_sink.protocol.metadata import NO_AUTHORIZED_OPERATIONS
from sparkkafka_sink.protocol.primitives import ZERO_UUID

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=12)
NTEXT = st.none() | TEXT
SMALL = {"max_size": 3}


def versions(api_key):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return st.integers(lo, hi)


# --- version-aware strategies: fields a version lacks keep their defaults ------------------

@st.composite
def metadata_responses(draw, v):
    def at(min_v, strategy, default, max_v=99):
        return draw(strategy) if min_v <= v <= max_v else default

    brokers = [MetadataBroker(draw(I32), draw(TEXT), draw(I32), at(1, NTEXT, None))
               for _ in range(draw(st.integers(0, 3)))]
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        partitions = [MetadataPartition(
            draw(I16), draw(I32), draw(I32), at(7, I32, -1), draw(st.lists(I32, **SMALL)),
            draw(st.lists(I32, **SMALL)), at(5, st.lists(I32, **SMALL), []))
            for _ in range(draw(st.integers(0, 3)))]
        topics.append(MetadataTopic(
            draw(I16), draw(NTEXT if v >= 12 else TEXT), partitions, at(1, st.booleans(), False),
            at(10, st.uuids(), ZERO_UUID), at(8, I32, NO_AUTHORIZED_OPERATIONS)))
    return MetadataResponse(brokers, topics, at(2, NTEXT, None), at(1, I32, -1), at(3, I32, 0),
                            at(8, I32, NO_AUTHORIZED_OPERATIONS, max_v=10))


@st.composite
def produce_responses(draw, v):
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        partitions = []
        for _ in range(draw(st.integers(0, 3))):
            record_errors = draw(st.lists(st.tuples(I32, NTEXT), **SMALL)) if v >= 8 else []
            leader = draw(st.none() | st.builds(LeaderIdAndEpoch, I32, I32)) if v >= 10 else None
            partitions.append(PartitionProduceResponse(
                draw(I32), draw(I16), draw(I64), draw(I64), draw(I64) if v >= 5 else -1,
                record_errors, draw(NTEXT) if v >= 8 else None, leader))
        topics.append(TopicProduceResponse(draw(TEXT), partitions))
    endpoints = draw(st.lists(st.builds(NodeEndpoint, I32, TEXT, I32, NTEXT), **SMALL)) if v >= 10 else []
    return ProduceResponse(topics, draw(I32), endpoints)


@st.composite
def api_versions_responses(draw, v):
    keys = draw(st.lists(st.builds(ApiVersionRange, I16, I16, I16), max_size=5))
    tags = draw(st.dictionaries(st.integers(0, 2**32 - 1), st.binary(max_size=5), max_size=3)) if v >= 3 else {}
    return ApiVersionsResponse(draw(I16), keys, draw(I32) if v >= 1 else 0, tags)


@st.composite
def init_producer_id_responses(draw, v):
    return InitProducerIdResponse(draw(I32), draw(I16), draw(I64), draw(I16))


@st.composite
def metadata_requests(draw, v):
    return MetadataRequest(draw(st.none() | st.lists(TEXT, **SMALL)),
                           draw(st.booleans()) if v >= 4 else True,
                           draw(st.booleans()) if 8 <= v <= 10 else False,
                           draw(st.booleans()) if v >= 8 else False)


@st.composite
def produce_requests(draw, v):
    data = draw(st.lists(st.tuples(TEXT, st.lists(st.tuples(I32, st.none() | st.binary(max_size=20)), **SMALL)), **SMALL))
    return ProduceRequest(draw(NTEXT), draw(I16), draw(I32), data)


@st.composite
def api_versions_requests(draw, v):
    return ApiVersionsRequest(draw(TEXT), draw(TEXT)) if v >= 3 else ApiVersionsRequest()


@st.composite
def init_producer_id_requests(draw, v):
    return InitProducerIdRequest(draw(NTEXT), draw(I32), draw(I64), draw(I16))


RESPONSES = [
    (ApiKey.METADATA, MetadataResponse, metadata_responses),
    (ApiKey.PRODUCE, ProduceResponse, produce_responses),
    (ApiKey.API_VERSIONS, ApiVersionsResponse, api_versions_responses),
    (ApiKey.INIT_PRODUCER_ID, InitProducerIdResponse, init_producer_id_responses),
]
REQUESTS = [
    (ApiKey.METADATA, MetadataRequest, metadata_requests),
    (ApiKey.PRODUCE, ProduceRequest, produce_requests),
    (ApiKey.API_VERSIONS, ApiVersionsRequest, api_versions_requests),
    (ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, init_producer_id_requests),
]
ALL = RESPONSES + REQUESTS
IDS = [f"{cls.__name__}" for _, cls, _ in ALL]


def encoded(message, version) -> bytes:
    return b"".join(bytes(p) for p in message.encode(version))


# --- round trips ----------------------------------------------------------------------------

@pytest.mark.parametrize("api_key, cls, strategy", ALL, ids=IDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip_every_version(api_key, cls, strategy, data):
    version = data.draw(versions(api_key), label="version")
    message = data.draw(strategy(version), label="message")
    raw = encoded(message, version)
    assert cls.decode(memoryview(raw), version) == message
    assert cls.decode(raw, version) == message


@pytest.mark.parametrize("api_key, cls, strategy", ALL, ids=IDS)
def test_roundtrip_empty_message_at_each_version(api_key, cls, strategy):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    for version in range(lo, hi + 1):
        message = {
            MetadataResponse: MetadataResponse(), ProduceResponse: ProduceResponse(),
            ApiVersionsResponse: ApiVersionsResponse(), InitProducerIdResponse: InitProducerIdResponse(),
            MetadataRequest: MetadataRequest(), ProduceRequest: ProduceRequest(None, 1, 0, []),
            ApiVersionsRequest: ApiVersionsRequest(), InitProducerIdRequest: InitProducerIdRequest(),
        }[cls]
        assert cls.decode(encoded(message, version), version) == message


# --- fuzzing --------------------------------------------------------------------------------

def decode_or_protocol_error(cls, raw: bytes, version: int) -> None:
    try:
        cls.decode(memoryview(raw), version)
    except ProtocolError:
        pass


@pytest.mark.parametrize("api_key, cls, strategy", ALL, ids=IDS)
@FUZZ
@given(data=st.data())
def test_random_bytes(api_key, cls, strategy, data):
    version = data.draw(versions(api_key), label="version")
    decode_or_protocol_error(cls, data.draw(st.binary(max_size=200), label="bytes"), version)


@st.composite
def mutations(draw, raw: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "set", "insert", "delete"]))
    i = draw(st.integers(0, max(len(raw) - 1, 0)))
    if kind == "truncate":
        return raw[:i]
    if kind == "insert":
        return raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:]
    if not raw:
        return raw
    if kind == "delete":
        return raw[:i] + raw[i + draw(st.integers(1, 8)):]
    value = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF])) if kind == "set" else raw[i] ^ (1 << draw(st.integers(0, 7)))
    return raw[:i] + bytes([value]) + raw[i + 1:]


@pytest.mark.parametrize("api_key, cls, strategy", ALL, ids=IDS)
@FUZZ
@given(data=st.data())
def test_mutated_valid_messages(api_key, cls, strategy, data):
    version = data.draw(versions(api_key), label="version")
    raw = encoded(data.draw(strategy(version), label="message"), version)
    for _ in range(data.draw(st.integers(1, 3), label="rounds")):
        raw = data.draw(mutations(raw), label="mutated")
    decode_or_protocol_error(cls, raw, version)


SAMPLES = {
    MetadataResponse: MetadataResponse(
        [MetadataBroker(1, "b1", 9092, "r")],
        [MetadataTopic(0, "t", [MetadataPartition(0, 0, 1, 2, [1, 2], [1], [2])], True, uuid.uuid4(), 3)],
        "c", 1, 2, 3),
    ProduceResponse: ProduceResponse(
        [TopicProduceResponse("t", [PartitionProduceResponse(0, 1, 2, 3, 4, [(5, "e")], "m", LeaderIdAndEpoch(1, 2))])],
        7, [NodeEndpoint(1, "h", 2, "r")]),
    ApiVersionsResponse: ApiVersionsResponse(0, [ApiVersionRange(0, 3, 11)], 1, {0: b"\x01", 3: b"\x00"}),
    InitProducerIdResponse: InitProducerIdResponse(1, 0, 3, 4),
}


@pytest.mark.parametrize("api_key, cls, strategy", RESPONSES, ids=IDS[:4])
def test_every_truncation_and_byte_value_at_every_position(api_key, cls, strategy):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    for version in range(lo, hi + 1):
        raw = encoded(SAMPLES[cls], version)
        for i in range(len(raw)):
            decode_or_protocol_error(cls, raw[:i], version)
            for value in (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF):
                decode_or_protocol_error(cls, raw[:i] + bytes([value]) + raw[i + 1:], version)
        # a truncated message never decodes silently
        for i in range(len(raw)):
            if cls is ApiVersionsResponse and version > 0:
                continue  # a prefix can be a valid KIP-511 v0 fallback body
            with pytest.raises(ProtocolError):
                cls.decode(raw[:i], version)
