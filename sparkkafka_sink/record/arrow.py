"""Vectorized record batch encoding straight from Arrow columns (the Spark sink's fast path).

Each record is ``P1 | key | P2 | value | P3`` with
``P1 = length, attributes, timestampDelta, offsetDelta, keyLength`` (varints), ``P2 =
valueLength`` and ``P3`` the headers.  The varints of whole columns are packed into one uint64
per row with numpy (:func:`~sparkkafka_sink.varint_columns.pack_words`), handed to Arrow as
inline binary views, and Arrow's ``binary_join_element_wise`` kernel interleaves them with the
key/value bytes in one C++ pass.  :func:`encode_batches_from_arrow` does this once for all rows
of a table, every batch at once (deltas are taken from each row's batch start, and uncompressed
batches get their header written into a gap left in the same buffer), so the per-batch cost is
compression, a header and a CRC.  Output is byte-identical to
:class:`~sparkkafka_sink.record.batch.RecordBatchBuilder` fed the same rows; there is no
per-row Python code unless headers are given as Python objects.  One call's rows must encode
to less than 2 GiB (Arrow binary offsets are int32; Spark hands over far smaller batches).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.arrow_views import binary_view_of
from sparkkafka_sink.errors import InvalidHeaderError, InvalidPartitionError, InvalidRecordError
from sparkkafka_sink.record.batch import (
    BATCH_OVERHEAD,
    MAX_RECORD_OVERHEAD,
    NO_TIMESTAMP,
    batch_attributes,
    finish_batch,
    finish_batch_in_place,
)
from sparkkafka_sink.record.compression import CompressionType, compress
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.varint import encode_varint
from sparkkafka_sink.varint_columns import (
    encode_varint_rows,
    encode_varints,
    length_varint_sizes_np,
    pack_words,
    unsigned_varint_sizes_np,
    varint_words,
    zigzag_np,
)

__all__ = [
    "ColumnLike",
    "ExtraHeader",
    "HeaderPairs",
    "HeadersColumnLike",
    "IntColumnLike",
    "HEADERS_TYPE",
    "ArrowRecords",
    "RecordColumns",
    "binary_column",
    "one_array",
    "encode_batch_from_arrow",
    "encode_batches_from_arrow",
    "record_size_bounds",
    "Slice",
    "plan_batches",
]

#: Spark's Kafka ``headers`` column: ``array<struct<key: string, value: binary>>``.
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

# What a column of records may be (``RecordColumns``, ``Producer.send_batch``).  Arrow columns are
# read in place; anything else is converted to one first.
#: keys or values: an Arrow binary, large_binary, string or view array (chunked or not), or a
#: sequence (a numpy object array included) of bytes-like or str items, None for a null
ColumnLike: TypeAlias = pa.Array | pa.ChunkedArray | np.ndarray | Sequence[bytes | bytearray | memoryview | str | None]
#: partitions or timestamps (int64 milliseconds): an Arrow integer array (timestamps: a timestamp
#: array too), a numpy integer array, or a sequence of ints, None for a null (the default)
IntColumnLike: TypeAlias = pa.Array | pa.ChunkedArray | np.ndarray | Sequence[int | None]
#: one record's headers, in order: ``(key, value)`` pairs (a key may repeat; a value may be null)
HeaderPairs: TypeAlias = Sequence[tuple[str, bytes | bytearray | memoryview | None]]
#: headers of many records: a ``HEADERS_TYPE`` Arrow column (``list<struct<key, value>>``, Spark's
#: layout), or one ``HeaderPairs`` per record (None or empty: no headers)
HeadersColumnLike: TypeAlias = pa.Array | pa.ChunkedArray | Sequence[HeaderPairs | None]

@functools.cache
def _scalar(data: bytes) -> pa.Scalar:
    """Binary scalars built on first use: ``pa.scalar`` imports pandas (0.3 s), which every
    Spark worker and planning process would otherwise pay at import."""
    return pa.scalar(data, pa.binary())
_JOIN = pc.JoinOptions(null_handling="replace", null_replacement="")
_ZERO_BYTE = (np.uint64(0), np.uint64(8))  # record attributes: one 0 byte


def _views_supported() -> bool:
    """Binary views (pyarrow >= 16) and their cast to binary, which ``_view_column`` relies on."""
    try:
        words = np.array([[1 | (0x61 << 32), 0]], dtype=np.uint64)
        arr = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(words)])
        return arr.cast(pa.binary()).to_pylist() == [b"a"]
    except (AttributeError, pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return False


_VIEWS = _views_supported()


def _view_join_supported() -> bool:
    """Binary views over several data buffers built from Python and cast to binary (pyarrow
    >= 19; 16-18 refuse them), which ``_join_views`` relies on."""
    if not _VIEWS:
        return False
    try:
        words = np.array([[13, 0], [13, 1 << 32 | 1]], dtype=np.uint64)
        first, second = pa.py_buffer(b"a" * 13), pa.py_buffer(b"xb" + b"b" * 12)
        arr = pa.Array.from_buffers(pa.binary_view(), 2, [None, pa.py_buffer(words), first, second])
        return arr.cast(pa.binary()).to_pylist() == [b"a" * 13, b"b" * 13]
    except (AttributeError, pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False


#: regrouped rows (``RecordColumns.take``), and values in pieces (a Spark task's batches), are
#: encoded from views of their columns' bytes, one copy, rather than joined or taken (a copy) and
#: then joined (another), where pyarrow can (``_VIEW_JOIN``) and the rows' keys and values average
#: at least this many bytes: below it, building the views costs more than the copies it saves
#: (``python -m benchmarks.encoder_paths`` measures the crossover: from Spark's batches, 11-14 %
#: more CPU at 256 B, 7-9 % less at 512 B, 18-28 % less at 1 KiB)
VIEW_JOIN_MIN_BYTES = 512
_VIEW_JOIN = _view_join_supported()


# ------------------------------------------------------------------------------ input columns


class RecordColumns:
    """A call's records as validated, measured columns: binary keys and values, int64 ms
    timestamps (nulls filled in), encoded headers (``P3``), and what of each record does not
    depend on its place in a batch: its key and value lengths and ``tail_size``, the bytes from
    the key length field to its end.  Measured once per call; ``take`` and ``slice`` regroup
    them (Arrow take, numpy gathers) without measuring again.

    The one place the columns of ``encode_batch*_from_arrow`` and ``Producer.send_batch`` are
    checked.  ``keys``/``values``: binary, large_binary, string or view columns (Arrow arrays,
    chunked or not, or sequences of bytes), nulls allowed, ``None`` all null (not both);
    ``timestamps_ms``: an int64 or timestamp column, a sequence or numpy array of ints, one int,
    or ``None``, nulls taking ``default_timestamp_ms`` (now if unset); ``headers``: ``None``, a
    ``list<struct<key: string, value: binary>>`` column, or one sequence of ``(str, bytes |
    None)`` pairs per row.  A bad column raises ``InvalidRecordError`` naming it."""

    __slots__ = ("n", "keys", "values", "key_len", "value_len", "ts", "ts_spread", "ts_mixed_default", "headers",
                 "tail_size", "size_bounds", "partitions", "refused", "gather")

    def __init__(self, keys: ColumnLike | None, values: ColumnLike | None,
                 timestamps_ms: IntColumnLike | int | None = None, headers: HeadersColumnLike | None = None,
                 default_timestamp_ms: int | None = None, *, partitions: IntColumnLike | int | None = None,
                 extra_header: ExtraHeader | None = None):
        n = next((len(c) for c in (keys, values) if c is not None), None)
        if n is None:
            raise InvalidRecordError("at least one of keys and values must be a column")
        self.keys = binary_column(keys, n, "key")
        # values in pieces (Spark's batches, not joined): kept apart where the encoder can read them
        # in place (``gather``, below), else joined here
        in_pieces = _VIEW_JOIN and isinstance(values, pa.ChunkedArray) and values.num_chunks > 1
        self.values: pa.Array | pa.ChunkedArray = (_binary_pieces(values, "value") if in_pieces
                                                   else binary_column(values, n, "value"))
        n_keys, n_values = len(self.keys), len(self.values)       # the key column's, not a setting
        if n_keys != n_values:
            raise InvalidRecordError(f"{n_keys} keys but {n_values} values")
        self.n = n = len(self.keys)
        self.key_len = _lengths(self.keys)
        self.value_len = _lengths(self.values)
        self.ts, self.ts_mixed_default = _timestamps(timestamps_ms, n, default_timestamp_ms)
        self.ts_spread = _spread(self.ts)
        #: each row's partition as given (-1: none, the partitioner's to choose), or None: none given
        self.partitions, bad_partitions = _partitions(partitions, n)
        #: rows whose headers cannot be encoded (a header without a key): measured without them
        self.headers, header_size, bad_headers = _header_column(headers, n, extra_header)
        #: the rows no record can be made of (a negative partition, a header without a key)
        self.refused = bad_partitions | bad_headers
        #: None: row i is row i of ``keys``, ``values`` and ``headers``; else row i is their row
        #: ``gather[i]`` (regrouped by ``take`` without copying their bytes, or values kept in
        #: pieces: see ``VIEW_JOIN_MIN_BYTES``)
        self.gather: np.ndarray | None = None
        if in_pieces:
            if self._long_rows():
                self.gather = np.arange(n)
            else:
                self.values = self.values.combine_chunks()
        self.tail_size = _tail_sizes(self.key_len, self.value_len, header_size)
        #: each record's ``record.batch.estimate_record_size``: its encoded size wherever it lands
        #: in a batch (the worst case of its length, offset and timestamp deltas).  ``send()`` and
        #: ``send_batch()`` hand the partitioner the same sizes, so the sticky partitioner switches
        #: partitions at the same records on both paths.
        self.size_bounds = MAX_RECORD_OVERHEAD + self.tail_size

    def checked(self) -> RecordColumns:
        """These columns, or the error of their first refused row (for callers that encode
        every row or none)."""
        if self.refused:
            raise next(iter(self.refused))[1]
        return self

    def take(self, indices: np.ndarray) -> RecordColumns:
        """The records at ``indices`` (int64), in that order: their bytes copied by Arrow's take,
        or -- long rows, where pyarrow can -- not copied at all (``gather``: the encoder reads
        them where they are)."""
        if self.gather is not None or (_VIEW_JOIN and self._long_rows()):
            gather = indices if self.gather is None else self.gather[indices]
            return self._with(len(indices), lambda col: col, lambda a: a.take(indices), gather)
        arrow_indices = pa.array(indices)
        return self._with(len(indices), lambda col: col.take(arrow_indices), lambda a: a.take(indices))

    def slice(self, start: int, stop: int) -> RecordColumns:
        """Records ``start..stop`` (no copy)."""
        if self.gather is not None:
            return self._with(max(min(stop, self.n) - start, 0), lambda col: col, lambda a: a[start:stop],
                              self.gather[start:stop])
        return self._with(max(min(stop, self.n) - start, 0), lambda col: col[start:stop], lambda a: a[start:stop])

    def _long_rows(self) -> bool:
        """Whether the rows' keys and values average ``VIEW_JOIN_MIN_BYTES`` or more."""
        total = np.maximum(self.key_len, 0).sum() + np.maximum(self.value_len, 0).sum()
        return bool(self.n) and float(total) / self.n >= VIEW_JOIN_MIN_BYTES

    def _with(self, n: int, arrow: Callable[[Any], Any],
              numpy: Callable[[np.ndarray], np.ndarray], gather: np.ndarray | None = None) -> RecordColumns:
        out = object.__new__(RecordColumns)
        out.n, out.keys, out.values, out.gather = n, arrow(self.keys), arrow(self.values), gather
        out.headers = self.headers if isinstance(self.headers, pa.Scalar) else arrow(self.headers)
        out.key_len, out.value_len, out.tail_size, out.size_bounds, out.ts = (
            numpy(a) for a in (self.key_len, self.value_len, self.tail_size, self.size_bounds, self.ts))
        out.partitions = None if self.partitions is None else numpy(self.partitions)
        out.ts_spread = _spread(out.ts) if self.ts_spread else 0
        out.ts_mixed_default = self.ts_mixed_default  # (some rows may have left: still a safe bound)
        out.refused = Refused()  # (the refused rows are the caller's to leave out)
        return out


