"""The driver's end of a write: close it, sweep its losers, record its decision, commit.

1. **Close**: initialise the write's decision id (``DecisionRecorder.close``).  From then on a
   task attempt that checks the write finds it closed and writes nothing (``fence.py``).  An
   epoch above 0 says someone ended the write first (its driver judged gone): nothing of it may
   be committed; the driver ends it too (all aborted) and fails the job cleanly.
2. **Sweep**: one listing of the write's ids (``settle.list_write``) after the close; every id
   but the winners fenced -- failed attempts, speculative losers, attempts that initialised
   before the close and had not begun.  A winner not open under its producer id (its
   coordinator aborted it: ``transaction.timeout.ms``) means the write cannot be committed
   whole: it is aborted, nothing visible.
3. **Decide**: the exact winners committed in a transaction under the decision id
   (``decision_log``).  Fenced there: someone ended the write first, which aborts all of it.
   Unknown (no answer): the driver cannot tell, commits nothing and fails; whoever ends the
   write next reads the answer after fencing.
4. **Commit** each winner (a commit that landed answers success again, so retries are safe).
   Nothing decided is ever aborted: a commit that still fails after its budget fails the job
   naming the write, whose ender (the Spark abort that follows, the keeper, the next write,
   the command) completes it as recorded.
5. A batch write's decision record is then deleted; a streaming query keeps its latest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import KafkaError, Message, Setting
from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.decision_log import DecisionLog, DecisionRecorder
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.exactly_once.settle import list_write, plan, settle
from sparkkafka_sink.producer.handover import PreparedTransaction

__all__ = ["CommitError", "WriteEndedError", "NothingDecidedError", "UndecidedError", "IncompleteCommitError",
           "Committed", "commit_write"]

log = logging.getLogger(__name__)


class CommitError(KafkaError):
    """The driver's commit did not end the write: the message says what is visible and who
    ends it."""


class WriteEndedError(CommitError):
    """Nothing of the write is visible: someone ended it before its driver decided (its driver
    was judged gone), or one of its winners was aborted by its coordinator."""


class NothingDecidedError(CommitError):
    """The commit failed before its decision (a request of the close or the sweep): nothing of
    the write is committed, and its end (Spark's abort, which follows) aborts it."""


class UndecidedError(CommitError):
    """The decision's transaction got no answer: whether it was recorded is known to whoever
    ends the write next (after fencing it)."""


class IncompleteCommitError(CommitError):
    """The write was decided, and some winners could not be committed yet: whoever ends the
    write next commits them, as recorded (never aborts them)."""

    def __init__(self, message: str, write: WriteId, pending: Sequence[str]):
        super().__init__(message)
        self.write, self.pending = write, tuple(pending)


@dataclass
class Committed:
    write: WriteId
    committed: list[str] = field(default_factory=list)
    #: the write's other ids fenced (an open transaction among them aborted)
    aborted: list[str] = field(default_factory=list)


def commit_write(admin: Any, decisions: DecisionLog, config: Any, write: WriteId,
                 winners: Sequence[PreparedTransaction], deadline: float) -> Committed:
    """Close, sweep, decide and commit ``write`` with exactly ``winners`` (see the module); a
    ``CommitError`` says what is visible when it did not end the write."""
    recorder = None
    try:
        try:
            recorder = DecisionRecorder(config, write, decisions.topic, decisions.partitions(deadline, create=True))
            losers = _close_and_sweep(admin, decisions, recorder, write, winners, deadline)
        except CommitError:
            raise
        except KafkaError as e:
            raise NothingDecidedError(
                f"exactly-once write {write}: its commit failed before anything was decided ({type(e).__name__}: "
                f"{e}): nothing of it is committed, and its end (the job's abort, else the driver's keeper, the next "
                "write under the prefix or the command) aborts it") from None
        try:
            recorded = recorder.record(Decision(write, tuple(winners)), _left(deadline))
        except KafkaError as e:
            raise UndecidedError(
                f"exactly-once write {write}: the decision's transaction got no answer ({e}): nothing was committed; "
                "whoever ends the write next (the job's abort, the driver's keeper, the next write under the prefix, "
                "the command) learns whether it was recorded, and commits or aborts all of it") from None
        if not recorded:
            raise _ended_elsewhere(admin, decisions, write, deadline, "before its driver's decision was recorded")
        done = Committed(write, aborted=losers)
        failed = []
        for winner in winners:
            try:
                admin.end(winner, True, deadline)
                done.committed.append(winner.transactional_id)
            except KafkaError as e:
                failed.append((winner, e))
        if failed:
            raise IncompleteCommitError(
                f"exactly-once write {write} is decided ({len(winners)} transactions), but {len(failed)} could not be "
                f"committed yet ({'; '.join(f'{w.transactional_id}: {e}' for w, e in failed)}): nothing decided is "
                "ever aborted -- whoever ends the write next (the job's abort, the driver's keeper, the next write "
                "under the prefix, the command) commits them as recorded", write,
                [w.transactional_id for w, _ in failed])
        if not write.streaming:
            try:
                recorder.forget(_left(deadline))
            except KafkaError as e:  # it only stays in the compacted topic
                log.warning("exactly-once write %s: its decision record stays in %r: %s", write, decisions.topic, e)
        return done
    finally:
        if recorder is not None:
            recorder.close_producer()


def _close_and_sweep(admin: Any, decisions: DecisionLog, recorder: DecisionRecorder, write: WriteId,
                     winners: Sequence[PreparedTransaction], deadline: float) -> list[str]:
    """Steps 1 and 2: the write closed by its driver first, every id of it but the winners
    fenced; the ids fenced."""
    if not recorder.close(_left(deadline)):
        raise _ended_elsewhere(admin, decisions, write, deadline, "before its driver closed it")
    ending = plan(write, list_write(admin, write, deadline), winners)
    if ending.missing:
        settle(admin, decisions, write, deadline)
        raise WriteEndedError(Message(
            "exactly-once write {}: the transactions of {} are no longer open (their coordinator aborted them: {} "
            "passed, or a broker lost them), so the write cannot be committed whole: nothing of it is visible",
            write, _tasks(ending.missing), Setting("transaction.timeout.ms")))
    for txn_id in ending.fence:
        admin.fence(txn_id, deadline)
    return list(ending.fence)


def _ended_elsewhere(admin: Any, decisions: DecisionLog, write: WriteId, deadline: float, when: str) -> WriteEndedError:
    """Someone ended the write first (it judged the driver gone): end it too, as decided
    (nothing was), so that nothing of it stays open."""
    settle(admin, decisions, write, deadline)
    return WriteEndedError(
        f"exactly-once write {write} was ended by another process {when} (the driver's lease was judged gone: its "
        "keeper stopped beating): nothing of it is visible; run the job again")


def _tasks(missing: Sequence[PreparedTransaction]) -> str:
    return ", ".join(w.transactional_id for w in missing)


def _left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic())
