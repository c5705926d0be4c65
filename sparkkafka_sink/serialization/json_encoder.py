"""JSON text of whole Arrow columns, as Spark's ``to_json`` writes it, following a :class:`JsonBinding`.

Each value becomes a column of JSON texts (null for a null) built by Arrow kernels: numbers and
booleans cast to strings (decimals as Java's ``BigDecimal.toString``, as Spark writes them),
strings escaped by substring replacement (a row with a rarer control character is fixed alone),
binary in base64 (numpy), dates and timestamps formatted as Spark does (``yyyy-MM-dd``,
``yyyy-MM-dd'T'HH:mm:ss.SSS`` in UTC with ``Z``; milliseconds rounded down), a struct's
``"name":value`` pieces joined row by row with ``binary_join_element_wise``, arrays and maps
joined over their offsets with ``binary_join``.  A null struct field is left out (Spark's
``ignoreNullFields``) unless the schema requires it.

Rows JSON cannot hold are bad rows, not errors: NaN and infinities (JSON has no such numbers;
Spark writes the strings "NaN" and "Infinity", which a ``number`` refuses), and a null where the
schema requires a value that cannot be null.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.arrow_views import binary_view_of
from sparkkafka_sink.serialization.arrow_types import is_binary, is_list, is_string
from sparkkafka_sink.serialization.columns import (
    BadRows,
    Rows,
    as_binary,
    constant_column,
    lengths,
    list_offsets,
    planned_input,
    raw_values,
    time_values,
    validity,
    with_validity,
)
from sparkkafka_sink.serialization.encoded import EncodedColumn
from sparkkafka_sink.serialization.json_schema import JsonBinding, JsonSchema, check_json_schema

__all__ = ["JsonEncoder"]

#: nulls (left-out fields) add nothing; Arrow's "skip" drops rows that are null in every input
_JOIN = pc.JoinOptions(null_handling="replace", null_replacement="")


def _bytes(text: str) -> pa.Scalar:
    return pa.scalar(text.encode(), pa.binary())


_EMPTY, _QUOTE, _NULL, _COMMA = _bytes(""), _bytes('"'), _bytes("null"), _bytes(",")


class JsonEncoder:
    """Encodes columns of one Arrow type as JSON described by one JSON Schema, checked and
    planned once (``InvalidSchemaError`` for a schema that does not fit the column)."""

    def __init__(self, schema: JsonSchema | str, arrow_type: pa.DataType, column: str = "value"):
        self.arrow_type = arrow_type
        self.binding = check_json_schema(schema, arrow_type, column=column)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> EncodedColumn:
        """Each row's UTF-8 JSON text (no Schema Registry header: see ``encoded.frame``); a null
        row stays null (a tombstone); a row JSON or the schema cannot hold is null, in ``bad_rows``."""
        array = planned_input(array, self.arrow_type)
        valid = validity(array)
        bad = BadRows()
        values = _json(self.binding, array, Rows(len(array), written=lambda: valid), bad)
        return bad.result(values)  # null where the input is: _json keeps its nulls


def _json(b: JsonBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> pa.Array:
    """The JSON text of each slot (binary), null where the slot is null."""
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if t == pa.bool_() or pa.types.is_integer(t) or pa.types.is_decimal(t):
        return pc.cast(arr, pa.string()).view(pa.binary())
    if pa.types.is_floating(t):
        finite = pc.is_finite(arr).fill_null(True).to_numpy(zero_copy_only=False)
        if not finite.all():
            bad.add(rows, ~finite, b.path, lambda i: f"{arr[i].as_py()} is not a JSON number")
        return pc.cast(arr, pa.string()).view(pa.binary())
    if is_string(t):
        return _quote(_escaped(pc.cast(arr, pa.string()) if not pa.types.is_string(t) else arr))
    if is_binary(t):
        return _quote(_base64(as_binary(arr)))
    if t == pa.date32():
        return _quote(_date_text(arr))
    if pa.types.is_timestamp(t):
        return _quote(_timestamp_text(arr))
    if is_list(t) or pa.types.is_map(t):
        return _elements(b, arr, rows, bad)
    if pa.types.is_struct(t):
        return _object(b, arr, rows, bad)
    raise TypeError(f"{b.path}: no JSON for {t}")  # check_json_schema refused it already


def _quote(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(_QUOTE, text, _QUOTE, _EMPTY)


_RARE_CONTROL = "[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f]"
_RARE = re.compile(_RARE_CONTROL)


def _utf8(strings: pa.Array) -> np.ndarray:
    """The bytes a string column's values span (null slots' too), without a copy."""
    offsets = np.frombuffer(strings.buffers()[1], np.int32, len(strings) + 1, strings.offset * 4)
    data = strings.buffers()[2]
    if data is None or len(strings) == 0:
        return np.zeros(0, np.uint8)
    return np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]]


def _escaped(strings: pa.Array) -> pa.Array:
    """Strings escaped for a JSON string's inside: backslash, quote and control characters, each
    pass only when some byte of the column needs it."""
    data = _utf8(strings)
    raw = data.tobytes()  # memchr over a copy: several times faster than a replace pass finding nothing
    text = strings
    if raw.find(b"\\") >= 0:
        text = pc.replace_substring(text, "\\", "\\\\")
    if raw.find(b'"') >= 0:
        text = pc.replace_substring(text, '"', '\\"')
    if data.shape[0] and data.min() < 0x20:
        for char, escape in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
            text = pc.replace_substring(text, char, escape)
        rare = pc.match_substring_regex(text, _RARE_CONTROL).fill_null(False)
        if pc.any(rare).as_py():  # a row at a time, only those rows
            fixed = [_RARE.sub(lambda m: f"\\u{ord(m.group()):04X}", s) for s in pc.filter(text, rare).to_pylist()]
            text = pc.replace_with_mask(text, rare, pa.array(fixed, pa.string()))
    return text.view(pa.binary())


_BASE64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)


def _base64(data: pa.Array) -> pa.Array:
    """Each value in standard base64 with padding (as Spark's ``to_json`` writes binary)."""
    n = len(data)
    sizes = lengths(data)
    sizes[sizes < 0] = 0
    offsets = np.frombuffer(data.buffers()[1], np.int32, n + 1, data.offset * 4).astype(np.int64)
    buffer = data.buffers()[2]
    raw = np.frombuffer(buffer, np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    source = np.concatenate([raw, np.zeros(2, np.uint8)])  # a last group may read two bytes past the end
    groups = (sizes + 2) // 3
    total = int(groups.sum())
    row = np.repeat(np.arange(n), groups)
    first_group = np.zeros(n, dtype=np.int64)
    np.cumsum(groups[:-1], out=first_group[1:])
    start = offsets[:-1][row] + 3 * (np.arange(total) - first_group[row])
    end = (offsets[:-1] + sizes)[row]
    b0 = source[start].astype(np.uint32)
    b1 = np.where(start + 1 < end, source[start + 1], 0).astype(np.uint32)
    b2 = np.where(start + 2 < end, source[start + 2], 0).astype(np.uint32)
    word = (b0 << 16) | (b1 << 8) | b2
    out = np.empty((total, 4), dtype=np.uint8)
    for k in range(4):
        out[:, k] = _BASE64[(word >> (18 - 6 * k)) & 63]
    out[:, 2] = np.where(start + 1 < end, out[:, 2], ord("="))
    out[:, 3] = np.where(start + 2 < end, out[:, 3], ord("="))
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(groups * 4, out=out_offsets[1:])
    return with_validity(binary_view_of(out.reshape(-1), out_offsets), validity(data))


def _timestamp_text(arr: pa.Array) -> pa.Array:
    """``yyyy-MM-dd'T'HH:mm:ss.SSS``, then ``Z`` for an instant (UTC): milliseconds rounded down."""
    millis = time_values(arr, "ms")
    days, millis_of_day = np.divmod(millis, 86_400_000)
    text = _iso_text(days, millis_of_day, "Z" if arr.type.tz is not None else "")
    if text is None:  # a year before 1 or after 9999: Arrow's formatter, slower
        valid = validity(arr)
        mask = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
        as_millis = pa.Array.from_buffers(pa.timestamp("ms"), len(arr), [mask, pa.py_buffer(millis)])
        text = pc.binary_join_element_wise(pc.strftime(as_millis, format="%Y-%m-%dT%H:%M:%S").view(pa.binary()),
                                           _bytes("Z" if arr.type.tz is not None else ""), _EMPTY)
    return with_validity(text, validity(arr))


def _date_text(arr: pa.Array) -> pa.Array:
    text = _iso_text(raw_values(arr, np.int32).astype(np.int64), None, "")
    if text is None:
        return pc.cast(arr, pa.string()).view(pa.binary())
    return with_validity(text, validity(arr))


def _iso_text(days: np.ndarray, millis_of_day: np.ndarray | None, suffix: str) -> pa.Array | None:
    """``yyyy-MM-dd`` (and ``'T'HH:mm:ss.SSS`` + ``suffix``) of days since 1970-01-01 (and the
    milliseconds into each), all rows the same width; None for a year outside 1-9999."""
    # the proleptic Gregorian date of a day number (Howard Hinnant's days_from_civil, inverted)
    z = days + 719_468
    era = z // 146_097
    day_of_era = z - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = np.where(shifted_month < 10, shifted_month + 3, shifted_month - 9)
    year = year_of_era + era * 400 + (month <= 2)
    if year.shape[0] and (year.min() < 1 or year.max() > 9999):
        return None
    layout = "0000-00-00" if millis_of_day is None else "0000-00-00T00:00:00.000" + suffix
    out = np.empty((year.shape[0], len(layout)), dtype=np.uint8)
    out[:] = np.frombuffer(layout.encode(), np.uint8)
    fields = [(0, year, 4), (5, month, 2), (8, day, 2)]
    if millis_of_day is not None:
        fields += [(11, millis_of_day // 3_600_000, 2), (14, millis_of_day // 60_000 % 60, 2),
                   (17, millis_of_day // 1000 % 60, 2), (20, millis_of_day % 1000, 3)]
    for start, value, width in fields:
        for k in range(width - 1, -1, -1):
            out[:, start + k] += (value % 10).astype(np.uint8)
            value = value // 10
    return binary_view_of(out.reshape(-1), np.arange(year.shape[0] + 1, dtype=np.int64) * len(layout))


def _values_or_null(b: JsonBinding, arr: pa.Array, text: pa.Array, rows: Rows, bad: BadRows) -> pa.Array:
    """An array item's or map value's text, ``null`` for a null (a bad row where the schema
    allows none)."""
    if text.null_count == 0:
        return text
    if not b.null_allowed:
        valid = validity(arr)
        if valid is not None:
            bad.add(rows, ~valid, b.path, lambda i: "null, but the JSON Schema does not allow null here")
    return text.fill_null(_NULL)


def _elements(b: JsonBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> pa.Array:
    """``[item,...]`` for a list, ``{"key":value,...}`` for a map."""
    assert b.item is not None
    offsets = list_offsets(arr)
    start, stop = int(offsets[0]), int(offsets[-1])
    local = offsets - start
    inner = rows.elements(local, validity(arr))
    entries = arr.values.slice(start, stop - start)
    if pa.types.is_map(arr.type):
        keys, values = entries.field(0), entries.field(1)
        key_text = _escaped(keys if pa.types.is_string(keys.type) else pc.cast(keys, pa.string()))
        items = pc.binary_join_element_wise(
            _QUOTE, key_text, _bytes('":'), _values_or_null(b.item, values, _json(b.item, values, inner, bad), inner, bad),
            _EMPTY)
        open_, close = _bytes("{"), _bytes("}")
    else:
        items = _values_or_null(b.item, entries, _json(b.item, entries, inner, bad), inner, bad)
        open_, close = _bytes("["), _bytes("]")
    grouped = pa.ListArray.from_arrays(pa.array(local.astype(np.int32)), items)
    joined = pc.binary_join(grouped, _COMMA)
    return with_validity(pc.binary_join_element_wise(open_, joined, close, _EMPTY), validity(arr))


def _object(b: JsonBinding, arr: pa.Array, rows: Rows, bad: BadRows) -> pa.Array:
    """``{"name":value,...}``: fields in the struct's order, a null one left out unless required."""
    inner = rows.where(validity(arr))
    pieces: list[pa.Array] = []
    leading_comma = False  # a piece after the first starts with a comma, the first only when it may be left out
    for f in b.fields:
        child = arr.field(f.arrow_index)
        text = _json(f.binding, child, inner, bad)
        if f.required and text.null_count:
            text = _values_or_null(f.binding, child, text, inner, bad)
        comma = bool(pieces) or text.null_count > 0
        leading_comma = leading_comma or not pieces and comma
        name = ("," if comma else "") + json.dumps(f.name, ensure_ascii=False) + ":"
        pieces.append(pc.binary_join_element_wise(_bytes(name), text, _EMPTY))
    if not pieces:
        body = constant_column(b"", len(arr))
    else:
        body = pc.binary_join_element_wise(*pieces, _EMPTY, options=_JOIN)
        if leading_comma:  # cut it (binary_slice fails on an empty value after a longer one: pyarrow 26)
            body = pc.replace_substring_regex(body, pattern="^,", replacement="", max_replacements=1)
    return with_validity(pc.binary_join_element_wise(_bytes("{"), body, _bytes("}"), _EMPTY), validity(arr))
