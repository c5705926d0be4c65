"""Produce futures: one result object per batch, one light future per record.

As in the Java client, a batch's :class:`ProduceRequestResult` is completed
once by the Sender; each record's :class:`FutureRecordMetadata` only keeps the
record's position in that batch, so completing a batch of thousands of
records is O(callbacks), not O(records).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

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
    """Completion of one batch: base offset, log append time, or the error.

    A batch the broker found too large is split (``split``): its result then completes once
    every piece did, and a record's offset and error are its own piece's (``resolve``).

    As in the Java client, the callbacks run before the waiters wake: once ``get()``,
    ``exception()`` or ``flush()`` returns, every callback of the record has run (an errback
    counting failures is complete when ``flush()`` returns).  ``is_done()`` is true from the
    moment the outcome is known, so the callbacks themselves see their batch as done."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "_event", "_callbacks", "_lock",
                 "pieces", "_completer")

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        #: made by the first ``wait`` before completion: most batches are never waited on one
        #: by one (a bulk send waits through callbacks), and an Event per batch cost the bulk
        #: path more than the rest of a batch's bookkeeping
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[ProduceRequestResult], Any]] | None = []
        self._lock = threading.Lock()
        #: after a split: ``[(first record index, count, piece's result)]`` in record order
        self.pieces: list[tuple[int, int, ProduceRequestResult]] | None = None
        #: the thread running the callbacks while they run (its waits on this result return at
        #: once: a callback waiting for its own record would otherwise wait for itself)
        self._completer: int | None = None

    def done(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        with self._lock:
            if self._completer is not None or self._callbacks is None:
                return  # completed already: the first outcome wins
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self._completer = threading.get_ident()
        while True:  # a callback may add another: it runs here too, before the waiters wake
            with self._lock:
                callbacks = self._callbacks
                if not callbacks:
                    self._callbacks = None
                    self._completer = None
                    if self._event is not None:
                        self._event.set()
                    return
                self._callbacks = []
            for cb in callbacks:
                try:
                    cb(self)
                except Exception:  # a user's callback must not kill the Sender thread
                    log.exception("produce callback raised")

    def is_done(self) -> bool:
        """The outcome is known (its callbacks may still be running)."""
        return self._callbacks is None or self._completer is not None

    def split(self, pieces: list[tuple[int, int, ProduceRequestResult]]) -> None:
        """The batch was split into ``pieces``: complete when all are, with the first error."""
        self.pieces = pieces
        remaining = [len(pieces)]
        lock = threading.Lock()

        def piece_done(_: ProduceRequestResult) -> None:
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            failed = [r.error for _, _, r in pieces if r.error is not None]
            first = pieces[0][2]
            self.done(first.base_offset, first.log_append_time, failed[0] if failed else None)

        for _, _, result in pieces:
            result.add_callback(piece_done)

    def resolve(self, index: int) -> tuple[ProduceRequestResult, int]:
        """The result that holds record ``index`` of this batch, and its index there."""
        result = self
        while result.pieces is not None:
            for start, count, piece in result.pieces:
                if start <= index < start + count:
                    result, index = piece, index - start
                    break
            else:
                raise IndexError(index)
        return result, index

    def offset_of(self, index: int) -> int:
        """Offset of record ``index`` (-1 when unknown: acks=0, failed, or not stored twice)."""
        result, index = self.resolve(index)
        return result.base_offset + index if result.base_offset >= 0 else -1

    def landed(self, count: int, first: int = 0) -> list[tuple[int, int, int]]:
        """``(records, first offset, last offset)`` of the records ``first..first+count`` of this
        batch that were written (all, one range, unless it was split and a piece failed)."""
        if self.pieces is None:
            if self.error is not None or count <= 0:
                return []
            if self.base_offset < 0:
                return [(count, -1, -1)]
            return [(count, self.base_offset + first, self.base_offset + first + count - 1)]
        return [r for start, c, piece in self.pieces for lo, n in _overlap(start, c, first, count)
                for r in piece.landed(n, lo - start)]

    def failed_pieces(self, count: int, first: int = 0) -> list[tuple[BaseException, int, int]]:
        """``(error, index, count)`` of the failed records among ``first..first+count`` of this
        batch, indices counted from ``first``."""
        if self.pieces is None:
            return [(self.error, 0, count)] if self.error is not None and count > 0 else []
        return [(e, lo - first + s, n2) for start, c, piece in self.pieces for lo, n in _overlap(start, c, first, count)
                for e, s, n2 in piece.failed_pieces(n, lo - start)]

    def wait(self, timeout: float | None = None) -> bool:
        """Until the outcome is known and every callback ran (at once from a callback)."""
        with self._lock:
            if self._callbacks is None or self._completer == threading.get_ident():
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def add_callback(self, cb: Callable[[ProduceRequestResult], Any]) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(cb)
                return
        cb(self)


def _overlap(start: int, count: int, first: int, wanted: int) -> list[tuple[int, int]]:
    """``[(index, count)]`` of the records ``start..start+count`` among ``first..first+wanted``."""
    lo, hi = max(start, first), min(start + count, first + wanted)
    return [(lo, hi - lo)] if hi > lo else []


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
        r, index = self._result.resolve(self._relative_offset)
        offset = r.base_offset + index if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self._timestamp
        return RecordMetadata(r.topic, r.partition, offset, ts, self._key_size, self._value_size)

    def _error(self) -> BaseException | None:
        """This record's own error (its piece's, when the batch was split)."""
        return self._result.resolve(self._relative_offset)[0].error

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is acknowledged; raise its error if it failed."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(
                f"Record for {self._result.topic}-{self._result.partition} was not acknowledged "
                f"within {timeout} s of waiting in get() (it is still pending)"
            )
        error = self._error()
        if error is not None:
            raise error
        return self._metadata()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"Record for {self._result.topic}-{self._result.partition} still pending")
        return self._error()

    def succeeded(self) -> bool:
        return self.done() and self._error() is None

    def failed(self) -> bool:
        return self.done() and self._error() is not None

    def add_callback(self, fn: Callable[[RecordMetadata], object]) -> FutureRecordMetadata:
        """``fn(metadata)`` runs (on the Sender thread) when the record succeeds."""
        self._result.add_callback(lambda r: fn(self._metadata()) if self._error() is None else None)
        return self

    def add_errback(self, fn: Callable[[BaseException], object]) -> FutureRecordMetadata:
        """``fn(exception)`` runs (on the Sender thread) when the record fails."""
        def failed(_: ProduceRequestResult) -> None:
            error = self._error()
            if error is not None:
                fn(error)

        self._result.add_callback(failed)
        return self

    def add_both(self, fn: Callable[[RecordMetadata | None, BaseException | None], object]) -> FutureRecordMetadata:
        self._result.add_callback(
            lambda r: fn(None, self._error()) if self._error() is not None else fn(self._metadata(), None))
        return self
