"""Bad rows under ``errors.tolerance=all``: skipped, counted, logged, dead-lettered.

A bad row is one that can never be written as it is: a null or invalid topic, a header
without a key, a partition out of range, a record over ``max.request.size``, an invalid
timestamp -- all refused before sending -- and a broker's refusal of the record itself
(MESSAGE_TOO_LARGE for a single record, after splitting; INVALID_RECORD, CORRUPT_MESSAGE,
INVALID_TIMESTAMP, TOPIC_AUTHORIZATION_FAILED for one topic among several).  Retriable trouble
(a broker down, timeouts, buffer memory) is never a bad row: it fails the task as before.

With ``errors.deadletterqueue.topic.name`` each bad row is written there -- by the task's own
producer, so under exactly-once in the same transaction -- with its original key, value and
headers (as far as they could be read), plus context headers (Kafka Connect's names where
Connect has one) naming the error, the intended topic and partition, and the Spark partition,
attempt and row.  A value too large to travel at all (the row was refused for its size) is cut
to fit ``max.request.size``, its original length in a header.  The task sends them
(``send``) and its ``DeliveryTracker`` follows them as it follows the rows: one that fails fails the
task.

Bad rows are found at four stages -- the row checks, serialization (a key or value its Avro or
JSON schema cannot hold: dead-lettered as JSON text of its data), the producer's refusal before
sending, the broker's refusal -- and each hands them over with ``reject_rows``, naming them in
the part they were found in (``routing.Part``).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sparkkafka_sink.errors import InvalidHeaderError
from sparkkafka_sink.producer.bulk import BulkFuture
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.sink_errors import in_option_names
from sparkkafka_sink.spark.task.routing import Part

log = logging.getLogger(__name__)

#: context headers (Kafka Connect's, KIP-298, where Connect has the concept)
H_TOPIC = "__connect.errors.topic"
H_PARTITION = "__connect.errors.partition"
H_EXCEPTION = "__connect.errors.exception.class.name"
H_MESSAGE = "__connect.errors.exception.message"
H_STAGE = "__connect.errors.stage"
H_SPARK_PARTITION = "__pyprod.errors.spark.partition"
H_SPARK_ATTEMPT = "__pyprod.errors.spark.attempt"
H_ROW = "__pyprod.errors.row"
H_TRUNCATED = "__pyprod.errors.value.truncated.from"
#: room left for the record's framing and context headers when a value is cut to fit
_RECORD_SLACK = 4096


@dataclass(frozen=True, slots=True)
class DeadLettersSent:
    """A ``send_batch`` call of dead-letter records: each must land (a dead letter is never
    dead-lettered); ``task_rows``: the bad row each stands for, which a failure names."""

    future: BulkFuture
    topic: str
    task_rows: np.ndarray


@dataclass
class BadRow:
    row: int             # position in the task's input
    topic: str | None    # where it was meant to go
    partition: int | None
    error: BaseException
    stage: str           # "row check", "producer" (refused before sending) or "broker"
    key: bytes | None
    value: bytes | None
    headers: list


class DeadLetters:
    """One task's bad rows: counted, logged, and queued for the dead-letter topic."""

    def __init__(self, topic: str | None, context_headers: bool, log_each: bool, spark_partition: int, attempt: int,
                 max_request_size: int, layout: ColumnLayout):
        self.topic = topic
        self.layout = layout
        self.max_request_size = max_request_size
        self.context_headers = context_headers
        self.log_each = log_each
        self.spark_partition = spark_partition
        self.attempt = attempt
        self.skipped = 0
        self._queued: list[BadRow] = []

    def reject(self, bad: BadRow) -> None:
        self.skipped += 1
        if self.log_each:  # never the values: they may be secret or huge
            log.warning("pyprod-kafka: skipping row %d of Spark partition %d (attempt %d) meant for topic %r "
                        "partition %s at the %s: %s: %s%s", bad.row, self.spark_partition, self.attempt, bad.topic,
                        bad.partition, bad.stage, type(bad.error).__name__, in_option_names(bad.error),
                        f"; dead-lettered to {self.topic!r}" if self.topic else "")
        if self.topic is not None:
            self._queued.append(bad)

    def reject_rows(self, part: Part, indices: Sequence[int] | np.ndarray, error: BaseException, stage: str,
                    topic: str | None = None, partition: int | None = None, with_headers: bool = True) -> None:
        """Rows ``indices`` of ``part`` are bad rows (meant for ``topic`` and ``partition``, where
        known), with their contents as far as they can be read."""
        for i in indices:
            key, value, headers = _row_contents(part.batch, self.layout, int(i), with_headers)
            self.reject(BadRow(int(part.rows[i]), topic, partition, error, stage, key, value, headers))

    def reject_refused(self, part: Part, refused: Refused, stage: str, topic: str | None) -> None:
        """The rows of ``part`` a check refused, each with its own error (a header without a key:
        without its headers, which cannot be read)."""
        for row, error, partition in refused:
            self.reject_rows(part, [row], error, stage, topic, partition,
                             with_headers=not isinstance(error, InvalidHeaderError))

    def take(self) -> list[BadRow]:
        queued, self._queued = self._queued, []
        return queued

    def record_of(self, bad: BadRow) -> tuple[bytes | None, bytes | None, list]:
        """(key, value, headers) of the dead-letter record for ``bad``."""
        headers = list(bad.headers)
        value = bad.value
        room = self.max_request_size - _RECORD_SLACK - len(bad.key or b"") - sum(
            len(k) + len(v or b"") for k, v in headers)
        if value is not None and len(value) > room:
            headers.append((H_TRUNCATED, _text(len(value))))
            value = value[:max(room, 0)]
        if self.context_headers:
            headers += [(H_TOPIC, _text(bad.topic)), (H_PARTITION, _text(bad.partition)),
                        (H_EXCEPTION, _text(type(bad.error).__module__ + "." + type(bad.error).__name__)),
                        (H_MESSAGE, _text(in_option_names(bad.error))), (H_STAGE, _text(bad.stage)),
                        (H_SPARK_PARTITION, _text(self.spark_partition)), (H_SPARK_ATTEMPT, _text(self.attempt)),
                        (H_ROW, _text(bad.row))]
        return bad.key, value, headers

    def send(self, producer: Producer) -> DeadLettersSent | None:
        """Send the dead-letter records of the bad rows queued so far, in one ``send_batch``; the
        send, for the task's tracker to follow (None: none to send)."""
        queued, topic = self.take(), self.topic
        if not queued or topic is None:  # (rows are queued only with a topic)
            return None
        records = [self.record_of(b) for b in queued]
        future = producer.send_batch(topic, values=[v for _, v, _ in records], keys=[k for k, _, _ in records],
                                     headers=[h for _, _, h in records])
        # a failure names the bad row by its place in the task's input, as every task failure does
        return DeadLettersSent(future, topic, np.array([b.row for b in queued], dtype=np.int64))


