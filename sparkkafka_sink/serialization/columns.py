"""Arrow column plumbing both codecs share: reading a column's buffers as they are, building
binary columns from numpy, joining parts row by row, and following a nested value back to its
row.

Codecs work on whole columns and never skip a null slot: a slot's bytes are computed from
whatever its buffer holds and then masked, dropped with a bad row, or not written because its
parent is null.  :class:`Rows` says which slots are written and which top-level row each one
belongs to -- computed only when a bad value has to be named, so a clean column never pays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.arrow_views import binary_view_of
from sparkkafka_sink.record.arrow import one_array
from sparkkafka_sink.serialization.arrow_types import TIME_UNIT_MICROS
from sparkkafka_sink.serialization.encoded import EncodedColumn

__all__ = [
    "EMPTY",
    "Part",
    "BadRows",
    "Rows",
    "as_binary",
    "constant_column",
    "join",
    "lengths",
    "list_offsets",
    "raw_values",
    "regroup",
    "unscaled_bytes",
    "time_values",
    "validity",
    "with_validity",
]

#: nulls join as nothing: a slot masked out (or a null inside a value) adds no bytes
_JOIN = pc.JoinOptions(null_handling="replace", null_replacement="")
EMPTY = pa.scalar(b"", pa.binary())

#: one piece of each row's bytes: a binary column (nulls count as empty) or the same bytes on
#: every row
Part: TypeAlias = pa.Array | bytes


def validity(arr: pa.Array) -> np.ndarray | None:
    """Which slots hold a value, as bools; None when all do (the common case: no pass at all)."""
    if arr.null_count == 0:
        return None
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), dtype=bool)
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little", count=arr.offset + len(arr))[arr.offset:].view(bool)


def with_validity(arr: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """A binary column with nulls where ``valid`` is False too (its buffers shared, not copied)."""
    if valid is None:
        return arr
    own = validity(arr)
    if own is not None:
        valid = valid & own
    bits = np.zeros(arr.offset + len(arr), dtype=bool)
    bits[arr.offset:] = valid
    bitmap = pa.py_buffer(np.packbits(bits, bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]], offset=arr.offset)


def raw_values(arr: pa.Array, dtype: np.dtype | type) -> np.ndarray:
    """A fixed-width column's values as numpy, null slots included (whatever they hold)."""
    dtype = np.dtype(dtype)
    return np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * dtype.itemsize)


def time_values(arr: pa.Array, unit: str) -> np.ndarray:
    """A timestamp or duration column's int64 values (null slots too) in ``unit`` (``us`` or
    ``ms``), rounded down as Spark's ``microsToMillis``."""
    have, want = TIME_UNIT_MICROS[arr.type.unit], TIME_UNIT_MICROS[unit]
    values = raw_values(arr, np.int64)
    if have == want:
        return values
    return values * int(have // want) if have > want else values // round(want / have)


def as_binary(arr: pa.Array) -> pa.Array:
    """A string or binary column as ``pa.binary()``: UTF-8 strings are viewed, not copied."""
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    return arr.cast(pa.binary())


def list_offsets(arr: pa.Array) -> np.ndarray:
    """A list or map column's offsets (n + 1 of them, into its unsliced child) as int64."""
    width = np.int64 if pa.types.is_large_list(arr.type) else np.int32
    return np.frombuffer(arr.buffers()[1], width, len(arr) + 1, arr.offset * np.dtype(width).itemsize) \
        .astype(np.int64)


def lengths(arr: pa.Array) -> np.ndarray:
    """Byte lengths of a ``pa.binary()`` column as int64, read from its offsets (null slots too)."""
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.diff(np.frombuffer(arr.buffers()[1], np.int32, len(arr) + 1, arr.offset * 4)).astype(np.int64)


def constant_column(value: bytes, n: int) -> pa.Array:
    """``value`` on each of ``n`` rows, as a binary column."""
    data = np.frombuffer(value * n, np.uint8) if value else np.zeros(0, np.uint8)
    return binary_view_of(data, np.arange(n + 1, dtype=np.int64) * len(value))


def join(parts: Sequence[Part], n: int) -> pa.Array:
    """Each row's parts concatenated, in one pass of Arrow's ``binary_join_element_wise``."""
    columns = [p for p in parts if not isinstance(p, bytes)]
    if not columns:
        return constant_column(b"".join(p for p in parts if isinstance(p, bytes)), n)
    if len(parts) == 1:
        return columns[0] if columns[0].null_count == 0 else columns[0].fill_null(EMPTY)
    args = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*args, EMPTY, options=_JOIN)


