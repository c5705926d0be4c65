"""Row checks on Arrow batches: a row no producer could take is named before its batch is sent.

A null topic (with no ``topic`` option) or a headers array holding a null element or a null key
raises ``RowError`` with the row's position in the batch; the write task reports it.
numpy and pyarrow are imported where used: the driver's commit process imports the write task's
modules (to unpickle the writer) and has no use for them.
"""

from __future__ import annotations

from bisect import bisect_right

NULL_TOPIC = "topic is null and no 'topic' option is set"


class RowError(Exception):
    """A row that cannot be sent; ``index`` is its position within the batch."""

    def __init__(self, index: int, message: str, topic=None, partition=None):
        super().__init__(message)
        self.index = index
        self.topic = topic
        self.partition = partition


def check_headers(col) -> None:
    """Raise ``RowError`` for a null struct or a null key inside a row's headers array."""
    import numpy as np
    import pyarrow.compute as pc

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
