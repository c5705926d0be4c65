"""Varint codecs: golden bytes at the 7-bit boundaries, error handling, numpy == scalar."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkkafka_sink import varint_columns as v
from sparkkafka_sink.errors import ProtocolError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

SIGNED_GOLDEN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (-8193, "818001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]
LONG_GOLDEN = [
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
    (2**35, "8080808080 02".replace(" ", "")),
]
UNSIGNED_GOLDEN = [
    (0, "00"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**32 - 1, "ffffffff0f"),
]


@pytest.mark.parametrize("n,hexed", SIGNED_GOLDEN)
def test_varint_golden(n, hexed):
    assert v.encode_varint(n).hex() == hexed
    assert v.encode_varlong(n).hex() == hexed
    assert v.varint_bytes(n).hex() == hexed
    assert v.size_of_varint(n) == len(hexed) // 2
    assert v.decode_varint(bytes.fromhex(hexed)) == (n, len(hexed) // 2)


@pytest.mark.parametrize("n,hexed", LONG_GOLDEN)
def test_varlong_golden(n, hexed):
    assert v.encode_varlong(n).hex() == hexed
    assert v.varint_bytes(n).hex() == hexed
    assert v.size_of_varlong(n) == len(hexed) // 2
    assert v.decode_varlong(b"\xaa" + bytes.fromhex(hexed), 1) == (n, 1 + len(hexed) // 2)


@pytest.mark.parametrize("n,hexed", UNSIGNED_GOLDEN)
def test_unsigned_golden(n, hexed):
    assert v.encode_unsigned_varint(n).hex() == hexed
    assert v.size_of_unsigned_varint(n) == len(hexed) // 2
    assert v.decode_unsigned_varint(bytes.fromhex(hexed)) == (n, len(hexed) // 2)


def test_range_checks():
    with pytest.raises(ValueError):
        v.encode_varint(INT32_MAX + 1)
    with pytest.raises(ValueError):
        v.encode_varlong(INT64_MIN - 1)
    with pytest.raises(ValueError):
        v.encode_unsigned_varint(-1)


@pytest.mark.parametrize(
    "data", [b"", b"\x80", b"\xff\xff", bytes.fromhex("ffffffff")], ids=["empty", "1", "2", "4"]
)
def test_truncated_raises_protocol_error(data):
    with pytest.raises(ProtocolError):
        v.decode_varint(data)
    with pytest.raises(ProtocolError):
        v.decode_varlong(data)


def test_overlong_raises_protocol_error():
    six = b"\x80" * 5 + b"\x00"
    with pytest.raises(ProtocolError):
        v.decode_varint(six)
    assert v.decode_varlong(six) == (0, 6)  # fine for a varlong
    with pytest.raises(ProtocolError):
        v.decode_varlong(b"\x80" * 10 + b"\x00")
    with pytest.raises(ProtocolError):  # 5 bytes but more than 32 bits
        v.decode_varint(b"\xff\xff\xff\xff\x7f")
    with pytest.raises(ProtocolError):  # 10 bytes but more than 64 bits
        v.decode_varlong(b"\xff" * 9 + b"\x7f")


@settings(max_examples=300)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_scalar_round_trip(n):
    enc = v.encode_varlong(n)
    assert v.varint_bytes(n) == enc
    assert v.decode_varlong(enc) == (n, len(enc))
    assert v.size_of_varlong(n) == len(enc)
    assert v.unzigzag(v.zigzag(n)) == n


BOUNDARIES = [0, 1, -1, INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN] + [
    s * (2 ** (7 * k)) + d for k in range(1, 10) for s in (1, -1) for d in (-1, 0, 1)
]


@settings(max_examples=100)
@given(st.lists(st.integers(INT64_MIN, INT64_MAX), max_size=50))
def test_numpy_matches_scalar(values):
    values = values + [b for b in BOUNDARIES if INT64_MIN <= b <= INT64_MAX]
    data, offsets = v.encode_varints(np.array(values, dtype=np.int64))
    assert data.dtype == np.uint8 and offsets.dtype == np.int64
    assert offsets[0] == 0 and offsets[-1] == len(data)
    blob = data.tobytes()
    for i, n in enumerate(values):
        assert blob[offsets[i] : offsets[i + 1]] == v.encode_varlong(n)


def test_numpy_small_and_empty():
    data, offsets = v.encode_varints(np.array([], dtype=np.int64))
    assert len(data) == 0 and offsets.tolist() == [0]
    data, offsets = v.encode_varints(np.array([0, -1, 1, 63], dtype=np.int64))
    assert data.tobytes().hex() == "0001027e" and offsets.tolist() == [0, 1, 2, 3, 4]


@settings(max_examples=100)
@given(
    st.lists(
        st.one_of(
            st.integers(-(2**13), 2**13),
            st.integers(INT64_MIN, INT64_MAX),
            st.lists(st.integers(-(2**20), 2**20), min_size=7, max_size=7),
            st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=7, max_size=7),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_varint_rows_match_scalar(columns):
    """Packed (<= 8 bytes a row) and general paths, array and constant columns."""
    n = 7
    if all(isinstance(c, int) for c in columns):
        columns = columns + [list(range(n))]
    cols = [c if isinstance(c, int) else np.array(c, dtype=np.int64) for c in columns]
    data, sizes = v.encode_varint_rows(cols)
    blob, pos = data.tobytes(), 0
    for i in range(n):
        expected = b"".join(v.encode_varlong(c if isinstance(c, int) else c[i]) for c in columns)
        assert blob[pos : pos + sizes[i]] == expected
        pos += sizes[i]
    assert pos == len(blob)


@settings(max_examples=100)
@given(st.lists(st.integers(-1, INT64_MAX // 2), max_size=50))
def test_length_sizes_match_scalar(values):
    """Sizes counted on lengths (>= -1) without zigzag: the zigzag varint's size, at every 7-bit boundary."""
    values = values + [b for b in BOUNDARIES if -1 <= b <= INT64_MAX // 2] + [(1 << (7 * k - 1)) + d
                                                                                for k in range(1, 10) for d in (-1, 0)]
    sizes = v.length_varint_sizes_np(np.array(values, dtype=np.int64))
    assert sizes.dtype == np.int64
    assert sizes.tolist() == [len(v.encode_varlong(n)) for n in values]
    assert v.length_varint_sizes_np(np.array([], dtype=np.int64)).tolist() == []
