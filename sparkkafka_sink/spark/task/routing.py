"""Rows to the producer: out what has no topic, split by topic, encode, send, route refusals.

A part of an Arrow batch (``part.Part``) goes through four steps, each handling a row once:
rows without a topic are taken out (``row_checks``); the rest are split by topic; each topic's
rows are encoded when a column is written in a registry format (``encoders``: the rows their
schema cannot hold come back as data); each topic's rows go to the producer in one
``send_batch`` (the rows it refuses -- too large, a partition that does not exist, a header
without a key -- come back as data too, under ``errors.tolerance=all``).  Under the default
tolerance the first refused row stops the task, named, before any row of its part is sent;
under ``all`` the refused rows go to the dead letters (``_route``) and the rest goes on, as do
all the rows of a topic the producer refuses (not authorized).  What the producer accepted is
followed by the ``DeliveryTracker``.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidHeaderError, InvalidRecordError, KafkaError
from sparkkafka_sink.producer.bulk import BulkSendError
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.dead_letters import DeadLetters, is_bad_row
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.encoders import TaskEncoders
from sparkkafka_sink.spark.task.part import Part
from sparkkafka_sink.spark.task.row_checks import NULL_TOPIC, RowError, null_positions


def send_arrow_batch(producer: Producer, part: Part, layout: ColumnLayout, topic_option: str | None,
                     tracker: DeliveryTracker, dead_letters: DeadLetters | None = None,
                     encoders: TaskEncoders | None = None) -> None:
    """Hand every row of ``part`` to the producer, one ``send_batch`` per topic; rejections and
    failures go to ``tracker`` with their rows.

    Raises ``RowError`` for a row without a topic, before any row of the part is sent.  With
    ``dead_letters`` (errors.tolerance=all) such rows, rows their schema cannot hold and rows the
    producer refuses are handed there, each once, and the rest is sent."""
    part = _with_topics(part, layout, topic_option, dead_letters)
    for topic, group in _topic_groups(part, layout, topic_option):
        if encoders:
            encoded, refused = encoders.encode(group, topic)
            if refused and dead_letters is None:  # the task stops before any row of the group is sent
                row, error, _ = next(iter(refused))
                tracker.fail_now(group.task_row(row), topic, None, error, count=group.num_rows)
                continue
            _route(dead_letters, group, refused, "serialization", topic)  # read as the user gave them
            group = encoded.without(refused.rows) if refused else encoded
            if not group.num_rows:
                continue
        _send(producer, group, layout, topic, tracker, dead_letters)


def _with_topics(part: Part, layout: ColumnLayout, topic_option: str | None, dead_letters: DeadLetters | None
                 ) -> Part:
    """``part`` without its rows that have no topic (dead-lettered), or ``RowError`` for the first."""
    if topic_option is not None or part.num_rows == 0:
        return part
    assert layout.topic is not None, "validate_schema: no topic option, so a topic column"
    nulls = null_positions(part.column(layout.topic))
    if not len(nulls):
        return part
    if dead_letters is None:
        raise RowError(part.task_row(int(nulls[0])), NULL_TOPIC)
    dead_letters.reject_rows(part, nulls, InvalidRecordError(NULL_TOPIC), "row check")
    return part.without(nulls)


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


def _send(producer: Producer, part: Part, layout: ColumnLayout, topic: str, tracker: DeliveryTracker,
          dead_letters: DeadLetters | None) -> None:
    """One ``send_batch`` of ``part``.  Under tolerance the producer leaves out the rows it
    refuses and returns them (routed to the dead letters), and a topic it refuses (not
    authorized) makes every row of the part a bad row; otherwise the first refused row fails
    the task, nothing of the part sent."""
    col = part.column
    try:
        future = producer.send_batch(
            topic,
            values=col(layout.value),
            keys=col(layout.key) if layout.key else None,
            headers=col(layout.headers) if layout.headers else None,
            partitions=col(layout.partition) if layout.partition else None,
            timestamps=col(layout.timestamp) if layout.timestamp else None,
            refused="raise" if dead_letters is None else "return",
        )
    except BulkSendError as exc:
        if exc.partial is not None:  # the rows queued before the error travel on
            tracker.track_bulk(exc.partial, topic, part)
        _route(dead_letters, part, exc.refused, "producer", topic)
        first = exc.row if exc.row is not None else exc.first_row_not_sent  # the row at fault, or the first left
        tracker.fail_now(part.task_row(first), topic, exc.partition, exc.error, count=len(exc.rows_not_sent))
        return
    except KafkaError as exc:  # the call as a whole: nothing of it was queued
        if dead_letters is not None and is_bad_row(exc):
            # the topic itself is refused (TOPIC_AUTHORIZATION_FAILED from Metadata): every row
            dead_letters.reject_rows(part, np.arange(part.num_rows), exc, "producer", topic)
            return
        tracker.fail_now(part.task_row(0), topic, None, exc, count=part.num_rows)
        return
    _route(dead_letters, part, future.refused, "producer", topic)
    tracker.track_bulk(future, topic, part)


def _route(dead_letters: DeadLetters | None, part: Part, refused: Refused, stage: str, topic: str) -> None:
    """Rows of ``part`` a call refused, to the dead letters (a header without a key: without its
    headers, which cannot be read)."""
    if dead_letters is None:
        return
    for row, error, partition in refused:
        dead_letters.reject_rows(part, [row], error, stage, topic, partition,
                                 with_headers=not isinstance(error, InvalidHeaderError))
