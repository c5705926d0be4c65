"""Avro's binary encoding of whole Arrow columns, following an :class:`AvroBinding`.

No Python object per row: each value becomes *parts* -- binary columns (strings, bytes, fixed,
decimals) and :class:`Words` (varints, floats, booleans, union indexes: each row's next bytes as
one little-endian uint64) -- and a record's parts are concatenated row by row by Arrow's
``binary_join_element_wise`` in one C++ pass, neighbouring words packed into one first (an id,
a string's length and a union index are one column).  Avro's int and long are the zigzag varints
Kafka's records use (``varint_columns``); an array or map is one block (its count, the items, a
0), its items encoded as one column and regrouped by the list's offsets without a copy; a union
is its branch index then the value.  A null slot's bytes are whatever its buffer holds and get
masked; nothing is ever skipped row by row.

What a schema cannot hold is found per row, not raised: a null where the schema has no null, a
decimal beyond the schema's precision, a string outside an enum, a binary of the wrong size for
a fixed.  Those rows come back in ``EncodedColumn.bad_rows``, their value null.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.arrow_views import binary_view_of
from sparkkafka_sink.serialization.avro_schema import (
    NO_DEFAULT,
    AvroBinding,
    AvroJson,
    AvroSchema,
    AvroType,
    avro_schema,
    check_avro_schema,
)
from sparkkafka_sink.serialization.columns import (
    BadRows,
    Rows,
    as_binary,
    join,
    lengths,
    list_offsets,
    planned_input,
    raw_values,
    regroup,
    time_values,
    unscaled_bytes,
    validity,
)
from sparkkafka_sink.serialization.encoded import EncodedColumn
from sparkkafka_sink.serialization.words import Piece, Words, masked, packed
from sparkkafka_sink.varint_columns import encode_unsigned_varint, zigzag

__all__ = ["AvroEncoder", "encode_avro_datum"]


class AvroEncoder:
    """Encodes columns of one Arrow type with one Avro schema, checked and planned once (on the
    driver it raises :class:`~sparkkafka_sink.serialization.encoded.InvalidSchemaError` for a
    schema that cannot hold the column; in each task :meth:`encode` runs per batch)."""

    def __init__(self, schema: AvroSchema | AvroJson, arrow_type: pa.DataType, column: str = "value"):
        self.schema = avro_schema(schema)
        self.arrow_type = arrow_type
        self.binding = check_avro_schema(self.schema, arrow_type, column=column)
        self._root = _Slot(self.binding)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> EncodedColumn:
        """Each row's Avro encoding (no Schema Registry header: see ``encoded.frame``); a null row
        stays null (a tombstone), a row the schema cannot hold is null and listed in ``bad_rows``."""
        array = planned_input(array, self.arrow_type)
        n = len(array)
        valid = validity(array)
        bad = BadRows()
        parts = self._root.parts(array, Rows(n, written=lambda: valid), bad, tombstones=True)
        return bad.result(join(packed(parts, n), n), valid)


def _index(i: int) -> bytes:
    """A union branch index (or an array's item count) as Avro writes it."""
    return encode_unsigned_varint(zigzag(i))


# ---------------------------------------------------------------------------------- writers


class _Slot:
    """A place in the schema that a (possibly null) value fills: the union around the value
    (branch index, or the null branch for a null), or a bad row for a null with nowhere to go."""

    def __init__(self, binding: AvroBinding):
        self.binding = binding
        self.value = _writer(binding)
        self.value_index = _index(binding.branch) if binding.branch is not None else b""
        self.null_index = _index(binding.null_branch) if binding.null_branch is not None else None

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows, tombstones: bool = False) -> list[Piece]:
        b = self.binding
        if b.write == "null":
            return [self.null_index] if self.null_index else []
        valid = validity(arr)
        if valid is None or tombstones:  # a null top-level value is a tombstone, not an Avro value
            return [self.value_index, *self.value.parts(arr, rows, bad)]
        if self.null_index is None:
            bad.add(rows, ~valid, b.path, lambda i: f"null, but Avro {b.declared} has no null")
            return [self.value_index, *self.value.parts(arr, rows.where(valid), bad)]
        value = masked(self.value.parts(arr, rows.where(valid), bad), valid, len(arr))
        when_value, when_null = Words.constant(self.value_index), Words.constant(self.null_index)
        index = Words(np.where(valid, when_value.word, when_null.word), np.where(valid, when_value.bits, when_null.bits),
                       max(when_value.top, when_null.top))
        return [index, *value]


