"""Spark's Arrow batches as a task sends them: joined up to ``coalesceBytes``, paced by the rate limits.

Every ``send_batch`` call has a fixed cost, so consecutive batches are joined into calls of
``coalesceBytes`` (options.py says what it saves); under a rate limit each is then cut into
slices that go at their turn (``rate_limit.py``).  Row order is kept throughout, so the task's
row count plus a row's index in a batch is still its position in the task's input.
"""

from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.rate_limit import RateLimiter, payload_bytes


def coalesced(batches: Iterator, limit: int) -> Iterator:
    """Spark's Arrow batches, consecutive ones joined while together they hold at most ``limit``
    bytes (0: each alone).  A call goes as soon as the next batch, if it is like the last, would
    not fit (no waiting for it); a batch that fills half the limit or more goes alone, uncopied
    (1 KiB rows: one Spark batch is ~10 MB, and a call's fixed cost is small beside it).  Empty
    batches are dropped."""
    pending, size = [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if limit <= 0:
            yield batch
            continue
        if pending and size + batch.nbytes > limit:  # bigger than the last: the pending go first
            yield _concat(pending)
            pending, size = [], 0
        pending.append(batch)
        size += batch.nbytes
        if size + batch.nbytes > limit:
            yield _concat(pending)
            pending, size = [], 0
    if pending:
        yield _concat(pending)


def paced(batches: Iterator, limiter: Optional[RateLimiter], layout: ColumnLayout) -> Iterator:
    """``batches`` as they are, or cut into slices each sent at its turn under the rate limits."""
    if limiter is None:
        yield from batches
        return
    count = payload_bytes(layout)
    for batch in batches:
        yield from limiter.paced(batch, count)


def _concat(batches: list):
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
