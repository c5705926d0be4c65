"""Arrow fast path: byte-identical to the row builder, batch planning, input handling."""

import numpy as np
import pyarrow as pa
import pytest
from encoder_paths import PATHS, encoder_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkkafka_sink.errors import InvalidRecordError
from sparkkafka_sink.record.arrow import (
    HEADERS_TYPE,
    ArrowRecords,
    RecordColumns,
    encode_batch_from_arrow,
    encode_batches_from_arrow,
    plan_batches,
    record_size_bounds,
)
from sparkkafka_sink.record.batch import RecordBatchBuilder, decode_batches
from sparkkafka_sink.record.compression import CompressionType

TS = 1_700_000_000_000
ALL = list(CompressionType)


def row_path(keys, values, timestamps, headers=None, ctype=CompressionType.NONE, **state):
    b = RecordBatchBuilder(ctype, 1 << 40)
    for i, (k, v, ts) in enumerate(zip(keys, values, timestamps, strict=True)):
        assert b.try_append(ts, k, v, headers[i] if headers else None)
    return b.build(**state)


def to_bytes(items):
    return [None if x is None else (x.encode() if isinstance(x, str) else x) for x in items]


def hdr_column(headers):
    return pa.array(
        [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
        HEADERS_TYPE,
    )


maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
maybe_text = st.one_of(st.none(), st.text(max_size=50))
header_lists = st.one_of(
    st.none(), st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 40))
    text = draw(st.booleans())
    keys = draw(st.lists(maybe_text if text else maybe_bytes, min_size=n, max_size=n))
    values = draw(st.lists(maybe_bytes, min_size=n, max_size=n))
    spread = draw(st.sampled_from([0, 5, 10**6, 2**40]))
    ts = draw(st.lists(st.integers(TS - spread, TS + spread), min_size=n, max_size=n))
    headers = draw(st.one_of(st.none(), st.lists(header_lists, min_size=n, max_size=n)))
    return keys, values, ts, headers, text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from(ALL), st.booleans())
def test_identical_to_row_path(table, ctype, arrow_headers):
    keys, values, ts, headers, text = table
    karr = pa.array(keys, pa.string() if text else pa.binary())
    varr = pa.array(values, pa.binary())
    h = None if headers is None else (hdr_column(headers) if arrow_headers else headers)
    hrows = None if headers is None else [list(x or []) for x in headers]
    got = encode_batch_from_arrow(karr, varr, pa.array(ts, pa.int64()), h, ctype)
    assert got == row_path(to_bytes(keys), values, ts, hrows, ctype)


@settings(max_examples=60, deadline=None)
@given(tables(), st.integers(100, 3000), st.sampled_from([CompressionType.NONE, CompressionType.LZ4]))
def test_batches_identical_to_row_path_per_slice(table, limit, ctype):
    keys, values, ts, headers, _ = table
    karr, varr = pa.array(to_bytes(keys), pa.binary()), pa.array(values, pa.binary())
    hrows = None if headers is None else [list(x or []) for x in headers]
    out = encode_batches_from_arrow(karr, varr, pa.array(ts), hdr_column(headers) if headers else None, ctype, limit)
    assert out[0][0] == 0 and out[-1][1] == len(keys)
    for (a, b, batch), (a2, _, _) in zip(out, out[1:] + [(len(keys), 0, 0)], strict=False):
        assert b == a2 and b > a
        kb = to_bytes(keys)[a:b]
        expected = row_path(kb, values[a:b], ts[a:b], hrows[a:b] if hrows else None, ctype)
        assert batch == expected
        if b - a > 1:  # only a lone record may exceed the limit
            uncompressed = row_path(kb, values[a:b], ts[a:b], hrows[a:b] if hrows else None)
            assert len(uncompressed) <= limit


@settings(max_examples=60, deadline=None)
@given(tables(), st.integers(100, 3000), st.sampled_from([CompressionType.NONE, CompressionType.ZSTD]),
       st.data())
def test_grouped_batches_never_cross_a_group_and_match_the_row_path(table, limit, ctype, data):
    """Rows grouped by partition are encoded in one call; every batch stays inside its group and
    its offset deltas restart at the group's batches, as if each group were encoded alone."""
    keys, values, ts, _, _ = table
    n = len(keys)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=4))) if n > 1 else []
    starts = [0] + cuts
    out = encode_batches_from_arrow(pa.array(to_bytes(keys), pa.binary()), pa.array(values, pa.binary()),
                                    pa.array(ts), None, ctype, limit, group_starts=starts)
    assert [a for a, _, _ in out][0] == 0 and out[-1][1] == n
    bounds = starts + [n]
    for a, b, batch in out:
        g = max(i for i, s0 in enumerate(starts) if s0 <= a)
        assert b <= bounds[g + 1]
        assert batch == row_path(to_bytes(keys)[a:b], values[a:b], ts[a:b], ctype=ctype)
    with pytest.raises(ValueError, match="group_starts"):
        encode_batches_from_arrow(pa.array([b"k"]), pa.array([b"v"]), TS, group_starts=[1])


