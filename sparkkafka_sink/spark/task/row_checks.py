"""Rows of a task's input: where a batch's row sits in it, and the rows without a topic.

The task numbers rows from its first Arrow batch; a batch it sends may hold only some of them
(one topic's, or the rest once bad rows were taken out), so its row ``i`` is row
``row_offset + row_map[i]`` of the input (``task_row``): failures and bad rows are named so.
A null topic (with no ``topic`` option) raises ``RowError`` with the row's position in the
batch, before the batch is sent.  Every other row check is the producer's own: its
``BulkSendError`` names the row.
"""

from __future__ import annotations

NULL_TOPIC = "topic is null and no 'topic' option is set"


def task_row(row_offset: int, row_map, index: int) -> int:
    """Position in the task's input of row ``index`` of a batch whose rows start at ``row_offset``;
    ``row_map`` maps the batch's rows to positions in the Arrow batch they were taken from (None:
    all of it, in order)."""
    return row_offset + (index if row_map is None else int(row_map[index]))


class RowError(Exception):
    """A row that cannot be sent; ``index`` is its position within the batch."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def first_null(col) -> int | None:
    """Position of the first null of an Arrow array, or None."""
    if not col.null_count:
        return None
    return int(col.is_null().to_numpy(zero_copy_only=False).argmax())