def _spread(ts: np.ndarray) -> int:
    return int(ts.max()) - int(ts.min()) if len(ts) else 0


def _tail_sizes(key_len: np.ndarray, value_len: np.ndarray, header_size: np.ndarray) -> np.ndarray:
    """Each record's bytes from its key length field to its end: its key and value fields (their
    varint lengths, -1 for null, and bytes) and its headers."""
    lengths = np.concatenate((key_len, value_len))
    fields = length_varint_sizes_np(lengths) + np.maximum(lengths, 0)
    n = len(key_len)
    return fields[:n] + fields[n:] + header_size


def _nbytes(words: tuple[Any, Any]) -> np.ndarray:
    """Byte sizes from a :func:`varint_words` pair."""
    return (words[1] >> np.uint64(3)).astype(np.int64)


def _varint_sizes(signed: np.ndarray) -> np.ndarray:
    """Zigzag varint sizes of any int64s (a timestamp delta may be negative)."""
    return unsigned_varint_sizes_np(zigzag_np(signed))


def one_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``col`` as one array: an array or a column of one piece as it is (Arrow's
    ``combine_chunks`` would copy even that), several pieces joined (a copy)."""
    if not isinstance(col, pa.ChunkedArray):
        return col
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()


def binary_column(col: ColumnLike | None, n: int, what: str) -> pa.Array:
    """Key/value column as ``pa.binary()``; strings are reinterpreted, not copied."""
    if col is None:
        return pa.nulls(n, pa.binary())
    arr: pa.Array
    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        arr = one_array(col)
    else:
        try:
            arr = pa.array(col, pa.binary())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise InvalidRecordError(f"{what} must be binary or string: {exc}") from exc
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if (
        pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
        or getattr(pa.types, "is_binary_view", bool)(t)
        or getattr(pa.types, "is_string_view", bool)(t)
    ):
        return arr.cast(pa.binary())
    raise InvalidRecordError(f"{what} column must be binary or string, not {t}")


def _binary_pieces(col: pa.ChunkedArray, what: str) -> pa.ChunkedArray:
    """``binary_column`` of each piece of ``col``, the pieces kept apart."""
    return pa.chunked_array([binary_column(c, len(c), what) for c in col.chunks], pa.binary())


def _lengths(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Byte lengths of a ``pa.binary()`` array as int64, -1 for nulls, read from its buffers."""
    if isinstance(col, pa.ChunkedArray):
        return np.concatenate([_lengths(c) for c in col.chunks]) if col.num_chunks else np.empty(0, np.int64)
    n = len(col)
    validity, offsets = col.buffers()[:2]
    if offsets is None or n == 0:
        return np.full(n, -1, dtype=np.int64)
    lengths = np.diff(np.frombuffer(offsets, np.int32, n + 1, col.offset * 4)).astype(np.int64)
    if col.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        lengths[~bits[col.offset : col.offset + n].view(bool)] = -1
    return lengths


