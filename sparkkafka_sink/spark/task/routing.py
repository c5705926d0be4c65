"""Rows to the producer: one ``send_batch`` per topic of an Arrow batch, bad rows taken out.

A row without a topic (``row_checks``) stops the task before its batch is sent -- or, under
``errors.tolerance=all``, goes to the dead letters and the rest is sent.  So does a row the
producer refuses (its ``BulkSendError`` names the row: too large, a partition that does not
exist, a header without a key) and, tolerated, every row of a topic it refuses (not
authorized).  What the producer accepted is followed by the ``DeliveryTracker``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidHeaderError, InvalidRecordError, KafkaError
from sparkkafka_sink.producer.bulk import BulkSendError
from sparkkafka_sink.serialization.encoded import RecordSchemaError
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.dead_letters import DeadLetters, is_bad_row
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.row_checks import NULL_TOPIC, RowError, first_null, task_row
from sparkkafka_sink.spark.task.serialization import TaskSerializers


def send_arrow_batch(producer, batch, layout: ColumnLayout, topic_option, row_offset: int,
                     tracker: DeliveryTracker, dead_letters: DeadLetters | None = None,
                     serializers: TaskSerializers | None = None) -> None:
    """Hand every row of ``batch`` (rows ``row_offset``.. of the task) to the producer, one
    ``send_batch`` per topic; rejections and failures go to ``tracker`` with their rows.

    Raises ``RowError`` (position within ``batch``) for a row without a topic, before any row of
    the batch is sent.  With ``dead_letters`` (errors.tolerance=all) such rows, and rows the
    producer refuses, are taken out and handed there, and the rest is sent."""
    positions = None  # batch rows -> positions in the original batch, once bad rows were taken out
    while True:
        try:
            groups = _topic_groups(batch, layout, topic_option)
            break
        except RowError as exc:
            if dead_letters is None:
                raise
            i = exc.index
            dead_letters.reject_rows(batch, layout, [i], row_offset, positions, None, None,
                                     InvalidRecordError(str(exc)), "row check")
            batch, positions = _without(batch, positions, [i])
            if batch.num_rows == 0:
                return
    for topic, rows in groups:
        part = batch if rows is None else batch.take(pa.array(rows))
        if positions is not None:  # positions in the batch the task received
            rows = positions if rows is None else positions[rows]
        if serializers:
            part, rows = _serialized(part, rows, topic, layout, serializers, row_offset, tracker, dead_letters)
            if part is None:
                continue
        _send_part(producer, part, layout, topic, rows, row_offset, tracker, dead_letters)


def _serialized(part, rows, topic: str, layout: ColumnLayout, serializers: TaskSerializers, row_offset: int,
                tracker: DeliveryTracker, dead_letters: DeadLetters | None):
    """``(part, rows)`` with the key and value serialized; a row its schema cannot hold goes to
    the dead letters (the rest is sent), or stops the task before any row of the part is sent
    (``(None, None)``, the failure with the tracker)."""
    encoded, bad = serializers.encode(part, topic)
    if not bad:
        return encoded, rows
    errors = [(i, RecordSchemaError(reason, task_row(row_offset, rows, i), field)) for i, field, reason in bad]
    if dead_letters is None:
        first, error = errors[0]
        tracker.fail_now(task_row(row_offset, rows, first), topic, None, error, count=part.num_rows)
        return None, None
    for i, error in errors:  # dead-lettered as the user gave them, before serialization
        dead_letters.reject_rows(part, layout, [i], row_offset, rows, topic, None, error, "serialization")
    encoded, rows = _without(encoded, rows, [i for i, _ in errors])
    return (encoded, rows) if encoded.num_rows else (None, None)


def _without(part, rows, positions):
    """``part`` without the rows at ``positions``, and where its remaining rows come from
    (``rows``: the part's rows' positions in the batch the task received, None for all in order)."""
    keep = np.delete(np.arange(part.num_rows), positions)
    return part.take(pa.array(keep)), (keep if rows is None else np.asarray(rows)[keep])


def _topic_groups(batch, layout: ColumnLayout, topic_option):
    """[(topic, row indices or None for all rows)]; the topic option wins over the column."""
    if topic_option is not None:
        return [(topic_option, None)]
    col = batch.column(layout.topic)
    bad = first_null(col)
    if bad is not None:
        raise RowError(bad, NULL_TOPIC)
    topics = pc.unique(col).to_pylist()
    if len(topics) == 1:
        return [(topics[0], None)]
    return [(t, np.flatnonzero(pc.equal(col, t).to_numpy(zero_copy_only=False))) for t in topics]


def _send_part(producer, part, layout: ColumnLayout, topic: str, rows, row_offset: int, tracker: DeliveryTracker,
               dead_letters: DeadLetters | None) -> None:
    """One ``send_batch`` of ``part`` (``rows``: its rows' positions in the original batch, None
    for all in order); under tolerance a row the producer refuses is taken out and the rest
    sent again, and a topic it refuses (not authorized) makes every row of the part a bad row."""
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
                tracker.track_bulk(exc.partial, topic, row_offset, rows, part)
            if dead_letters is not None and exc.row is not None and is_bad_row(exc.error):
                # a row the producer refused, before any row was queued: out, and the rest again
                dead_letters.reject_rows(part, layout, [exc.row], row_offset, rows, topic, exc.partition, exc.error,
                                         "producer", with_headers=not isinstance(exc.error, InvalidHeaderError))
                part, rows = _without(part, rows, [exc.row])
                if part.num_rows == 0:
                    return
                continue
            first = exc.row if exc.row is not None else exc.first_row_not_sent  # the row at fault, or the first left
            tracker.fail_now(task_row(row_offset, rows, first), topic, exc.partition, exc.error,
                             count=len(exc.rows_not_sent))
            return
        except KafkaError as exc:  # the call as a whole: nothing of it was queued
            if dead_letters is not None and is_bad_row(exc):
                # the topic itself is refused (TOPIC_AUTHORIZATION_FAILED from Metadata): every row
                dead_letters.reject_rows(part, layout, range(part.num_rows), row_offset, rows, topic, None, exc,
                                         "producer")
                return
            tracker.fail_now(task_row(row_offset, rows, 0), topic, None, exc, count=part.num_rows)
            return
        tracker.track_bulk(future, topic, row_offset, rows, part)
        return
