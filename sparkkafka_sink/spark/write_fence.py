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

A batch write's commit is decided at the coordinator too, for whoever ends the write if its
driver dies between its first and last EndTxn: once the losers are aborted, the driver
initialises the write's *commit marker* (``decide_commit``), then commits the winners.  The
write's transactions still open after that are winners: they are committed, not aborted
(``producer/dead_writes.py``), so the write becomes wholly visible, never in part.  (A streaming
micro-batch records its decision in the query's checkpoint instead, which its restart reads.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sparkkafka_sink.producer import dead_writes
from sparkkafka_sink.spark.options import SinkOptions

if TYPE_CHECKING:  # the driver and the task pass their own clients in: this module loads neither
    from sparkkafka_sink.producer.handover import TransactionAdmin
    from sparkkafka_sink.producer.producer import Producer

#: bound of a task's question about the marker (retries included)
CHECK_TIMEOUT_S = 30.0


def closed_marker(options: SinkOptions, batch_id: int | None = None) -> str:
    """The write's closed marker: a transactional id no task attempt ever uses."""
    return dead_writes.closed_marker(options.write_id(batch_id))


def attempts_prefix(options: SinkOptions, batch_id: int | None = None) -> str:
    """What the transactional ids of the write's task attempts start with (not its marker, nor
    another write's ids)."""
    return options.write_id(batch_id) + "-p"


def commit_marker(options: SinkOptions) -> str:
    """The batch write's commit marker: it exists once the driver decided to commit."""
    return dead_writes.commit_marker(options.write_id())


# -- the driver -----------------------------------------------------------------------------------
def close_write(admin: TransactionAdmin, options: SinkOptions, batch_id: int | None, deadline: float) -> None:
    """Step 1, before anything of the write is committed or aborted: the marker exists."""
    admin.fence(closed_marker(options, batch_id), deadline)


def decide_commit(admin: TransactionAdmin, options: SinkOptions, deadline: float) -> None:
    """After the losers are aborted, before the first commit: the write is to be committed."""
    admin.fence(commit_marker(options), deadline)


def fence_idle_attempts(admin: TransactionAdmin, options: SinkOptions, batch_id: int | None,
                        keep: Iterable[str], deadline: float) -> None:
    """Step 3: fence the write's producers initialised but not in a transaction (those that
    looked for the marker before it existed); their open transactions the caller aborts."""
    admin.abort_lingering(attempts_prefix(options, batch_id), deadline, keep, states=("Empty",))


# -- a task attempt -------------------------------------------------------------------------------
def write_closed(producer: Producer, options: SinkOptions, batch_id: int | None) -> bool:
    """Step 2, after ``init_transactions`` and before ``begin_transaction``: the driver closed the
    write (the attempt then writes nothing).  Asked through the attempt's own producer (its
    connections)."""
    return producer.transaction_state(closed_marker(options, batch_id), CHECK_TIMEOUT_S) is not None
