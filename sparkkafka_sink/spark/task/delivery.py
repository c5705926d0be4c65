"""Record what became of every row of a write task: the outcomes ``routing.route`` returns (rows
handed to the producer, bad rows, the row the task stops at) and, as the producer's futures
complete, each record's delivery -- its rows' and, under ``errors.tolerance=all``, the dead-letter
records of its bad rows (``DeadLetters.send``), so a row's way ends here.  The tracker records;
it sends nothing.

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
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

import numpy as np

from sparkkafka_sink.errors import KafkaError, condemns_record
from sparkkafka_sink.producer.bulk import BulkFuture
from sparkkafka_sink.producer.offset_ranges import merge_range
from sparkkafka_sink.spark.sink_errors import in_option_names
from sparkkafka_sink.spark.task.dead_letters import DeadLetters, DeadLettersSent
from sparkkafka_sink.spark.task.routing import Handed, Outcome, Part, Rejected


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

    @property
    def tolerant(self) -> bool:
        """Bad rows go to the dead letters (errors.tolerance=all) rather than failing the task."""
        return self.dead_letters is not None

    def record(self, outcomes: Iterable[Outcome | DeadLettersSent]) -> None:
        """What became of rows (``routing.route``) or of dead letters sent (``DeadLetters.send``):
        the producer's futures followed, bad rows handed to the dead letters, a stop recorded as
        the task's failure."""
        for outcome in outcomes:
            if isinstance(outcome, Handed):
                self._follow(RowsSent(outcome.future, outcome.topic, outcome.part.rows,
                                      outcome.part if self.dead_letters is not None else None))
            elif isinstance(outcome, DeadLettersSent):
                self._follow(outcome)
            elif isinstance(outcome, Rejected):
                assert self.dead_letters is not None, "rows are rejected (not stopped at) under tolerance only"
                self.dead_letters.reject_refused(outcome.part, outcome.refused, outcome.stage, outcome.topic)
            else:
                self.rejected += outcome.count
                self._record_failure(Failure(outcome.row, outcome.topic, outcome.partition, outcome.error,
                                             outcome.count))

    def _follow(self, sent: CompletedSend) -> None:
        """A ``send_batch`` future, folded once complete (its part kept until then only when bad
        rows are dead-lettered: their contents are read from it)."""
        self.sent += sent.future.record_count
        sent.future.add_callback(partial(self._on_bulk_done, sent))

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
            if self.dead_letters is not None and condemns_record(exc) and self.transactional:
                exc = KafkaError(
                    f"{in_option_names(exc)} -- under exactly-once a record the broker refuses after it was sent "
                    "cannot be dead-lettered: Kafka does not commit a transaction with a refused batch"
                    + (" (keep kafka.max.request.size at most the topic's max.message.bytes: a larger record is "
                       "then refused before sending, and dead-lettered)"
                       if getattr(exc, "too_large", False) else ""))
            elif self.dead_letters is not None and source is not None and condemns_record(exc):
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
