"""Collect the outcome of every record a write task handed to the producer: its rows' and, under
``errors.tolerance=all``, the dead-letter records of its bad rows (one tracker follows both, so a
row's way ends here).

Each ``send_batch`` call reports once, with the failed rows' indices.  Callbacks run on the
producer's Sender thread (or inline when a future is already done), so they only append to a
``collections.deque``, whose ``append`` and ``popleft`` are atomic, and wake the task thread
waiting in ``wait_all``; the task thread folds the results into per topic-partition counts and
offsets in ``drain()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.producer.bulk import BulkFuture
from sparkkafka_sink.producer.offset_ranges import merge_range
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.spark.errors import in_option_names
from sparkkafka_sink.spark.task.dead_letters import DeadLetters, is_bad_row
from sparkkafka_sink.spark.task.part import Part


@dataclass
class Failure:
    """Records that did not make it, with where the first of them came from."""

    row: int  # position within the task's input (0-based)
    topic: str | None
    partition: int | None
    error: BaseException
    count: int = 1
    #: a dead-letter record of the bad row ``row`` failed (not the row's own write)
    dead_letter: bool = False

    def where(self) -> str:
        part = ("partition chosen by the partitioner" if self.partition is None
                else f"partition {self.partition}")
        return f"row {self.row} of this task's input, topic {self.topic!r}, {part}"


@dataclass(frozen=True, slots=True)
class RowsSent:
    """A ``send_batch`` call of the task's rows: its future, its topic, the task's rows its records
    came from (the call's row ``i`` is ``task_rows[i]``) and, under tolerance, the part their
    contents are read from for the dead letters (None: not kept)."""

    future: BulkFuture
    topic: str
    task_rows: np.ndarray
    source: Part | None


@dataclass(frozen=True, slots=True)
class DeadLettersSent:
    """A ``send_batch`` call of dead-letter records: each must land (a dead letter is never
    dead-lettered); ``task_rows``: the bad row each stands for, which a failure names."""

    future: BulkFuture
    topic: str
    task_rows: np.ndarray


#: a send whose every batch completed, as the Sender's callback hands it to the task thread
CompletedSend = RowsSent | DeadLettersSent


class DeliveryTracker:
    """Counts records handed over vs. resolved, and keeps the first (lowest row) failure.

    With ``dead_letters`` (errors.tolerance=all) records the broker refused for good are handed
    there (with their contents, read from the Arrow batch they came from) instead of failing --
    except in a ``transactional`` task: Kafka never commits a transaction one of whose batches
    was refused, so such a record fails the task, saying how to have it refused before sending."""

    def __init__(self, dead_letters: DeadLetters | None = None, transactional: bool = False):
        self._bulk_done: deque[CompletedSend] = deque()
        self._arrived = threading.Event()  # set by each callback: wait_all looks again
        self.dead_letters = dead_letters
        self.transactional = transactional
        self.sent = 0  # records handed to the producer (dead letters included)
        self.delivered = 0  # the task's rows written
        self.dead_lettered = 0  # dead-letter records written
        self.failed = 0  # includes the rejected ones
        self.rejected = 0  # send_batch() refused them: never handed over
        self.tolerated = 0  # handed over, refused by the broker as bad rows, handed to dead_letters
        self.first_failure: Failure | None = None
        # (topic, partition) -> [count, first_offset, last_offset]
        self.offsets: dict = {}

    def fail_now(self, row: int, topic: str | None, partition: int | None, exc: BaseException, count: int = 1) -> None:
        """``count`` records rejected before they were handed over (``send_batch()`` raised)."""
        self.rejected += count
        self._record_failure(Failure(row, topic, partition, exc, count))

    @property
    def tolerant(self) -> bool:
        """Bad rows go to the dead letters (errors.tolerance=all) rather than failing the task."""
        return self.dead_letters is not None

    def refuse(self, part: Part, refused: Refused, stage: str, topic: str | None) -> bool:
        """Rows of ``part`` a check refused before any was handed over: under tolerance they go to
        the dead letters and the rest goes on (True); otherwise the first fails the task with
        every row of the part, none of which is sent (False)."""
        if not refused:
            return True
        if self.dead_letters is None:
            row, error, partition = next(iter(refused))
            self.fail_now(part.task_row(row), topic, partition, error, count=part.num_rows)
            return False
        self.dead_letters.reject_refused(part, refused, stage, topic)
        return True

    def refuse_call(self, part: Part, error: KafkaError, topic: str) -> None:
        """A call refused as a whole, nothing of ``part`` queued: under tolerance, a refusal that
        condemns every row (a topic not authorized) sends them all to the dead letters; anything
        else fails the task."""
        if self.dead_letters is not None and is_bad_row(error):
            self.dead_letters.reject_rows(part, np.arange(part.num_rows), error, "producer", topic)
        else:
            self.fail_now(part.task_row(0), topic, None, error, count=part.num_rows)

    # -- bulk futures ----------------------------------------------------------------------
    def track_bulk(self, future: BulkFuture, topic: str, sent: Part) -> None:
        """A ``send_batch`` future of the rows of ``sent`` (the part is kept until it resolves only
        when bad rows are dead-lettered: their contents are read from it)."""
        self.sent += future.record_count
        source = sent if self.dead_letters is not None else None
        future.add_callback(partial(self._on_bulk_done, RowsSent(future, topic, sent.rows, source)))

    def send_dead_letters(self, producer: Producer) -> int:
        """Send the dead-letter records of the bad rows found so far, and follow them (each must
        land, or the task fails); how many."""
        outgoing = self.dead_letters.outgoing() if self.dead_letters is not None else None
        if outgoing is None:
            return 0
        topic, records, rows = outgoing
        future = producer.send_batch(topic, values=[v for _, v, _ in records], keys=[k for k, _, _ in records],
                                     headers=[h for _, _, h in records])
        self.sent += future.record_count
        # a failure names the bad row by its place in the task's input, as every task failure does
        future.add_callback(partial(self._on_bulk_done, DeadLettersSent(future, topic, rows)))
        return len(records)

    def send_dead_letters_until_none(self, producer: Producer, flush: Callable[[], None]) -> None:
        """After a flush: the dead letters of the bad rows the brokers refused in it, flushed in
        turn (``flush``: the producer's flush, then :meth:`wait_all`), until none is left or a
        record failed."""
        while not self.failed and self.send_dead_letters(producer):
            flush()

    def _on_bulk_done(self, done: CompletedSend, _result: object, _error: object) -> None:
        self._bulk_done.append(done)
        self._arrived.set()

    def _fold(self, done: CompletedSend) -> None:
        if isinstance(done, DeadLettersSent):
            self._fold_dead_letters(done)
        else:
            self._fold_rows(done)

    def _fold_dead_letters(self, done: DeadLettersSent) -> None:
        """A dead letter is never dead-lettered: its failure fails the task, naming its bad row."""
        failed = 0
        for exc, partition, rows in done.future.errors():
            failed += len(rows)
            self._record_failure(Failure(int(done.task_rows[int(rows.min())]), done.topic, partition, exc, len(rows),
                                         dead_letter=True))
        self.dead_lettered += done.future.record_count - failed

    def _fold_rows(self, done: RowsSent) -> None:
        future, topic, task_rows, source = done.future, done.topic, done.task_rows, done.source
        failed = 0
        for exc, partition, rows in future.errors():
            failed += len(rows)
            if self.dead_letters is not None and is_bad_row(exc) and self.transactional:
                exc = KafkaError(
                    f"{in_option_names(exc)} -- under exactly-once a record the broker refuses after it was sent "
                    "cannot be dead-lettered: Kafka does not commit a transaction with a refused batch"
                    + (" (keep kafka.max.request.size at most the topic's max.message.bytes: a larger record is "
                       "then refused before sending, and dead-lettered)"
                       if getattr(exc, "too_large", False) else ""))
            elif self.dead_letters is not None and source is not None and is_bad_row(exc):
                self.tolerated += len(rows)
                self.dead_letters.reject_rows(source, rows, exc, "broker", topic, partition)
                continue
            row = int(task_rows[int(rows.min())])
            self._record_failure(Failure(row, topic, partition, exc, len(rows)))
        self.delivered += future.record_count - failed
        for partition, (count, first, last) in future.landed().partitions.items():
            merge_range(self.offsets, (topic, partition), count, first, last)

    # -- bookkeeping (task thread only) ----------------------------------------------------
    def _record_failure(self, f: Failure) -> None:
        self.failed += f.count
        if self.first_failure is None or f.row < self.first_failure.row:
            self.first_failure = f

    def drain(self) -> None:
        """Fold the bulk sends completed so far into counts, offsets and failures."""
        try:
            while True:
                self._fold(self._bulk_done.popleft())
        except IndexError:
            pass

    @property
    def pending(self) -> int:
        """Records handed over whose outcome has not been drained yet."""
        return self.sent - self.delivered - self.dead_lettered - self.tolerated - (self.failed - self.rejected)

    def wait_all(self, timeout_s: float) -> bool:
        """After ``flush()``: wait until every callback ran; False on timeout."""
        deadline = time.monotonic() + timeout_s
        self.drain()
        while self.pending > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._arrived.wait(left)
            self._arrived.clear()  # before draining: a callback after this sets it again
            self.drain()
        return True
