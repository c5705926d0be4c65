"""The producer pool of a Python worker, without Spark but with real producers: reuse by
configuration, never a failed or unhealthy producer (``Producer.healthy``), idle expiry."""

from __future__ import annotations

from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.task.producer_pool import ProducerPool


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_reuse_by_configuration_and_idle_expiry(kafka):
    clock = Clock()
    pool = ProducerPool(clock)
    x = {"bootstrap.servers": kafka.bootstrap_servers, "client.id": "x"}
    y = {"bootstrap.servers": kafka.bootstrap_servers, "client.id": "y"}
    a, reused = pool.acquire(x, Producer, 60)
    assert not reused
    pool.release(a, x, 60)
    other, reused = pool.acquire(y, Producer, 60)  # another configuration
    assert not reused and other is not a
    again, reused = pool.acquire(x, Producer, 60)
    assert reused and again is a and len(pool) == 0
    pool.release(again, x, 60)
    clock.now = 61
    fresh, reused = pool.acquire(x, Producer, 60)
    assert not reused and a.closed  # idle too long: closed, not handed out
    assert (pool.created, pool.reused) == (3, 1)
    for p in (other, fresh):
        p.close(5)


def test_unhealthy_producers_are_closed_not_pooled(kafka):
    pool = ProducerPool(Clock())
    config = {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 600_000}
    p, _ = pool.acquire(config, Producer, 60)
    p.send(kafka.create_topic(), b"pending")  # lingering: something pending, not fit to be handed on
    assert not p.healthy
    pool.release(p, config, 60)
    assert p.closed and len(pool) == 0
    q, _ = pool.acquire(config, Producer, 60)
    pool.release(q, config, 60)
    q.close(5)  # went bad while idle (closed, as a fatal error or a fencing would leave it)
    r, reused = pool.acquire(config, Producer, 60)
    assert not reused and r is not q
    r.close(5)
    pool.close_all()


def test_cache_timeout_option():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_options(base).producer_cache_timeout_ms == 600_000
    assert parse_options({**base, "producerCacheTimeoutMs": "0"}).producer_cache_timeout_ms == 0
