"""Bad input at record and batch level, and broker error codes: each surfaces as a distinct,
documented exception with a readable message, fails at once (nothing waits for a timeout that
cannot help), leaves nothing in the topic, and leaves the producer usable.

Broker codes the embedded brokers cannot produce on demand are injected by the FaultProxy,
which rewrites a Produce (or Metadata) response; MESSAGE_TOO_LARGE and CORRUPT_MESSAGE also
come for real from noida (a record over its 1048588-byte limit; a record byte flipped in flight
so the batch CRC no longer matches).
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import BulkSendError
from sparkkafka_sink import errors as E
from sparkkafka_sink.protocol import error_codes as PE
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.header import decode_response_header
from sparkkafka_sink.testing.brokers import create_topics

from .harness import METADATA, PRODUCE
from .helpers import BROKERS, assert_no_sender_threads, flip_byte_after, fresh_topic, make_producer, produce_error


@pytest.fixture
def broker(proxied_broker):
    pb = proxied_broker("tansu")
    create_topics(pb.direct_bootstrap_servers, {"good": 2})
    return pb


def _only(pb, topic, values):
    got = [r.value for r in consume_all(pb.direct_bootstrap_servers, topic, expected_count=len(values))]
    assert sorted(got) == sorted(values), got


# ---------------------------------------------------------------------------------------------
# Record level: rejected by send() itself, before anything is queued
# ---------------------------------------------------------------------------------------------

BAD_RECORDS = [
    # (id, send kwargs, exception, message fragment)
    ("value-int", dict(value=5), E.SerializationError, "Record value must be bytes"),
    ("value-list", dict(value=[b"a"]), E.SerializationError, "got list"),
    ("key-dict", dict(value=b"v", key={"a": 1}), E.SerializationError, "Record key must be bytes"),
    ("key-float", dict(value=b"v", key=1.5), E.SerializationError, "got float"),
    ("header-key-bytes", dict(value=b"v", headers=[(b"k", b"v")]), E.InvalidHeaderError, "Header keys must be str"),
    ("header-key-int", dict(value=b"v", headers={1: b"v"}), E.InvalidHeaderError, "Header keys must be str"),
    ("header-value-int", dict(value=b"v", headers=[("k", 7)]), E.SerializationError, "header 'k' value"),
    ("headers-not-pairs", dict(value=b"v", headers=[b"kv"]), E.InvalidHeaderError, "list of (str, bytes|None) pairs"),
    ("headers-triples", dict(value=b"v", headers=[("k", b"v", b"x")]), E.InvalidHeaderError, "(str, bytes|None) pairs"),
    ("headers-str", dict(value=b"v", headers="k=v"), E.InvalidHeaderError, "(str, bytes|None) pairs"),
    ("headers-not-iterable", dict(value=b"v", headers=5), E.InvalidHeaderError, "list of (str, bytes|None) pairs"),
    ("timestamp-negative", dict(value=b"v", timestamp_ms=-1), E.InvalidRecordTimestampError, "Invalid timestamp -1"),
    ("timestamp-too-big", dict(value=b"v", timestamp_ms=2**63), E.InvalidRecordTimestampError, "Invalid timestamp"),
    ("timestamp-float", dict(value=b"v", timestamp_ms=1.5e12), E.InvalidRecordTimestampError, "Invalid timestamp"),
    ("timestamp-bool", dict(value=b"v", timestamp_ms=True), E.InvalidRecordTimestampError, "Invalid timestamp"),
    ("timestamp-str", dict(value=b"v", timestamp_ms="2024-01-01"), E.InvalidRecordTimestampError, "Invalid timestamp"),
    ("partition-beyond-count", dict(value=b"v", partition=2), E.InvalidPartitionError,
     "Partition 2 of topic 'good' does not exist: the topic has 2 partition(s) [0..1]"),
    ("partition-negative", dict(value=b"v", partition=-1), E.InvalidPartitionError, "must be an int >= 0"),
    ("partition-str", dict(value=b"v", partition="0"), E.InvalidPartitionError, "must be an int >= 0"),
    ("over-max-request-size", dict(value=b"x" * 300_000), E.RecordTooLargeError,
     "larger than 200000, the value of max.request.size"),
]


@pytest.mark.parametrize("kwargs, exc, fragment", [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS])
def test_bad_record_is_rejected_by_send_with_a_readable_error(broker, kwargs, exc, fragment):
    with make_producer(broker.bootstrap_servers, **{"max.request.size": 200_000}) as p:
        start = time.monotonic()
        with pytest.raises(exc) as info:
            p.send("good", **kwargs)
        assert time.monotonic() - start < 1.0
        assert fragment in str(info.value), str(info.value)
        assert type(info.value) is exc, f"{type(info.value).__name__} instead of {exc.__name__}"
        assert isinstance(info.value, E.KafkaError) and not info.value.retriable
        p.send("good", value=b"ok", partition=0).get(10)  # the producer is still fine
        assert p.metrics()["records_sent"] == 1
    _only(broker, "good", [b"ok"])


BAD_TOPICS = ["", ".", "..", "a b", "a/b", "t\u00fcr", "x" * 250, "tab\t", None, 5, b"bytes"]


@pytest.mark.parametrize("topic", BAD_TOPICS, ids=[repr(t)[:20] for t in BAD_TOPICS])
def test_topic_names_kafka_rejects_are_rejected_before_any_request(broker, topic):
    with make_producer(broker.bootstrap_servers) as p:
        p.send("good", value=b"ok").get(10)
        requests = broker.proxy.stats()["requests"]
        with pytest.raises(E.InvalidTopicError, match="Topic must be a str|Invalid topic name"):
            p.send(topic, value=b"v")
        with pytest.raises(E.InvalidTopicError, match="Topic must be a str|Invalid topic name"):
            p.send_batch(topic, values=[b"v"])
        with pytest.raises(E.InvalidTopicError, match="Topic must be a str|Invalid topic name"):
            p.partitions_for(topic)
        time.sleep(0.1)
        assert broker.proxy.stats()["requests"] == requests, "a request was sent for an illegal topic"


def test_record_over_buffer_memory_is_rejected(broker):
    with make_producer(broker.bootstrap_servers, **{"buffer.memory": 100_000, "batch.size": 16384,
                                                    "max.request.size": 1_000_000}) as p:
        with pytest.raises(E.RecordTooLargeError, match="larger than 100000, the value of buffer.memory"):
            p.send("good", value=b"x" * 150_000)


@pytest.mark.parametrize("kwargs, row, error, message", [
    ({"values": [b"a", b"b"], "partitions": [0, 7]}, 1, E.InvalidPartitionError, r"Row 1: partition 7 .* 2 partition\(s\)"),
    ({"values": [b"a", b"b"], "partitions": pa.array([None, -1])}, 1, E.InvalidPartitionError,
     r"Row 1: partition -1 does not exist: partitions are numbered from 0"),
    ({"values": [b"a", b"b"], "headers": [[("h", b"1")], [(b"bytes key", b"2")]]}, 1, E.InvalidHeaderError,
     r"Row 1: cannot encode its headers: each header is a \(str, bytes \| None\) pair"),
    ({"values": [b"a", b"b", b"x" * 300_000]}, 2, E.RecordTooLargeError, r"Row 2 .* max.request.size"),
    ({"values": [b"a", b"b", b"c"], "headers": [[("h", b"1")], [(None, b"2")], []]}, 1, E.InvalidHeaderError,
     r"Row 1: cannot encode its headers"),
    ({"values": [b"a", b"b"], "headers": pa.array([[{"key": "h", "value": b"1"}], [{"key": None, "value": b"2"}]],
                                                   pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))},
     1, E.InvalidHeaderError, r"Row 1: its headers hold a null element or a null key"),
])
def test_send_batch_rejects_a_bad_row_naming_it_and_sends_none(broker, kwargs, row, error, message):
    with make_producer(broker.bootstrap_servers, **{"max.request.size": 200_000}) as p:
        with pytest.raises(BulkSendError, match=message) as refused:
            p.send_batch("good", **kwargs)
        assert isinstance(refused.value.error, error) and refused.value.__cause__ is refused.value.error
        assert refused.value.row == row and refused.value.partial is None
        assert refused.value.rows_not_sent.tolist() == list(range(len(kwargs["values"])))
        assert "no row of this call was queued" in str(refused.value)
        p.send_batch("good", values=[b"ok"], partitions=0).get(10)
    _only(broker, "good", [b"ok"])


def test_send_batch_returns_every_refused_row_and_sends_the_others(broker):
    """``refused="return"``: one call over rows of each kind the producer refuses (a partition
    that does not exist, a record no request could carry, a header without a key) leaves them
    all out, each with its own error, and delivers the rest; failures after sending are still
    numbered as the call's rows."""
    n = 12
    values = [b"v%d" % i for i in range(n)]
    values[4] = b"x" * 300_000
    headers = [[("h", b"1")] for _ in range(n)]
    headers[7] = [(None, b"2")]
    headers[9] = [(None, b"3")]
    partitions = [0] * n
    partitions[2] = partitions[10] = 7
    partitions[5] = -2
    with make_producer(broker.bootstrap_servers, **{"max.request.size": 200_000}) as p:
        future = p.send_batch("good", values=values, headers=headers, partitions=partitions, refused="return")
        future.get(30)
        refused = list(future.refused)
        assert [(row, type(error)) for row, error, _ in refused] == [
            (2, E.InvalidPartitionError), (4, E.RecordTooLargeError), (5, E.InvalidPartitionError),
            (7, E.InvalidHeaderError), (9, E.InvalidHeaderError), (10, E.InvalidPartitionError)]
        assert [partition for _, _, partition in refused] == [7, None, -2, None, None, 7]
        assert all(str(error).startswith(f"Row {row}") for row, error, _ in refused)
        assert future.record_count == n - 6 and future.errors() == []
    _only(broker, "good", [values[i] for i in range(n) if i not in (2, 4, 5, 7, 9, 10)])