def _int_column(col: IntColumnLike, n: int, what: str) -> pa.Array:
    """``n`` integers (or timestamps) as one Arrow array, nulls kept; a sequence's None a null."""
    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        arr = one_array(col)
    else:  # a sequence (None: a null) or a numpy array
        try:
            arr = pa.array(np.asarray(col, dtype=np.int64) if isinstance(col, np.ndarray) else col, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise InvalidRecordError(f"{what} must be int64 milliseconds or a timestamp column: {exc}"
                                     if what == "timestamps" else f"{what} must be integers: {exc}") from exc
    if len(arr) != n:
        raise InvalidRecordError(f"{len(arr)} {what} for {n} records")
    return arr


def _timestamps(timestamps_ms: IntColumnLike | int | None, n: int, default_ms: int | None) -> tuple[np.ndarray, bool]:
    """int64 milliseconds per row; nulls (and ``None``) become ``default_ms``, else now.

    Also says whether some but not all rows took the default (see ``_size_bounds``).
    """
    if default_ms is None:
        default_ms = int(time.time() * 1000)
    if timestamps_ms is None:
        return np.full(n, default_ms, dtype=np.int64), False
    if isinstance(timestamps_ms, (int, np.integer)):
        return np.full(n, int(timestamps_ms), dtype=np.int64), False
    col = _int_column(timestamps_ms, n, "timestamps")
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
    elif not pa.types.is_integer(col.type):
        raise InvalidRecordError(f"timestamps must be int64 milliseconds or a timestamp column, not {col.type}")
    mixed = 0 < col.null_count < n
    if col.null_count:
        col = col.fill_null(default_ms)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64), mixed


