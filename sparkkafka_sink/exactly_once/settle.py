"""Ending a write as its decision says: the recorded winners committed, everything else of it
aborted -- for its driver's commit and for whoever ends a write its driver left.

Two questions, each asked of the one who knows:

* **What else of the write may hold or begin a transaction** (to be fenced): one listing of its
  ids in every state but the completed ones (``LIVE_STATES``), asked of every broker once, after
  the write was closed.  A task attempt initialises its producer before it checks that the write
  is open, so an attempt that found it open was initialised before the close, and is in the
  listing whether it began its transaction yet or not.  (A listing taken while a partition of
  ``__transaction_state`` changes leader may miss an id: a loser missed is not fenced, and holds
  readers back until its coordinator times it out -- never a row visible.)
* **Where each winner stands**: its own coordinator's description (DescribeTransactions),
  never the listing -- a winner the listing missed is still described, and committed if open.
  A winner's fate (:func:`fate`) is ``open`` (its transaction, under its recorded producer id and
  epoch, not ended: commit it), ``committed``, ``aborted`` (its coordinator says so: its rows are
  lost) or ``unknown`` (the coordinator no longer knows the transaction: it ended long ago).

:func:`plan` is the judgement (pure: unit-tested, and explored by tests/unit/eos_model);
:func:`apply` carries it out; :func:`settle` is the whole of it for an ender: fence the write's
decision id (a decision not yet committed can then never be), read the decision, list, describe
the winners, apply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import Message, Setting
from sparkkafka_sink.exactly_once.decision_log import DecisionLog, fence
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.producer.handover import PreparedTransaction, TransactionAdmin
from sparkkafka_sink.protocol.schema import ProtocolMessage

__all__ = ["LIVE_STATES", "OPEN", "COMMITTED", "ABORTED", "UNKNOWN", "Listed", "Ending", "Settled", "fate",
           "list_write", "describe_winners", "plan", "apply", "settle"]

log = logging.getLogger(__name__)

#: states of a transactional id that holds a transaction, or may still begin one (Kafka's names)
LIVE_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
#: a winner's fates
OPEN, COMMITTED, ABORTED, UNKNOWN = "open", "committed", "aborted", "unknown"
_ABORTING = ("PrepareAbort", "CompleteAbort", "PrepareEpochFence")


@dataclass(frozen=True)
class Listed:
    """One transactional id of a write, as its coordinator listed it."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class Ending:
    """What ending a write takes."""

    #: the winners still open: committed
    commit: tuple[PreparedTransaction, ...]
    #: every other id that holds or may begin a transaction: fenced (an open one aborted)
    fence: tuple[str, ...]
    #: winners committed already
    committed: tuple[PreparedTransaction, ...] = ()
    #: winners their coordinator aborted (timed out) before anyone committed them: lost
    aborted: tuple[PreparedTransaction, ...] = ()
    #: winners whose transaction their coordinator no longer knows (it ended long ago)
    unknown: tuple[PreparedTransaction, ...] = ()

    @property
    def not_open(self) -> tuple[PreparedTransaction, ...]:
        return self.committed + self.aborted + self.unknown


@dataclass
class Settled:
    """What ending a write did."""

    write: WriteId
    decided: bool
    committed: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    #: recorded winners committed before (by the driver, or an earlier ender)
    already: list[str] = field(default_factory=list)
    #: recorded winners whose transaction was aborted before anyone committed it (its coordinator
    #: timed it out): their rows are lost
    lost: list[str] = field(default_factory=list)
    #: recorded winners their coordinator no longer knows (ended long ago: committed or not)
    unknown: list[str] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        """Every recorded winner's rows are visible (or there were none)."""
        return not self.lost and not self.unknown


