"""The driver's end of a write: close it, sweep its losers, record its decision, commit.

1. **Close**: initialise the write's decision id (``DecisionRecorder.close``).  From then on a
   task attempt that checks the write finds it closed and writes nothing (``fence.py``).  An
   epoch above 0 says someone ended the write first (its driver judged gone): nothing of it may
   be committed; the driver ends it too (all aborted) and fails the job cleanly.
2. **Sweep**: one listing of the write's ids (``settle.list_write``) after the close; every id
   but the winners fenced -- failed attempts, speculative losers, attempts that initialised
   before the close and had not begun.  Each winner is described by its own coordinator: one
   not open under its producer id (its coordinator aborted it: ``transaction.timeout.ms``), or
   one whose transaction has less time left than the commit needs (:data:`COMMIT_NEEDS_S`, counted
   from the transaction's start as its coordinator does), means the write cannot be committed
   whole: it is aborted before anything is decided, nothing visible.
3. **Decide**: the exact winners committed in a transaction under the decision id
   (``decision_log``).  Fenced there, or no answer: the driver ends the write itself
   (``settle``: fence, read the decision) and so learns what is final -- its decision recorded
   (an answer lost, its retry fenced): the write is completed, the job succeeds; no decision:
   all of it aborted.  Only when even that cannot be asked does the job fail not knowing.
4. **Commit** each winner (a commit that landed answers success again, so retries are safe),
   within the time its transactions have left.  Nothing decided is ever aborted: a commit that
   still fails after its budget fails the job naming the write, whose ender (the Spark abort
   that follows, the keeper, the next write, the command) completes it as recorded.
5. A batch write's decision record is then deleted; a streaming query keeps its latest.

Every error says what readers see -- all of the write, none, or which part -- and whether running
the job again would write rows twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import KafkaError, Message, Setting
from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.decision_log import DecisionLog, DecisionRecorder
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.exactly_once.settle import describe_winners, list_write, plan, settle
from sparkkafka_sink.producer.handover import PreparedTransaction, TransactionAdmin
from sparkkafka_sink.protocol.schema import ProtocolMessage

__all__ = ["CommitError", "WriteEndedError", "NothingDecidedError", "UndecidedError", "IncompleteCommitError",
           "Committed", "commit_write", "COMMIT_NEEDS_S", "COMMIT_NEEDS_PER_WINNER_S", "CLOCK_SKEW_S",
           "time_left_s"]

log = logging.getLogger(__name__)

#: what the commit needs of every winner's transaction once it decides: recording the decision
#: and one EndTxn per winner, with room for a retry or a coordinator moving; and how far apart
#: the driver's clock and a coordinator's may be (the coordinator times transactions by its own)
COMMIT_NEEDS_S = 30.0
COMMIT_NEEDS_PER_WINNER_S = 0.05
CLOCK_SKEW_S = 5.0
#: the bound of the driver's own end of a write whose decision's answer it did not get
RESOLVE_S = 30.0

_RERUN_SAFE = "running the job again writes its rows once"
_NO_RERUN = "do not run the job again: every row of it would be written twice"


class CommitError(KafkaError):
    """The driver's commit did not end the write: the message says what readers see and whether
    running the job again would write rows twice."""


class WriteEndedError(CommitError):
    """Nothing of the write is visible, and nothing of it will be: someone ended it before its
    driver decided, or a winner could not be committed whole.  Running the job again is safe."""


class NothingDecidedError(CommitError):
    """The commit failed before its decision (a request of the close or the sweep): nothing of
    the write is committed, and its end (Spark's abort, which follows) aborts it.  Running the
    job again is safe."""


class UndecidedError(CommitError):
    """Whether the decision was recorded could not be learnt: whoever ends the write next makes
    all of it visible (recorded) or none.  Running the job again before then may write twice."""


class IncompleteCommitError(CommitError):
    """The write was decided, and some winners could not be committed yet: part of it is visible
    now, whoever ends the write next commits the rest as recorded (never aborts them).  Running
    the job again would write twice."""

    def __init__(self, message: str, write: WriteId, pending: Sequence[str], lost: Sequence[str] = ()):
        super().__init__(message)
        self.write, self.pending, self.lost = write, tuple(pending), tuple(lost)


@dataclass
class Committed:
    write: WriteId
    committed: list[str] = field(default_factory=list)
    #: the write's other ids fenced (an open transaction among them aborted)
    aborted: list[str] = field(default_factory=list)


def time_left_s(described: ProtocolMessage, now_s: float) -> float:
    """Seconds before a transaction's coordinator aborts it (its start, as the coordinator
    recorded it, plus its timeout), less the clocks' possible skew."""
    return (described.start_time_ms + described.timeout_ms) / 1000 - now_s - CLOCK_SKEW_S