def _partitions(partitions: IntColumnLike | int | None, n: int) -> tuple[np.ndarray | None, Refused]:
    """Each row's partition as given, -1 for a null (the partitioner's to choose), or None: none
    given; and the rows given a negative partition, which never exists (whether one beyond does
    is the producer's to check: it knows the topic)."""
    if partitions is None:
        return None, Refused()
    if isinstance(partitions, (int, np.integer)):
        given = np.full(n, int(partitions), dtype=np.int64)
        valid = None
    else:
        col = _int_column(partitions, n, "partitions")
        if not pa.types.is_integer(col.type):
            raise InvalidRecordError(f"partitions must be integers, not {col.type}")
        given = np.array(pc.fill_null(col.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        valid = col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else None
    negative = given < 0 if valid is None else (given < 0) & valid
    if not negative.any():
        return given, Refused()
    rows = np.flatnonzero(negative)
    refused = Refused.of([(row, InvalidPartitionError(
        f"Row {row}: partition {int(given[row])} does not exist: partitions are numbered from 0 "
        f"({len(rows)} row(s) out of range)"), int(given[row])) for row in rows.tolist()])
    given[rows] = -1  # (refused: the caller leaves them out)
    return given, refused


#: one more header on every record, after its own: its key, and its value -- the same bytes for
#: every record, or a column (a null: no such header on that record)
ExtraHeader: TypeAlias = tuple[str, "bytes | ColumnLike"]


class _Extra(NamedTuple):
    """An extra header encoded (key and value fields): one scalar for every record, or a column
    (empty where a record has none), and how many each record gets (1, or 0/1 per record)."""

    encoded: pa.Scalar | pa.Array
    per_record: int | np.ndarray


def _extra_header(extra: ExtraHeader | None, n: int) -> _Extra | None:
    if extra is None:
        return None
    name, value = extra
    key_bytes = name.encode("utf-8")
    key_part = encode_varint(len(key_bytes)) + key_bytes
    if isinstance(value, _BYTES):
        data = bytes(value)
        return _Extra(_scalar(key_part + encode_varint(len(data)) + data), 1)
    values = binary_column(value, n, f"header {name!r}")
    if len(values) != n:
        raise InvalidRecordError(f"{len(values)} values of header {name!r} for {n} records")
    each = pc.binary_join_element_wise(_scalar(key_part), binary_view_of(*encode_varints(_lengths(values))), values,
                                       _scalar(b""), options=_JOIN)
    if not values.null_count:
        return _Extra(each, 1)
    present = values.is_valid()
    return _Extra(pc.if_else(present, each, _scalar(b"")), present.to_numpy(zero_copy_only=False).astype(np.int64))


def _header_column(headers: HeadersColumnLike | None, n: int, extra_header: ExtraHeader | None = None
                   ) -> tuple[pa.Array | pa.Scalar, np.ndarray, Refused]:
    """Encoded headers per row (``P3``: count + headers, then the extra header), their sizes, and
    the rows whose headers cannot be encoded (encoded as none).  Headers as Python objects (one
    sequence of ``(str, bytes | None)`` pairs per row) are first made the Arrow column Spark
    hands over."""
    extra = _extra_header(extra_header, n)
    if headers is None:
        return _headers_of(None, None, extra, n) + (Refused(),)
    refused = Refused()
    if isinstance(headers, pa.ChunkedArray):
        headers = one_array(headers)
    elif not isinstance(headers, pa.Array):
        headers, refused = _headers_array(headers)
    col, sizes, more = _arrow_headers(headers, n, extra)
    return col, sizes, refused | more


def _headers_of(joined: pa.Array | None, counts: np.ndarray | None, extra: _Extra | None, n: int
                ) -> tuple[pa.Array | pa.Scalar, np.ndarray]:
    """``P3`` of each record: its header count (``counts`` None: no headers), its headers'
    fields joined (None: none), then the extra header's; and their sizes."""
    if joined is None and (extra is None or isinstance(extra.encoded, pa.Scalar)):  # the same for every record
        data = encode_varint(extra.per_record if extra is not None else 0)  # type: ignore[arg-type]
        data += extra.encoded.as_py() if extra is not None else b""
        return _scalar(data), np.full(n, len(data), dtype=np.int64)
    total = np.zeros(n, dtype=np.int64) if counts is None else counts
    if extra is not None:
        total = total + extra.per_record
    parts = [binary_view_of(*encode_varints(total))]
    if joined is not None:
        parts.append(joined)
    if extra is not None:
        parts.append(extra.encoded)
    col = pc.binary_join_element_wise(*parts, _scalar(b""), options=_JOIN)
    return col, _lengths(col)


def _headers_array(headers: Sequence[HeaderPairs | None]) -> tuple[pa.Array, Refused]:
    """Python headers as a ``HEADERS_TYPE`` column; the rows that are not ``(str, bytes | None)``
    pairs refused, their headers left out (the slower path: a look at each pair)."""
    rows: list[HeaderPairs | None] = []
    refused = []
    for row, h in enumerate(headers):
        try:
            if h and not all(isinstance(k, str) and (v is None or isinstance(v, _BYTES)) for k, v in h):
                raise TypeError("each header is a (str, bytes | None) pair")
            rows.append(h)
        except (TypeError, ValueError) as exc:  # (ValueError: not a pair)
            refused.append((row, InvalidHeaderError(f"Row {row}: cannot encode its headers: {exc}", row), None))
            rows.append(None)
    try:
        return pa.array(rows, HEADERS_TYPE), Refused.of(refused)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError):  # text that is not UTF-8 (a lone surrogate)
        pass
    for row, h in enumerate(rows):  # the rows at fault, one at a time
        try:
            pa.array([h], HEADERS_TYPE)
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError) as exc:
            refused.append((row, InvalidHeaderError(f"Row {row}: cannot encode its headers: {exc}", row), None))
            rows[row] = None
    return pa.array(rows, HEADERS_TYPE), Refused.of(refused)


_BYTES = (bytes, bytearray, memoryview)


