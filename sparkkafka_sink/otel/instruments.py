"""A producer's metrics as OpenTelemetry instruments: a ``producer.metrics.MetricsObserver`` that
records each event of the producer on a meter, named after OpenTelemetry's messaging semantic
conventions where they have a name, and the package's own otherwise.

| instrument | kind, unit | what |
|---|---|---|
| ``messaging.client.sent.messages`` | counter, {message} | records acknowledged, and failed ones with ``error.type`` (their error's class) |
| ``messaging.client.operation.duration`` | histogram, s | a Produce request's round trip (``messaging.operation.name`` ``send``) |
| ``sparkkafka_sink.producer.sent.bytes`` | counter, By | bytes of the record batches acknowledged |
| ``sparkkafka_sink.producer.batch.size`` | histogram, By | each record batch acknowledged |
| ``sparkkafka_sink.producer.retries`` | counter, {batch} | batches sent again, with ``error.type`` |
| ``sparkkafka_sink.producer.buffer.wait.duration`` | histogram, s | each wait of a caller for buffer memory |

Every one carries ``messaging.system`` = ``kafka``; those of records and batches their topic
(``messaging.destination.name``).  Made only when OpenTelemetry's API is installed; the
producer calls them on its Sender thread, per batch or request, never per record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkkafka_sink.otel import MESSAGING_SYSTEM
from sparkkafka_sink.version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter

__all__ = ["ProducerInstruments", "SENT", "DURATION", "BYTES", "BATCH_SIZE", "RETRIES", "BUFFER_WAIT"]

SENT = "messaging.client.sent.messages"
DURATION = "messaging.client.operation.duration"
BYTES = "sparkkafka_sink.producer.sent.bytes"
BATCH_SIZE = "sparkkafka_sink.producer.batch.size"
RETRIES = "sparkkafka_sink.producer.retries"
BUFFER_WAIT = "sparkkafka_sink.producer.buffer.wait.duration"

#: OpenTelemetry's advice for messaging durations (seconds)
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
_BATCH_BUCKETS = (1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)


def _histogram(meter: Meter, name: str, unit: str, description: str, buckets: tuple[float, ...]) -> Histogram:
    try:  # the bucket advice arrived in opentelemetry-api 1.23
        return meter.create_histogram(name, unit=unit, description=description,
                                      explicit_bucket_boundaries_advisory=list(buckets))
    except TypeError:
        return meter.create_histogram(name, unit=unit, description=description)


class ProducerInstruments:
    """The instruments of the package's meter (one set per process: OpenTelemetry keeps one
    per meter and name), and the producer's events recorded on them."""

    def __init__(self) -> None:
        from opentelemetry.metrics import get_meter

        meter = get_meter("sparkkafka_sink", __version__)
        # (no client id: a Spark write's every task has its producer, and an attribute per producer
        # would make a series of each)
        self._client = dict(MESSAGING_SYSTEM)
        self._sent = meter.create_counter(SENT, unit="{message}", description=(
            "Records the brokers acknowledged, and records that failed (with error.type)"))
        self._duration = _histogram(meter, DURATION, "s", "Produce requests, from sent to answered",
                                    _DURATION_BUCKETS)
        self._bytes = meter.create_counter(BYTES, unit="By", description="Bytes of the record batches acknowledged")
        self._batch = _histogram(meter, BATCH_SIZE, "By", "Record batches acknowledged, in bytes", _BATCH_BUCKETS)
        self._retries = meter.create_counter(RETRIES, unit="{batch}",
                                             description="Batches sent again after a retriable error")
        self._wait = _histogram(meter, BUFFER_WAIT, "s", "Waits of a caller for buffer memory", _DURATION_BUCKETS)
        self._operation = {**self._client, "messaging.operation.name": "send", "messaging.operation.type": "send"}

    def _topic(self, topic: str | None) -> dict[str, str]:
        return {**self._client, "messaging.destination.name": topic} if topic else self._client

    def request_completed(self, latency_ms: float) -> None:
        self._duration.record(latency_ms / 1000, self._operation)

    def batch_sent(self, topic: str, records: int, nbytes: int) -> None:
        where = self._topic(topic)
        self._sent.add(records, {**where, "messaging.operation.name": "send"})
        self._bytes.add(nbytes, where)
        self._batch.record(nbytes, where)

    def batch_retried(self, topic: str, records: int, error: BaseException) -> None:
        self._retries.add(1, {**self._topic(topic), "error.type": type(error).__name__})

    def records_failed(self, topic: str | None, records: int, error: BaseException) -> None:
        self._sent.add(records, {**self._topic(topic), "messaging.operation.name": "send",
                                 "error.type": type(error).__name__})

    def buffer_waited(self, waited_ms: float) -> None:
        self._wait.record(waited_ms / 1000, self._client)
