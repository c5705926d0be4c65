"""Round trips of every declared message at every version we speak, the Produce hot paths against
the generic codec, and fuzzing of every decoder: random bytes and mutated valid messages may only
decode or raise ``ProtocolError``.  Values come from the declarations (tests/message_values.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_values import sample, values

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import SUPPORTED_VERSIONS, ApiKey, codec
from sparkkafka_sink.protocol.messages import SPEC_NAMES, schema_of
from sparkkafka_sink.protocol.produce import ProduceRequest, decode_produce_response

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROUNDTRIP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(max_size=12)


def versions(name):
    lo, hi = SUPPORTED_VERSIONS[schema_of(name).api_key]
    return st.integers(lo, hi)


def every_version(name):
    lo, hi = SUPPORTED_VERSIONS[schema_of(name).api_key]
    return range(lo, hi + 1)


def encoded(name, message, version) -> bytes:
    return b"".join(bytes(p) for p in codec.encode(schema_of(name), message, version))


def decode(name, raw, version):
    return codec.decode(schema_of(name), raw, version)


# --- round trips ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", SPEC_NAMES)
@ROUNDTRIP
@given(data=st.data())
def test_roundtrip_every_version(name, data):
    version = data.draw(versions(name), label="version")
    message = data.draw(values(schema_of(name), version), label="message")
    raw = encoded(name, message, version)
    assert decode(name, memoryview(raw), version) == message
    assert decode(name, raw, version) == message


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_roundtrip_empty_message_at_each_version(name):
    for version in every_version(name):
        message = schema_of(name).cls()
        assert decode(name, encoded(name, message, version), version) == message


# --- the hand-written Produce paths say exactly what the declaration says ------------------------

@ROUNDTRIP
@given(data=st.data())
def test_produce_request_fast_path_matches_the_generic_codec_at_every_version(data):
    version = data.draw(versions("ProduceRequest"), label="version")
    topic_data = data.draw(st.lists(st.tuples(TEXT, st.lists(st.tuples(
        st.integers(-(2**31), 2**31 - 1), st.none() | st.binary(max_size=20)), max_size=3)), max_size=3))
    request = ProduceRequest(data.draw(st.none() | TEXT), data.draw(st.integers(-(2**15), 2**15 - 1)),
                             data.draw(st.integers(-(2**31), 2**31 - 1)), topic_data)
    fast = b"".join(bytes(p) for p in request.encode(version))
    assert fast == encoded("ProduceRequest", request.as_message(), version)


@ROUNDTRIP
@given(data=st.data())
def test_produce_response_fast_path_matches_the_generic_codec_at_every_version(data):
    version = data.draw(versions("ProduceResponse"), label="version")
    message = data.draw(values(schema_of("ProduceResponse"), version), label="message")
    raw = encoded("ProduceResponse", message, version)
    assert decode_produce_response(raw, version) == decode("ProduceResponse", raw, version) == message


@pytest.mark.parametrize("version", every_version("ProduceResponse"))
def test_produce_response_fast_path_on_every_truncation(version):
    raw = encoded("ProduceResponse", sample(schema_of("ProduceResponse"), version, seed=version), version)
    for i in range(len(raw)):
        with pytest.raises(ProtocolError):
            decode_produce_response(raw[:i], version)


# --- fuzzing --------------------------------------------------------------------------------

def decode_or_protocol_error(name, raw: bytes, version: int) -> None:
    try:
        decode(name, memoryview(raw), version)
    except ProtocolError:
        pass
    if name == "ProduceResponse":
        try:
            decode_produce_response(memoryview(raw), version)
        except ProtocolError:
            pass


@pytest.mark.parametrize("name", SPEC_NAMES)
@FUZZ
@given(data=st.data())
def test_random_bytes(name, data):
    version = data.draw(versions(name), label="version")
    decode_or_protocol_error(name, data.draw(st.binary(max_size=200), label="bytes"), version)


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


@pytest.mark.parametrize("name", SPEC_NAMES)
@FUZZ
@given(data=st.data())
def test_mutated_valid_messages(name, data):
    version = data.draw(versions(name), label="version")
    raw = encoded(name, data.draw(values(schema_of(name), version), label="message"), version)
    for _ in range(data.draw(st.integers(1, 3), label="rounds")):
        raw = data.draw(mutations(raw), label="mutated")
    decode_or_protocol_error(name, raw, version)


RESPONSES = [n for n in SPEC_NAMES if n.endswith("Response")]


@pytest.mark.parametrize("name", RESPONSES)
def test_every_truncation_and_byte_value_at_every_position(name):
    for version in every_version(name):
        raw = encoded(name, sample(schema_of(name), version, seed=version), version)
        for i in range(len(raw)):
            decode_or_protocol_error(name, raw[:i], version)
            for value in (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF):
                decode_or_protocol_error(name, raw[:i] + bytes([value]) + raw[i + 1:], version)
        # a truncated message never decodes silently
        for i in range(len(raw)):
            with pytest.raises(ProtocolError):
                decode(name, raw[:i], version)


def test_every_declared_api_is_fuzzed():
    assert {schema_of(n).api_key for n in SPEC_NAMES} == set(SUPPORTED_VERSIONS) >= {
        ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.INIT_PRODUCER_ID}
