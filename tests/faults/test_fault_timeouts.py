"""Scenarios 3 and 4: a hung broker (SIGSTOP) and a blackholed network path.

* paused for longer than request.timeout.ms, then resumed: the request times out, the
  connection is closed, the producer reconnects and every record arrives exactly once;
* paused past delivery.timeout.ms: every pending future fails with KafkaTimeoutError naming the
  topic-partition and the time waited, no earlier and not much later than the bound; flush()
  and close() return within their bounds and the Sender thread is gone;
* blackholed: ``send().get()`` fails within delivery.timeout.ms plus a small margin, never
  succeeds falsely (the proxy dropped the bytes, so the records must not be in the topic).

"Within" a bound is within the timeout the test configures plus ``SLACK_S`` (helpers), and each
test's timeouts are far enough apart that a wait ignoring the one under test lands past it.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import KafkaTimeoutError
from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.testing.waiting import wait_until

from .helpers import BROKERS, SLACK_S, assert_no_sender_threads, fresh_topic, make_producer, within


def _topic(pb, name, partitions=2):
    name = fresh_topic(pb, name, partitions)
    return name


@pytest.mark.parametrize("kind", BROKERS)
def test_pause_longer_than_request_timeout_then_resume_delivers_exactly_once(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = _topic(pb, "paused-briefly")
    p = make_producer(pb.bootstrap_servers, **{"request.timeout.ms": 700, "delivery.timeout.ms": 10000})
    try:
        p.send(topic, value=b"warm-up").get(10)
        pb.broker.pause()
        try:
            futures = [p.send(topic, value=b"v%04d" % i, key=b"k%d" % (i % 7)) for i in range(2000)]
            # a request sent to the stopped broker timed out and its batch is queued again
            wait_until("a request to timeout", lambda: p.metrics()["retries"] > 0)
            assert not any(f.done() for f in futures), "a record completed while the broker was stopped"
        finally:
            pb.broker.resume()
        p.flush(15)
        for f in futures:
            f.get(0)  # raises if any failed
    finally:
        p.close(5)
    assert_no_sender_threads()
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=2001)
    values = [r.value for r in records]
    assert sorted(values) == sorted([b"warm-up"] + [b"v%04d" % i for i in range(2000)])


@pytest.mark.parametrize("kind", BROKERS)
def test_pause_past_delivery_timeout_fails_every_future_with_a_clear_timeout(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = _topic(pb, "paused-long", partitions=3)
    flush_s = 0.3
    # a flush(flush_s) that ignored its bound would return when the records fail, delivery.timeout.ms
    # after the first send: past flush_s + SLACK_S, even if sending them took SLACK_S
    delivery_ms = int((flush_s + 2 * SLACK_S) * 1000)
    before = set(threading.enumerate())
    p = make_producer(pb.bootstrap_servers, **{"request.timeout.ms": 800, "delivery.timeout.ms": delivery_ms})
    p.send(topic, value=b"warm-up").get(10)
    failed_at = {}
    pb.broker.pause()
    try:
        sent_at = {}
        futures = []
        for i in range(3000):
            sent_at[i] = time.monotonic()
            f = p.send(topic, value=b"x%05d" % i, key=b"k%d" % (i % 11))
            f.add_errback(lambda e, i=i: failed_at.setdefault(i, time.monotonic()))
            futures.append(f)
        # flush() with a bound shorter than the delivery timeout gives up at its own bound
        with pytest.raises(KafkaTimeoutError, match=rf"flush\(\) timed out after {flush_s} s"):
            with within(flush_s + SLACK_S, f"flush({flush_s})"):
                p.flush(flush_s)
        # flush() without a bound returns once every record failed (delivery.timeout.ms)
        with within(delivery_ms / 1000 + SLACK_S, "flush()"):
            p.flush()
        for i, f in enumerate(futures):
            err = f.exception(0)
            assert isinstance(err, KafkaTimeoutError), f"record {i}: {err!r}"
            partition = f._result.partition
            msg = str(err)
            assert f"{topic}-{partition}" in msg, msg
            waited = int(re.search(r"(\d+) ms has passed", msg).group(1))
            assert delivery_ms <= waited <= delivery_ms + SLACK_S * 1000, msg
            assert f"delivery.timeout.ms={delivery_ms}" in msg, msg
            # never before delivery.timeout.ms (counted from its batch's creation, which is at or
            # after the first send), never much after it (counted from the record's own send)
            assert failed_at[i] - sent_at[0] >= delivery_ms / 1000 - 0.02, (i, failed_at[i] - sent_at[0])
            assert failed_at[i] - sent_at[i] <= delivery_ms / 1000 + SLACK_S, (i, failed_at[i] - sent_at[i])
        m = p.metrics()
        assert m["records_failed"] == 3000 and m["records_sent"] == 1
        with within(1.0 + SLACK_S, "close(1.0)"):
            p.close(1.0)
    finally:
        pb.broker.resume()
        p.close(1)
    assert_no_sender_threads()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()], "threads left running"
    # the broker is usable again: a new producer delivers
    with make_producer(pb.bootstrap_servers) as p2:
        p2.send(topic, value=b"after").get(10)
    assert_no_sender_threads()


@pytest.mark.parametrize("kind", BROKERS)
def test_close_with_a_bound_returns_in_time_and_fails_what_is_left(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = _topic(pb, "close-bound")
    # a close() that ignored its bound would wait for request.timeout.ms at least: far past it
    p = make_producer(pb.bootstrap_servers, **{"delivery.timeout.ms": 30000, "request.timeout.ms": 10000})
    p.send(topic, value=b"warm-up").get(10)
    pb.broker.pause()
    try:
        futures = [p.send(topic, value=b"y%d" % i) for i in range(500)]
        with within(0.5 + SLACK_S, "close(0.5)"):
            p.close(0.5)
        assert all(f.done() for f in futures)
        errors = {type(f.exception(0)) for f in futures}
        assert all(issubclass(e, KafkaError) for e in errors), errors
        assert "closed forcefully" in str(futures[0].exception(0))
        with pytest.raises(KafkaError, match="closed"):
            p.send(topic, value=b"late")
    finally:
        pb.broker.resume()
    assert_no_sender_threads()


@pytest.mark.parametrize("kind", BROKERS)
def test_blackholed_broker_fails_get_within_delivery_timeout_never_falsely_succeeds(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = _topic(pb, "blackholed", partitions=1)
    delivery_ms = 1500
    p = make_producer(pb.bootstrap_servers, **{"request.timeout.ms": 600, "delivery.timeout.ms": delivery_ms})
    try:
        p.send(topic, value=b"before").get(10)
        pb.proxy.blackhole(True)
        start = time.monotonic()
        futures = [p.send(topic, value=b"lost-%d" % i) for i in range(50)]
        with pytest.raises(KafkaTimeoutError, match=rf"{topic}-0.*delivery.timeout.ms={delivery_ms}"):
            futures[0].get()  # no timeout given: the producer's own bound must end the wait
        elapsed = time.monotonic() - start
        assert delivery_ms / 1000 - 0.05 <= elapsed <= delivery_ms / 1000 + SLACK_S, elapsed
        for f in futures:
            assert isinstance(f.exception(1), KafkaTimeoutError)
        # a producer started while the path is blackholed cannot even get metadata:
        # send() gives up after max.block.ms and says why (the default, 60 s, is far past the bound)
        with make_producer(pb.bootstrap_servers, **{"max.block.ms": 1000, "request.timeout.ms": 400}) as p2:
            with within(1.0 + SLACK_S, "send() without metadata"):
                with pytest.raises(KafkaTimeoutError, match=r"not present in metadata after 1000 ms"):
                    p2.send(topic, value=b"never")
        pb.proxy.blackhole(False)
        p.send(topic, value=b"after").get(10)  # recovers once the path is back
    finally:
        pb.proxy.blackhole(False)
        p.close(5)
    assert_no_sender_threads()
    values = [r.value for r in consume_all(pb.direct_bootstrap_servers, topic, expected_count=2)]
    assert values == [b"before", b"after"], values  # failed records never reached the broker


@pytest.mark.parametrize("kind", BROKERS)
def test_close_with_nothing_to_deliver_does_not_wait_for_a_hung_broker(proxied_broker, kind):
    """Only records hold close(): an unanswered Metadata or ApiVersions request to a hung broker
    must not (it used to keep close() waiting for socket.connection.setup.timeout.ms/request.timeout.ms)."""
    pb = proxied_broker(kind)
    topic = _topic(pb, "close-idle")
    # nothing to wait for: close() takes 0 + SLACK_S at most; a close() that waited for the
    # request it left unanswered would take these timeouts, far past that
    slow = {"request.timeout.ms": 20000, "socket.connection.setup.timeout.ms": 20000,
            "socket.connection.setup.timeout.max.ms": 30000, "delivery.timeout.ms": 30000}
    assert min(slow.values()) / 1000 > 2 * SLACK_S
    # 1. never connected: the ApiVersions handshake hangs in the blackhole
    pb.proxy.blackhole(True)
    p = make_producer(pb.bootstrap_servers, **slow, **{"max.block.ms": 500})
    with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
        p.send(topic, value=b"never")
    with within(SLACK_S, "close() of an idle producer (blackholed)"):
        p.close()
    pb.proxy.blackhole(False)
    # 2. connected, then the broker hangs with a Metadata request in flight
    p = make_producer(pb.bootstrap_servers, **slow, **{"max.block.ms": 500})
    p.send(topic, value=b"delivered").get(10)
    pb.broker.pause()
    try:
        with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
            p.partitions_for("another-topic")  # its Metadata request stays unanswered
        with within(SLACK_S, "close() of an idle producer (paused broker)"):
            p.close()
    finally:
        pb.broker.resume()
    assert_no_sender_threads()
    assert [r.value for r in consume_all(pb.direct_bootstrap_servers, topic, expected_count=1)] == [b"delivered"]
