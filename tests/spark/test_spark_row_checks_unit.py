"""A row without a topic is named (its number in the task's input) before its batch is sent;
rows are grouped by topic, each group knowing where its rows came from."""

import pyarrow as pa
import pytest

from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.part import Part
from sparkkafka_sink.spark.task.routing import _topic_groups, _with_topics
from sparkkafka_sink.spark.task.row_checks import RowError

LAYOUT = ColumnLayout("value", topic="topic")


def test_null_topic_names_the_row():
    batch = pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["t", "t", None])})
    with pytest.raises(RowError, match="topic is null") as e:
        _with_topics(Part.of(batch, 10), LAYOUT, None, None)
    assert e.value.row == 12


def test_topic_option_wins_and_rows_are_grouped_by_topic():
    part = Part.of(pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", None, "y"])}), 0)
    assert _with_topics(part, LAYOUT, "fixed", None) is part
    assert _topic_groups(part, LAYOUT, "fixed") == [("fixed", part)]
    part = Part.of(pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", "y", "x"])}), 5)
    groups = _topic_groups(part, LAYOUT, None)
    assert [(t, g.rows.tolist(), g.column("value").to_pylist()) for t, g in groups] == \
        [("x", [5, 7], ["a", "c"]), ("y", [6], ["b"])]
    assert groups[0][1].without([0]).rows.tolist() == [7]
