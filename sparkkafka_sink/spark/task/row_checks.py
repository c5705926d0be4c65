"""Rows of a task's input: where a batch's row sits in it, and the rows no producer could take.

The task numbers rows from its first Arrow batch; a batch it sends may hold only some of them
(one topic's, or the rest once bad rows were taken out), so its row ``i`` is row
``row_offset + row_map[i]`` of the input (``task_row``): failures and bad rows are named so.
A null topic (with no ``topic`` option) or a headers array holding a null element or a null key
raises ``RowError`` with the row's position in the batch, before the batch is sent.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pyarrow.compute as pc

NULL_TOPIC = "topic is null and no 'topic' option is set"


def task_row(row_offset: int, row_map, index: int) -> int:
    """Position in the task's input of row ``index`` of a batch whose rows start at ``row_offset``;
    ``row_map`` maps the batch's rows to positions in the Arrow batch they were taken from (None:
    all of it, in order)."""
    return row_offset + (index if row_map is None else int(row_map[index]))


class RowError(Exception):
    """A row that cannot be sent; ``index`` is its position within the batch."""

    def __init__(self, index: int, message: str, topic=None, partition=None):
        super().__init__(message)
        self.index = index
        self.topic = topic
        self.partition = partition


def check_headers(col) -> None:
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


def first_null(col) -> int | None:
    """Position of the first null of an Arrow array, or None."""
    if not col.null_count:
        return None
    return int(col.is_null().to_numpy(zero_copy_only=False).argmax())