def _arrow_headers(headers: pa.Array, n: int, extra: _Extra | None = None
                   ) -> tuple[pa.Array | pa.Scalar, np.ndarray, Refused]:
    """Vectorized headers from a ``list<struct<key, value>>`` column (Spark's layout)."""
    if len(headers) != n:
        raise InvalidRecordError(f"{len(headers)} header rows for {n} records")
    if not pa.types.is_list(headers.type):
        raise InvalidRecordError(f"headers must be list<struct<key, value>>, not {headers.type}")
    counts = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False)
    items = pc.list_flatten(headers)  # headers of non-null rows, in row order
    if len(items) == 0:
        return _headers_of(None, None, extra, n) + (Refused(),)
    try:
        hkeys = binary_column(items.field("key"), len(items), "header key")
        hvals = binary_column(items.field("value"), len(items), "header value")
    except (KeyError, ValueError, AttributeError, pa.ArrowInvalid) as exc:
        raise InvalidRecordError(f"header structs need 'key' and 'value' fields: {exc}") from exc
    if hkeys.null_count or items.null_count:
        bad = np.flatnonzero(pc.or_(items.is_null(), hkeys.is_null()).to_numpy(zero_copy_only=False))
        rows = np.unique(np.searchsorted(np.cumsum(counts), bad, side="right"))
        refused = Refused.of([(row, InvalidHeaderError(
            f"Row {row}: its headers hold a null element or a null key (each header needs a key)", row), None)
            for row in rows.tolist()])
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        col, sizes, _ = _arrow_headers(pc.if_else(pa.array(mask), pa.scalar(None, headers.type), headers), n, extra)
        return col, sizes, refused
    each = pc.binary_join_element_wise(
        binary_view_of(*encode_varints(_lengths(hkeys))), hkeys,
        binary_view_of(*encode_varints(_lengths(hvals))), hvals, _scalar(b""), options=_JOIN,
    )
    grouped = pa.ListArray.from_arrays(pa.array(_offsets(counts), pa.int32()), each)
    return _headers_of(pc.binary_join(grouped, _scalar(b"")), counts, extra, n) + (Refused(),)


