"""Spark's Arrow batches as a task sends them: grouped up to ``coalesceBytes``, paced by the rate limits.

Every ``send_batch`` call has a fixed cost, so consecutive batches are grouped into calls of
``coalesceBytes`` (options.py says what it saves) -- as the pieces of one table, not joined: the
producer copies a call's rows once, into its records, and reads long rows from Spark's own
buffers (``record.arrow.RecordColumns``).  Under a rate limit each is then cut into slices that
go at their turn (``rate_limit.py``).  Row order is kept throughout, so the task's row count plus
a row's index in a table is still its position in the task's input.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.rate_limit import RateLimiter, payload_bytes


def coalesced(batches: Iterator, limit: int) -> Iterator[pa.Table]:
    """Spark's Arrow batches, consecutive ones grouped (as one table's pieces) until they hold
    ``limit`` bytes (0: each alone).  Empty batches are dropped."""
    pending, size = [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def paced(tables: Iterator[pa.Table], limiter: RateLimiter | None, layout: ColumnLayout) -> Iterator[pa.Table]:
    """``tables`` as they are, or cut into slices each sent at its turn under the rate limits."""
    if limiter is None:
        yield from tables
        return
    count = payload_bytes(layout)
    for table in tables:
        yield from limiter.paced(table, count)
