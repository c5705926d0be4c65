"""The producer pool of a Python worker, without Spark: reuse by configuration, never a failed or
unhealthy producer, idle expiry."""

from __future__ import annotations

from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.task.producer_pool import ProducerPool


class FakeProducer:
    def __init__(self, config):
        self.config = config
        self.healthy = True
        self.closed = False

    def close(self, timeout=None):
        self.closed = True
        self.healthy = False


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_reuse_by_configuration_and_idle_expiry():
    clock = Clock()
    pool = ProducerPool(clock)
    a, reused = pool.acquire({"bootstrap.servers": "x"}, FakeProducer, 60)
    assert not reused
    pool.release(a, {"bootstrap.servers": "x"}, 60)
    other, reused = pool.acquire({"bootstrap.servers": "y"}, FakeProducer, 60)  # another configuration
    assert not reused and other is not a
    again, reused = pool.acquire({"bootstrap.servers": "x"}, FakeProducer, 60)
    assert reused and again is a and len(pool) == 0
    pool.release(again, {"bootstrap.servers": "x"}, 60)
    clock.now = 61
    fresh, reused = pool.acquire({"bootstrap.servers": "x"}, FakeProducer, 60)
    assert not reused and a.closed  # idle too long: closed, not handed out
    assert (pool.created, pool.reused) == (3, 1)


def test_unhealthy_producers_are_closed_not_pooled():
    pool = ProducerPool(Clock())
    p, _ = pool.acquire({}, FakeProducer, 60)
    p.healthy = False  # failed, fenced, or something pending
    pool.release(p, {}, 60)
    assert p.closed and len(pool) == 0
    q, _ = pool.acquire({}, FakeProducer, 60)
    pool.release(q, {}, 60)
    q.healthy = False  # went bad while idle (its broker refused it, say)
    r, reused = pool.acquire({}, FakeProducer, 60)
    assert not reused and r is not q and q.closed
    pool.close_all()


def test_cache_timeout_option():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_options(base).producer_cache_timeout_ms == 600_000
    assert parse_options({**base, "producerCacheTimeoutMs": "0"}).producer_cache_timeout_ms == 0