def _view_column(word: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """Binary column of row i = the low ``sizes[i]`` (<= 8) bytes of ``word[i]``.

    The words become inline binary views (16-byte structs: int32 length + up to 12 data
    bytes) that Arrow's cast compacts in C++: no per-byte work in numpy.
    """
    if not _VIEWS:  # old pyarrow: compact in numpy instead
        data, sizes = _compact_words(word, sizes)
        return _binary_from_sizes(data, sizes)
    views = pa.py_buffer(_inline_views(word, sizes))
    return pa.Array.from_buffers(pa.binary_view(), word.shape[0], [None, views]).cast(pa.binary())


def _inline_views(word: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Inline binary views (16 bytes each: int32 length, then up to 12 data bytes), row i the
    low ``sizes[i]`` (<= 8) bytes of ``word[i]``."""
    views = np.empty((word.shape[0], 2), dtype=np.uint64)
    views[:, 0] = sizes.view(np.uint64) | (word << np.uint64(32))
    views[:, 1] = word >> np.uint64(32)
    return views


def _compact_words(word: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    groups = word.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8)  # low bytes first
    return groups[np.arange(8) < sizes[:, None]], sizes


def _binary_from_sizes(data: np.ndarray, sizes: np.ndarray) -> pa.Array:
    return binary_view_of(data, _offsets(sizes))


def _offsets(sizes: np.ndarray) -> np.ndarray:
    out = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


# --------------------------------------------------------------------------------- encoding


def _encode_records(rows: RecordColumns, batch_start: np.ndarray, first_offset: np.ndarray | int = 0,
                    base_ts: np.ndarray | None = None, gap_starts: np.ndarray | None = None,
                    ) -> tuple[pa.Buffer, np.ndarray]:
    """All records, each with deltas relative to its batch: offset delta ``i - batch_start[i] +
    first_offset[i]`` (records already in an open batch it extends), timestamp delta from
    ``base_ts[i]`` (None: its batch's first row's).

    With ``gap_starts`` (the first row of each batch to frame in place), 61 zero bytes are left
    before each for its header, so uncompressed batches can be finished in place.  Returns
    ``(data pa.Buffer, offsets int64[n + 1])``: row i's bytes (led by its batch's header gap,
    if any) start at ``offsets[i]``.
    """
    n = rows.n
    offset_delta = np.arange(n, dtype=np.int64) - batch_start + first_offset
    od_words = varint_words(offset_delta, nonnegative=True)
    if base_ts is None:
        ts_delta = rows.ts - rows.ts[batch_start] if rows.ts_spread else 0
    else:
        ts_delta = rows.ts - base_ts
    ts_words = varint_words(ts_delta)
    if ts_words[0] is None:  # a delta beyond 8 bytes: the general path below
        assert isinstance(ts_delta, np.ndarray)  # the scalar 0 fits in one byte
        body = 1 + _nbytes(od_words) + _varint_sizes(ts_delta) + rows.tail_size
        packed = None
    else:
        body = 1 + _nbytes(od_words) + _nbytes(ts_words) + rows.tail_size
        # P1 = length | attributes (0 encodes as the byte 0) | tsDelta | offsetDelta | keyLength
        packed = pack_words(
            [varint_words(body, nonnegative=True), _ZERO_BYTE, ts_words, od_words, varint_words(rows.key_len)]
        )
    if rows.gather is not None:  # regrouped without copying: one pass over views of every piece
        return _join_views(rows, body, ts_delta, offset_delta, packed, gap_starts)
    if packed is None:
        columns = (body, 0, ts_delta, offset_delta, rows.key_len)
        p1 = _binary_from_sizes(*encode_varint_rows(columns))
    else:
        p1 = _view_column(*packed)
    # int32 lengths take at most 5 bytes: pack_words never returns None here
    p2 = _view_column(*pack_words([varint_words(rows.value_len)]))  # type: ignore[misc]
    parts = [p1, rows.keys, p2, rows.values, rows.headers]
    if gap_starts is not None and len(gap_starts):
        gap = np.zeros(n, dtype=np.int64)
        gap[gap_starts] = BATCH_OVERHEAD
        parts.insert(0, binary_view_of(np.zeros(BATCH_OVERHEAD * len(gap_starts), np.uint8), _offsets(gap)))
    joined = pc.binary_join_element_wise(*parts, _scalar(b""), options=_JOIN)
    offsets = np.frombuffer(joined.buffers()[1], np.int32, n + 1, joined.offset * 4)
    return joined.buffers()[2], offsets.astype(np.int64)


_VIEW_INLINE = 12  # a binary view holds up to 12 bytes itself; longer ones point into a data buffer
_HEADER_GAP = pa.py_buffer(bytes(BATCH_OVERHEAD))  # what a header gap's views point at
#: binary views (n x 2 uint64: length and prefix or inline bytes; buffer index and offset or
#: inline bytes) and the data buffers they point into
_Views: TypeAlias = tuple[np.ndarray, list[pa.Buffer]]


def _join_views(rows: RecordColumns, body: np.ndarray, ts_delta: np.ndarray | int, offset_delta: np.ndarray,
                packed: tuple[np.ndarray, np.ndarray] | None,
                gap_starts: np.ndarray | None) -> tuple[pa.Buffer, np.ndarray]:
    """``_encode_records`` for regrouped rows (``gather``): each record's pieces -- its header
    gap (if any), ``P1``, key, ``P2``, value, ``P3`` -- as consecutive binary views, the key,
    value and header views pointing into their columns' own buffers at the gathered rows, and
    one cast to binary copies every byte once, in order."""
    n, gather = rows.n, rows.gather
    assert gather is not None
    p1: _Views
    if packed is None:
        p1 = _views(_binary_from_sizes(*encode_varint_rows((body, 0, ts_delta, offset_delta, rows.key_len))))
    else:
        p1 = (_inline_views(*packed), [])
    p2: _Views = (_inline_views(*pack_words([varint_words(rows.value_len)])), [])  # type: ignore[misc]
    keys, values = _views(rows.keys, gather, rows.key_len), _views(rows.values, gather, rows.value_len)
    p3: _Views
    if isinstance(rows.headers, pa.Scalar):  # b"\x00" (no headers): the same inline view every row
        p3 = (np.broadcast_to(np.array([1, 0], dtype=np.uint64), (n, 2)), [])
    else:
        p3 = _views(rows.headers, gather)
    pieces = [p1, keys, p2, values, p3]
    if gap_starts is not None and len(gap_starts):
        gap = np.zeros((n, 2), dtype=np.uint64)
        gap[gap_starts, 0] = BATCH_OVERHEAD  # (prefix 0: the gap's first bytes are zeros)
        pieces.insert(0, (gap, [_HEADER_GAP]))
    k = len(pieces)
    words = np.empty((n, k, 2), dtype=np.uint64)
    buffers: list[pa.Buffer] = []
    for i, (piece, piece_buffers) in enumerate(pieces):
        words[:, i, :] = piece
        if piece_buffers and len(buffers):
            _renumber(words[:, i, :], len(buffers))
        buffers += piece_buffers
    joined = pa.Array.from_buffers(pa.binary_view(), n * k, [None, pa.py_buffer(words), *buffers]).cast(pa.binary())
    offsets = np.frombuffer(joined.buffers()[1], np.int32, n * k + 1, joined.offset * 4)[::k]
    return joined.buffers()[2], offsets.astype(np.int64)


def _renumber(views: np.ndarray, by: int) -> None:
    """Point ``views``' out-of-line views ``by`` buffers further (their data buffers placed after
    ``by`` others)."""
    out_of_line = (views[:, 0] & np.uint64(0xFFFFFFFF)) > _VIEW_INLINE
    views[out_of_line, 1] += np.uint64(by)


def _views(col: pa.Array | pa.ChunkedArray, gather: np.ndarray | None = None,
           lengths: np.ndarray | None = None) -> _Views:
    """The binary views of ``col``'s rows (at ``gather``, if given) and the data buffers they
    point into (Arrow's cast builds them over the column's own buffer: no byte is copied; a
    column in pieces has each piece's buffers).  A null row (``lengths`` -1) is an empty view."""
    if isinstance(col, pa.ChunkedArray):
        pieces = [_arrow_views(piece) for piece in col.chunks]
        words = np.concatenate([w for w, _ in pieces]) if pieces else np.empty((0, 2), np.uint64)  # (a copy)
        buffers: list[pa.Buffer] = []
        start = 0
        for piece_words, piece_buffers in pieces:  # each piece's views pointed past the pieces before
            _renumber(words[start:start + len(piece_words)], len(buffers))
            start += len(piece_words)
            buffers += piece_buffers
        words = words[gather] if gather is not None else words
    else:
        words, buffers = _arrow_views(col)
        words = words[gather] if gather is not None else words.copy()
    if lengths is not None and col.null_count:
        words[lengths < 0] = 0
    return words, buffers


def _arrow_views(col: pa.Array) -> _Views:
    """The binary views Arrow's cast builds over ``col``'s own buffer (read only, not copied) and
    the data buffers they point into."""
    as_views = col.cast(pa.binary_view())
    arrow_buffers = as_views.buffers()
    words = np.frombuffer(arrow_buffers[1], np.uint64, 2 * (len(col) + as_views.offset)).reshape(-1, 2)
    return words[as_views.offset:], [b for b in arrow_buffers[2:] if b is not None]


def _finish_batches(rows: RecordColumns, data: pa.Buffer, offsets: np.ndarray, slices: list[Slice], ctype: int,
                    level: int | None, attributes: int,
                    producer_state: tuple[int, int, int] | None) -> list[tuple[memoryview | bytes, int]]:
    """Frame each framed slice (compressed, or in place over its header gap); a bare slice
    is its records' bytes, for an open batch to append (``EncodedRecordsBuilder``).
    ``producer_state`` None: framed without producer state and CRC, which the caller stamps
    (``set_producer_state``) before sending, so the CRC runs once over the batch, not twice."""
    with_crc = producer_state is not None
    producer_state = producer_state or (-1, -1, -1)
    starts = np.fromiter((sl.start for sl in slices), np.int64, len(slices))
    base_ts = rows.ts[starts].tolist()
    max_ts = np.maximum(np.maximum.reduceat(rows.ts, starts), NO_TIMESTAMP).tolist()
    bounds = offsets[np.append(starts, slices[-1].stop)].tolist()  # byte range of each slice
    view = memoryview(data).cast("B")  # pa.Buffer exports signed chars
    out: list[tuple[memoryview | bytes, int]] = []
    for i, sl in enumerate(slices):
        part = view[bounds[i] : bounds[i + 1]]
        if not sl.framed:
            out.append((part, max_ts[i]))
        elif not ctype:  # encoded with a header gap: the batch spans its gap and its rows
            out.append((finish_batch_in_place(part, attributes, sl.stop - sl.start, base_ts[i], max_ts[i],
                                              *producer_state, with_crc), max_ts[i]))
        else:
            out.append((finish_batch(compress(ctype, part, level), attributes, sl.stop - sl.start, base_ts[i],
                                     max_ts[i], *producer_state, with_crc), max_ts[i]))
    return out


def encode_batch_from_arrow(
    keys: ColumnLike | None,
    values: ColumnLike | None,
    timestamps_ms: IntColumnLike | int | None,
    headers: HeadersColumnLike | None = None,
    compression_type: CompressionType | int = CompressionType.NONE,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    default_timestamp_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """One record batch holding every given row (the caller slices rows into batches).

    ``keys``/``values``: binary, large_binary, string (utf-8 bytes) or view columns, nulls
    allowed; ``None`` means all null.  ``timestamps_ms``: int64 (or timestamp) column, one int
    for every row, or ``None``; nulls and ``None`` take ``default_timestamp_ms`` (now if unset).
    ``headers``: ``None``, a ``list<struct<key: string, value: binary>>`` column, or per-row
    sequences of ``(str, bytes | None)``.  Byte-identical to ``RecordBatchBuilder``.
    """
    rows = RecordColumns(keys, values, timestamps_ms, headers, default_timestamp_ms).checked()
    ctype = CompressionType(compression_type)
    attributes = batch_attributes(ctype, is_transactional)
    if rows.n == 0:
        return finish_batch(compress(ctype, b""), attributes, 0, NO_TIMESTAMP, NO_TIMESTAMP,
                            producer_id, producer_epoch, base_sequence)
    ((batch, _),) = _encode(rows, [Slice(0, rows.n)], ctype, compression_level, attributes,
                            (producer_id, producer_epoch, base_sequence))
    return batch if isinstance(batch, bytes) else bytes(batch)


def encode_batches_from_arrow(
    keys: ColumnLike | None,
    values: ColumnLike | None,
    timestamps_ms: IntColumnLike | int | None,
    headers: HeadersColumnLike | None = None,
    compression_type: CompressionType | int = CompressionType.NONE,
    write_limit: int = 16384,
    *,
    group_starts: Iterable[int] | None = None,
    default_timestamp_ms: int | None = None,
    compression_level: int | None = None,
) -> list[tuple[int, int, bytes | memoryview]]:
    """Split all rows into batches within ``write_limit`` and encode them in one vectorized pass.

    Returns ``[(start, stop, batch)]`` covering the rows in order.  Each batch equals
    ``encode_batch_from_arrow`` of its slice and carries no producer id (stamp it with
    ``batch.set_producer_state``); a row alone above the limit gets its own batch.
    ``group_starts`` (ascending row indices, the first 0) splits the rows into runs that no
    batch crosses: the bulk producer groups rows by partition and encodes all partitions in
    one call.  Uncompressed batches are memoryviews sharing one buffer (no copy), others are
    bytes.
    """
    return ArrowRecords(RecordColumns(keys, values, timestamps_ms, headers, default_timestamp_ms).checked(),
                        group_starts).encode(
        compression_type, write_limit, compression_level)


class Slice(NamedTuple):
    """Rows ``[start, stop)`` of one batch: ``framed``, a whole record batch (header, codec);
    or bare records extending an open batch (``record.batch.EncodedRecordsBuilder``) that holds
    ``first_offset`` records so far and began at ``base_ts`` (None: a new open batch, based at
    its first row).  (A tuple: a call makes one per partition, hundreds.)"""

    start: int
    stop: int
    framed: bool = True
    first_offset: int = 0
    base_ts: int | None = None


class ArrowRecords:
    """Measured columns (``RecordColumns``) cut into runs no batch crosses (``group_starts``:
    the bulk producer's partitions), planned and encoded in one pass.

    ``sizes`` (each row's encoded size bound in a batch of its own run) is there before
    encoding, so a caller can reject an oversized row without having encoded anything;
    ``size_bounds`` gives the bounds for rows that extend open batches.
    """

    def __init__(self, columns: RecordColumns, group_starts: Iterable[int] | None = None):
        self._rows = columns
        self.n = columns.n
        self.groups = _group_bounds(group_starts, self.n) if self.n else []

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        return _size_bounds(self._rows, self.groups)

    def size_bounds(self, group_first_offsets: Sequence[int] | np.ndarray | None,
                    base_timestamps: Sequence[int] = ()) -> np.ndarray:
        """``sizes`` for rows that may extend open batches holding ``group_first_offsets``
        records (one per group) and based at ``base_timestamps``: their offset and timestamp
        deltas run on from those batches'."""
        return _size_bounds(self._rows, self.groups, group_first_offsets, base_timestamps)

    def timestamp(self, row: int) -> int:
        """Row ``row``'s timestamp (nulls filled in): a new open batch's base."""
        return int(self._rows.ts[row])

    def encode(self, compression_type: CompressionType | int = CompressionType.NONE, write_limit: int = 16384,
               compression_level: int | None = None) -> list[tuple[int, int, bytes | memoryview]]:
        if self.n == 0:
            return []
        plan = [Slice(a, b) for a, b in plan_batches(self.sizes, write_limit, self.groups)]
        return [(sl.start, sl.stop, data) for sl, (data, _) in zip(plan, self.encode_slices(plan, compression_type,
                                                                                             compression_level), strict=True)]

    def encode_slices(self, slices: list[Slice], compression_type: CompressionType | int = CompressionType.NONE,
                      compression_level: int | None = None, *, stamped_later: bool = False
                      ) -> list[tuple[bytes | memoryview, int]]:
        """``(data, max timestamp)`` per slice, in one vectorised pass over rows that the slices,
        in row order, cover: a framed slice's batch, a bare slice's records.  ``stamped_later``:
        framed batches get no CRC yet, as ``set_producer_state`` computes it when it stamps them."""
        ctype = CompressionType(compression_type)
        return _encode(self._rows, slices, ctype, compression_level, batch_attributes(ctype),
                       None if stamped_later else (-1, -1, -1))


def _group_bounds(group_starts: Iterable[int] | None, n: int) -> list[tuple[int, int]]:
    if group_starts is None:
        return [(0, n)]
    starts = [int(x) for x in group_starts]
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False)) or starts[-1] >= n:
        raise ValueError(f"group_starts must rise from 0 and stay below {n}: {starts[:8]}")
    return list(zip(starts, starts[1:] + [n], strict=False))


