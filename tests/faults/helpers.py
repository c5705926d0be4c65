"""Shared pieces of the failure-semantics tests: fast producer settings, thread accounting,
and frame mutations for the FaultProxy (broker error codes, corrupted record bytes)."""

from __future__ import annotations

import contextlib
import functools
import struct
import threading
import time
from collections.abc import Callable, Iterable

from kafka_helpers import producer_for

from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.header import decode_response_header

#: Small timeouts so every fault resolves in seconds (the suite must stay well under 3 minutes).
FAST = {
    "request.timeout.ms": 1000,
    "delivery.timeout.ms": 3000,
    "max.block.ms": 3000,
    "linger.ms": 5,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 100,
    "socket.connection.setup.timeout.ms": 1000,
    "socket.connection.setup.timeout.max.ms": 2000,
}

#: What a timed test allows on top of the timeout it configures, for a loaded machine (two cores
#: shared with brokers' JVMs and Spark: a thread may wait that long for its turn).  Every bound is
#: "the configured timeout (or 0) + SLACK_S", and a test picks its timeouts so that a wait which
#: ignores them (waiting for a longer timeout, or forever) still lands past the bound.
SLACK_S = 2.0

from broker_kinds import FAULT_KINDS  # noqa: E402

#: apache (the session's node behind a proxy, when Maven can provide it), tansu, noida
BROKERS = FAULT_KINDS


#: ``make_producer(bootstrap, **overrides)``: our producer with the FAST settings
make_producer = functools.partial(producer_for, defaults=FAST)


def sender_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("sparkkafka-sink-sender") and t.is_alive()]


def assert_no_sender_threads(timeout: float = 2.0) -> None:
    """Every producer's Sender thread has exited (they are named sparkkafka-sink-sender-*)."""
    deadline = time.monotonic() + timeout
    while sender_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    left = sender_threads()
    assert not left, f"threads left running: {[t.name for t in left]}"


@contextlib.contextmanager
def within(seconds: float, what: str):
    """Assert the block finishes within ``seconds`` (it is not interrupted, only measured)."""
    start = time.monotonic()
    box = {}
    yield box
    box["elapsed"] = elapsed = time.monotonic() - start
    assert elapsed <= seconds, f"{what} took {elapsed:.2f} s, bound {seconds:.2f} s"


# ---------------------------------------------------------------------------------------------
# Frame mutations
# ---------------------------------------------------------------------------------------------

def produce_error(code: int, message: str | None = None,
                  only: Iterable[int] | None = None) -> Callable[[bytes, int, int], bytes]:
    """A ``FaultProxy.mutate_next_response`` function: the broker's Produce response with every
    partition's error code replaced by ``code`` (``only``: just those partition indexes).

    The broker did write the data: this models a broker that stored a batch but answered with
    an error (or, for non-retriable codes, one that would have rejected it)."""
    only = None if only is None else set(only)

    def fn(frame: bytes, api_key: int, version: int) -> bytes:
        _, offset = decode_response_header(memoryview(frame), api_key, version)
        resp = messages.decode_body("ProduceResponse", memoryview(frame)[offset:], version)
        for topic in resp.responses:
            for p in topic.partition_responses:
                if only is None or p.index in only:
                    p.error_code, p.base_offset = code, -1
                    p.error_message = message if version >= 8 else None
        return frame[:offset] + b"".join(bytes(b) for b in messages.encode_body(resp, version))

    return fn


def flip_byte_after(marker: bytes) -> Callable[[bytes, int, int], bytes]:
    """A ``FaultProxy.mutate_next_request`` function flipping the byte right after the first
    ``marker`` in a request (inside an uncompressed record: the batch CRC no longer matches)."""

    def fn(frame: bytes, api_key: int, version: int) -> bytes:
        i = frame.find(marker)
        assert i >= 0, "marker not in the request"
        j = i + len(marker)
        return frame[:j] + bytes([frame[j] ^ 0x55]) + frame[j + 1:]

    return fn


def retarget_first_partition(topic: str, new_index: int) -> Callable[[bytes, int, int], bytes]:
    """A ``FaultProxy.mutate_next_request`` function for a Produce request to one ``topic``:
    its first partition index becomes ``new_index`` (one the topic lacks), so the broker refuses
    the batch with UNKNOWN_TOPIC_OR_PARTITION without writing it."""
    name = topic.encode()

    def fn(frame: bytes, api_key: int, version: int) -> bytes:
        i = frame.find(name)
        assert i >= 0, "topic not in the request"
        j = i + len(name) + (1 if version >= 9 else 4)  # partitions array length: uvarint / int32
        return frame[:j] + struct.pack(">i", new_index) + frame[j + 4:]

    return fn


def values_by_key(records) -> dict[bytes, list]:
    out: dict[bytes, list] = {}
    for r in records:
        out.setdefault(r.key, []).append(r.value)
    return out


def fresh_topic(pb, stem: str, partitions: int = 1) -> str:
    """Create a topic named after ``stem`` with a unique suffix (the Apache Kafka node is shared
    by the session, so fixed names would collide) and return its name."""
    import uuid

    from sparkkafka_sink.testing.brokers import create_topics

    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    create_topics(pb.direct_bootstrap_servers, {name: partitions})
    return name
