"""Leases on transactional ids: which open transactions belong to an owner that is gone.

A transaction left open by a process that died holds back every read_committed reader of its
partitions until its coordinator times it out (``transaction.timeout.ms``, up to 15 minutes).
Only its owner knew whether it would still be committed.  So an owner -- for the Spark sink, the
driver that commits a write's transactions -- names its transactional ids
``<prefix>-r<owner><run>...`` (``owner``: 8 hex digits, ``run``: 6) and keeps a **lease** beside
them while it lives: the transactional id ``<prefix>-lease-<owner>``, whose producer epoch it
bumps every :data:`BEAT_S` seconds (InitProducerId, which bumps the epoch of an id with no open
transaction).  Whoever finds open transactions under the prefix asks the coordinator about each
owner's lease twice, :data:`WINDOW_S` apart at most: an epoch that moved is a live owner; a lease
that stood still, or none at all, an owner that is gone, whose transactions can be ended at once.

Liveness is the coordinator's own record, so it needs nothing besides the transactional-id ACLs
the transactions already need, and it holds across hosts.  It costs one InitProducerId a second
per live owner and prefix.  A lease cannot lie in the unsafe direction for long: an owner whose
keeper stopped beating while it lived is judged gone, and its transactions are aborted -- its
commit then fails, and nothing of the write becomes visible (exactly-once holds; the job fails).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkkafka_sink.producer.control_requests import TransactionDescription
    from sparkkafka_sink.producer.handover import TransactionAdmin

__all__ = ["BEAT_S", "WINDOW_S", "OpenTransaction", "lease_id", "owned_prefix", "parse", "leases_alive",
           "open_transactions", "judge", "end_dead"]

#: how often a keeper bumps its lease's epoch
BEAT_S = 1.0
#: how long an observer waits for a lease to move before it calls its owner gone
WINDOW_S = 5.0
OWNER_DIGITS, RUN_DIGITS = 8, 6
_ID = re.compile(rf"^(?P<prefix>.+)-r(?P<owner>[0-9a-f]{{{OWNER_DIGITS}}})(?P<run>[0-9a-f]{{{RUN_DIGITS}}})"
                 r"(?P<rest>-.*)?$")


def lease_id(prefix: str, owner: str) -> str:
    """The transactional id whose epoch ``owner`` bumps while it lives."""
    return f"{prefix}-lease-{owner}"


def owned_prefix(prefix: str, owner: str) -> str:
    """What every transactional id of ``owner``'s runs under ``prefix`` starts with."""
    return f"{prefix}-r{owner}"


def parse(transactional_id: str) -> tuple[str, str, str] | None:
    """``(prefix, owner, run)`` of an owned transactional id; None for any other id."""
    m = _ID.match(transactional_id)
    return (m["prefix"], m["owner"], m["run"]) if m else None


@dataclass(frozen=True)
class OpenTransaction:
    """An open transaction found under a prefix, and what is known of it."""

    transactional_id: str
    #: the prefix and owner its id names ("" both when it names none: not an owned id)
    prefix: str
    owner: str
    #: the coordinator's view (None when it forgot the id meanwhile)
    description: TransactionDescription | None

    @property
    def lease(self) -> str | None:
        """Its owner's lease id (None: the id names no owner)."""
        return lease_id(self.prefix, self.owner) if self.owner else None

    def age_s(self, now_ms: float) -> float | None:
        start = self.description.start_time_ms if self.description is not None else -1
        return (now_ms - start) / 1000 if start >= 0 else None


def open_transactions(admin: TransactionAdmin, prefix: str, deadline: float,
                      states: Iterable[str] = ("Ongoing",)) -> list[OpenTransaction]:
    """Every transaction in ``states`` whose id starts with ``prefix``, described."""
    found = []
    for txn_id, _, _ in admin.open_transactions(prefix, deadline, tuple(states)):
        owned_by = parse(txn_id)
        found.append(OpenTransaction(txn_id, owned_by[0] if owned_by else "", owned_by[1] if owned_by else "",
                                     admin.describe(txn_id, deadline)))
    return found


def leases_alive(admin: TransactionAdmin, leases: Iterable[str], deadline: float,
                 window_s: float = WINDOW_S) -> set[str]:
    """The lease ids whose epoch moved within ``window_s``: their owners live.  A lease the
    coordinator does not know is no live owner's, at once."""
    first = {lease: admin.describe(lease, deadline) for lease in set(leases)}
    waiting = {lease for lease, seen in first.items() if seen is not None}
    alive: set[str] = set()
    until = min(time.monotonic() + window_s, deadline)
    while waiting and time.monotonic() < until:
        time.sleep(BEAT_S / 4)
        for lease in sorted(waiting):
            now, then = admin.describe(lease, deadline), first[lease]
            assert then is not None
            if now is not None and (now.producer_id, now.producer_epoch) != (then.producer_id, then.producer_epoch):
                alive.add(lease)
                waiting.discard(lease)
    return alive


def judge(admin: TransactionAdmin, prefix: str, deadline: float, spare: Iterable[str] = ()
          ) -> tuple[list[OpenTransaction], list[OpenTransaction]]:
    """The open transactions under ``prefix`` (except those of the owners in ``spare``) as
    ``(alive, gone)``: their owner's lease beats, or it does not (or they name no owner)."""
    spared = set(spare)
    found = [t for t in open_transactions(admin, prefix, deadline) if t.owner not in spared]
    beating = leases_alive(admin, [t.lease for t in found if t.lease], deadline)
    return [t for t in found if t.lease in beating], [t for t in found if t.lease not in beating]


def end_dead(admin: TransactionAdmin, prefix: str, deadline: float, spare: Iterable[str] = (),
             end: Callable[[list[str]], object] | None = None) -> list[OpenTransaction]:
    """End the open transactions under ``prefix`` whose owner is gone (never those of the owners
    in ``spare``, nor of a live owner); returns them.  ``end(ids)`` ends them as their owner
    would have (the Spark sink commits what a dead driver had decided to commit); by default
    each is aborted (InitProducerId under its id: the coordinator aborts it)."""
    _, gone = judge(admin, prefix, deadline, spare)
    ids = [t.transactional_id for t in gone]
    if end is not None:
        end(ids)
    else:
        for txn_id in ids:
            admin.fence(txn_id, deadline)
    return gone
