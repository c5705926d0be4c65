"""Rows to the producer: out what has no topic, split by topic, encode, send.

A part of an Arrow batch (``part.Part``) goes through four steps, each handling a row once:
rows without a topic are taken out; the rest are split by topic; each topic's rows are encoded
when a column is written in a registry format (``encoders``: the rows their schema cannot hold
come back as data); each topic's rows go to the producer in one ``send_batch`` (the rows it
refuses -- too large, a partition that does not exist, a header without a key -- come back as
data too, under ``errors.tolerance=all``).  Every row leaves here once, to the
``DeliveryTracker``: handed over with its ``send_batch`` future, or refused (the tracker fails
the task at the first, before any row of its part is sent, or under tolerance hands it to the
dead letters).
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidRecordError, KafkaError
from sparkkafka_sink.producer.bulk import BulkSendError
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.encoders import TaskEncoders
from sparkkafka_sink.spark.task.part import Part

NULL_TOPIC = "topic is null and no 'topic' option is set"


def send_arrow_batch(producer: Producer, part: Part, layout: ColumnLayout, topic_option: str | None,
                     tracker: DeliveryTracker, encoders: TaskEncoders | None = None) -> None:
    """Hand every row of ``part`` to the producer, one ``send_batch`` per topic, or to
    ``tracker`` as refused (a row without a topic, a row its schema cannot hold, a row the
    producer refuses)."""
    without_topic = _without_topic(part, layout, topic_option)
    if not tracker.refuse(part, without_topic, "row check", None):
        return
    part = part.without(without_topic.rows) if without_topic else part
    for topic, group in _topic_groups(part, layout, topic_option):
        if encoders:
            encoded, refused = encoders.encode(group, topic)
            if not tracker.refuse(group, refused, "serialization", topic):  # read as the user gave them
                continue
            group = encoded.without(refused.rows) if refused else encoded
            if not group.num_rows:
                continue
        _send(producer, group, layout, topic, tracker)


def _without_topic(part: Part, layout: ColumnLayout, topic_option: str | None) -> Refused:
    """The rows of ``part`` that have no topic (none with the topic option)."""
    if topic_option is not None or part.num_rows == 0:
        return Refused()
    assert layout.topic is not None, "validate_schema: no topic option, so a topic column"
    nulls = part.nulls(layout.topic)
    error = InvalidRecordError(NULL_TOPIC)
    return Refused(nulls, (error,) * len(nulls), (None,) * len(nulls))


def _topic_groups(part: Part, layout: ColumnLayout, topic_option: str | None) -> list[tuple[str, Part]]:
    """``[(topic, its rows)]``; the topic option wins over the column (which has no nulls here)."""
    if topic_option is not None:
        return [(topic_option, part)]
    if part.num_rows == 0:
        return []
    assert layout.topic is not None, "validate_schema: no topic option, so a topic column"
    col = part.column(layout.topic)
    topics = pc.unique(col).to_pylist()
    if len(topics) == 1:
        return [(topics[0], part)]
    return [(t, part.take(np.flatnonzero(pc.equal(col, t).to_numpy(zero_copy_only=False)))) for t in topics]


def _send(producer: Producer, part: Part, layout: ColumnLayout, topic: str, tracker: DeliveryTracker) -> None:
    """One ``send_batch`` of ``part``.  Under tolerance the producer leaves out the rows it
    refuses and returns them; otherwise the first refused row fails the task, nothing of the
    part sent."""
    col = part.column
    try:
        future = producer.send_batch(
            topic,
            values=col(layout.value),
            keys=col(layout.key) if layout.key else None,
            headers=col(layout.headers) if layout.headers else None,
            partitions=col(layout.partition) if layout.partition else None,
            timestamps=col(layout.timestamp) if layout.timestamp else None,
            refused="return" if tracker.tolerant else "raise",
        )
    except BulkSendError as exc:
        if exc.partial is not None:  # the rows queued before the error travel on
            tracker.track_bulk(exc.partial, topic, part)
        if tracker.tolerant:
            tracker.refuse(part, exc.refused, "producer", topic)
        first = exc.row if exc.row is not None else exc.first_row_not_sent  # the row at fault, or the first left
        tracker.fail_now(part.task_row(first), topic, exc.partition, exc.error, count=len(exc.rows_not_sent))
        return
    except KafkaError as exc:  # the call as a whole: nothing of it was queued
        tracker.refuse_call(part, exc, topic)
        return
    tracker.refuse(part, future.refused, "producer", topic)
    tracker.track_bulk(future, topic, part)
