"""Leases: which owners of open writes still live -- a shortcut, never a condition of safety.

While an owner's writes may be open, its keeper bumps the epoch of the owner's lease id
(``ids.lease_id``) every :data:`BEAT_S` seconds (InitProducerId on an id with no open
transaction bumps its epoch).  An observer (the next write under the prefix, the operator's
command) watches each owner's lease for up to :data:`WINDOW_S`: a lease that moved is a live
owner, whose writes are left alone; one that stood still, or none at all, an owner that is
gone, whose writes are ended as they were decided (``settle``).

A verdict may be wrong -- a keeper stopped or starved for longer than the window, a cluster
too slow to take its beats -- and nothing breaks: ending a write first fences its decision
id, so a live owner that had not decided can no longer decide (its job fails, nothing of it
visible), and one that had decided sees its write completed as it decided.  The window only
bounds how long readers may wait behind a dead owner's write.  Liveness is the coordinator's
own record: it needs nothing besides the transactional-id ACLs exactly-once already needs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sparkkafka_sink.exactly_once.ids import WriteId, lease_id, parse

if TYPE_CHECKING:  # (the driver's planning process reads leases without the producer loaded)
    from sparkkafka_sink.producer.handover import TransactionAdmin

__all__ = ["BEAT_S", "WINDOW_S", "HOLDING_STATES", "open_writes", "alive_owners", "judge"]

#: how often a keeper bumps its lease's epoch
BEAT_S = 2.0
#: how long an observer waits for a lease to move before it calls its owner gone
WINDOW_S = 30.0
#: states of a transaction that holds back read_committed readers
HOLDING_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
_LOOK_S = 0.5


def open_writes(admin: TransactionAdmin, prefix: str, deadline: float) -> dict[WriteId, list[str]]:
    """The writes under ``prefix`` holding a transaction (an attempt's, or a decision being
    recorded), with the ids that hold one."""
    found: dict[WriteId, list[str]] = {}
    for txn_id, _, _ in admin.open_transactions(prefix, deadline, HOLDING_STATES):
        write = parse(txn_id)
        if write is not None:
            found.setdefault(write, []).append(txn_id)
    return found


def alive_owners(admin: TransactionAdmin, owners: Iterable[tuple[str, str]], deadline: float,
                 window_s: float = WINDOW_S) -> set[tuple[str, str]]:
    """The ``(prefix, owner)`` pairs whose lease moved within ``window_s``: their owners live.
    A lease the coordinator does not know is no live owner's, at once."""
    leases = {owner: lease_id(*owner) for owner in set(owners)}
    first = {owner: admin.describe(lease, deadline) for owner, lease in leases.items()}
    waiting = {owner for owner, seen in first.items() if seen is not None}
    alive: set[tuple[str, str]] = set()
    until = min(time.monotonic() + window_s, deadline)
    while waiting and time.monotonic() < until:
        time.sleep(_LOOK_S)
        for owner in sorted(waiting):
            now, then = admin.describe(leases[owner], deadline), first[owner]
            assert then is not None
            if now is not None and (now.producer_id, now.producer_epoch) != (then.producer_id, then.producer_epoch):
                alive.add(owner)
                waiting.discard(owner)
    return alive


def judge(admin: TransactionAdmin, prefix: str, deadline: float, spare: Iterable[str] = (),
          window_s: float = WINDOW_S) -> tuple[dict[WriteId, list[str]], dict[WriteId, list[str]]]:
    """The open writes whose ids start with ``prefix`` (but those of the owners in ``spare``)
    as ``(alive, gone)`` by their owner's lease."""
    spared = set(spare)
    found = {w: ids for w, ids in open_writes(admin, prefix, deadline).items() if w.owner not in spared}
    beating = alive_owners(admin, {(w.prefix, w.owner) for w in found}, deadline, window_s)
    return ({w: ids for w, ids in found.items() if (w.prefix, w.owner) in beating},
            {w: ids for w, ids in found.items() if (w.prefix, w.owner) not in beating})
