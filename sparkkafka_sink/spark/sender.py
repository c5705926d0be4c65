"""The send loop: the one place that hands an Arrow batch's rows to the producer.

Two paths, same outcome.  The bulk path gives whole Arrow columns to
``Producer.send_batch`` (one call and one future per topic in the batch; the
producer encodes record batches straight from the columns).  The per-row path
calls ``Producer.send`` once per row.  When the producer rejects a bulk call
for a row's content (partition out of range, record too large, bad record),
the batch is re-sent row by row, which stops exactly at the offending row, so
the error names its position; nothing of the rejected call was queued.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import (
    InvalidPartitionError,
    InvalidRecordError,
    KafkaError,
    RecordTooLargeError,
)
from sparkkafka_sink.spark.delivery import DeliveryTracker
from sparkkafka_sink.spark.extract import (
    NULL_TOPIC,
    RecordColumns,
    RowError,
    check_headers,
    extract_records,
    first_null,
)
from sparkkafka_sink.spark.validation import ColumnLayout

# Errors about a row's content: worth a row-by-row pass to name the row.
_ROW_ERRORS = (InvalidPartitionError, RecordTooLargeError, InvalidRecordError)


def send_arrow_batch(producer, batch: pa.RecordBatch, layout: ColumnLayout, topic_option,
                     row_offset: int, tracker: DeliveryTracker, bulk: bool = True) -> None:
    """Send every row of ``batch`` (rows ``row_offset``.. of the task); failures go to ``tracker``.

    Raises ``RowError`` (position within ``batch``) for a row no producer could take.
    """
    if bulk and hasattr(producer, "send_batch"):
        send_bulk(producer, batch, layout, topic_option, row_offset, tracker)
    else:
        send_records(producer, extract_records(batch, layout, topic_option), row_offset, tracker)


def _topic_groups(batch: pa.RecordBatch, layout: ColumnLayout, topic_option):
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


def send_bulk(producer, batch: pa.RecordBatch, layout: ColumnLayout, topic_option,
              row_offset: int, tracker: DeliveryTracker) -> None:
    if layout.headers:
        check_headers(batch.column(layout.headers))
    for topic, rows in _topic_groups(batch, layout, topic_option):
        part = batch if rows is None else batch.take(pa.array(rows))
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
        except _ROW_ERRORS:
            # Name the row: the per-row path stops at it.  Rows already handed to the producer by
            # earlier topic groups of this batch stay sent.
            send_records(producer, extract_records(part, layout, topic), row_offset, tracker,
                         row_map=rows)
            return
        except KafkaError as exc:
            first = 0 if rows is None else int(rows[0])
            tracker.fail_now(row_offset + first, topic, None, exc, count=part.num_rows)
            return
        tracker.track_bulk(future, topic, row_offset, rows)


def send_records(producer, records: RecordColumns, row_offset: int, tracker: DeliveryTracker,
                 row_map=None) -> int:
    """Send row by row; stop at the first row ``send()`` rejects.

    A synchronous rejection (bad record, unknown partition, metadata or buffer
    wait timing out) is recorded with its row position and ends the loop, since
    the following rows would hit the same wall; asynchronous failures arrive
    through the errbacks.  ``row_map`` maps positions in ``records`` to
    positions in the batch (when ``records`` is a subset of it).
    """
    send = producer.send
    on_success = tracker.on_success
    errback = tracker.errback
    sent = 0
    rows = zip(
        records.topics, records.values, records.keys, records.headers,
        records.partitions, records.timestamps_ms,
    )
    try:
        for i, (topic, value, key, headers, partition, ts) in enumerate(rows):
            row = row_offset + (i if row_map is None else int(row_map[i]))
            try:
                future = send(topic, value, key, headers, partition, ts)
            except (KafkaError, TypeError, ValueError) as exc:
                tracker.fail_now(row, topic, partition, exc)
                break
            future.add_callback(on_success)
            future.add_errback(errback(row, topic, partition))
            sent += 1
    finally:
        tracker.sent += sent
    return sent