def test_send_batch_refuses_columns_that_are_not_records(broker):
    with make_producer(broker.bootstrap_servers) as p:
        with pytest.raises(E.InvalidRecordError, match="value"):
            p.send_batch("good", values=[1, 2])
        p.send_batch("good", values=[b"ok"], partitions=0).get(10)
    _only(broker, "good", [b"ok"])


@pytest.mark.parametrize("kwargs, message", [
    ({"keys": [b"k"]}, "1 keys but 2 values"),
    ({"timestamps": [1]}, "1 timestamps for 2 records"),
    ({"timestamps": ["soon", "later"]}, "timestamps must be int64 milliseconds"),
    ({"headers": [[("h", b"v")]]}, "1 header rows for 2 records"),
    ({"partitions": [0]}, "1 partitions for 2 records"),
])
def test_send_batch_names_the_column_that_does_not_fit(broker, kwargs, message):
    with make_producer(broker.bootstrap_servers) as p:
        with pytest.raises(E.InvalidRecordError, match=message):
            p.send_batch("good", values=[b"a", b"b"], **kwargs)
        p.send_batch("good", values=[b"ok"], partitions=0).get(10)
    _only(broker, "good", [b"ok"])


@pytest.mark.parametrize("kind", BROKERS)
def test_unknown_topic_fails_clearly_instead_of_being_dropped(proxied_broker, kind):
    """tansu answers a Produce to a missing topic with error 0 and drops the data; the producer
    must never get that far: metadata says the topic is unknown and send() fails."""
    pb = proxied_broker(kind)
    with make_producer(pb.bootstrap_servers, **{"allow.auto.create.topics": False, "max.block.ms": 400}) as p:
        start = time.monotonic()
        with pytest.raises(E.UnknownTopicError, match=r"'no-such-topic'.*UNKNOWN_TOPIC_OR_PARTITION"
                                                      r".*allow.auto.create.topics is false"):
            p.send("no-such-topic", value=b"v")
        assert 0.4 <= time.monotonic() - start < 0.4 + 1.0  # max.block.ms, plus a loaded machine's slack
        with pytest.raises(E.UnknownTopicError):
            p.send_batch("no-such-topic", values=[b"v"])
        with pytest.raises(E.UnknownTopicError):
            p.partitions_for("no-such-topic")
        assert p.metrics()["requests"] == 0 or p.metrics()["records_sent"] == 0


