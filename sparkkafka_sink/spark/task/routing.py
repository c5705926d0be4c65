"""Rows to the producer: serialize, split by topic, send, route the refusals.

A part of an Arrow batch (``part.Part``) goes through four steps, each handling a row once:
rows without a topic are taken out (``row_checks``); the rest are split by topic; each topic's
rows are serialized when a column is written in a registry format (rows the schema cannot hold
taken out); each topic's rows go to the producer in one ``send_batch``.  A row taken out stops
the task (its first, named) -- or, under ``errors.tolerance=all``, goes to the dead letters and
the rest goes on.  So does a row the producer refuses (its ``BulkSendError`` names the row: too
large, a partition that does not exist, a header without a key) and, tolerated, every row of a
topic it refuses (not authorized).  What the producer accepted is followed by the
``DeliveryTracker``.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidHeaderError, InvalidRecordError, KafkaError
from sparkkafka_sink.producer.bulk import BulkSendError
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.serialization.encoded import RecordSchemaError
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
    ``dead_letters`` (errors.tolerance=all) such rows, and rows the producer refuses, are taken
    out and handed there, and the rest is sent."""
    part = _with_topics(part, layout, topic_option, dead_letters)
    for topic, group in _topic_groups(part, layout, topic_option):
        if encoders:
            serialized = _serialized(group, topic, encoders, tracker, dead_letters)
            if serialized is None:
                continue
            group = serialized
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


def _serialized(part: Part, topic: str, encoders: TaskEncoders, tracker: DeliveryTracker,
                dead_letters: DeadLetters | None) -> Part | None:
    """``part`` with its key and value serialized; a row its schema cannot hold goes to the dead
    letters (the rest is sent), or stops the task before any row of the part is sent (None, the
    failure with the tracker)."""
    encoded, bad = encoders.encode(part.batch, topic)
    if not bad:
        return part.with_batch(encoded)
    errors = [(i, RecordSchemaError(reason, part.task_row(i), field)) for i, field, reason in bad]
    if dead_letters is None:
        first, error = errors[0]
        tracker.fail_now(part.task_row(first), topic, None, error, count=part.num_rows)
        return None
    for i, error in errors:  # dead-lettered as the user gave them, before serialization
        dead_letters.reject_rows(part, [i], error, "serialization", topic)
    rest = part.with_batch(encoded).without([i for i, _ in errors])
    return rest if rest.num_rows else None


def _send(producer: Producer, part: Part, layout: ColumnLayout, topic: str, tracker: DeliveryTracker,
          dead_letters: DeadLetters | None) -> None:
    """One ``send_batch`` of ``part``; under tolerance a row the producer refuses is taken out and
    the rest sent again, and a topic it refuses (not authorized) makes every row of the part a
    bad row."""
    while True:
        col = part.column
        try:
            future = producer.send_batch(
                topic,
                values=col(layout.value),
                keys=col(layout.key) if layout.key else None,
                headers=col(layout.headers) if layout.headers else None,
                partitions=col(layout.partition) if layout.partition else None,
                timestamps=col(layout.timestamp) if layout.timestamp else None,
            )
        except BulkSendError as exc:
            if exc.partial is not None:  # the rows queued before the error travel on
                tracker.track_bulk(exc.partial, topic, part)
            if dead_letters is not None and exc.row is not None and is_bad_row(exc.error):
                # a row the producer refused, before any row was queued: out, and the rest again
                dead_letters.reject_rows(part, [exc.row], exc.error, "producer", topic, exc.partition,
                                         with_headers=not isinstance(exc.error, InvalidHeaderError))
                part = part.without([exc.row])
                if part.num_rows == 0:
                    return
                continue
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
        tracker.track_bulk(future, topic, part)
        return


