"""A part: some rows of one Arrow table on their way to the producer, and where each came from.

The task numbers its input's rows from its first Arrow batch.  It sends them a table at a time
(Spark's batches grouped, ``batches.coalesced``), and what it sends of a table may be only some
of them -- one topic's rows, or the rest once bad rows were taken out -- so a part
carries, beside its rows, each row's number in the task's input (``rows``).  Failures and bad
rows are named by that number wherever they are found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Part:
    #: the rows (an Arrow table, its pieces Spark's batches; a record batch does as well)
    batch: pa.Table
    #: each row's number in the task's input (ascending)
    rows: np.ndarray

    @classmethod
    def of(cls, batch: pa.Table, first_row: int) -> Part:
        """All of ``batch``, whose first row is row ``first_row`` of the task's input."""
        return cls(batch, np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows

    def column(self, name: str) -> pa.ChunkedArray:
        return self.batch.column(name)

    def nulls(self, name: str) -> np.ndarray:
        """The positions (ascending) of the nulls of column ``name``."""
        col = self.batch.column(name)
        if not col.null_count:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))

    def task_row(self, index: int) -> int:
        """The task's number of this part's row ``index``."""
        return int(self.rows[index])

    def take(self, indices: np.ndarray) -> Part:
        """The rows at ``indices`` (ascending)."""
        return Part(self.batch.take(pa.array(indices)), self.rows[indices])

    def without(self, indices: Sequence[int] | np.ndarray) -> Part:
        """This part without the rows at ``indices``."""
        keep = np.delete(np.arange(self.num_rows), np.asarray(indices, dtype=np.int64))
        return self.take(keep)

    def with_batch(self, batch: pa.Table) -> Part:
        """The same rows, their columns replaced (serialized)."""
        return Part(batch, self.rows)
