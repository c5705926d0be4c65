"""Scenario 6: truncated and corrupted broker responses.

A response that does not decode is a protocol error: the connection it came on is closed, its
requests are retried on a new connection, and nothing but our own error types ever reaches the
Sender loop (an IndexError/struct.error escaping a decoder would be logged as "unexpected error
in the sender loop" and leave the request hanging until request.timeout.ms).  Produce responses
are mangled *after* the broker wrote the batch, so the idempotent resend must not duplicate it.
"""

from __future__ import annotations

import logging
import struct

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink.protocol.api import is_flexible
from sparkkafka_sink.protocol.header import decode_response_header

from .harness import API_VERSIONS, INIT_PRODUCER_ID, METADATA, PRODUCE
from .helpers import BROKERS, SLACK_S, assert_no_sender_threads, fresh_topic, make_producer, within

#: request.timeout.ms (and the connection set-up timeouts) of these tests: a bad response must be
#: recovered from well before it (RECOVERY_S), not by waiting for it (the leaked-exception bug)
TIMEOUT_MS = int(3 * SLACK_S * 1000)
RECOVERY_S = TIMEOUT_MS / 1000 - SLACK_S
SLOW = {"request.timeout.ms": TIMEOUT_MS, "socket.connection.setup.timeout.ms": TIMEOUT_MS,
        "socket.connection.setup.timeout.max.ms": TIMEOUT_MS, "delivery.timeout.ms": 4 * TIMEOUT_MS,
        "max.block.ms": 4 * TIMEOUT_MS}


def _cut_body(fraction: float):
    """Keep the frame's size consistent but drop the end of the body (decoder underflow)."""
    def fn(frame: bytes, api_key: int, version: int) -> bytes:
        return frame[:max(4, int(len(frame) * fraction))]
    return fn


def _huge_first_array(frame: bytes, api_key: int, version: int) -> bytes:
    """The response's first array claims 2**31-1 elements (must not allocate or IndexError)."""
    _, off = decode_response_header(memoryview(frame), api_key, version)
    if api_key == API_VERSIONS:
        off += 2  # error_code comes first
    if is_flexible(api_key, version) and api_key != API_VERSIONS or (api_key == API_VERSIONS and version >= 3):
        old = frame[off]
        assert old < 0x80, "first array length is a one-byte uvarint here"
        return frame[:off] + b"\xff\xff\xff\xff\x07" + frame[off + 1:]
    return frame[:off] + struct.pack(">i", 0x7FFFFFFF) + frame[off + 4:]


def _garbage_body(frame: bytes, api_key: int, version: int) -> bytes:
    _, off = decode_response_header(memoryview(frame), api_key, version)
    return frame[:off] + b"\xfe" * 3 + bytes(range(256)) * 2


def _bad_string_length(frame: bytes, api_key: int, version: int) -> bytes:
    """Produce: the first topic name's length is made larger than the rest of the frame."""
    _, off = decode_response_header(memoryview(frame), api_key, version)
    if is_flexible(api_key, version):
        return frame[:off + 1] + b"\xff\x7f" + frame[off + 2:]
    return frame[:off + 4] + b"\x7f\xff" + frame[off + 6:]


# (name, api key, fault) -- each fault hits exactly one response
PRODUCE_FAULTS = [
    ("truncated-in-size-prefix", lambda px: px.truncate_next_response(2, api_key=PRODUCE)),
    ("truncated-in-header", lambda px: px.truncate_next_response(6, api_key=PRODUCE)),
    ("truncated-in-body", lambda px: px.truncate_next_response(20, api_key=PRODUCE)),
    ("size-prefix-negative", lambda px: px.corrupt_next_response(api_key=PRODUCE, offset=0, length=1)),
    ("correlation-id-corrupted", lambda px: px.corrupt_next_response(api_key=PRODUCE, offset=4, length=4)),
    ("body-cut-short", lambda px: px.mutate_next_response(_cut_body(0.6), api_key=PRODUCE)),
    ("only-correlation-id", lambda px: px.mutate_next_response(lambda f, k, v: f[:4], api_key=PRODUCE)),
    ("huge-array-length", lambda px: px.mutate_next_response(_huge_first_array, api_key=PRODUCE)),
    ("string-length-past-end", lambda px: px.mutate_next_response(_bad_string_length, api_key=PRODUCE)),
    ("garbage-body", lambda px: px.mutate_next_response(_garbage_body, api_key=PRODUCE)),
    ("empty-frame", lambda px: px.mutate_next_response(lambda f, k, v: b"", api_key=PRODUCE)),
]

