"""Ending a write as its decision says: the recorded winners committed, everything else of it
aborted -- for its driver's commit and for whoever ends a write its driver left.

One listing finds what of a write may still hold or begin a transaction: its ids in every
state but the completed ones (``LIVE_STATES``), asked of every broker once, after the write
was closed.  A task attempt initialises its producer before it checks that the write is open,
so an attempt that found it open was initialised before the close, and is in the listing
whether it began its transaction yet or not: nothing of the write can escape it.

:func:`plan` is the judgement (pure: unit-tested on listings); :func:`apply` carries it out;
:func:`settle` is the whole of it for an ender: fence the write's decision id (a decision not
yet committed can then never be), read the decision, list, apply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import Message, Setting
from sparkkafka_sink.exactly_once.decision_log import DecisionLog, fence
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.producer.handover import PreparedTransaction

__all__ = ["LIVE_STATES", "Listed", "Ending", "Settled", "list_write", "plan", "apply", "settle"]

log = logging.getLogger(__name__)

#: states of a transactional id that holds a transaction, or may still begin one (Kafka's names)
LIVE_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
#: ... of a winner that its commit can still reach
_COMMITTABLE = ("Ongoing", "PrepareCommit")


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
    #: winners not open (committed already -- or lost, which :func:`apply` tells apart)
    missing: tuple[PreparedTransaction, ...]


@dataclass
class Settled:
    """What ending a write did."""

    write: WriteId
    decided: bool
    committed: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    #: recorded winners whose transaction was aborted before anyone committed it (its coordinator
    #: timed it out): their rows are lost
    lost: list[str] = field(default_factory=list)


def list_write(admin: Any, write: WriteId, deadline: float) -> list[Listed]:
    """Every id of ``write`` that holds or may begin a transaction: one listing of every broker."""
    return [Listed(t, pid, state) for t, pid, state in admin.open_transactions(write.name + "-", deadline, LIVE_STATES)]


def plan(write: WriteId, listed: Iterable[Listed], winners: Iterable[PreparedTransaction]) -> Ending:
    """Commit the winners the listing shows open under their recorded producer id; fence
    everything else of the write but its decision id (already fenced by whoever ends it)."""
    found = {t.transactional_id: t for t in listed}
    wins = {w.transactional_id: w for w in winners}
    commit = tuple(w for w in wins.values() if (t := found.get(w.transactional_id)) is not None
                   and t.state in _COMMITTABLE and t.producer_id == w.producer_id)
    fence_ = tuple(sorted(t for t in found if t not in wins and t != write.decision_id))
    missing = tuple(w for w in wins.values() if w not in commit)
    return Ending(commit, fence_, missing)


def apply(admin: Any, write: WriteId, ending: Ending, decided: bool, deadline: float) -> Settled:
    """Carry ``ending`` out: winners committed (a commit that landed answers success again),
    the rest fenced; winners that were not open looked up, to tell committed from lost."""
    settled = Settled(write, decided)
    for winner in ending.commit:
        admin.end(winner, True, deadline)
        settled.committed.append(winner.transactional_id)
    for txn_id in ending.fence:
        admin.fence(txn_id, deadline)
        settled.aborted.append(txn_id)
    for winner in ending.missing:
        seen = admin.describe(winner.transactional_id, deadline)
        if seen is not None and seen.state != "CompleteCommit":
            settled.lost.append(winner.transactional_id)
    return settled


def settle(admin: Any, decisions: DecisionLog, write: WriteId, deadline: float) -> Settled:
    """End ``write`` as its driver decided, for a driver that is gone (or its abort): fenced
    first, then what the decisions topic says is final -- its recorded winners committed and
    the rest aborted; without a decision, all of it aborted."""
    fence(admin, write, deadline)
    decision = decisions.decision_of(write, deadline)
    listed = list_write(admin, write, deadline)
    settled = apply(admin, write, plan(write, listed, decision.winners if decision else ()), decision is not None,
                    deadline)
    if settled.lost:
        log.error("%s", Message("exactly-once write {}: {} of its decided transactions were aborted by their "
                                "coordinator before anyone committed them (their {} passed): {}", write,
                                len(settled.lost), Setting("transaction.timeout.ms"), ", ".join(settled.lost)))
    return settled