def commit_write(admin: TransactionAdmin, decisions: DecisionLog, config: Mapping[str, Any], write: WriteId,
                 winners: Sequence[PreparedTransaction], deadline: float, query: str | None = None) -> Committed:
    """Close, sweep, decide and commit ``write`` with exactly ``winners`` (``query``: a streaming
    write's, recorded with the decision); a ``CommitError`` says what is visible when it did not
    end the write."""
    recorder = None
    try:
        try:
            recorder = DecisionRecorder(config, write, decisions.topic, decisions.partitions(deadline, create=True))
            losers, deadline = _close_and_sweep(admin, decisions, recorder, write, winners, deadline)
        except CommitError:
            raise
        except KafkaError as e:
            raise NothingDecidedError(
                f"exactly-once write {write}: its commit failed before anything was decided ({type(e).__name__}: "
                f"{e}): nothing of it is committed, and its end (the job's abort, else the driver's keeper, the next "
                f"write under the prefix or the command) aborts it; {_RERUN_SAFE}") from None
        try:
            recorded: bool | None = recorder.record(Decision(write, tuple(winners), query), _left(deadline))
        except KafkaError as e:
            log.warning("exactly-once write %s: the decision's transaction got no answer (%s): asking the decisions "
                        "topic", write, e)
            recorded = None
        if not recorded:  # fenced, or no answer: what is final is what the decisions topic holds
            return _resolved(admin, decisions, write, winners, losers, deadline, recorded)
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
                f"exactly-once write {write} is decided ({len(winners)} transactions), but the commits of {len(failed)} "
                f"got no answer ({'; '.join(f'{w.transactional_id}: {e}' for w, e in failed)}): readers see the rows "
                f"of the {len(done.committed)} committed now, and of those {len(failed)} once they are committed; "
                "nothing decided is ever aborted -- whoever ends the write next (the job's abort, the driver's "
                f"keeper, the next write under the prefix, the command) commits them as recorded; {_NO_RERUN}",
                write, [w.transactional_id for w, _ in failed])
        _forget(recorder, decisions, write, deadline)
        return done
    finally:
        if recorder is not None:
            recorder.close_producer()


def _close_and_sweep(admin: TransactionAdmin, decisions: DecisionLog, recorder: DecisionRecorder, write: WriteId,
                     winners: Sequence[PreparedTransaction], deadline: float) -> tuple[list[str], float]:
    """Steps 1 and 2: the write closed by its driver first, every winner open with the time the
    commit needs, every other id of it fenced; the ids fenced, and the deadline of the rest of
    the commit (no later than its winners' transactions may live)."""
    if not recorder.close(_left(deadline)):
        settle(admin, decisions, write, deadline)
        raise WriteEndedError(
            f"exactly-once write {write} was ended before its driver closed it: by another process (the driver's "
            f"lease was judged gone: its keeper stopped beating): nothing of it is visible; {_RERUN_SAFE}")
    described = describe_winners(admin, winners, deadline)
    ending = plan(write, list_write(admin, write, deadline), winners, described)
    if ending.not_open:
        settle(admin, decisions, write, deadline)
        raise WriteEndedError(Message(
            "exactly-once write {}: the transactions of {} are no longer open (their coordinator aborted them: {} "
            "passed, or a broker lost them), so the write cannot be committed whole: nothing of it is visible; {}",
            write, _tasks(ending.not_open), Setting("transaction.timeout.ms"), _RERUN_SAFE))
    needs = COMMIT_NEEDS_S + COMMIT_NEEDS_PER_WINNER_S * len(winners)
    left = _time_left(described, winners)
    short = sorted((s, t) for t, s in left.items() if s < needs)
    if short:
        settle(admin, decisions, write, deadline)
        raise WriteEndedError(Message(
            "exactly-once write {}: its oldest transactions have {:.0f} s left of their {} ({}), less than the {:.0f} "
            "s its commit needs, so rather than commit part of it, nothing of it is committed (all aborted, nothing "
            "visible; {}); raise {} (the brokers cap it with transaction.max.timeout.ms: raise that too), or write "
            "less per job", write, max(0.0, short[0][0]), Setting("transaction.timeout.ms"),
            ", ".join(t for _, t in short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else ""), needs,
            _RERUN_SAFE, Setting("transaction.timeout.ms")))
    for txn_id in ending.fence:
        admin.fence(txn_id, deadline)
    if left:
        deadline = min(deadline, time.monotonic() + min(left.values()))
    return list(ending.fence), deadline