def _encode(rows: RecordColumns, slices: list[Slice], ctype: int, level: int | None, attributes: int,
            producer_state: tuple[int, int, int] | None) -> list[tuple[memoryview | bytes, int]]:
    """Encode ``slices`` (covering ``rows`` in order, possibly skipping none) in one pass."""
    starts = np.fromiter((sl.start for sl in slices), np.int64, len(slices))
    lengths = np.fromiter((sl.stop - sl.start for sl in slices), np.int64, len(slices))
    if lengths.sum() != rows.n or (len(slices) and (starts[0] != 0 or (starts[1:] != starts[:-1] + lengths[:-1]).any())):
        raise ValueError("slices must cover the rows in order")
    batch_start = np.repeat(starts, lengths)
    first_offset = np.repeat(np.fromiter((sl.first_offset for sl in slices), np.int64, len(slices)), lengths)
    base_ts = None
    if any(sl.base_ts is not None for sl in slices):
        bases = np.fromiter((rows.ts[sl.start] if sl.base_ts is None else sl.base_ts for sl in slices),
                            np.int64, len(slices))
        base_ts = np.repeat(bases, lengths)
    framed_starts = starts[[sl.framed for sl in slices]] if not ctype else None
    data, offsets = _encode_records(rows, batch_start, first_offset, base_ts, framed_starts)
    return _finish_batches(rows, data, offsets, slices, ctype, level, attributes, producer_state)