@pytest.mark.parametrize("kind", BROKERS)
def test_partition_beyond_count_is_caught_from_metadata_not_dropped(proxied_broker, kind):
    pb = proxied_broker(kind)
    two_topic = fresh_topic(pb, "two", 2)
    with make_producer(pb.bootstrap_servers) as p:
        with pytest.raises(E.InvalidPartitionError, match=r"Partition 5 of topic 'two-[0-9a-f]+' does not exist"):
            p.send(two_topic, value=b"v", partition=5)
        p.send(two_topic, value=b"ok", partition=1).get(10)
    _only(pb, two_topic, [b"ok"])


# ---------------------------------------------------------------------------------------------
# Broker error codes
# ---------------------------------------------------------------------------------------------

INJECTED = [
    # (code, class, protocol name)
    (29, PE.TopicAuthorizationFailedError, "TOPIC_AUTHORIZATION_FAILED"),
    (21, PE.InvalidRequiredAcksError, "INVALID_REQUIRED_ACKS"),
    (10, PE.MessageTooLargeError, "MESSAGE_TOO_LARGE"),
    (2, PE.CorruptMessageError, "CORRUPT_MESSAGE"),
    (32, PE.InvalidTimestampError, "INVALID_TIMESTAMP"),
    (87, PE.InvalidRecordBrokerError, "INVALID_RECORD"),
]


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("code, cls, name", INJECTED, ids=[n for _, _, n in INJECTED])
def test_non_retriable_produce_error_fails_the_batch_at_once(proxied_broker, kind, code, cls, name):
    pb = proxied_broker(kind)
    topic = f"err-{code}"
    topic = fresh_topic(pb, topic, 1)
    with make_producer(pb.bootstrap_servers, **{"delivery.timeout.ms": 10000, "request.timeout.ms": 5000}) as p:
        p.send(topic, value=b"before").get(10)
        handle = pb.proxy.mutate_next_response(produce_error(code, "injected by the proxy"), api_key=PRODUCE)
        start = time.monotonic()
        fut = p.send(topic, value=b"rejected")
        with pytest.raises(cls) as info:
            fut.get(5)
        assert time.monotonic() - start < 1.5, "a non-retriable error waited for a timeout"
        assert handle.hits == 1
        err = info.value
        assert err.code == code and err.name == name
        # CORRUPT_MESSAGE is retriable in Kafka's table (a Fetch may have read a bad copy), but
        # a Produce resend carries the same bytes, so the producer does not retry it
        assert err.retriable == (code == 2)
        msg = str(err)
        assert msg.startswith(f"[Error {code}] {name}: ") and f"{topic}-0" in msg, msg
        assert cls.__doc__ and name in cls.__doc__
        m = p.metrics()
        assert m["retries"] == 0 and m["records_failed"] == 1
        # the producer stays usable (idempotence recovers with a fresh producer id)
        p.send(topic, value=b"after").get(10)
    assert_no_sender_threads()
    # the proxy only rewrote the answer: the broker did store "rejected" (at-least-once view)
    _only(pb, topic, [b"before", b"rejected", b"after"])


