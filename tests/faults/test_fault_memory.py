"""Scenario 7: buffer.memory exhausted in front of a slow or stopped broker.

``send()`` blocks for buffer memory up to max.block.ms, then raises BufferExhaustedError naming
both settings; memory freed by acknowledged batches unblocks it; and the producer's memory
stays bounded by buffer.memory plus a constant however much is pushed through it (peak RSS of a
subprocess that sends 200 MB through an 8 MB buffer to a broker slowed by proxy latency).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import BulkSendError
from sparkkafka_sink.errors import BufferExhaustedError, KafkaTimeoutError
from sparkkafka_sink.testing.waiting import wait_until

from .helpers import BROKERS, SLACK_S, assert_no_sender_threads, fresh_topic, make_producer


@pytest.mark.parametrize("kind", BROKERS)
def test_send_blocks_max_block_ms_then_raises_buffer_exhausted(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = "buffer-full"
    topic = fresh_topic(pb, topic, 2)
    # long enough that a send() which did not wait for memory (done within SLACK_S) and one that
    # waited max.block.ms (then raised) cannot be mistaken for each other
    buffer_memory, max_block_ms = 256 * 1024, int(2 * SLACK_S * 1000)
    p = make_producer(pb.bootstrap_servers, **{
        "buffer.memory": buffer_memory, "batch.size": 16384, "max.block.ms": max_block_ms,
        "delivery.timeout.ms": 30000, "request.timeout.ms": 20000})
    try:
        p.send(topic, value=b"warm-up").get(10)
        pb.broker.pause()
        accepted = []
        value = b"v" * 1000
        error = None
        for i in range(10_000):
            start = time.monotonic()
            try:
                accepted.append(p.send(topic, value=value, key=b"%05d" % i))
            except BufferExhaustedError as e:
                error, blocked = e, time.monotonic() - start
                break
            # a send that waits for memory waits max.block.ms (nothing frees any while the broker
            # is stopped) and raises: one that returned waited for nothing
            took = time.monotonic() - start
            assert took <= max_block_ms / 1000 - SLACK_S, f"send() blocked {took:.2f} s while memory was free"
        assert error is not None, "buffer.memory never ran out"
        assert isinstance(error, KafkaTimeoutError)
        assert max_block_ms / 1000 - 0.02 <= blocked <= max_block_ms / 1000 + SLACK_S, blocked
        msg = str(error)
        assert "buffer.memory" in msg and "max.block.ms" in msg and str(buffer_memory) in msg, msg
        assert len(accepted) * len(value) <= buffer_memory, "more was buffered than buffer.memory"
        assert len(accepted) * len(value) >= buffer_memory // 2
        assert not any(f.done() for f in accepted)
    finally:
        pb.broker.resume()
    p.flush(20)
    for f in accepted:
        f.get(0)
    p.close(5)
    assert_no_sender_threads()
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=len(accepted) + 1)
    assert len(records) == len(accepted) + 1  # the rejected record was never queued


@pytest.mark.parametrize("kind", BROKERS)
def test_blocked_send_resumes_when_the_broker_frees_memory(proxied_broker, kind):
    pb = proxied_broker(kind)
    topic = "buffer-unblocks"
    topic = fresh_topic(pb, topic, 1)
    p = make_producer(pb.bootstrap_servers, **{
        "buffer.memory": 64 * 1024, "batch.size": 16384, "max.block.ms": 8000,
        "delivery.timeout.ms": 30000, "request.timeout.ms": 20000})
    try:
        p.send(topic, value=b"warm-up").get(10)
        pb.broker.pause()
        blocked = []

        def resume_once_a_send_waits_for_memory():
            wait_until("send() to block on memory", lambda: p._pool.queued > 0)
            blocked.append(True)
            pb.broker.resume()

        resumer = threading.Thread(target=resume_once_a_send_waits_for_memory, daemon=True)
        resumer.start()
        futures = [p.send(topic, value=b"w" * 1000) for _ in range(400)]  # 400 KB through 64 KB
        resumer.join(10)
        assert blocked, "send() never waited for memory"
        p.flush(10)
        for f in futures:
            f.get(0)
    finally:
        if pb.broker.paused:
            pb.broker.resume()
        p.close(5)
    assert len(consume_all(pb.direct_bootstrap_servers, topic, expected_count=401)) == 401


@pytest.mark.parametrize("kind", BROKERS)
def test_send_batch_out_of_memory_part_way_raises_the_producers_error_and_loses_nothing(proxied_broker, kind):
    """A bulk call larger than buffer.memory in front of a paused broker: the ranges queued before
    memory ran out travel on under ``partial``, the rest are named, and the error is the
    producer's own (what ran out, for how long) -- not a NameError, as a stale local once made it."""
    pb = proxied_broker(kind)
    topic = fresh_topic(pb, "bulk-out-of-memory", 3)
    buffer_memory, max_block_ms = 1 << 20, 1000
    p = make_producer(pb.bootstrap_servers, **{
        "buffer.memory": buffer_memory, "max.block.ms": max_block_ms, "batch.size": 65536,
        "delivery.timeout.ms": 60000, "request.timeout.ms": 30000})
    values = [b"%06d" % i + b"v" * 1018 for i in range(20_000)]  # 20 MB of 1 KB rows through 1 MiB
    try:
        p.send(topic, value=b"warm-up").get(10)
        pb.broker.pause()
        with pytest.raises(BulkSendError) as raised:
            p.send_batch(topic, values=values)
        error = raised.value
        assert isinstance(error.error, BufferExhaustedError), repr(error.error)
        assert error.__cause__ is error.error and error.row is None  # about the call, not a row
        text = str(error)
        assert "buffer.memory" in text and "max.block.ms" in text and str(buffer_memory) in text, text
        queued = error.first_row_not_sent
        assert 0 < queued < len(values), "memory ran out before the first range or never"
        assert error.rows_not_sent.tolist() == list(range(queued, len(values)))
        assert error.partial is not None and error.partial.record_count == queued
        assert not error.partial.done()  # the broker is still paused
    finally:
        pb.broker.resume()
    result = error.partial.get(30)  # every range queued before the error lands once the broker answers
    assert result.record_count == queued
    p.close(10)
    assert_no_sender_threads()
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=queued + 1)
    assert sorted(r.value for r in records if r.value != b"warm-up") == values[:queued]