@pytest.mark.parametrize("ctype", ALL, ids=lambda c: c.name)
def test_nulls_empty_unicode_large(ctype):
    keys = ["ключ", None, "", "\U0001F600" * 3, "k" * 70, None]
    values = [b"v", b"", None, b"\x00" * 200_000, b"x" * 8193, None]
    ts = [TS, TS, TS + 1, TS - 1, TS, TS]
    got = encode_batch_from_arrow(pa.array(keys), pa.array(values), pa.array(ts), None, ctype)
    assert got == row_path(to_bytes(keys), values, ts, ctype=ctype)
    # large_binary / large_string / chunked inputs give the same bytes
    got2 = encode_batch_from_arrow(
        pa.chunked_array([pa.array(keys[:2], pa.large_string()), pa.array(keys[2:], pa.large_string())]),
        pa.array(values, pa.large_binary()), np.array(ts), None, ctype,
    )
    assert got2 == got


def test_sliced_inputs_and_offsets():
    keys = pa.array([b"a", None, b"ccc", b"dd", None, b""] * 50)
    values = pa.array([b"x" * i if i % 7 else None for i in range(300)])
    ts = pa.array(list(range(TS, TS + 300)))
    for a, b in [(0, 300), (1, 5), (37, 201), (299, 300)]:
        got = encode_batch_from_arrow(keys[a:b], values[a:b], ts[a:b])
        assert got == row_path(keys[a:b].to_pylist(), values[a:b].to_pylist(), ts[a:b].to_pylist())


def test_producer_state_and_transactional():
    k, v = pa.array([b"k"] * 3), pa.array([b"v"] * 3)
    got = encode_batch_from_arrow(k, v, TS, None, CompressionType.ZSTD, producer_id=5,
                                  producer_epoch=2, base_sequence=99, is_transactional=True)
    exp = row_path([b"k"] * 3, [b"v"] * 3, [TS] * 3, None, CompressionType.ZSTD, producer_id=5,
                   producer_epoch=2, base_sequence=99, is_transactional=True)
    assert got == exp


def test_timestamp_forms():
    k = pa.array([b"a", b"b", b"c"])
    exp = row_path([b"a", b"b", b"c"], [None] * 3, [TS] * 3)
    assert encode_batch_from_arrow(k, None, TS) == exp
    assert encode_batch_from_arrow(k, None, None, default_timestamp_ms=TS) == exp
    assert encode_batch_from_arrow(k, None, pa.array([None, TS, None], pa.int64()), default_timestamp_ms=TS) == exp
    us = pa.array([TS * 1000 + 999] * 3, pa.timestamp("us"))  # sub-millisecond part dropped
    assert encode_batch_from_arrow(k, None, us) == exp
    (batch,) = decode_batches(encode_batch_from_arrow(k, None, None))
    assert abs(batch.base_timestamp - __import__("time").time() * 1000) < 60_000


def test_headers_python_and_arrow_forms_agree():
    headers = [[("a", b"1")], None, [], [("é", None), ("b", b"")]]
    k = pa.array([b"k"] * 4)
    exp = row_path([b"k"] * 4, [None] * 4, [TS] * 4, [h or [] for h in headers])
    assert encode_batch_from_arrow(k, None, TS, headers) == exp
    assert encode_batch_from_arrow(k, None, TS, hdr_column(headers)) == exp
    assert encode_batch_from_arrow(k, None, TS, hdr_column([None] * 4)) == row_path([b"k"] * 4, [None] * 4, [TS] * 4)


def test_invalid_inputs():
    k = pa.array([b"k"])
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(pa.array([1]), None, TS)
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(None, None, TS)
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(k, pa.array([b"a", b"b"]), TS)
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(k, None, pa.array([1.5]))
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(k, None, TS, [[(b"bytes key", b"v")]])
    bad = pa.array([[{"key": None, "value": b"v"}]], HEADERS_TYPE)
    with pytest.raises(InvalidRecordError):
        encode_batch_from_arrow(k, None, TS, bad)


