"""Once a write is closed, no task attempt of it can leave a transaction open.

A late attempt -- a losing speculative copy, a task of a failed job that Spark is still killing,
an attempt of a write whose driver was judged gone -- could otherwise begin a transaction after
the write was ended, and hold read_committed readers back for ``transaction.timeout.ms``.  The
write is closed by initialising its decision id (the driver at its commit or abort, or whoever
ends the write for a driver that is gone), and an attempt keeps to this order:

1. it initialises its own producer (InitProducerId under its transactional id);
2. it asks the decision id's coordinator whether the write is closed (:func:`write_closed`),
   and writes nothing when it is;
3. only then does it begin its transaction.

Whoever ends the write lists the write's ids after closing it (``settle.list_write``) and
fences every one that is not a winner.  An attempt that found the write open asked before the
close, so its producer was initialised before the listing: the listing holds it, whether it
began its transaction yet or not, and the fence leaves it nothing to commit or hold open.  An
attempt that asks after the close writes nothing.  Driver and tasks meet only at the
coordinator: no other channel between them is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkkafka_sink.exactly_once.ids import WriteId

if TYPE_CHECKING:  # a task passes its own producer: this module loads none
    from sparkkafka_sink.producer.producer import Producer

__all__ = ["CHECK_TIMEOUT_S", "write_closed"]

#: bound of a task's question about its write (retries included)
CHECK_TIMEOUT_S = 30.0


def write_closed(producer: Producer, write: WriteId) -> bool:
    """Step 2, after ``init_transactions`` and before ``begin_transaction``: the write was
    closed (the attempt then writes nothing).  Asked through the attempt's own producer."""
    return producer.transaction_state(write.decision_id, CHECK_TIMEOUT_S) is not None