@pytest.mark.parametrize("kind", BROKERS)
@pytest.mark.parametrize("code", [6, 7, 19, 13], ids=["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT",
                                                     "NOT_ENOUGH_REPLICAS", "NETWORK_EXCEPTION"])
def test_retriable_produce_error_is_retried_and_deduplicated(proxied_broker, kind, code):
    """The broker stored the batch but answered with a retriable error: the resend carries the
    same sequence number, so the record is in the topic once (tansu answers the resend with
    DUPLICATE_SEQUENCE_NUMBER, noida with NONE and the original offset)."""
    pb = proxied_broker(kind)
    topic = f"retriable-{code}"
    topic = fresh_topic(pb, topic, 1)
    with make_producer(pb.bootstrap_servers, **{"delivery.timeout.ms": 10000}) as p:
        p.send(topic, value=b"before").get(10)
        handle = pb.proxy.mutate_next_response(produce_error(code), api_key=PRODUCE, times=2)
        futures = [p.send(topic, value=b"v%d" % i) for i in range(50)]
        p.flush(10)
        for f in futures:
            f.get(0)
        assert handle.hits == 2 and p.metrics()["retries"] >= 2
    _only(pb, topic, [b"before"] + [b"v%d" % i for i in range(50)])


@pytest.mark.parametrize("kind", [k for k in ("noida", "apache") if k in BROKERS])
def test_message_too_large_from_the_broker(proxied_broker, kind):
    pb = proxied_broker(kind)
    big_topic = fresh_topic(pb, "big", 1)
    with make_producer(pb.bootstrap_servers, **{"max.request.size": 3_000_000,
                                                "buffer.memory": 8_000_000}) as p:
        start = time.monotonic()
        with pytest.raises(PE.MessageTooLargeError, match=r"MESSAGE_TOO_LARGE.*big-[0-9a-f]+-0"):
            p.send(big_topic, value=b"x" * 1_100_000).get(10)
        assert time.monotonic() - start < 2
        assert p.metrics()["retries"] == 0
        p.send(big_topic, value=b"small").get(10)
    _only(pb, big_topic, [b"small"])


