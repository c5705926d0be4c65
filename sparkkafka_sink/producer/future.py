"""Produce futures: one result object per batch, one light future per record.

As in the Java client, a batch's :class:`ProduceRequestResult` is completed
once by the Sender; each record's :class:`FutureRecordMetadata` only keeps the
record's position in that batch, so completing a batch of thousands of
records is O(callbacks), not O(records).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, NamedTuple

from sparkkafka_sink.errors import KafkaTimeoutError

log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """Where a record landed.  ``offset`` is -1 when the broker did not tell (acks=0,
    or a duplicate the broker recognised without returning its offset)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class ProduceRequestResult:
    """Completion of one batch: base offset, log append time, or the error."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "_event", "_callbacks", "_lock")

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._callbacks: list[Callable[["ProduceRequestResult"], Any]] | None = []
        self._lock = threading.Lock()

    def done(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self._callbacks is None:
                return  # completed already: the first outcome wins
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            callbacks, self._callbacks = self._callbacks, None
            self._event.set()
        for cb in callbacks:
            try:
                cb(self)
            except Exception:  # a user's callback must not kill the Sender thread
                log.exception("produce callback raised")

    def is_done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def add_callback(self, cb: Callable[["ProduceRequestResult"], Any]) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(cb)
                return
        cb(self)


class FutureRecordMetadata:
    """The future ``Producer.send()`` returns."""

    __slots__ = ("_result", "_relative_offset", "_timestamp", "_key_size", "_value_size")

    def __init__(self, result: ProduceRequestResult, relative_offset: int, timestamp: int,
                 key_size: int, value_size: int):
        self._result = result
        self._relative_offset = relative_offset
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._result.is_done()

    def _metadata(self) -> RecordMetadata:
        r = self._result
        offset = r.base_offset + self._relative_offset if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(r.topic, r.partition, offset, ts, self._key_size, self._value_size)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is acknowledged; raise its error if it failed."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(
                f"Record for {self._result.topic}-{self._result.partition} was not acknowledged "
                f"within {timeout} s of waiting in get() (it is still pending)"
            )
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"Record for {self._result.topic}-{self._result.partition} still pending")
        return self._result.error

    def succeeded(self) -> bool:
        return self.done() and self._result.error is None

    def failed(self) -> bool:
        return self.done() and self._result.error is not None

    def add_callback(self, fn: Callable[[RecordMetadata], Any]) -> "FutureRecordMetadata":
        """``fn(metadata)`` runs (on the Sender thread) when the record succeeds."""
        self._result.add_callback(lambda r: fn(self._metadata()) if r.error is None else None)
        return self

    def add_errback(self, fn: Callable[[BaseException], Any]) -> "FutureRecordMetadata":
        """``fn(exception)`` runs (on the Sender thread) when the record fails."""
        self._result.add_callback(lambda r: fn(r.error) if r.error is not None else None)
        return self

    def add_both(self, fn: Callable[[RecordMetadata | None, BaseException | None], Any]) -> "FutureRecordMetadata":
        self._result.add_callback(
            lambda r: fn(None, r.error) if r.error is not None else fn(self._metadata(), None))
        return self