def regroup(items: pa.Array, offsets: np.ndarray) -> pa.Array:
    """Row i = items ``offsets[i]`` to ``offsets[i + 1]`` concatenated: the items' own bytes,
    re-cut at the rows' boundaries (no copy)."""
    item_offsets = np.frombuffer(items.buffers()[1], np.int32, len(items) + 1, items.offset * 4)
    return pa.Array.from_buffers(pa.binary(), offsets.shape[0] - 1,
                                 [None, pa.py_buffer(item_offsets[offsets]), items.buffers()[2]])



def unscaled_bytes(arr: pa.Array) -> pa.Array:
    """A decimal128 column's unscaled values as big-endian two's complement in as few bytes as
    hold each (Java's ``BigInteger.toByteArray``), null slots too."""
    n = len(arr)
    big_endian = np.frombuffer(arr.buffers()[1], np.uint8, 16 * n, 16 * arr.offset).reshape(n, 16)[:, ::-1]
    negative = big_endian[:, 0] >= 0x80
    # a leading byte is redundant while it only repeats the sign of the byte after it
    fill = np.where(negative, np.uint8(0xFF), np.uint8(0))[:, None]
    redundant = (big_endian[:, :15] == fill) & ((big_endian[:, 1:] >= 0x80) == negative[:, None])
    skip = np.cumprod(redundant, axis=1).sum(axis=1)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(16 - skip, out=offsets[1:])
    return binary_view_of(big_endian[np.arange(16) >= skip[:, None]], offsets)


class Rows:
    """The slots of a (possibly nested) column: which of them are written, and the top-level row
    each belongs to.  Both are computed on first use, from the parent's."""

    def __init__(self, n: int, top: Callable[[], np.ndarray] | None = None,
                 written: Callable[[], np.ndarray | None] | None = None):
        self.n = n
        self._top = top
        self._written = written
        self._top_cache: np.ndarray | None = None
        self._written_cache: tuple[np.ndarray | None] | None = None

    def top(self) -> np.ndarray:
        """Each slot's row in the column handed to the encoder."""
        if self._top_cache is None:
            self._top_cache = self._top() if self._top is not None else np.arange(self.n)
        return self._top_cache

    def written(self) -> np.ndarray | None:
        """Which slots end up in the output (None: all); a null parent's children do not."""
        if self._written_cache is None:
            self._written_cache = (self._written() if self._written is not None else None,)
        return self._written_cache[0]

    def where(self, valid: np.ndarray | None) -> Rows:
        """The same slots, written only where ``valid`` too (the children of a struct)."""
        if valid is None:
            return self

        def written() -> np.ndarray:
            mine = self.written()
            return valid if mine is None else mine & valid
        return Rows(self.n, self.top, written)

    def elements(self, offsets: np.ndarray, valid: np.ndarray | None) -> Rows:
        """The slots of a list column's elements (``offsets`` rebased to 0): an element is
        written when its list is."""
        counts = np.diff(offsets)

        def parents() -> np.ndarray:
            return np.repeat(np.arange(self.n), counts)

        def top() -> np.ndarray:
            found: np.ndarray = self.top()[parents()]
            return found

        def written() -> np.ndarray | None:
            mine = self.written()
            if valid is not None:
                mine = valid if mine is None else mine & valid
            return None if mine is None else mine[parents()]
        return Rows(int(offsets[-1]) if offsets.shape[0] else 0, top, written)


class BadRows:
    """The rows that cannot be encoded, each with the first reason found for it."""

    def __init__(self) -> None:
        self.reasons: dict[int, tuple[str, str]] = {}

    def add(self, rows: Rows, mask: np.ndarray, field: str, what: Callable[[int], str]) -> None:
        """Slots where ``mask`` holds (those written) are bad: ``what(slot)`` says why."""
        written = rows.written()
        hits = np.flatnonzero(mask if written is None else mask & written)
        if hits.shape[0] == 0:
            return
        top = rows.top()
        for slot in hits.tolist():
            row = int(top[slot])
            if row not in self.reasons:
                self.reasons[row] = (field, f"field {field}: {what(slot)}")

    def result(self, values: pa.Array, valid: np.ndarray | None = None) -> EncodedColumn:
        """A codec's answer: ``values`` made null on the bad rows (and where ``valid``, if given,
        is False), with each bad row's field and reason."""
        keep = valid
        if self.reasons:
            bad = np.zeros(len(values), dtype=bool)
            bad[list(self.reasons)] = True
            keep = ~bad if valid is None else valid & ~bad
        rows = sorted(self.reasons)
        return EncodedColumn(with_validity(values, keep), np.array(rows, dtype=np.int64),
                             tuple(self.reasons[r][0] for r in rows), tuple(self.reasons[r][1] for r in rows))


def planned_input(array: pa.Array | pa.ChunkedArray, arrow_type: pa.DataType) -> pa.Array:
    """The column an encoder was given, as one array of the type it was planned for."""
    array = one_array(array)
    if array.type != arrow_type:
        raise TypeError(f"this encoder was planned for {arrow_type}, not {array.type}")
    return array
