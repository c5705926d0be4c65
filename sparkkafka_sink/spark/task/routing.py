"""Rows to the producer: one ``send_batch`` per topic of an Arrow batch, bad rows taken out.

A row no producer could take (``row_checks``) stops the task before its batch is sent -- or,
under ``errors.tolerance=all``, goes to the dead letters and the rest is sent.  So does a row the
producer refuses (it names the row) and, tolerated, every row of a topic it refuses (not
authorized).  What the producer accepted is followed by the ``DeliveryTracker``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidRecordError, KafkaError
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.dead_letters import DeadLetters, is_bad_row
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.row_checks import NULL_TOPIC, RowError, check_headers, first_null, task_row


def send_arrow_batch(producer, batch, layout: ColumnLayout, topic_option, row_offset: int,
                     tracker: DeliveryTracker, dead_letters: Optional[DeadLetters] = None) -> None:
    """Hand every row of ``batch`` (rows ``row_offset``.. of the task) to the producer, one
    ``send_batch`` per topic; rejections and failures go to ``tracker`` with their rows.

    Raises ``RowError`` (position within ``batch``) for a row no producer could take, before
    any row of the batch is sent.  With ``dead_letters`` (errors.tolerance=all) such rows, and
    rows the producer refuses, are taken out and handed there, and the rest is sent."""
    positions = None  # batch rows -> positions in the original batch, once bad rows were taken out
    while True:
        try:
            _check_rows(batch, layout, topic_option)
            groups = _topic_groups(batch, layout, topic_option)
            break
        except RowError as exc:
            if dead_letters is None:
                raise
            i = exc.index
            topic = exc.topic or topic_option or (batch.column(layout.topic)[i].as_py() if layout.topic else None)
            # a row whose headers cannot be read is dead-lettered without them
            dead_letters.reject_rows(batch, layout, [i], row_offset, positions, topic, exc.partition,
                                     InvalidRecordError(str(exc)), "row check", with_headers=str(exc) == NULL_TOPIC)
            keep = np.delete(np.arange(batch.num_rows), i)
            batch = batch.take(pa.array(keep))
            positions = keep if positions is None else positions[keep]
            if batch.num_rows == 0:
                return
    for topic, rows in groups:
        part = batch if rows is None else batch.take(pa.array(rows))
        if positions is not None:  # positions in the batch the task received
            rows = positions if rows is None else positions[rows]
        _send_part(producer, part, layout, topic, rows, row_offset, tracker, dead_letters)


def _check_rows(batch, layout: ColumnLayout, topic_option) -> None:
    """Raise ``RowError`` for the first row no producer could take (a null topic, a header
    without a key), whichever check finds it."""
    errors = []
    if layout.headers:
        try:
            check_headers(batch.column(layout.headers))
        except RowError as exc:
            errors.append(exc)
    if topic_option is None:
        bad = first_null(batch.column(layout.topic))
        if bad is not None:
            errors.append(RowError(bad, NULL_TOPIC))
    if errors:
        raise min(errors, key=lambda e: e.index)


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
               dead_letters: Optional[DeadLetters]) -> None:
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
        except KafkaError as exc:
            if getattr(exc, "partial", None) is not None:  # batches queued before the rejection
                tracker.track_bulk(exc.partial, topic, row_offset, rows, part)
            first = exc.row or 0
            not_sent = getattr(exc, "rows_not_sent", None)
            if dead_letters is not None and is_bad_row(exc) and not_sent is None and exc.row is not None:
                dead_letters.reject_rows(part, layout, [first], row_offset, rows, topic, exc.partition, exc, "producer")
                keep = np.delete(np.arange(part.num_rows), first)
                if len(keep) == 0:
                    return
                part = part.take(pa.array(keep))
                rows = keep if rows is None else np.asarray(rows)[keep]
                continue
            if dead_letters is not None and is_bad_row(exc) and exc.row is None and getattr(exc, "partial", None) is None:
                # the topic itself is refused (TOPIC_AUTHORIZATION_FAILED from Metadata): every row
                dead_letters.reject_rows(part, layout, range(part.num_rows), row_offset, rows, topic, None, exc,
                                         "producer")
                return
            tracker.fail_now(task_row(row_offset, rows, first), topic, exc.partition, exc,
                             count=part.num_rows if not_sent is None else len(not_sent))
            return
        tracker.track_bulk(future, topic, row_offset, rows, part)
        return
