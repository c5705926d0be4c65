"""Producers kept across the write tasks of one Python worker (at-least-once writes).

Every write task used to open its connections, fetch metadata, get a producer id and, with
security, run TLS and SASL handshakes -- a cost streaming micro-batches and jobs of many small
tasks pay again and again.  Spark reuses its Python workers (``spark.python.worker.reuse``), so
a task hands its producer back here when it succeeded and the next task with the same producer
configuration takes it, as Spark's JVM sink does with ``spark.kafka.producer.cache.timeout``.

* Keyed by the whole producer configuration: a task never gets a producer configured otherwise.
* One task at a time per producer (a Python worker runs one task at a time anyway), and a task
  still flushes and sees every one of its own records resolved before it commits.
* A producer of a failed task, or one that is not ``healthy`` (closed, fatal error, something
  pending) is closed, never handed out again.
* Idle producers are closed after ``producerCacheTimeoutMs`` (checked whenever a task takes or
  returns one, and at exit).
* Exactly-once producers are never pooled: a transactional id belongs to one task attempt.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sparkkafka_sink.producer.producer import Producer

log = logging.getLogger(__name__)


def _key(config: Mapping[str, Any]) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in config.items()))


class ProducerPool:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._idle: dict[tuple, list[tuple[Producer, float]]] = {}
        self._lock = threading.Lock()
        #: producers made / handed out again (for tests and metrics)
        self.created = 0
        self.reused = 0

    def acquire(self, config: Mapping[str, Any], factory: Callable[[Any], Producer],
                idle_timeout_s: float) -> tuple[Producer, bool]:
        """``(producer, reused)``: an idle healthy producer of this configuration, or a new one."""
        self.expire(idle_timeout_s)
        key = _key(config)
        while True:
            with self._lock:
                idle = self._idle.get(key)
                producer = idle.pop()[0] if idle else None
            if producer is None:
                break
            if producer.healthy:
                self.reused += 1
                return producer, True
            _close(producer)
        self.created += 1
        return factory(config), False

    def release(self, producer: Producer, config: Mapping[str, Any], idle_timeout_s: float) -> None:
        """A task succeeded with ``producer``: keep it for the next task, if it is healthy."""
        if not producer.healthy:
            _close(producer)
            return
        with self._lock:
            self._idle.setdefault(_key(config), []).append((producer, self._clock()))
        self.expire(idle_timeout_s)

    def expire(self, idle_timeout_s: float) -> None:
        """Close producers idle for longer than ``idle_timeout_s``."""
        now = self._clock()
        stale = []
        with self._lock:
            for key, idle in list(self._idle.items()):
                keep = [(p, since) for p, since in idle if now - since <= idle_timeout_s]
                stale += [p for p, since in idle if now - since > idle_timeout_s]
                if keep:
                    self._idle[key] = keep
                else:
                    del self._idle[key]
        for producer in stale:
            _close(producer)

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for producers in idle.values():
            for producer, _ in producers:
                _close(producer)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())


def _close(producer: Producer) -> None:
    try:
        producer.close(5.0)
    except Exception:  # a producer being thrown away
        log.debug("closing a pooled producer failed", exc_info=True)


#: the pool of this Python worker
POOL = ProducerPool()
atexit.register(POOL.close_all)
