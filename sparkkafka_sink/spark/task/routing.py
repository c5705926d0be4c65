"""Rows to the producer: out what has no topic, split by topic, encode, send -- and what became
of them, as data.

A :class:`Part` of an Arrow batch -- some rows, and each row's number in the task's input --
goes through four steps, each handling a row once: rows without a topic are taken out; the rest
are split by topic; each topic's rows are encoded when a column is written in a registry format
(``encoders``: the rows their schema cannot hold come back as data, left out); each topic's rows
go to the producer in one ``send_batch`` (the rows it refuses -- too large, a partition that does
not exist, a header without a key -- come back as data too, under ``errors.tolerance=all``).
Every row leaves here once, in one of the outcomes :func:`route` returns, which the task's
``DeliveryTracker`` records: :class:`Handed` to the producer with its ``send_batch`` future,
:class:`Rejected` as a bad row (under tolerance), or :class:`Stopped` -- the task fails at it,
nothing of its part sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidRecordError, KafkaError, condemns_record
from sparkkafka_sink.otel.spans import valid_traceparents
from sparkkafka_sink.producer.bulk import BulkFuture, BulkSendError
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.record.arrow import ExtraHeader
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.task.encoders import TaskEncoders


@dataclass(frozen=True)
class Part:
    """Some rows of one Arrow table on their way to the producer, and where each came from.

    The task numbers its input's rows from its first Arrow batch.  It sends them a table at a
    time (Spark's batches grouped, ``batches.coalesced``), and what it sends of a table may be
    only some of them -- one topic's rows, or the rest once bad rows were taken out -- so a part
    carries, beside its rows, each row's number in the task's input (``rows``).  Failures and
    bad rows are named by that number wherever they are found."""

    #: the rows (an Arrow table, its pieces Spark's batches; a record batch does as well)
    batch: pa.Table
    #: each row's number in the task's input (ascending)
    rows: np.ndarray

    @classmethod
    def of(cls, batch: pa.Table, first_row: int) -> Part:
        """All of ``batch``, whose first row is row ``first_row`` of the task's input."""
        return cls(batch, np.arange(first_row, first_row + batch.num_rows, dtype=np.int64))

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows

    def nulls(self, name: str) -> np.ndarray:
        """The positions (ascending) of the nulls of column ``name``."""
        col = self.batch.column(name)
        if not col.null_count:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))

    def take(self, indices: np.ndarray) -> Part:
        """The rows at ``indices`` (ascending)."""
        return Part(self.batch.take(pa.array(indices)), self.rows[indices])

    def without(self, indices: Sequence[int] | np.ndarray) -> Part:
        """This part without the rows at ``indices``."""
        keep = np.delete(np.arange(self.num_rows), np.asarray(indices, dtype=np.int64))
        return self.take(keep)


NULL_TOPIC = "topic is null and no 'topic' option is set"


@dataclass(frozen=True, slots=True)
class Handed:
    """The rows of ``part`` handed to the producer for ``topic`` in one ``send_batch``: its future."""

    future: BulkFuture
    topic: str
    part: Part


@dataclass(frozen=True, slots=True)
class Rejected:
    """Bad rows of ``part`` (under ``errors.tolerance=all``), refused before any was sent, each with
    its error: at the row ``stage`` ("row check", "serialization" or "producer")."""

    part: Part
    refused: Refused
    stage: str
    topic: str | None


@dataclass(frozen=True, slots=True)
class Stopped:
    """The task fails here: ``count`` records not handed over, the first the task's row ``row``."""

    row: int
    topic: str | None
    partition: int | None
    error: BaseException
    count: int


#: what became of a part's rows
Outcome = Handed | Rejected | Stopped


def route(producer: Producer, part: Part, layout: ColumnLayout, topic_option: str | None,
          encoders: TaskEncoders | None, tolerant: bool, trace: str | None = None) -> list[Outcome]:
    """Hand every row of ``part`` to the producer, one ``send_batch`` per topic; what became of
    them.  A row refused on the way (no topic, a traceparent that is not one, a schema that
    cannot hold it, the producer's refusal) is a bad row when ``tolerant``; otherwise its part
    stops there, unsent.  ``trace``: the task's span as a W3C traceparent, written as every
    record's ``traceparent`` header (``traceHeaders=task``), or where a row has none of its own
    (``traceHeaders=column``: ``layout.traceparent``)."""
    outcomes: list[Outcome] = []
    unroutable = _without_topic(part, layout, topic_option) | _bad_traceparent(part, layout)
    if unroutable:
        if not tolerant:
            return [_stop(part, unroutable, None)]
        outcomes.append(Rejected(part, unroutable, "row check", None))
        part = part.without(unroutable.rows)
    for topic, group in _topic_groups(part, layout, topic_option):
        outcomes += _send(producer, group, layout, topic, encoders, tolerant, trace)
    return outcomes