def _json_default(value: Any) -> object:
    """What JSON cannot hold as it is: bytes as base64 (Spark's to_json writes them so), the rest
    (decimals, dates, timestamps) as their text."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _text(value: Any) -> bytes | None:
    return None if value is None else str(value).encode("utf-8", "replace")


def _row_contents(batch: pa.RecordBatch, layout: ColumnLayout, index: int, with_headers: bool = True
                  ) -> tuple[bytes | None, bytes | None, list]:
    """Key, value and headers of row ``index`` of an Arrow batch, as far as they can be read."""
    def as_bytes(name: str | None) -> bytes | None:
        if not name:
            return None
        v = batch.column(name)[index].as_py()
        if v is None or isinstance(v, bytes):
            return v
        if isinstance(v, str):
            return v.encode("utf-8")
        # a key or value the sink serializes (valueFormat avro, json or protobuf) that its schema could not
        # hold: dead-lettered as JSON text of the row's data, readable by anyone
        return json.dumps(v, default=_json_default, ensure_ascii=False).encode("utf-8")

    headers = []
    if with_headers and layout.headers:
        for h in batch.column(layout.headers)[index].as_py() or ():
            if h is not None and h.get("key") is not None:
                headers.append((h["key"], h.get("value")))
    return as_bytes(layout.key), as_bytes(layout.value), headers
