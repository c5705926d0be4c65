"""Rows a vectorised call refuses, as data: which, and why.

A call over many rows (``Producer.send_batch``, a codec of the serialization layer) checks every
row at once.  The rows it cannot take are returned as a ``Refused`` -- each row with its own
error and, when the error is about one, the partition it names -- and the call goes on with the
rest, so a caller routes k bad rows in one pass; the call raises only when it fails as a whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from sparkkafka_sink.errors import KafkaError


@dataclass(frozen=True)
class Refused:
    #: the refused rows, ascending (positions in the call)
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    #: each row's error
    errors: tuple[KafkaError, ...] = ()
    #: each row's partition, when its error names one
    partitions: tuple[int | None, ...] = ()

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return len(self.rows) > 0

    def __iter__(self) -> Iterator[tuple[int, KafkaError, int | None]]:
        """``(row, error, partition)`` of each refused row, ascending."""
        return zip(self.rows.tolist(), self.errors, self.partitions, strict=True)

    @classmethod
    def of(cls, found: Sequence[tuple[int, KafkaError, int | None]]) -> Refused:
        """From ``(row, error, partition)`` triples (any order)."""
        ordered = sorted(found, key=lambda f: f[0])
        return cls(np.array([f[0] for f in ordered], dtype=np.int64), tuple(f[1] for f in ordered),
                   tuple(f[2] for f in ordered))

    def __or__(self, other: Refused) -> Refused:
        """Both, a row refused by both keeping this one's error (the earlier check's)."""
        if not other:
            return self
        mine = set(self.rows.tolist())
        return Refused.of(list(self) + [f for f in other if f[0] not in mine])

    def mapped(self, rows: np.ndarray) -> Refused:
        """The same refusals, their rows numbered by ``rows`` (a call's rows within a larger one)."""
        return Refused(rows[self.rows], self.errors, self.partitions)
