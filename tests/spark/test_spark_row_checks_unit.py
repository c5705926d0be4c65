"""Rows no producer could take are named (their position in the batch) before the batch is sent."""

import pyarrow as pa
import pytest

from sparkkafka_sink.record.arrow import HEADERS_TYPE
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.routing import _topic_groups
from sparkkafka_sink.spark.task.row_checks import RowError, check_headers


def test_null_topic_names_the_row():
    batch = pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["t", "t", None])})
    with pytest.raises(RowError, match="topic is null") as e:
        _topic_groups(batch, ColumnLayout("value", topic="topic"), None)
    assert e.value.index == 2


def test_topic_option_wins_and_rows_are_grouped_by_topic():
    batch = pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", None, "y"])})
    assert _topic_groups(batch, ColumnLayout("value", topic="topic"), "fixed") == [("fixed", None)]
    groups = _topic_groups(pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", "y", "x"])}),
                           ColumnLayout("value", topic="topic"), None)
    assert [(t, rows.tolist()) for t, rows in groups] == [("x", [0, 2]), ("y", [1])]


def test_null_header_element_names_the_row():
    h = pa.array([[{"key": "a", "value": b"0"}], [None]], HEADERS_TYPE)
    with pytest.raises(RowError, match="null element") as e:
        check_headers(h)
    assert e.value.index == 1


def test_sliced_headers_are_checked_by_their_own_offsets():
    h = pa.array([[None], [{"key": "b", "value": b"1"}], [{"key": None, "value": b"2"}]], HEADERS_TYPE).slice(1)
    with pytest.raises(RowError) as e:
        check_headers(h)
    assert e.value.index == 1
    check_headers(h.slice(0, 1))  # row 1 of the original alone is fine
