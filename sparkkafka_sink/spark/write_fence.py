"""Exactly-once: once the driver ends a write, no task attempt of it can leave a transaction open.

A late attempt -- a losing speculative copy, a task of a failed job that Spark is still killing
-- could otherwise begin a transaction after the driver committed or aborted the write, and hold
read_committed readers back for ``transaction.timeout.ms``.  The fence is the write's *closed
marker*, a transactional id of its own (one per write: per micro-batch when streaming), and
three steps:

1. the driver closes the write (``close_write``) before it commits or aborts anything of it:
   InitProducerId under the marker, so its coordinator knows the id from then on;
2. a task attempt initialises its own producer first, then asks the marker's coordinator about
   the marker (``write_closed``) and writes only while the coordinator does not know it;
3. once it committed (or aborted) what it keeps, the driver aborts every other open transaction
   under the prefix and fences the write's producers initialised but not in a transaction
   (``fence_idle_attempts``).

Why the order makes it safe: an attempt that found no marker looked before step 1, so its
producer was initialised before step 3 runs: the driver's sweep finds it (Ongoing: aborted;
Empty: fenced), and it can never commit, nor leave a transaction open.  An attempt that looks
after step 1 sees the marker and writes nothing.  Driver and tasks meet only at the coordinator:
no other channel between them is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from sparkkafka_sink.producer.leases import parse
from sparkkafka_sink.spark.options import SinkOptions

if TYPE_CHECKING:  # the driver and the task pass their own clients in: this module loads neither
    from sparkkafka_sink.producer.handover import TransactionAdmin
    from sparkkafka_sink.producer.producer import Producer

#: bound of a task's question about the marker (retries included)
CHECK_TIMEOUT_S = 30.0


def closed_marker(options: SinkOptions, batch_id: int | None = None) -> str:
    """The write's closed marker: a transactional id no task attempt ever uses."""
    return options.write_id(batch_id) + "-closed"


def attempts_prefix(options: SinkOptions, batch_id: int | None = None) -> str:
    """What the transactional ids of the write's task attempts start with (not its marker, nor
    another write's ids)."""
    return options.write_id(batch_id) + "-p"


def write_of_attempt(transactional_id: str) -> tuple[str, int | None] | None:
    """``(write id, micro-batch)`` of a task attempt's transactional id (what ``write_id`` and
    ``attempts_prefix`` made: ``<prefix>-r<run>[-b<batch>]-p...``); None for an id no write of the
    sink made."""
    parsed = parse(transactional_id)
    if parsed is None:
        return None
    prefix, owner, run = parsed
    rest = transactional_id[len(prefix) + 2 + len(owner) + len(run):]
    batch = rest.split("-")[1][1:] if rest.startswith("-b") else ""
    write = f"{prefix}-r{owner}{run}" + (f"-b{batch}" if batch else "")
    return write, int(batch) if batch.isdigit() else None


def marker_of_attempt(transactional_id: str) -> str | None:
    """The closed marker of the write a task attempt's transactional id belongs to, for closing
    the write of a driver that is gone."""
    found = write_of_attempt(transactional_id)
    return f"{found[0]}-closed" if found else None


# -- the driver -----------------------------------------------------------------------------------
def close_write(admin: "TransactionAdmin", options: SinkOptions, batch_id: int | None, deadline: float) -> None:
    """Step 1, before anything of the write is committed or aborted: the marker exists."""
    admin.fence(closed_marker(options, batch_id), deadline)


def fence_idle_attempts(admin: "TransactionAdmin", options: SinkOptions, batch_id: int | None,
                        keep: Iterable[str], deadline: float) -> None:
    """Step 3: fence the write's producers initialised but not in a transaction (those that
    looked for the marker before it existed); their open transactions the caller aborts."""
    admin.abort_lingering(attempts_prefix(options, batch_id), deadline, keep, states=("Empty",))


# -- a task attempt -------------------------------------------------------------------------------
def write_closed(producer: "Producer", options: SinkOptions, batch_id: int | None) -> bool:
    """Step 2, after ``init_transactions`` and before ``begin_transaction``: the driver closed the
    write (the attempt then writes nothing).  Asked through the attempt's own producer (its
    connections)."""
    return producer.transaction_state(closed_marker(options, batch_id), CHECK_TIMEOUT_S) is not None
