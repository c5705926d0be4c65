"""routing.py: a row without a topic is found (its number in the task's input) before its batch is sent;
rows are grouped by topic, each group knowing where its rows came from."""

import pyarrow as pa

from sparkkafka_sink.errors import InvalidRecordError
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.routing import Part, _topic_groups, _without_topic

LAYOUT = ColumnLayout("value", topic="topic")


def test_null_topics_are_refused_naming_the_rows():
    batch = pa.record_batch({"value": pa.array(["a", "b", "c", "d"]), "topic": pa.array(["t", None, "t", None])})
    part = Part.of(batch, 10)
    refused = _without_topic(part, LAYOUT, None)
    assert [int(part.rows[row]) for row, _, _ in refused] == [11, 13]
    assert all(isinstance(e, InvalidRecordError) and "topic is null" in str(e) for e in refused.errors)
    assert not _without_topic(part, LAYOUT, "fixed")  # the topic option names every row's topic


def test_topic_option_wins_and_rows_are_grouped_by_topic():
    part = Part.of(pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", None, "y"])}), 0)
    assert _topic_groups(part, LAYOUT, "fixed") == [("fixed", part)]
    part = Part.of(pa.record_batch({"value": pa.array(["a", "b", "c"]), "topic": pa.array(["x", "y", "x"])}), 5)
    groups = _topic_groups(part, LAYOUT, None)
    assert [(t, g.rows.tolist(), g.batch.column("value").to_pylist()) for t, g in groups] == \
        [("x", [5, 7], ["a", "c"]), ("y", [6], ["b"])]
    assert groups[0][1].without([0]).rows.tolist() == [7]