def test_column_errors_name_the_column():
    k2 = pa.array([b"a", b"b"])
    cases = [
        (dict(keys=pa.array([b"k"]), values=k2), "1 keys but 2 values"),
        (dict(keys=k2, values=None, timestamps_ms=[1]), "1 timestamps for 2 records"),
        (dict(keys=k2, values=None, timestamps_ms=pa.array([1.5, 2.5])), "timestamps must be int64 milliseconds"),
        (dict(keys=k2, values=None, headers=[[("h", b"v")]]), "1 header rows for 2 records"),
        (dict(keys=k2, values=None, headers=hdr_column([[("h", b"v")]])), "1 header rows for 2 records"),
        (dict(keys=None, values=None), "at least one of keys and values"),
    ]
    for kwargs, message in cases:
        with pytest.raises(InvalidRecordError, match=message):
            RecordColumns(**kwargs)


def test_timestamps_as_a_sequence_with_nones_take_the_default():
    ts = RecordColumns(pa.array([b"a", b"b", b"c"]), None, [TS, None, TS + 5], default_timestamp_ms=TS + 1).ts
    assert ts.tolist() == [TS, TS + 1, TS + 5]
    assert RecordColumns(pa.array([b"a"]), None, np.array([TS])).ts.tolist() == [TS]


def test_empty_input():
    empty = pa.array([], pa.binary())
    assert encode_batches_from_arrow(empty, empty, None) == []
    (batch,) = decode_batches(encode_batch_from_arrow(empty, empty, None))
    assert batch.records == []


def test_plan_batches():
    assert plan_batches([], 100) == []
    assert plan_batches([10] * 10, 61 + 30) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert plan_batches([500, 10, 10], 100) == [(0, 1), (1, 3)]  # oversized row alone
    assert plan_batches([10, 500, 10], 100) == [(0, 1), (1, 2), (2, 3)]
    sizes = np.random.default_rng(1).integers(1, 300, 5000)
    plan = plan_batches(sizes, 4096)
    assert plan[0][0] == 0 and plan[-1][1] == 5000
    for (a, b), (c, _) in zip(plan, plan[1:], strict=False):
        assert b == c and 61 + sizes[a:b].sum() <= 4096 < 61 + sizes[a : b + 1].sum()


def test_size_bounds_cover_actual_sizes():
    rng = np.random.default_rng(2)
    n = 3000
    values = [bytes(rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8)) for _ in range(n)]
    ts = (TS + rng.integers(-5000, 5000, n)).tolist()
    bounds = record_size_bounds(pa.array([b"key"] * n), pa.array(values), pa.array(ts))
    for start in (0, 1000, 2999):
        b = RecordBatchBuilder(CompressionType.NONE, 1 << 40)
        for i in range(start, n):
            before = b.estimated_size
            b.try_append(ts[i], b"key", values[i], None)
            assert b.estimated_size - before <= bounds[i]


def test_numpy_fallback_without_binary_views(monkeypatch):
    from sparkkafka_sink.record import arrow

    monkeypatch.setattr(arrow, "_VIEWS", False)
    keys = [b"k%d" % i if i % 3 else None for i in range(500)]
    values = [b"v" * (i % 200) for i in range(500)]
    ts = [TS + i for i in range(500)]
    got = encode_batch_from_arrow(pa.array(keys), pa.array(values), pa.array(ts))
    assert got == row_path(keys, values, ts)


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.binary_view(), pa.string_view()])
def test_input_types(typ):
    raw = [b"a", None, b"", b"xyz"]
    col = pa.array([None if x is None else x.decode() for x in raw] if "string" in str(typ) else raw, typ)
    assert encode_batch_from_arrow(col, col, TS) == row_path(raw, raw, [TS] * 4)


def test_uncompressed_batches_share_one_buffer_and_decode():
    n = 2000
    keys = pa.array([b"key-%d" % i for i in range(n)])
    values = pa.array([b"v" * 100] * n)
    out = encode_batches_from_arrow(keys, values, TS, None, CompressionType.NONE, 16384)
    assert len(out) > 5
    blob = b"".join(bytes(b) for _, _, b in out)
    batches = decode_batches(blob)
    assert sum(len(b.records) for b in batches) == n
    assert [r.key for b in batches for r in b.records] == keys.to_pylist()


