"""Kafka primitive encodings: golden bytes from the protocol guide, round trips, and the
guarantee that malformed input raises ``ProtocolError`` and nothing else."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol.primitives import Reader, Writer, encode_uvarint
from sparkkafka_sink.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def written(fn, *args, **kwargs) -> bytes:
    w = Writer()
    getattr(w, fn)(*args, **kwargs)
    return w.getvalue()


@pytest.mark.parametrize("value, expected", [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
])
def test_varint_golden(value, expected):
    """Zigzag varints (record fields) come from the one varint codec, ``sparkkafka_sink.varint``."""
    assert encode_varint(value).hex() == expected
    assert decode_varint(bytes.fromhex(expected)) == (value, len(expected) // 2)


@pytest.mark.parametrize("value, expected", [
    (0, "00"), (-1, "01"), (63, "7e"), (64, "8001"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01"),
])
def test_varlong_golden(value, expected):
    assert encode_varlong(value).hex() == expected
    assert decode_varlong(bytes.fromhex(expected)) == (value, len(expected) // 2)


@pytest.mark.parametrize("value, expected", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16383, "ff7f"),
    (16384, "808001"), (2**31 - 1, "ffffffff07"), (2**32 - 1, "ffffffff0f"),
])
def test_unsigned_varint_golden(value, expected):
    assert written("uvarint", value).hex() == expected
    assert encode_uvarint(value).hex() == expected
    assert Reader(bytes.fromhex(expected)).uvarint() == value


@pytest.mark.parametrize("method, value, expected", [
    ("int8", -2, "fe"), ("int16", -2, "fffe"), ("int32", 1, "00000001"),
    ("int64", -1, "ffffffffffffffff"), ("uint16", 65535, "ffff"), ("uint32", 2**32 - 1, "ffffffff"),
    ("boolean", True, "01"), ("boolean", False, "00"), ("float64", 1.5, "3ff8000000000000"),
    ("string", "kafka", "00056b61666b61"), ("string", "", "0000"),
    ("nullable_string", None, "ffff"), ("nullable_string", "é", "0002c3a9"),
    ("compact_string", "kafka", "066b61666b61"), ("compact_string", "", "01"),
    ("compact_nullable_string", None, "00"), ("compact_nullable_string", "a", "0261"),
    ("bytes", b"\x01\x02", "000000020102"), ("nullable_bytes", None, "ffffffff"),
    ("compact_bytes", b"\x01\x02", "030102"), ("compact_nullable_bytes", None, "00"),
    ("array_length", 3, "00000003"), ("array_length", None, "ffffffff"),
    ("compact_array_length", 3, "04"), ("compact_array_length", None, "00"),
    ("uuid", uuid.UUID(int=1), "00" * 15 + "01"), ("uuid", None, "00" * 16),
])
def test_fixed_and_length_prefixed_golden(method, value, expected):
    assert written(method, value).hex() == expected


def test_reader_golden_values():
    r = Reader(bytes.fromhex("00056b61666b61" "ffff" "066b61666b61" "00" "000000020102" "030102"))
    assert r.string() == "kafka"
    assert r.nullable_string() is None
    assert r.compact_string() == "kafka"
    assert r.compact_nullable_string() is None
    assert bytes(r.bytes()) == b"\x01\x02"
    assert bytes(r.compact_bytes()) == b"\x01\x02"
    assert r.remaining == 0


def test_tagged_fields_golden():
    assert written("empty_tagged_fields").hex() == "00"
    # count=2, (tag 0, size 1, 01), (tag 5, size 2, "ab"), in ascending tag order (the codec
    # writes tagged sections; here they are read)
    encoded = bytes.fromhex("02" "000101" "05026162")
    r = Reader(encoded + b"\x2a")
    assert {k: bytes(v) for k, v in r.tagged_fields().items()} == {0: b"\x01", 5: b"ab"}
    assert r.int8() == 42
    r = Reader(encoded + b"\x2a")
    r.skip_tagged_fields()
    assert r.int8() == 42


def test_external_buffers_are_kept_by_reference():
    payload = bytearray(b"x" * 1000)
    view = memoryview(b"y" * 10)
    w = Writer()
    w.int8(1)
    w.bytes(payload, external=True)
    w.compact_bytes(view, external=True)
    w.int8(2)
    parts = w.parts()
    assert parts[1] is payload and parts[3] is view
    assert len(w) == len(w.getvalue()) == 1 + 4 + 1000 + 1 + 10 + 1


@pytest.mark.parametrize("data, method", [
    (b"", "int8"), (b"\x00", "int16"), (b"\x00\x00\x00", "int32"), (b"\x00" * 7, "int64"),
    (b"\x00" * 15, "uuid"), (b"\x80", "uvarint"), (b"\xff\xff\xff\xff\xff\x01", "uvarint"),
    (b"\xff\xff\xff\xff\x1f", "uvarint"),  # 5 bytes but more than 32 bits
    (b"\x00\x05kaf", "string"), (b"\xff\xfe", "string"), (b"\xff\xff", "string"),
    (b"\xff\xfe", "nullable_string"), (b"\x00", "compact_string"), (b"\x06ka", "compact_string"),
    (b"\x00\x02\xc3\x28", "string"),  # invalid UTF-8
    (b"\x03\xff\xfe", "compact_nullable_string"),
    (b"\xff\xff\xff\xfe", "bytes"), (b"\xff\xff\xff\xfe", "nullable_bytes"), (b"\x00\x00\x00\x05ab", "bytes"),
    (b"\x00", "compact_bytes"), (b"\x05ab", "compact_nullable_bytes"),
    (b"\xff\xff\xff\xfe", "array_length"), (b"\x7f\xff\xff\xff", "array_length"),
    (b"\x05", "compact_array_length"),
    (b"\x01\x00\x05ab", "tagged_fields"), (b"\x7f", "tagged_fields"),
    (b"\x01\x00\x05ab", "skip_tagged_fields"), (b"\x02\x00\x00", "skip_tagged_fields"),
])
def test_malformed_input_raises_protocol_error(data, method):
    with pytest.raises(ProtocolError):
        getattr(Reader(data), method)()


def test_reader_over_memoryview_slice_and_offset():
    data = memoryview(b"\xaa\x00\x00\x00\x07\xbb")
    r = Reader(data[1:5])
    assert r.int32() == 7
    with pytest.raises(ProtocolError):
        r.int8()
    assert Reader(b"\x00\x01\x00\x02", pos=2).int16() == 2


@given(INT32)
def test_varint_roundtrip(v):
    assert decode_varint(encode_varint(v))[0] == v


@given(INT64)
def test_varlong_roundtrip(v):
    assert decode_varlong(encode_varlong(v))[0] == v


@pytest.mark.parametrize("data, decode", [
    (b"\xff" * 10 + b"\x01", decode_varlong), (b"\xff\xff\xff\xff\xff\x01", decode_varint)])
def test_malformed_varints_raise_protocol_error(data, decode):
    with pytest.raises(ProtocolError):
        decode(data)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(v):
    assert Reader(written("uvarint", v)).uvarint() == v


@given(st.one_of(st.none(), st.text(max_size=50)), st.one_of(st.none(), st.binary(max_size=50)))
def test_string_and_bytes_roundtrip(s, b):
    w = Writer()
    w.nullable_string(s)
    w.compact_nullable_string(s)
    w.nullable_bytes(b)
    w.compact_nullable_bytes(b, external=True)
    r = Reader(w.getvalue())
    assert r.nullable_string() == s
    assert r.compact_nullable_string() == s
    got = r.nullable_bytes()
    assert (got if got is None else bytes(got)) == b
    got = r.compact_nullable_bytes()
    assert (got if got is None else bytes(got)) == b
    assert r.remaining == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_reader_on_random_bytes_raises_only_protocol_error(data):
    methods = ["int8", "int16", "int32", "int64", "uuid", "uvarint",
               "string", "nullable_string", "compact_string", "compact_nullable_string",
               "bytes", "nullable_bytes", "compact_bytes", "compact_nullable_bytes",
               "array_length", "compact_array_length",
               "tagged_fields", "skip_tagged_fields", "boolean", "float64"]
    for method in methods:
        try:
            getattr(Reader(data), method)()
        except ProtocolError:
            pass