_RSS_CHILD = textwrap.dedent("""
    import json, os, resource, sys
    from sparkkafka_sink import Producer
    bootstrap, topic, total, buffer_memory = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    value = os.urandom(10_000)
    p = Producer({"bootstrap.servers": bootstrap, "buffer.memory": buffer_memory, "batch.size": 65536,
                  "linger.ms": 5, "max.block.ms": 60000, "delivery.timeout.ms": 120000,
                  "request.timeout.ms": 30000})
    p.send(topic, value=b"warm-up").get(30)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = total // len(value)
    min_available = buffer_memory
    failures = []
    for i in range(n):
        f = p.send(topic, value=value, key=b"%d" % (i % 16))
        if i % 50 == 0:
            f.add_errback(failures.append)
            min_available = min(min_available, p.metrics()["buffer_available_bytes"])
    p.flush(120)
    m = p.metrics()
    p.close(10)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"base_kb": base, "peak_kb": peak, "records": n, "min_available": min_available,
                      "records_sent": m["records_sent"], "records_failed": m["records_failed"],
                      "failures": [repr(e) for e in failures[:3]]}))
""")


def test_peak_rss_stays_bounded_by_buffer_memory(proxied_broker):
    pb = proxied_broker("tansu")
    topic = "rss-bound"
    topic = fresh_topic(pb, topic, 4)
    total, buffer_memory, slack = 200 * 1000 * 1000, 8 * 1024 * 1024, 24 * 1024 * 1024
    pb.proxy.latency(3)  # the broker answers more slowly than send() produces
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, pb.bootstrap_servers, topic, str(total),
                          str(buffer_memory)], capture_output=True, text=True, timeout=120)
    pb.proxy.latency(0)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["records_failed"] == 0 and not r["failures"], r
    assert r["records_sent"] == r["records"] + 1
    assert r["min_available"] <= 2 * 65536, f"the buffer never filled up: {r}"
    grown = (r["peak_kb"] - r["base_kb"]) * 1024
    assert grown <= buffer_memory + slack, (
        f"peak RSS grew by {grown / 2**20:.1f} MB while sending {total / 1e6:.0f} MB through "
        f"buffer.memory={buffer_memory / 2**20:.0f} MB (allowed {(buffer_memory + slack) / 2**20:.0f} MB)")
    records = consume_all(pb.direct_bootstrap_servers, topic, expected_count=r["records"] + 1, timeout=90)
    assert len(records) == r["records"] + 1
    assert sum(len(x.value) for x in records) == total // 10_000 * 10_000 + len(b"warm-up")