def test_size_bounds_with_some_null_timestamps():
    import time

    ts = pa.array([None, TS, None], pa.int64())
    bounds = record_size_bounds(pa.array([b"k"] * 3), pa.array([b"v"] * 3), ts)
    now = int(time.time() * 1000)
    for start in range(3):
        b = RecordBatchBuilder(CompressionType.NONE, 1 << 40)
        for i, t in enumerate([now + 1000, TS, now + 1000][start:], start):
            before = b.estimated_size
            b.try_append(t, b"k", b"v", None)
            assert b.estimated_size - before <= bounds[i]


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=80, deadline=None)
@given(tables(), st.booleans(), st.sampled_from([CompressionType.NONE, CompressionType.LZ4]), st.data())
def test_taken_and_sliced_columns_equal_measuring_again(path, table, arrow_headers, ctype, data):
    """The bulk path measures a call once and regroups it (take by partition, slice by range):
    each regrouped column, and what it encodes to, equals measuring the regrouped rows afresh --
    on both encoder paths, over input columns that are themselves slices of larger arrays, and
    values in pieces (Spark's batches grouped, not joined)."""
    keys, values, ts, headers, _ = table
    n = len(values)
    hdrs = hdr_column(headers) if headers is not None and arrow_headers else headers
    pad = data.draw(st.integers(0, 3))  # the inputs as slices (a non-zero offset into their buffers)
    key_col = pa.array([b"pad"] * pad + to_bytes(keys), pa.binary())[pad:] if pad else pa.array(keys)
    value_col = pa.array([b"p" * 20] * pad + values, pa.binary())[pad:]
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    if cuts:  # the first piece a slice of the input, the others arrays of their own (an empty one too)
        bounds = list(zip([0, *cuts], [*cuts, n], strict=True))
        value_col = pa.chunked_array([value_col[: bounds[0][1]]]
                                     + [pa.array(values[a:b], pa.binary()) for a, b in bounds[1:]])
    with encoder_path(path):
        columns = RecordColumns(key_col, value_col, pa.array(ts, pa.int64()), hdrs)
        order = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
        again = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
        lo = data.draw(st.integers(0, n))
        hi = data.draw(st.integers(lo, n))
        pick = lambda seq, idx: None if seq is None else [seq[i] for i in idx]  # noqa: E731
        cases = ((columns.take(order), order.tolist()), (columns.slice(lo, hi), list(range(lo, hi))),
                 (columns.take(order).slice(lo, hi), order.tolist()[lo:hi]),
                 (columns.slice(lo, hi).take(np.arange(hi - lo)[::-1].copy()), list(range(lo, hi))[::-1]),
                 (columns.take(order).take(again), order[again].tolist()))
        for got, idx in cases:
            _check_regrouped(got, idx, keys, values, ts, headers, arrow_headers, ctype, pick)


def test_the_path_is_chosen_by_the_rows_sizes():
    """Long rows are regrouped as views (no copy), short ones taken by Arrow: the faster of the
    two for their sizes (``VIEW_JOIN_MIN_BYTES``); either way the same bytes."""
    from sparkkafka_sink.record import arrow

    order = np.arange(8)[::-1].copy()
    for size, views in ((100, False), (arrow.VIEW_JOIN_MIN_BYTES, arrow._VIEW_JOIN)):
        values = [bytes([i]) * size for i in range(8)]
        taken = RecordColumns(pa.array([b"k"] * 8), pa.array(values), TS).take(order)
        assert (taken.gather is not None) == views, size
        assert bytes(ArrowRecords(taken).encode(write_limit=1 << 20)[0][2]) == row_path(
            [b"k"] * 8, values[::-1], [TS] * 8)
        # values in pieces: long ones kept so (read in place), short ones joined at once
        pieces = RecordColumns(pa.array([b"k"] * 8), pa.chunked_array([values[:3], values[3:]], pa.binary()), TS)
        assert (pieces.gather is not None) == views, size
        assert isinstance(pieces.values, pa.ChunkedArray) == views, size
        assert bytes(ArrowRecords(pieces).encode(write_limit=1 << 20)[0][2]) == row_path(
            [b"k"] * 8, values, [TS] * 8)


def _check_regrouped(got, idx, keys, values, ts, headers, arrow_headers, ctype, pick):
    fresh = RecordColumns(pa.array(pick(keys, idx), pa.array(keys).type), pa.array(pick(values, idx), pa.binary()),
                          pa.array(pick(ts, idx), pa.int64()),
                          None if headers is None else (hdr_column(pick(headers, idx)) if arrow_headers
                                                        else pick(headers, idx)))
    assert got.n == fresh.n == len(idx)
    for name in ("key_len", "value_len", "ts", "tail_size"):
        assert getattr(got, name).tolist() == getattr(fresh, name).tolist(), name
    assert got.ts_spread == fresh.ts_spread
    assert got.size_bounds.tolist() == fresh.size_bounds.tolist()
    if idx:
        assert ([bytes(b) for _, _, b in ArrowRecords(got).encode(ctype, write_limit=1 << 20)]
                == [bytes(b) for _, _, b in ArrowRecords(fresh).encode(ctype, write_limit=1 << 20)])
        expected = row_path(to_bytes(pick(keys, idx)), pick(values, idx), pick(ts, idx),
                            None if headers is None else [list(h or []) for h in pick(headers, idx)], ctype)
        assert bytes(ArrowRecords(got).encode(ctype, write_limit=1 << 40)[0][2]) == expected


