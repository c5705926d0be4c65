"""Protobuf's binary encoding of whole Arrow columns, following a :class:`ProtoBinding`.

As the Avro encoder: no Python object per row.  Each field becomes *pieces* (``words``): its
tag and value as packed words (varints, fixed 4 and 8 bytes), or binary columns (strings,
bytes, nested messages), joined row by row by Arrow.  A message field is its content joined
first, then its length before it; a repeated field's elements are encoded as one column and
regrouped by the list's offsets (numbers packed, as proto3 writes them); a map is a repeated
entry of key 1 and value 2.  A field without presence is left out where it holds its type's
default and an ``optional`` or message field where it is null, as Protobuf's own serializers
do, so the bytes are theirs.

What Protobuf cannot hold is found per row: a null element of a repeated field, a null value of
a map.  Those rows come back in ``EncodedColumn.bad_rows``, their value null.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
from sparkkafka_sink.serialization.protobuf_schema import (
    DELIMITED,
    FIXED32,
    FIXED64,
    ProtoBinding,
    ProtoFile,
    ProtoMessage,
    check_protobuf_schema,
)
from sparkkafka_sink.serialization.words import Piece, Words, masked, packed
from sparkkafka_sink.varint_columns import encode_unsigned_varint

__all__ = ["ProtobufEncoder"]

_VARINT, _FIXED64, _DELIMITED, _FIXED32 = 0, 1, 2, 5
_INT_DTYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}
_MICROS = 1_000_000


class ProtobufEncoder:
    """Encodes columns of one Arrow type as one Protobuf message, checked and bound once (on
    the driver it raises ``InvalidSchemaError`` for a message that cannot hold the column); in
    each task :meth:`encode` runs per batch."""

    def __init__(self, schema: ProtoFile | ProtoMessage, arrow_type: pa.DataType, column: str = "value"):
        message = schema.message if isinstance(schema, ProtoFile) else schema
        self.arrow_type = arrow_type
        self.binding = check_protobuf_schema(message, arrow_type, column)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> EncodedColumn:
        """Each row's message (no Schema Registry header: see ``encoded.frame``); a null row stays
        null (a tombstone), a row Protobuf cannot hold is null and listed in ``bad_rows``."""
        array = planned_input(array, self.arrow_type)
        n = len(array)
        valid = validity(array)
        bad = BadRows()
        content = _content(self.binding, array, Rows(n, written=lambda: valid), bad)
        return bad.result(join(packed(content, n), n), valid)


def _tag(number: int, wire: int) -> bytes:
    return encode_unsigned_varint((number << 3) | wire)


def _wire(write: str) -> int:
    if write in FIXED32:
        return _FIXED32
    if write in FIXED64:
        return _FIXED64
    return _DELIMITED if write in DELIMITED or "." in write or write == "message" else _VARINT


def _content(b: ProtoBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
    """A message's fields in their numbers' order (a struct's children, or a well-known message
    made of the column's values)."""
    if b.write != "message":
        return _well_known(b.write, arr)
    inner = rows.where(validity(arr))
    out: list[Piece] = []
    for index, child in b.children:
        out += _field(child, arr.field(index), inner, bad)
    return out


def _field(b: ProtoBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
    """One field of each row: its tag and value, nothing where it is not written."""
    n = len(arr)
    if b.repeated:
        return _repeated(b, arr, rows, bad)
    valid = validity(arr)
    pieces, default = _value(b, arr, rows, bad)
    keep = valid if b.presence else (~default if valid is None else valid & ~default)
    pieces = [_tag(b.number, _wire(b.write)), *pieces]
    return pieces if keep is None or keep.all() else masked(pieces, keep, n)


def _value(b: ProtoBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> tuple[list[Piece], np.ndarray]:
    """A single value of each slot (no tag), and where it is its type's default."""
    if b.write == "message" or "." in b.write:
        payload = join(packed(_content(b, arr, rows, bad), len(arr)), len(arr))
        size = lengths(payload)
        return [Words.unsigned(size.view(np.uint64)), payload], np.zeros(len(arr), dtype=bool)
    return _scalar(b.write, arr)


def _scalar(write: str, arr: pa.Array) -> tuple[list[Piece], np.ndarray]:
    t = arr.type
    if write == "bool":
        bits = np.unpackbits(np.frombuffer(arr.buffers()[1], np.uint8), bitorder="little",
                             count=arr.offset + len(arr))[arr.offset:]
        return [Words(bits.astype(np.uint64), np.uint64(8), 8)], bits == 0
    if write in ("int32", "int64"):
        values = raw_values(arr, _INT_DTYPES[t]).astype(np.int64, copy=False)
        return [Words.unsigned(values.view(np.uint64))], values == 0
    if write == "float":
        bits = raw_values(arr, np.float32).view(np.uint32).astype(np.uint64)
        return [Words(bits, np.uint64(32), 32)], bits == 0
    if write == "double":
        values = raw_values(arr, np.float64 if t == pa.float64() else np.float32).astype(np.float64, copy=False)
        words = values.view(np.uint64)
        return [Words(words, np.uint64(64), 64)], words == 0
    data = as_binary(arr)  # string, bytes
    size = lengths(data)
    return [Words.unsigned(size.view(np.uint64)), data], size == 0


def _varint_field(number: int, values: np.ndarray) -> list[Piece]:
    """An int field without presence: left out where 0."""
    keep = values != 0
    pieces: list[Piece] = [_tag(number, _VARINT), Words.unsigned(values.astype(np.int64).view(np.uint64))]
    return pieces if keep.all() else masked(pieces, keep, len(values))


def _well_known(write: str, arr: pa.Array) -> list[Piece]:
    """The content of a well-known message holding each slot's value."""
    if write in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        micros = time_values(arr, "us")
        if write == "google.protobuf.Timestamp":  # seconds rounded down, nanos in [0, 1e9)
            seconds = micros // _MICROS
        else:  # seconds towards zero, nanos of the same sign
            seconds = np.where(micros < 0, -((-micros) // _MICROS), micros // _MICROS)
        nanos = (micros - seconds * _MICROS) * 1000
        return [*_varint_field(1, seconds), *_varint_field(2, nanos)]
    if write == "google.type.Date":
        days = raw_values(arr, np.int32).astype("datetime64[D]")
        months = days.astype("datetime64[M]")
        year = months.astype("datetime64[Y]").astype(np.int64) + 1970
        month = months.astype(np.int64) % 12 + 1
        day = (days - months.astype("datetime64[D]")).astype(np.int64) + 1
        return [*_varint_field(1, year), *_varint_field(2, month), *_varint_field(3, day)]
    # confluent.type.Decimal: the unscaled value, its digit count (as Confluent's clients write
    # it, 1 for zero) and the column's scale
    t = arr.type
    unscaled = unscaled_bytes(arr)
    digits = np.ones(len(arr), dtype=np.int64)
    if len(arr):
        magnitude = pc.abs(arr)
        for k in range(1, t.precision):
            bound = pa.scalar(Decimal(10) ** (k - t.scale), t)
            digits += pc.greater_equal(magnitude, bound).fill_null(False).to_numpy(zero_copy_only=False)
    return [_tag(1, _DELIMITED), Words.unsigned(lengths(unscaled).view(np.uint64)), unscaled,
            *_varint_field(2, digits), *_varint_field(3, np.full(len(arr), t.scale, dtype=np.int64))]


def _repeated(b: ProtoBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
    """A repeated field or a map: each element's encoding, regrouped per row; numbers packed."""
    n = len(arr)
    offsets = list_offsets(arr)
    start, stop = int(offsets[0]), int(offsets[-1])
    if stop == start:
        return []
    local = offsets - start
    count = stop - start
    elements = arr.values.slice(start, count)
    element_rows = rows.elements(local, validity(arr))
    assert b.element is not None
    if b.write == "map":
        assert b.key is not None
        entries = elements
        values = entries.field(1)
        _no_nulls(values, element_rows, bad, b.path, "a null value, but a Protobuf map's values cannot be null")
        entry = join(packed([*_element(b.key, entries.field(0), element_rows, bad),
                             *_element(b.element, values, element_rows, bad)], count), count)
        items = join(packed([_tag(b.number, _DELIMITED), Words.unsigned(lengths(entry).view(np.uint64)), entry],
                            count), count)
        return [regroup(items, local)]
    _no_nulls(elements, element_rows, bad, b.path, "a null element, but a Protobuf repeated field has none")
    e = b.element
    if _wire(e.write) == _DELIMITED:  # each element tagged
        pieces, _ = _value(e, elements, element_rows, bad)
        items = join(packed([_tag(b.number, _DELIMITED), *pieces], count), count)
        return [regroup(items, local)]
    pieces, _ = _scalar(e.write, elements)  # packed: one tag and length, the values back to back
    payload = regroup(join(packed(pieces, count), count), local)
    size = lengths(payload)
    keep = size > 0
    out: list[Piece] = [_tag(b.number, _DELIMITED), Words.unsigned(size.view(np.uint64)), payload]
    return out if keep.all() else masked(out, keep, n)


def _element(b: ProtoBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> list[Piece]:
    """A map entry's key or value: always written, defaults included (as Protobuf writes them)."""
    pieces, _ = _value(b, arr, rows, bad)
    return [_tag(b.number, _wire(b.write)), *pieces]


def _no_nulls(arr: pa.Array, rows: Rows, bad: BadRows, path: str, what: str) -> None:
    valid = validity(arr)
    if valid is not None:
        bad.add(rows, ~valid, path, lambda i: what)
