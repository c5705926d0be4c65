"""Arrow batch -> producer arguments, column-wise."""

from itertools import islice

import pyarrow as pa
import pytest

from sparkkafka_sink.spark.extract import RowError, extract_records
from sparkkafka_sink.spark.validation import ColumnLayout

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
FULL = ColumnLayout("value", "key", "topic", "partition", "headers", "timestamp")


def rows(records, n):
    r = records
    cols = (r.topics, r.values, r.keys, r.headers, r.partitions, r.timestamps_ms)
    return list(islice(zip(*cols), n))


def test_all_columns():
    batch = pa.record_batch({
        "value": pa.array(["a", None, "ü"]),
        "key": pa.array([b"k1", None, b"k3"]),
        "topic": pa.array(["t1", "t2", "t1"]),
        "partition": pa.array([0, None, 2], pa.int32()),
        "headers": pa.array([[{"key": "h", "value": b"1"}], None, [{"key": "a", "value": None}, {"key": "b", "value": b"2"}]], HEADERS),
        "timestamp": pa.array([1_700_000_000_123_456, None, 0], pa.timestamp("us", tz="UTC")),
    })
    r = extract_records(batch, FULL, None)
    assert r.num_rows == 3
    assert rows(r, 3) == [
        ("t1", b"a", b"k1", [("h", b"1")], 0, 1_700_000_000_123),
        ("t2", None, None, None, None, None),
        ("t1", "ü".encode(), b"k3", [("a", None), ("b", b"2")], 2, 0),
    ]


def test_topic_option_wins_and_absent_columns_are_none():
    batch = pa.record_batch({"value": pa.array([b"x", b"y"]), "topic": pa.array([None, "other"])})
    r = extract_records(batch, ColumnLayout("value", topic="topic"), "fixed")
    assert rows(r, 2) == [("fixed", b"x", None, None, None, None), ("fixed", b"y", None, None, None, None)]


def test_sliced_batch_headers_follow_offsets():
    h = pa.array([[{"key": "a", "value": b"0"}], [{"key": "b", "value": b"1"}], [{"key": "c", "value": b"2"}]], HEADERS)
    batch = pa.record_batch({"value": pa.array(["0", "1", "2"]), "headers": h}).slice(1)
    r = extract_records(batch, ColumnLayout("value", headers="headers"), "t")
    assert r.headers == [[("b", b"1")], [("c", b"2")]]


def test_large_string_values():
    batch = pa.record_batch({"value": pa.array(["x", "yy"], pa.large_string())})
    assert extract_records(batch, ColumnLayout("value"), "t").values == [b"x", b"yy"]


def test_null_topic_names_the_row():
    batch = pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["t", "t", None])})
    with pytest.raises(RowError, match="topic is null") as e:
        extract_records(batch, ColumnLayout("value", topic="topic"), None)
    assert e.value.index == 2


def test_null_header_element_names_the_row():
    h = pa.array([[{"key": "a", "value": b"0"}], [None]], HEADERS)
    batch = pa.record_batch({"value": pa.array(["0", "1"]), "headers": h})
    with pytest.raises(RowError, match="null element") as e:
        extract_records(batch, ColumnLayout("value", headers="headers"), "t")
    assert e.value.index == 1