@pytest.mark.parametrize("kind", [k for k in ("noida", "apache") if k in BROKERS])
def test_corrupt_message_from_the_broker_when_a_record_byte_flips_in_flight(proxied_broker, kind):
    pb = proxied_broker(kind)
    crc_topic = fresh_topic(pb, "crc", 1)
    with make_producer(pb.bootstrap_servers, **{"delivery.timeout.ms": 10000}) as p:
        p.send(crc_topic, value=b"before").get(10)
        handle = pb.proxy.mutate_next_request(flip_byte_after(b"FLIP-ME:"), api_key=PRODUCE)
        start = time.monotonic()
        with pytest.raises(PE.CorruptMessageError, match=r"CORRUPT_MESSAGE.*crc-[0-9a-f]+-0"):
            p.send(crc_topic, value=b"FLIP-ME:payload").get(10)
        assert time.monotonic() - start < 2 and handle.hits == 1
        assert p.metrics()["retries"] == 0
        p.send(crc_topic, value=b"after").get(10)
    _only(pb, crc_topic, [b"before", b"after"])  # the corrupted batch was refused, nothing else lost


def _metadata_topic_error(code: int):
    def fn(frame: bytes, api_key: int, version: int) -> bytes:
        _, off = decode_response_header(memoryview(frame), api_key, version)
        resp = messages.decode_body("MetadataResponse", memoryview(frame)[off:], version)
        for t in resp.topics:
            t.error_code, t.partitions = code, []
        return frame[:off] + b"".join(bytes(b) for b in messages.encode_body(resp, version))
    return fn


@pytest.mark.parametrize("kind", BROKERS)
def test_topic_authorization_failed_in_metadata_fails_send_at_once(proxied_broker, kind):
    pb = proxied_broker(kind)
    secret_topic = fresh_topic(pb, "secret", 1)
    # armed before the producer exists: every Metadata answer it ever reads says the topic is refused
    handle = pb.proxy.mutate_next_response(_metadata_topic_error(29), api_key=METADATA, times=20)
    with make_producer(pb.bootstrap_servers, **{"max.block.ms": 5000}) as p:
        start = time.monotonic()
        with pytest.raises(PE.TopicAuthorizationFailedError, match="TOPIC_AUTHORIZATION_FAILED.*'secret-[0-9a-f]+'"):
            p.send(secret_topic, value=b"v")
        assert time.monotonic() - start < 2, "waited for max.block.ms although the error is final"
        assert handle.hits >= 1


def test_every_failure_has_its_own_documented_exception_class():
    classes = [E.InvalidTopicError, E.SerializationError, E.InvalidHeaderError, E.InvalidRecordTimestampError,
               E.InvalidRecordError, E.InvalidPartitionError, E.RecordTooLargeError, E.UnknownTopicError,
               E.BufferExhaustedError, E.KafkaTimeoutError, E.ProducerClosedError, E.ConfigError,
               E.ProtocolError, E.KafkaConnectionError] + [cls for _, cls, _ in INJECTED]
    assert len(set(classes)) == len(classes)
    for cls in classes:
        assert issubclass(cls, E.KafkaError) and cls.__doc__, cls