# --------------------------------------------------------------------------------- planning


_NOW_SLACK_MS = 3_600_000


def _size_bounds(rows: RecordColumns, groups: list[tuple[int, int]],
                 group_first_offsets: Sequence[int] | np.ndarray | None = None,
                 base_timestamps: Sequence[int] = ()) -> np.ndarray:
    """Per-row encoded size bound; the offset delta is bounded by the row's index in its group
    plus the records of the open batch it may extend, the timestamp delta by the spread of the
    rows' and those batches' timestamps."""
    if rows.n == 0:
        return np.zeros(0, dtype=np.int64)
    spread = rows.ts_spread  # any |ts[i] - ts[start]| is at most this
    if len(base_timestamps):
        spread = max(int(rows.ts.max()), *base_timestamps) - min(int(rows.ts.min()), *base_timestamps)
    if rows.ts_mixed_default:
        # Null timestamps become "now" when encoding, a little later than now: leave room.
        spread += _NOW_SLACK_MS
    ts_size = max(_varint_sizes(np.array([spread, -spread], dtype=np.int64)))
    index = np.arange(rows.n, dtype=np.int64)  # offset delta <= row index within its group
    if groups and len(groups) > 1:
        starts = np.array([a for a, _ in groups], dtype=np.int64)
        index -= np.repeat(starts, [b - a for a, b in groups])
    if group_first_offsets is not None:
        index += np.repeat(np.asarray(group_first_offsets, dtype=np.int64), [b - a for a, b in groups])
    body = 1 + ts_size + length_varint_sizes_np(index) + rows.tail_size
    return body + length_varint_sizes_np(body)


def record_size_bounds(
    keys: ColumnLike | None, values: ColumnLike | None, timestamps_ms: IntColumnLike | int | None = None,
    headers: HeadersColumnLike | None = None, *, default_timestamp_ms: int | None = None
) -> np.ndarray:
    """Per-row upper bound of the encoded record size, wherever a batch starts before it.

    Exact key/value/header sizes; the offset delta is bounded by the row's index and the
    timestamp delta by the column's timestamp spread, so slices planned from these sizes stay
    within the limit once encoded (null timestamps: within an hour of this call).
    """
    return ArrowRecords(RecordColumns(keys, values, timestamps_ms, headers, default_timestamp_ms).checked()).sizes


def plan_batches(sizes: np.ndarray | Sequence[int], write_limit: int,
                 groups: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """Split rows into ``[start, stop)`` slices whose ``61 + sum(sizes)`` fits ``write_limit``.

    Greedy like ``RecordBatchBuilder.try_append``: each slice takes as many rows as fit and at
    least one; no slice crosses a ``groups`` boundary.  One ``searchsorted`` per slice, not per
    row.
    """
    cum = _offsets(np.asarray(sizes, dtype=np.int64))
    n = cum.shape[0] - 1
    budget = write_limit - BATCH_OVERHEAD
    out = []
    for start, end in groups or [(0, n)]:
        while start < end:
            stop = int(np.searchsorted(cum, cum[start] + budget, side="right")) - 1
            stop = min(max(stop, start + 1), end)
            out.append((start, stop))
            start = stop
    return out
