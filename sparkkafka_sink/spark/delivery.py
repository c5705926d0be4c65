"""Collect the outcome of every record a write task handed to the producer.

Callbacks run on the producer's Sender thread (or inline when a future is
already done), so they only append to ``collections.deque`` objects, whose
``append`` and ``popleft`` are atomic; the task thread folds them into per
topic-partition counts and offsets in ``drain()``.  The per-row success
callback is ``deque.append`` itself: no Python frame per delivered record.
Bulk sends report once per ``send_batch`` call, with the failed rows' indices.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from functools import partial


@dataclass
class Failure:
    """Records that did not make it, with where the first of them came from."""

    row: int  # position within the task's input (0-based)
    topic: str | None
    partition: int | None
    error: BaseException
    count: int = 1

    def where(self) -> str:
        part = ("partition chosen by the partitioner" if self.partition is None
                else f"partition {self.partition}")
        return f"row {self.row} of this task's input, topic {self.topic!r}, {part}"


class DeliveryTracker:
    """Counts records handed over vs. resolved, and keeps the first (lowest row) failure."""

    def __init__(self):
        self._delivered: deque = deque()
        self._failed: deque = deque()
        self._bulk_done: deque = deque()
        self.on_success = self._delivered.append  # add_callback(fn) -> fn(RecordMetadata)
        self.sent = 0  # records handed to the producer
        self.delivered = 0
        self.failed = 0  # includes the rejected ones
        self.rejected = 0  # send() raised: never handed over
        self.first_failure: Failure | None = None
        # (topic, partition) -> [count, first_offset, last_offset]
        self.offsets: dict = {}

    # -- per-row futures -------------------------------------------------------------------
    def errback(self, row: int, topic, partition):
        """The errback for one record: remembers its position for the error message."""
        return partial(self._on_error, row, topic, partition)

    def _on_error(self, row, topic, partition, exc):
        self._failed.append(Failure(row, topic, partition, exc))

    def fail_now(self, row: int, topic, partition, exc: BaseException, count: int = 1) -> None:
        """``count`` records rejected before they were handed over (``send()`` raised)."""
        self.rejected += count
        self._record_failure(Failure(row, topic, partition, exc, count))

    # -- bulk futures ----------------------------------------------------------------------
    def track_bulk(self, future, topic: str, row_offset: int, row_map=None) -> None:
        """A ``send_batch`` future; ``row_map`` maps its rows to positions in the Arrow batch."""
        self.sent += future.record_count
        future.add_callback(partial(self._on_bulk_done, (future, topic, row_offset, row_map)))

    def _on_bulk_done(self, entry, _result, _error):
        self._bulk_done.append(entry)

    def _fold_bulk(self, entry) -> None:
        future, topic, row_offset, row_map = entry
        errors = future.errors()
        failed = 0
        for exc, partition, rows in errors:
            first = int(rows.min())
            row = row_offset + (first if row_map is None else int(row_map[first]))
            self._record_failure(Failure(row, topic, partition, exc, len(rows)))
            failed += len(rows)
        self.delivered += future.record_count - failed
        if errors:
            return
        for partition, (count, first, last) in future.get(0).partitions.items():
            self._add_offsets((topic, partition), count, first, last)

    # -- bookkeeping (task thread only) ----------------------------------------------------
    def _record_failure(self, f: Failure) -> None:
        self.failed += f.count
        if self.first_failure is None or f.row < self.first_failure.row:
            self.first_failure = f

    def _add_offsets(self, tp, count, first, last) -> None:
        s = self.offsets.get(tp)
        if s is None:
            self.offsets[tp] = [count, first, last]
        else:
            s[0] += count
            s[1] = min(s[1], first)
            s[2] = max(s[2], last)

    def drain(self) -> None:
        """Fold the callbacks' results so far into counts and offsets."""
        pop = self._delivered.popleft
        offsets = self.offsets
        n = 0
        try:
            while True:
                md = pop()
                n += 1
                tp = (md.topic, md.partition)
                s = offsets.get(tp)
                if s is None:
                    offsets[tp] = [1, md.offset, md.offset]
                else:
                    s[0] += 1
                    if md.offset < s[1]:
                        s[1] = md.offset
                    if md.offset > s[2]:
                        s[2] = md.offset
        except IndexError:
            pass
        self.delivered += n
        for queue, fold in ((self._failed, self._record_failure), (self._bulk_done, self._fold_bulk)):
            try:
                while True:
                    fold(queue.popleft())
            except IndexError:
                pass

    @property
    def pending(self) -> int:
        """Records handed over whose outcome has not been drained yet."""
        return self.sent - self.delivered - (self.failed - self.rejected)

    def wait_all(self, timeout_s: float) -> bool:
        """After ``flush()``: wait until every callback ran; False on timeout."""
        deadline = time.monotonic() + timeout_s
        self.drain()
        while self.pending > 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
            self.drain()
        return True
