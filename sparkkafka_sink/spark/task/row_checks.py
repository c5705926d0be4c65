"""The one row check of the task's own: a row without a topic.

With no ``topic`` option, a row whose ``topic`` is null cannot be sent: ``RowError`` names it
(its number in the task's input) before any row of its batch is sent -- or, under
``errors.tolerance=all``, such rows go to the dead letters.  Every other row check is the
producer's own (its ``BulkSendError`` names the row) or the codec's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

NULL_TOPIC = "topic is null and no 'topic' option is set"


class RowError(Exception):
    """A row that cannot be sent; ``row`` is its number in the task's input."""

    def __init__(self, row: int, message: str):
        super().__init__(message)
        self.row = row


def null_positions(col: pa.Array) -> np.ndarray:
    """Positions of the nulls of an Arrow array (ascending)."""
    if not col.null_count:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