SETUP_FAULTS = [
    ("api-versions-cut-short", lambda px: px.mutate_next_response(_cut_body(0.5), api_key=API_VERSIONS)),
    ("api-versions-truncated", lambda px: px.truncate_next_response(30, api_key=API_VERSIONS)),
    ("api-versions-huge-array", lambda px: px.mutate_next_response(_huge_first_array, api_key=API_VERSIONS)),
    ("metadata-cut-short", lambda px: px.mutate_next_response(_cut_body(0.7), api_key=METADATA)),
    ("metadata-huge-array", lambda px: px.mutate_next_response(_huge_first_array, api_key=METADATA)),
    ("metadata-garbage", lambda px: px.mutate_next_response(_garbage_body, api_key=METADATA)),
    ("metadata-truncated", lambda px: px.truncate_next_response(40, api_key=METADATA)),
    ("init-producer-id-cut-short", lambda px: px.mutate_next_response(_cut_body(0.7), api_key=INIT_PRODUCER_ID)),
    ("init-producer-id-corrupt-corr-id",
     lambda px: px.corrupt_next_response(api_key=INIT_PRODUCER_ID, offset=4, length=4)),
]


@pytest.fixture
def no_leaks(caplog):
    """Fail if any non-Kafka exception reached the Sender loop's last-resort handler."""
    caplog.set_level(logging.WARNING, logger="sparkkafka_sink")
    yield
    records = caplog.get_records("setup") + caplog.get_records("call")
    leaked = [r for r in records if "unexpected error" in r.getMessage()
              or (r.exc_info and not _ours(r.exc_info[1]))]
    assert not leaked, [(r.getMessage(), r.exc_info and repr(r.exc_info[1])) for r in leaked]


def _ours(exc) -> bool:
    from sparkkafka_sink.errors import KafkaError
    return isinstance(exc, KafkaError)


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("name, fault", PRODUCE_FAULTS, ids=[n for n, _ in PRODUCE_FAULTS])
def test_bad_produce_response_closes_connection_and_retries_exactly_once(proxied_broker, kind, name, fault,
                                                                         no_leaks):
    pb = proxied_broker(kind)
    topic = f"bad-produce-{name}"
    topic = fresh_topic(pb, topic, 2)
    with make_producer(pb.bootstrap_servers, **SLOW) as p:
        p.send(topic, value=b"warm-up", partition=0).get(10)
        connections = pb.proxy.stats()["connections"]
        handle = fault(pb.proxy)
        futures = [p.send(topic, value=b"r%03d" % i, key=b"k%d" % (i % 5)) for i in range(300)]
        with within(RECOVERY_S, f"recovery (request.timeout.ms is {TIMEOUT_MS})"):
            p.flush(4 * TIMEOUT_MS / 1000)
        assert handle.wait(0), "the fault never hit a response"
        for f in futures:
            f.get(0)
        m = p.metrics()
        assert m["retries"] >= 1, "the mangled request was not retried"
        # the connection that carried the bad response was replaced, well before request.timeout.ms
        assert pb.proxy.stats()["connections"] > connections
        assert m["request_latency_max_ms"] < RECOVERY_S * 1000, m
    assert_no_sender_threads()
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=301)
    assert sorted(r.value for r in records) == sorted([b"warm-up"] + [b"r%03d" % i for i in range(300)])


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("name, fault", SETUP_FAULTS, ids=[n for n, _ in SETUP_FAULTS])
def test_bad_setup_response_is_retried_and_the_producer_delivers(proxied_broker, kind, name, fault, no_leaks):
    pb = proxied_broker(kind)
    topic = f"bad-setup-{name}"
    topic = fresh_topic(pb, topic, 1)
    handle = fault(pb.proxy)
    with make_producer(pb.bootstrap_servers, **SLOW) as p:
        with within(RECOVERY_S, f"recovery (request.timeout.ms is {TIMEOUT_MS})"):
            futures = [p.send(topic, value=b"s%02d" % i) for i in range(20)]
            p.flush(4 * TIMEOUT_MS / 1000)
        assert handle.wait(0), "the fault never hit a response"
        for f in futures:
            f.get(0)
        assert pb.proxy.stats()["connections"] >= 2, "the connection with the bad response was not replaced"
    assert_no_sender_threads()
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=20)
    assert [r.value for r in records] == [b"s%02d" % i for i in range(20)]
