"""BufferPool: the bound on memory held by records waiting to be sent.

Batches reserve their size here when they are created and give it back when
they complete, so ``buffer.memory`` caps what a fast ``send()`` loop can pile
up in front of a slow broker.  Waiters are served first come, first served
(as the Java client does) so one large record cannot starve behind a stream
of small ones.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from sparkkafka_sink.errors import BufferExhaustedError, KafkaError, Message, RecordTooLargeError, Setting


class BufferPool:
    def __init__(self, total_memory: int, on_wait: Callable[[float], None] | None = None):
        self.total_memory = total_memory
        #: told how long (ms) a caller waited for memory, each time one had to
        self._on_wait = on_wait
        self._available = total_memory
        self._lock = threading.Lock()
        self._waiters: deque[threading.Condition] = deque()
        self._closed = False

    @property
    def available_memory(self) -> int:
        return self._available

    @property
    def queued(self) -> int:
        """How many threads are blocked waiting for memory."""
        return len(self._waiters)

    def allocate(self, size: int, max_time_ms: float) -> None:
        """Reserve ``size`` bytes, waiting up to ``max_time_ms`` for them."""
        if size > self.total_memory:
            raise RecordTooLargeError(Message("Attempt to allocate {} bytes, but {} is only {} bytes", size,
                                              Setting("buffer.memory"), self.total_memory))
        with self._lock:
            if self._closed:
                raise KafkaError("Producer closed while allocating memory")
            if not self._waiters and self._available >= size:
                self._available -= size
                return
            cond = threading.Condition(self._lock)
            self._waiters.append(cond)
            started = time.monotonic()
            deadline = started + max_time_ms / 1000.0
            try:
                while True:
                    if self._closed:
                        raise KafkaError("Producer closed while allocating memory")
                    if self._waiters[0] is cond and self._available >= size:
                        self._available -= size
                        return
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        memory, block = Setting("buffer.memory"), Setting("max.block.ms")
                        raise BufferExhaustedError(Message(
                            "Failed to allocate {} bytes within the configured max blocking time {:.0f} ms ({}). "
                            "Total memory: {} bytes ({}). Available memory: {} bytes. The broker is not keeping up "
                            "with send(): raise {} or {}, or slow down.", size, max_time_ms, block,
                            self.total_memory, memory, self._available, memory, block))
                    cond.wait(remaining)
            finally:
                self._waiters.remove(cond)
                if self._waiters:
                    self._waiters[0].notify()
                if self._on_wait is not None:
                    self._on_wait((time.monotonic() - started) * 1000)

    def take(self, size: int) -> None:
        """Reserve ``size`` bytes now, even past the limit (a bound that fell short: the memory
        is already in use); later allocations wait until it is given back."""
        with self._lock:
            self._available -= size

    def deallocate(self, size: int) -> None:
        with self._lock:
            self._available += size
            if self._waiters:
                self._waiters[0].notify()

    def close(self) -> None:
        """Wake every waiter so a closing producer does not leave threads blocked."""
        with self._lock:
            self._closed = True
            for cond in self._waiters:
                cond.notify()