def _stop(part: Part, refused: Refused, topic: str | None) -> Stopped:
    """The first refused row of ``part`` fails the task, with every row of the part."""
    row, error, partition = next(iter(refused))
    return Stopped(int(part.rows[row]), topic, partition, error, part.num_rows)


def _without_topic(part: Part, layout: ColumnLayout, topic_option: str | None) -> Refused:
    """The rows of ``part`` that have no topic (none with the topic option)."""
    if topic_option is not None or part.num_rows == 0:
        return Refused()
    assert layout.topic is not None, "validate_schema: no topic option, so a topic column"
    nulls = part.nulls(layout.topic)
    error = InvalidRecordError(NULL_TOPIC)
    return Refused(nulls, (error,) * len(nulls), (None,) * len(nulls))


def _bad_traceparent(part: Part, layout: ColumnLayout) -> Refused:
    """``traceHeaders=column``: the rows whose ``traceparent`` is not a W3C traceparent (a null
    is not refused: the task's span stands in)."""
    if layout.traceparent is None or part.num_rows == 0:
        return Refused()
    col = part.batch.column(layout.traceparent)
    valid = valid_traceparents(col).fill_null(True)
    if pc.all(valid).as_py():
        return Refused()
    rows = np.flatnonzero(~valid.to_numpy(zero_copy_only=False))
    errors = tuple(InvalidRecordError(f"Row {int(part.rows[r])}: its traceparent {col[int(r)].as_py()!r} is not a "
                                      "W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)") for r in rows)
    return Refused(rows, errors, (None,) * len(rows))


#: the header a traceparent is written as
TRACEPARENT_HEADER = "traceparent"


def _topic_groups(part: Part, layout: ColumnLayout, topic_option: str | None) -> list[tuple[str, Part]]:
    """``[(topic, its rows)]``; the topic option wins over the column (which has no nulls here)."""
    if topic_option is not None:
        return [(topic_option, part)]
    if part.num_rows == 0:
        return []
    assert layout.topic is not None, "validate_schema: no topic option, so a topic column"
    col = part.batch.column(layout.topic)
    topics = pc.unique(col).to_pylist()
    if len(topics) == 1:
        return [(topics[0], part)]
    return [(t, part.take(np.flatnonzero(pc.equal(col, t).to_numpy(zero_copy_only=False)))) for t in topics]


def _send(producer: Producer, given: Part, layout: ColumnLayout, topic: str, encoders: TaskEncoders | None,
          tolerant: bool, trace: str | None) -> list[Outcome]:
    """``given``'s rows for ``topic``, encoded (when a column is written in a registry format),
    in one ``send_batch``.  Under tolerance the rows the encoders or the producer refuse are
    left out and returned as bad rows; otherwise the first refused row stops the task, nothing
    of the part sent."""
    outcomes: list[Outcome] = []
    part = given
    if encoders:
        encoded, kept, refused = encoders.encode(given.batch, given.rows, topic)
        if refused:
            if not tolerant:
                return [_stop(given, refused, topic)]
            outcomes.append(Rejected(given, refused, "serialization", topic))  # read as the user gave them
            if not len(kept):
                return outcomes
        part = Part(encoded, given.rows[kept])
    col = part.batch.column
    extra: ExtraHeader | None = None
    if layout.traceparent is not None:  # each row's own, the task's where it has none
        own = col(layout.traceparent)
        extra = (TRACEPARENT_HEADER, own.fill_null(trace) if trace is not None else own)
    elif trace is not None:
        extra = (TRACEPARENT_HEADER, trace.encode("ascii"))
    try:
        future = producer.send_batch(
            topic,
            values=col(layout.value),
            keys=col(layout.key) if layout.key else None,
            headers=col(layout.headers) if layout.headers else None,
            partitions=col(layout.partition) if layout.partition else None,
            timestamps=col(layout.timestamp) if layout.timestamp else None,
            refused="return" if tolerant else "raise",
            extra_header=extra,
        )
    except BulkSendError as exc:
        if exc.partial is not None:  # the rows queued before the error travel on
            outcomes.append(Handed(exc.partial, topic, part))
        if tolerant and exc.refused:
            outcomes.append(Rejected(part, exc.refused, "producer", topic))
        first = exc.row if exc.row is not None else exc.first_row_not_sent  # the row at fault, or the first left
        outcomes.append(Stopped(int(part.rows[first]), topic, exc.partition, exc.error, len(exc.rows_not_sent)))
        return outcomes
    except KafkaError as exc:  # the call as a whole: nothing of it was queued
        if tolerant and condemns_record(exc):  # a refusal that condemns every row (a topic not authorized)
            every = np.arange(len(part.rows))
            outcomes.append(Rejected(part, Refused(every, (exc,) * len(every), (None,) * len(every)), "producer",
                                     topic))
            return outcomes
        outcomes.append(Stopped(int(part.rows[0]), topic, None, exc, len(part.rows)))
        return outcomes
    if future.refused:
        outcomes.append(Rejected(part, future.refused, "producer", topic))
    outcomes.append(Handed(future, topic, part))
    return outcomes
