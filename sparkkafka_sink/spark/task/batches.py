"""Spark's Arrow batches as a task sends them: joined up to ``coalesceBytes``, paced by the rate limits.

Every ``send_batch`` call has a fixed cost, so consecutive batches are joined into calls of
``coalesceBytes`` (options.py says what it saves); under a rate limit each is then cut into
slices that go at their turn (``rate_limit.py``).  Row order is kept throughout, so the task's
row count plus a row's index in a batch is still its position in the task's input.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.rate_limit import RateLimiter, payload_bytes


def coalesced(batches: Iterator, limit: int) -> Iterator:
    """Spark's Arrow batches, consecutive ones joined until they hold ``limit`` bytes (0: each
    alone).  Empty batches are dropped."""
    pending, size = [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if limit <= 0:
            yield batch
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield _concat(pending)
            pending, size = [], 0
    if pending:
        yield _concat(pending)


def paced(batches: Iterator, limiter: RateLimiter | None, layout: ColumnLayout) -> Iterator:
    """``batches`` as they are, or cut into slices each sent at its turn under the rate limits."""
    if limiter is None:
        yield from batches
        return
    count = payload_bytes(layout)
    for batch in batches:
        yield from limiter.paced(batch, count)


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
