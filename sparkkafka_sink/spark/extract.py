"""Row checks on Arrow batches, and column lists for the per-row send path.

The bulk path hands Arrow columns to the producer as they are; the per-row
path (``sender.send_records``) needs Python values, built here column by
column in Arrow's C++ kernels: strings become UTF-8 bytes by a zero-copy cast
to binary, timestamps become epoch milliseconds by one cast, headers are
sliced out of the flattened list child by offsets.  No per-row dicts or
``Row`` objects are built.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import repeat
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.spark.validation import ColumnLayout


NULL_TOPIC = "topic is null and no 'topic' option is set"


class RowError(Exception):
    """A row that cannot be sent; ``index`` is its position within the batch."""

    def __init__(self, index: int, message: str, topic=None, partition=None):
        super().__init__(message)
        self.index = index
        self.topic = topic
        self.partition = partition


@dataclass
class RecordColumns:
    """The records of one Arrow batch, column-wise, in the order ``Producer.send`` takes them.

    Absent columns are ``itertools.repeat(None)`` so the send loop can ``zip``
    without per-row branches; ``topics`` is ``repeat(name)`` for a fixed topic.
    """

    num_rows: int
    topics: Iterable
    values: list
    keys: Iterable
    headers: Iterable
    partitions: Iterable
    timestamps_ms: Iterable


def _as_bytes(col: pa.Array) -> list:
    t = col.type
    if pa.types.is_string(t):
        col = col.cast(pa.binary())
    elif pa.types.is_large_string(t):
        col = col.cast(pa.large_binary())
    elif hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t):
        col = col.cast(pa.binary())
    return col.to_pylist()


def _timestamps_ms(col: pa.Array) -> list:
    """Epoch milliseconds (Spark sends microseconds; Kafka keeps milliseconds, truncated)."""
    return col.cast(pa.timestamp("ms", tz=col.type.tz), safe=False).cast(pa.int64()).to_pylist()


def check_headers(col: pa.Array) -> None:
    """Raise ``RowError`` for a null struct or a null key inside a row's headers array."""
    child = col.values
    if not child.null_count and not child.field("key").null_count:
        return
    offsets = col.offsets.to_pylist()
    bad = pc.or_(child.is_null(), child.field("key").is_null())
    for j in np.flatnonzero(bad.to_numpy(zero_copy_only=False)):
        i = bisect_right(offsets, int(j)) - 1
        if 0 <= i < len(col) and offsets[i] <= j < offsets[i + 1] and col[i].is_valid:
            raise RowError(i, "headers array contains a null element or a null key (each header needs a key)")


def _headers(col: pa.Array) -> list:
    """Per row: a list of ``(str key, bytes|None value)`` tuples, or None when empty/null."""
    n = len(col)
    check_headers(col)
    offsets = col.offsets.to_pylist()
    child = col.values
    keys = child.field("key").to_pylist()
    values = child.field("value").to_pylist()
    pairs = list(zip(keys, values))
    out = [None] * n
    for i in range(n):
        start, end = offsets[i], offsets[i + 1]
        if end > start:
            out[i] = pairs[start:end]
    if col.null_count:
        for i in col.is_null().to_numpy(zero_copy_only=False).nonzero()[0]:
            out[i] = None
    return out


def first_null(col: pa.Array) -> int | None:
    if not col.null_count:
        return None
    return int(col.is_null().to_numpy(zero_copy_only=False).argmax())


def extract_records(batch: pa.RecordBatch, layout: ColumnLayout, topic_option: str | None) -> RecordColumns:
    """Column lists for ``batch``; raises ``RowError`` for a row no producer could take.

    The ``topic`` option wins over the column (as in Spark's Kafka sink); a null
    topic with no option is a per-row error, checked before anything of the
    batch is sent.
    """
    n = batch.num_rows
    col = batch.column
    if topic_option is not None:
        topics = repeat(topic_option)
    else:
        tcol = col(layout.topic)
        bad = first_null(tcol)
        if bad is not None:
            raise RowError(bad, NULL_TOPIC)
        topics = tcol.to_pylist()
    return RecordColumns(
        num_rows=n,
        topics=topics,
        values=_as_bytes(col(layout.value)),
        keys=_as_bytes(col(layout.key)) if layout.key else repeat(None),
        headers=_headers(col(layout.headers)) if layout.headers else repeat(None),
        partitions=col(layout.partition).to_pylist() if layout.partition else repeat(None),
        timestamps_ms=_timestamps_ms(col(layout.timestamp)) if layout.timestamp else repeat(None),
    )