def fate(winner: PreparedTransaction, described: ProtocolMessage | None) -> str:
    """Where ``winner`` stands by its coordinator's description (a ``TransactionDescription``,
    None when the coordinator does not know the id)."""
    if described is None or described.producer_id != winner.producer_id:
        return UNKNOWN
    if described.state == "Ongoing" and described.producer_epoch == winner.producer_epoch:
        return OPEN
    # a commit the coordinator took (being completed, or done); transactions v2 bumps the epoch as
    # it prepares the end of each transaction
    if described.state in ("PrepareCommit", "CompleteCommit") and \
            described.producer_epoch in (winner.producer_epoch, winner.producer_epoch + 1):
        return COMMITTED
    if described.state in _ABORTING and described.producer_epoch >= winner.producer_epoch:
        return ABORTED
    return UNKNOWN


def list_write(admin: TransactionAdmin, write: WriteId, deadline: float) -> list[Listed]:
    """Every id of ``write`` that holds or may begin a transaction: one listing of every broker."""
    return [Listed(t, pid, state) for t, pid, state in admin.open_transactions(write.name + "-", deadline, LIVE_STATES)]


def describe_winners(admin: TransactionAdmin, winners: Iterable[PreparedTransaction], deadline: float) -> dict[str, Any]:
    """Each winner's description by its own coordinator."""
    return {w.transactional_id: admin.describe(w.transactional_id, deadline) for w in winners}


def plan(write: WriteId, listed: Iterable[Listed], winners: Iterable[PreparedTransaction],
         described: Mapping[str, Any]) -> Ending:
    """Commit the winners their coordinators describe as open; fence everything else of the write
    the listing shows (but its decision id, already fenced by whoever ends it)."""
    wins = {w.transactional_id: w for w in winners}
    fates: dict[str, list[PreparedTransaction]] = {OPEN: [], COMMITTED: [], ABORTED: [], UNKNOWN: []}
    for txn_id, winner in wins.items():
        fates[fate(winner, described.get(txn_id))].append(winner)
    fence_ = tuple(sorted({t.transactional_id for t in listed} - set(wins) - {write.decision_id}))
    return Ending(tuple(fates[OPEN]), fence_, tuple(fates[COMMITTED]), tuple(fates[ABORTED]), tuple(fates[UNKNOWN]))


def apply(admin: TransactionAdmin, write: WriteId, ending: Ending, decided: bool, deadline: float) -> Settled:
    """Carry ``ending`` out: the open winners committed (a commit that landed answers success
    again), the rest of the write fenced."""
    settled = Settled(write, decided, already=[w.transactional_id for w in ending.committed],
                      lost=[w.transactional_id for w in ending.aborted],
                      unknown=[w.transactional_id for w in ending.unknown])
    for winner in ending.commit:
        admin.end(winner, True, deadline)
        settled.committed.append(winner.transactional_id)
    for txn_id in ending.fence:
        admin.fence(txn_id, deadline)
        settled.aborted.append(txn_id)
    return settled


def settle(admin: TransactionAdmin, decisions: DecisionLog, write: WriteId, deadline: float) -> Settled:
    """End ``write`` as its driver decided, for a driver that is gone (or its abort): fenced
    first, then what the decisions topic says is final -- its recorded winners committed and
    the rest aborted; without a decision, all of it aborted.  Raises (and the write stays to be
    ended) while a winner's coordinator cannot be asked."""
    fence(admin, write, deadline)
    decision = decisions.decision_of(write, deadline)
    winners = decision.winners if decision else ()
    listed = list_write(admin, write, deadline)
    ending = plan(write, listed, winners, describe_winners(admin, winners, deadline))
    settled = apply(admin, write, ending, decision is not None, deadline)
    if settled.lost:
        log.error("%s", Message("exactly-once write {}: {} of its decided transactions were aborted by their "
                                "coordinator before anyone committed them (their {} passed): {}", write,
                                len(settled.lost), Setting("transaction.timeout.ms"), ", ".join(settled.lost)))
    if settled.unknown:
        log.warning("exactly-once write %s: the coordinators no longer know %d of its decided transactions (ended "
                    "long ago): %s", write, len(settled.unknown), ", ".join(settled.unknown))
    return settled
