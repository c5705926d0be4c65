"""Ending the writes of an owner that is gone, as it would have ended them.

A *write* is a set of transactions one owner (the Spark sink's driver) ends together, each
begun by another process and handed over (``handover``).  Its transactional ids say whose
write they belong to (``leases``: ``<prefix>-r<owner><run>[-b<batch>]-...``), and the write
keeps two markers at the coordinator, transactional ids that no task uses, whose existence is
the record (InitProducerId under an id makes the coordinator know it):

* ``<write>-closed``: the owner is ending the write; a task attempt that looks after it writes
  nothing (the Spark sink's ``write_fence``);
* ``<write>-commit``: the owner aborted the write's losers and decided to commit the rest; it
  is initialised before the first commit, so every transaction of the write still open after
  it is one to commit.

Whoever finds a gone owner's open transactions (its keeper, the next write, the operator's
command) settles them: closes their writes, commits what was decided, aborts the rest.  A write
thus becomes visible whole or not at all, even when its owner died between two commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparkkafka_sink.producer.leases import parse

if TYPE_CHECKING:
    from sparkkafka_sink.producer.handover import PreparedTransaction, TransactionAdmin

__all__ = ["write_of", "closed_marker", "commit_marker", "decided", "settle"]


def write_of(transactional_id: str) -> tuple[str, int | None] | None:
    """``(write id, micro-batch)`` of a transactional id of an owned write
    (``<prefix>-r<owner><run>[-b<batch>]-...``); None for any other id."""
    parsed = parse(transactional_id)
    if parsed is None:
        return None
    prefix, owner, run = parsed
    rest = transactional_id[len(prefix) + 2 + len(owner) + len(run):]
    batch = rest.split("-")[1][1:] if rest.startswith("-b") else ""
    write = f"{prefix}-r{owner}{run}" + (f"-b{batch}" if batch else "")
    return write, int(batch) if batch.isdigit() else None


def closed_marker(write_id: str) -> str:
    """The marker that closes ``write_id``: once it exists, no attempt begins writing."""
    return write_id + "-closed"


def commit_marker(write_id: str) -> str:
    """The marker of ``write_id``'s decision to commit what is still open of it."""
    return write_id + "-commit"


def decided(admin: TransactionAdmin, transactional_ids: list[str], deadline: float,
            recorded: Mapping[str, PreparedTransaction] | None = None) -> dict[str, PreparedTransaction]:
    """The open transactions among these that their owner had decided to commit, ``{id:
    prepared}``: those of a write whose commit marker exists (their producer id and epoch from
    the coordinator), and those in ``recorded`` (decisions the owner kept elsewhere: a
    streaming query's checkpoint)."""
    found: dict[str, PreparedTransaction] = {}
    writes = {t: w[0] for t in transactional_ids if (w := write_of(t)) is not None}
    known = {w for w in set(writes.values()) if admin.describe(commit_marker(w), deadline) is not None}
    for txn_id, write in writes.items():
        if write in known and (prepared := admin.prepared(txn_id, deadline)) is not None:
            found[txn_id] = prepared
    found.update({t: p for t, p in (recorded or {}).items() if t in transactional_ids})
    return found


def settle(admin: TransactionAdmin, transactional_ids: list[str], deadline: float,
           recorded: Mapping[str, PreparedTransaction] | None = None) -> list[str]:
    """End a gone owner's open transactions as it would have: their writes closed first (a
    late attempt then writes nothing), those it had decided to commit (:func:`decided`)
    committed, the others aborted (InitProducerId under their id).  Returns the ids committed."""
    to_commit = decided(admin, transactional_ids, deadline, recorded)
    for write in sorted({w[0] for w in map(write_of, transactional_ids) if w is not None}):
        admin.fence(closed_marker(write), deadline)
    for txn_id in transactional_ids:
        if txn_id in to_commit:
            admin.end(to_commit[txn_id], True, deadline)
        else:
            admin.fence(txn_id, deadline)
    return sorted(to_commit)