# --- headers no record can carry: every such row refused, named; the others measured ------------
def test_null_header_elements_or_keys_are_refused_row_by_row():
    from sparkkafka_sink.errors import InvalidHeaderError
    from sparkkafka_sink.record.arrow import HEADERS_TYPE, RecordColumns

    values = pa.array([b"a", b"b", b"c", b"d"])
    for bad in ([None], [{"key": None, "value": b"2"}]):
        headers = pa.array([[{"key": "a", "value": b"0"}], bad, None, bad], HEADERS_TYPE)
        columns = RecordColumns(None, values, headers=headers)
        assert columns.refused.rows.tolist() == [1, 3]
        assert [str(e) for _, e, _ in columns.refused] == [
            f"Row {r}: its headers hold a null element or a null key (each header needs a key)" for r in (1, 3)]
        kept = columns.take(np.array([0, 2]))  # the others encode as they would alone
        alone = RecordColumns(None, pa.array([b"a", b"c"]), headers=headers.take(pa.array([0, 2])))
        assert kept.size_bounds.tolist() == alone.size_bounds.tolist()
        with pytest.raises(InvalidHeaderError, match="Row 1: its headers hold") as e:
            columns.checked()  # for callers that encode every row or none
        assert e.value.row == 1


def test_sliced_headers_are_checked_by_their_own_offsets():
    from sparkkafka_sink.record.arrow import HEADERS_TYPE, RecordColumns

    h = pa.array([[None], [{"key": "b", "value": b"1"}], [{"key": None, "value": b"2"}]], HEADERS_TYPE).slice(1)
    assert RecordColumns(None, pa.array([b"x", b"y"]), headers=h).refused.rows.tolist() == [1]
    assert not RecordColumns(None, pa.array([b"x"]), headers=h.slice(0, 1)).refused  # row 1 of the original is fine


def test_a_column_of_one_piece_is_read_in_place_and_of_several_joined():
    """A Spark task's table of one batch hands the producer columns of one piece: read where they
    are (Arrow's combine_chunks would copy even one); several pieces are joined (short rows) or
    kept apart (long rows: ``VIEW_JOIN_MIN_BYTES``)."""
    from sparkkafka_sink.record.arrow import one_array

    values = pa.array([b"v" * 20] * 4)
    assert one_array(values) is values
    alone = one_array(pa.chunked_array([values]))
    assert alone.buffers()[2].address == values.buffers()[2].address
    assert RecordColumns(None, pa.chunked_array([values]), TS).values.buffers()[2].address == values.buffers()[2].address
    joined = one_array(pa.chunked_array([values, values]))
    assert joined.to_pylist() == values.to_pylist() * 2
    assert one_array(pa.chunked_array([], pa.binary())).to_pylist() == []


@pytest.mark.parametrize("extra_value, expected", [
    (b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
     [b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"] * 5),
    (pa.array(["t1", None, "", "t4", None]), [b"t1", None, b"", b"t4", None]),
])
@pytest.mark.parametrize("form", ["none", "python", "arrow"])
def test_an_extra_header_is_the_records_last_as_if_each_had_it(extra_value, expected, form):
    """``extra_header`` (the sink's traceparent): the same bytes as every record given that header
    after its own -- a constant encoded once, a column's null adding none."""
    own = [[("a", b"1")], None, [], [("b", None), ("c", b"xyz")], [("d", b"")]]
    given = {"none": None, "python": own, "arrow": pa.array(own, HEADERS_TYPE)}[form]
    rows = [list(h or []) if form != "none" else [] for h in own]
    appended = [r + ([("trace", e)] if e is not None else []) for r, e in zip(rows, expected, strict=True)]
    keys, values = [b"k"] * 5, [b"v"] * 5
    got = RecordColumns(keys, values, TS, given, extra_header=("trace", extra_value))
    want = RecordColumns(keys, values, TS, appended)

    def p3(c):
        return [c.headers.as_py()] * c.n if isinstance(c.headers, pa.Scalar) else c.headers.to_pylist()

    assert p3(got) == p3(want) and got.tail_size.tolist() == want.tail_size.tolist()
    assert not got.refused