def _time_left(described: Mapping[str, Any], winners: Sequence[PreparedTransaction]) -> dict[str, float]:
    now = time.time()
    return {w.transactional_id: time_left_s(described[w.transactional_id], now) for w in winners}


def _resolved(admin: TransactionAdmin, decisions: DecisionLog, write: WriteId, winners: Sequence[PreparedTransaction],
              losers: list[str], deadline: float, recorded: bool | None) -> Committed:
    """The decision's transaction was fenced (``recorded`` False) or got no answer (None): end the
    write as the decisions topic says -- whoever fenced it did the same or will -- and report
    (within a bound of its own: waiting for the answer may have used up the commit's)."""
    try:
        settled = settle(admin, decisions, write, max(deadline, time.monotonic() + RESOLVE_S))
    except KafkaError as e:
        raise UndecidedError(
            f"exactly-once write {write}: whether its decision was recorded is not known here (its transaction "
            f"{'was fenced' if recorded is False else 'got no answer'}, and the decisions topic could not be read: "
            f"{type(e).__name__}: {e}): whoever ends the write next (the job's abort, the driver's keeper, the next "
            "write under the prefix, the command) makes all of it visible, if the decision was recorded, or none; "
            "until `python -m sparkkafka_sink.transactions list` shows it ended, running the job again may write "
            "its rows twice") from None
    if not settled.decided and recorded is False:
        raise WriteEndedError(
            f"exactly-once write {write} was ended by another process before its driver's decision was recorded "
            f"(the driver's lease was judged gone: its keeper stopped beating): nothing of it is visible; {_RERUN_SAFE}")
    if not settled.decided:
        raise WriteEndedError(
            f"exactly-once write {write}: the decision's transaction got no answer, and the decisions topic shows it "
            f"was not recorded: the driver aborted the write, nothing of it is visible; {_RERUN_SAFE}")
    if not settled.whole:
        lost = settled.lost + settled.unknown
        raise IncompleteCommitError(
            f"exactly-once write {write} was decided, but {len(lost)} of its transactions were aborted by their "
            f"coordinator before they could be committed ({', '.join(lost)}): readers see every row but theirs; "
            f"{_NO_RERUN} (write those tasks' rows again instead)", write, (), lost)
    log.info("exactly-once write %s: its decision was recorded (its answer lost or its retry fenced): completed as "
             "recorded", write)
    return Committed(write, committed=sorted(settled.committed + settled.already), aborted=losers)


def _forget(recorder: DecisionRecorder, decisions: DecisionLog, write: WriteId, deadline: float) -> None:
    if not write.streaming:
        try:
            recorder.forget(_left(deadline))
        except KafkaError as e:  # it only stays in the compacted topic
            log.warning("exactly-once write %s: its decision record stays in %r: %s", write, decisions.topic, e)


def _tasks(missing: Sequence[PreparedTransaction]) -> str:
    return ", ".join(w.transactional_id for w in missing)


def _left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic())