class _Writer:
    def __init__(self, binding: AvroBinding):
        self.binding = binding

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        raise NotImplementedError


def _writer(binding: AvroBinding) -> _Writer:
    return _WRITERS[binding.write](binding)


class _Boolean(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        n = len(arr)
        bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little",
                             count=arr.offset + n)[arr.offset:]
        return [Words(bits.astype(np.uint64), np.uint64(8), 8)]


_INT_DTYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
               pa.date32(): np.int32}


class _Int(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        return [Words.varints(raw_values(arr, _INT_DTYPES[arr.type]).astype(np.int64, copy=False))]


class _Timestamp(_Writer):
    """Timestamps (and day-time intervals) as microseconds, or milliseconds rounded down as
    Spark's ``microsToMillis``."""

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        return [Words.varints(time_values(arr, "ms" if self.binding.write == "timestamp_millis" else "us"))]


class _Float(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        bits = raw_values(arr, np.float32).view(np.uint32).astype(np.uint64)
        return [Words(bits, np.uint64(32), 32)]


class _Double(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        values = raw_values(arr, np.float64 if arr.type == pa.float64() else np.float32)
        return [Words(values.astype(np.float64, copy=False).view(np.uint64), np.uint64(64), 64)]


class _Bytes(_Writer):
    """A string's UTF-8 or a binary's bytes, their length first."""

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        data = as_binary(arr)
        return [Words.varints(lengths(data), nonnegative=True), data]


class _Fixed(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        data = as_binary(arr)
        size = self.binding.avro.size
        sizes = lengths(data)
        wrong = sizes != size
        if wrong.any():
            valid = validity(arr)
            bad.add(rows, wrong if valid is None else wrong & valid, self.binding.path,
                    lambda i: f"{sizes[i]} bytes do not fit Avro {self.binding.avro}: it holds exactly {size}")
        return [data]


class _Enum(_Writer):
    def __init__(self, binding: AvroBinding):
        super().__init__(binding)
        self.symbols = pa.array(binding.avro.symbols, pa.string())

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        index = pc.index_in(arr, value_set=self.symbols.cast(arr.type))
        if index.null_count > arr.null_count:
            unknown = index.is_null().to_numpy(zero_copy_only=False)
            valid = validity(arr)
            bad.add(rows, unknown if valid is None else unknown & valid, self.binding.path,
                    lambda i: f"{arr[i].as_py()!r} is not a symbol of Avro {self.binding.avro}")
        return [Words.varints(index.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))]


class _Decimal(_Writer):
    """decimal128 as big-endian two's complement: a fixed's size (sign-extended), or bytes in as
    few bytes as hold the value (Java's ``BigInteger.toByteArray``), length first."""

    def __init__(self, binding: AvroBinding):
        super().__init__(binding)
        t, avro = binding.arrow_type, binding.avro
        self.limit = None
        if avro.precision < t.precision:  # values beyond the schema's precision are bad rows
            self.limit = pa.scalar(Decimal(10) ** (avro.precision - t.scale), t)

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        n = len(arr)
        if self.limit is not None:
            over = pc.greater_equal(pc.abs(arr), self.limit).fill_null(False).to_numpy(zero_copy_only=False)
            if over.any():
                avro = self.binding.avro
                bad.add(rows, over, self.binding.path,
                        lambda i: f"{arr[i].as_py()} does not fit decimal({avro.precision},{avro.scale})")
        big_endian = np.frombuffer(arr.buffers()[1], np.uint8, 16 * n, 16 * arr.offset).reshape(n, 16)[:, ::-1]
        negative = big_endian[:, 0] >= 0x80
        if self.binding.write == "decimal_fixed":
            size = self.binding.avro.size
            if size <= 16:
                data = np.ascontiguousarray(big_endian[:, 16 - size:])
            else:
                sign = np.where(negative, np.uint8(0xFF), np.uint8(0))[:, None]
                data = np.concatenate([np.repeat(sign, size - 16, axis=1), big_endian], axis=1)
            return [binary_view_of(data.reshape(-1), np.arange(n + 1, dtype=np.int64) * size)]
        unscaled = unscaled_bytes(arr)
        return [Words.varints(lengths(unscaled), nonnegative=True), unscaled]


class _Array(_Writer):
    """One block per row: the item count, the items, a 0 (an empty array: the 0 alone)."""

    def __init__(self, binding: AvroBinding):
        super().__init__(binding)
        assert binding.item is not None
        self.item = _Slot(binding.item)

    def items(self, arr: pa.Array, start: int, stop: int, rows: Rows, bad: BadRows) -> list[Piece]:
        return self.item.parts(arr.values.slice(start, stop - start), rows, bad)

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        offsets = list_offsets(arr)
        start, stop = int(offsets[0]), int(offsets[-1])
        if stop == start:
            return [b"\x00"]
        local = offsets - start
        item_parts = self.items(arr, start, stop, rows.elements(local, validity(arr)), bad)
        joined = join(packed(item_parts, stop - start), stop - start)
        counts = np.diff(local)
        return [Words.varints(counts, nonnegative=True), regroup(joined, local),
                Words(np.uint64(0), (counts > 0).astype(np.uint64) * np.uint64(8), 8)]


class _Map(_Array):
    """An array of (key, value) entries, keys being strings."""

    def items(self, arr: pa.Array, start: int, stop: int, rows: Rows, bad: BadRows) -> list[Piece]:
        entries = arr.values.slice(start, stop - start)
        keys = as_binary(entries.field(0))
        return [Words.varints(lengths(keys), nonnegative=True), keys,
                *self.item.parts(entries.field(1), rows, bad)]


class _Record(_Writer):
    """The fields in the schema's order: a struct's child each, or the field's default."""

    def __init__(self, binding: AvroBinding):
        super().__init__(binding)
        self.fields: list[tuple[int, _Slot] | bytes] = []
        for f in binding.fields:
            if f.binding is not None:
                assert f.arrow_index is not None
                self.fields.append((f.arrow_index, _Slot(f.binding)))
            elif f.field.default is not NO_DEFAULT:
                self.fields.append(encode_avro_datum(f.field.type, f.field.default))
            else:  # a union with null, as Spark writes a field the DataFrame lacks
                null_branch = next(i for i, b in enumerate(f.field.type.branches) if b.kind == "null")
                self.fields.append(_index(null_branch))

    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        inner = rows.where(validity(arr))
        out: list[Piece] = []
        for f in self.fields:
            if isinstance(f, bytes):
                out.append(f)
            else:
                index, slot = f
                out += slot.parts(arr.field(index), inner, bad)
        return out


class _Null(_Writer):
    def parts(self, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
        return []


_WRITERS: dict[str, Callable[[AvroBinding], _Writer]] = {
    "null": _Null, "boolean": _Boolean, "int": _Int, "float": _Float, "double": _Double, "bytes": _Bytes,
    "fixed": _Fixed, "enum": _Enum, "decimal_fixed": _Decimal, "decimal_bytes": _Decimal,
    "timestamp_micros": _Timestamp, "timestamp_millis": _Timestamp, "array": _Array, "map": _Map,
    "record": _Record,
}


# --------------------------------------------------------------------------- one datum (defaults)


def encode_avro_datum(t: AvroType, value: Any) -> bytes:
    """One value given as JSON (a field's default: bytes as code points 0-255, a union's value
    for its first branch) in Avro's binary encoding."""
    kind = t.kind
    if kind == "union":
        return _index(0) + encode_avro_datum(t.branches[0], value)
    if kind == "null":
        return b""
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in ("int", "long"):
        return encode_unsigned_varint(zigzag(int(value)))
    if kind == "float":
        return struct.pack("<f", value)
    if kind == "double":
        return struct.pack("<d", value)
    if kind in ("bytes", "string"):
        data: bytes = value.encode("latin-1" if kind == "bytes" else "utf-8")
        return encode_unsigned_varint(zigzag(len(data))) + data
    if kind == "fixed":
        fixed: bytes = value.encode("latin-1")
        return fixed
    if kind == "enum":
        return _index(t.symbols.index(value))
    if kind in ("array", "map"):
        assert t.items is not None
        items = t.items
        if not value:
            return b"\x00"
        if kind == "array":
            body = b"".join(encode_avro_datum(items, v) for v in value)
        else:
            body = b"".join(encode_avro_datum(AvroType("string"), k) + encode_avro_datum(items, v)
                            for k, v in value.items())
        return _index(len(value)) + body + b"\x00"
    if kind == "record":
        return b"".join(encode_avro_datum(f.type, value[f.name] if f.name in value else f.default)
                        for f in t.fields)
    raise ValueError(f"no Avro value of {t}")
