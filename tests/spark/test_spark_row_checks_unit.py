"""A row without a topic is named (its position in the batch) before the batch is sent."""

import pyarrow as pa
import pytest

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.routing import _topic_groups
from sparkkafka_sink.spark.task.row_checks import RowError


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
