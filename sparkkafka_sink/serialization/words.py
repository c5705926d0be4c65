"""Each row's next few bytes as one machine word: the small pieces of an encoding (varints,
floats, booleans, tags, indexes) packed with their neighbours before a row's pieces are joined.

Both codecs that write a binary format from whole Arrow columns, Avro's and Protobuf's, build a
row's bytes from *pieces*: binary columns (strings, bytes, nested values) and :class:`Words`
(each row's next bytes as a little-endian uint64).  Neighbouring words are packed into one
(``packed``) so a row's many small pieces make few columns for ``columns.join``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from sparkkafka_sink.arrow_views import binary_view_of
from sparkkafka_sink.serialization.columns import Part, constant_column, with_validity
from sparkkafka_sink.varint_columns import (
    encode_unsigned_varints_np,
    encode_varints,
    unsigned_varint_words,
    varint_words,
)

__all__ = ["Words", "Piece", "packed", "masked"]


class Words:
    """Each row's next ``bits`` (a multiple of 8, at most 64) bytes as a little-endian uint64;
    ``word``/``bits`` are arrays, or scalars for bytes every row shares; ``top`` bounds ``bits``."""

    __slots__ = ("word", "bits", "top")

    def __init__(self, word: np.ndarray | np.uint64, bits: np.ndarray | np.uint64, top: int):
        self.word = word
        self.bits = bits
        self.top = top

    @classmethod
    def constant(cls, data: bytes) -> Words:
        return cls(np.uint64(int.from_bytes(data, "little")), np.uint64(8 * len(data)), 8 * len(data))

    @classmethod
    def varints(cls, values: np.ndarray, nonnegative: bool = False) -> Words | pa.Array:
        """Zigzag varints of int64 values; a binary column when one needs more than 8 bytes."""
        word, bits = varint_words(values, nonnegative)
        if word is None:
            data, offsets = encode_varints(values)
            return binary_view_of(data, offsets)
        return cls(word, bits, int(bits.max()) if bits.shape[0] else 0)

    @classmethod
    def unsigned(cls, values: np.ndarray) -> Words | pa.Array:
        """Plain varints of uint64 values (Protobuf's; a negative int64 viewed as uint64 takes
        ten bytes); a binary column when one needs more than 8 bytes."""
        word, bits = unsigned_varint_words(values)
        if word is None:
            data, sizes = encode_unsigned_varints_np(values)
            offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
            np.cumsum(sizes, out=offsets[1:])
            return binary_view_of(data, offsets)
        return cls(word, bits, int(bits.max()) if bits.shape[0] else 0)

    def then(self, other: Words) -> Words:
        """This row's bytes followed by ``other``'s (``top`` of both at most 64)."""
        return Words(self.word | (other.word << self.bits), self.bits + other.bits, self.top + other.top)

    def masked(self, valid: np.ndarray) -> Words:
        return Words(np.where(valid, self.word, np.uint64(0)), np.where(valid, self.bits, np.uint64(0)), self.top)

    def column(self, n: int) -> Part:
        if not isinstance(self.word, np.ndarray) and not isinstance(self.bits, np.ndarray):
            return int(self.word).to_bytes(int(self.bits) // 8, "little")
        word = np.broadcast_to(np.asarray(self.word, np.uint64), (n,))
        if not isinstance(self.bits, np.ndarray):  # the same width on every row: slice the words' bytes
            width = int(self.bits) // 8
            data = np.ascontiguousarray(word).view(np.uint8)
            if width < 8:
                data = np.ascontiguousarray(data.reshape(n, 8)[:, :width]).reshape(-1)
            return binary_view_of(data, np.arange(n + 1, dtype=np.int64) * width)
        sizes = self.bits >> np.uint64(3)
        if not _VIEWS:  # pyarrow before 16: compact in numpy
            keep = np.arange(8) < sizes[:, None].astype(np.int64)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(sizes, out=offsets[1:])
            return binary_view_of(np.ascontiguousarray(word).view(np.uint8).reshape(n, 8)[keep], offsets)
        # inline binary views (length, then up to 12 bytes in place), compacted by Arrow's cast
        views = np.empty((n, 2), dtype=np.uint64)
        views[:, 0] = sizes | (word << np.uint64(32))
        views[:, 1] = word >> np.uint64(32)
        return pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views)]).cast(pa.binary())


_VIEWS = hasattr(pa, "binary_view")
#: a part of each row's bytes, or words still to be packed with their neighbours
Piece: TypeAlias = pa.Array | bytes | Words


def packed(parts: Sequence[Piece], n: int) -> list[Part]:
    """Parts ready for ``join``: neighbouring words (and short constants) packed, then made columns."""
    out: list[Part] = []
    pending: Words | None = None
    for part in parts:
        if isinstance(part, bytes) and len(part) <= 8:
            part = Words.constant(part)
        if isinstance(part, Words):
            if pending is not None and pending.top + part.top <= 64:
                pending = pending.then(part)
                continue
            if pending is not None:
                out.append(pending.column(n))
            pending = part
            continue
        if pending is not None:
            out.append(pending.column(n))
            pending = None
        out.append(part)
    if pending is not None:
        out.append(pending.column(n))
    return out


def masked(parts: list[Piece], valid: np.ndarray, n: int) -> list[Piece]:
    """The parts with nothing on the rows where ``valid`` is False."""
    out: list[Piece] = []
    for part in parts:
        if isinstance(part, bytes):
            part = Words.constant(part) if len(part) <= 8 else constant_column(part, n)
        out.append(part.masked(valid) if isinstance(part, Words) else with_validity(part, valid))
    return out
