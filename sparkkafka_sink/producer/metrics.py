"""ProducerMetrics: the counters a Producer exposes (and the Spark sink ships home), and what it
reports as it happens to an observer (the OpenTelemetry instruments of ``otel/``).

The Sender thread writes them (the buffer's waits: the thread that waited); readers take a
snapshot dict.  Without an observer an event costs one test of ``None``.
"""

from __future__ import annotations

from typing import Protocol


class MetricsObserver(Protocol):
    """Events as they happen, beside the counters: each call on the thread of the event (the
    Sender's, a waiting caller's), so quick and never raising."""

    def request_completed(self, latency_ms: float) -> None: ...

    def batch_sent(self, topic: str, records: int, nbytes: int) -> None: ...

    def batch_retried(self, topic: str, records: int, error: BaseException) -> None: ...

    def records_failed(self, topic: str | None, records: int, error: BaseException) -> None: ...

    def buffer_waited(self, waited_ms: float) -> None: ...


class ProducerMetrics:
    __slots__ = ("records_sent", "bytes_sent", "batches_sent", "records_failed", "retries", "record_retries",
                 "requests", "_latency_sum", "request_latency_max_ms", "batch_splits", "buffer_wait_ms",
                 "observer")

    def __init__(self) -> None:
        self.records_sent = 0
        self.bytes_sent = 0
        self.batches_sent = 0
        self.records_failed = 0
        #: batches sent again after a retriable error, and the records in them
        self.retries = 0
        self.record_retries = 0
        self.requests = 0
        self._latency_sum = 0.0
        self.request_latency_max_ms = 0.0
        #: batches split because a broker refused them as too large
        self.batch_splits = 0
        #: time callers waited for buffer memory (send, send_batch)
        self.buffer_wait_ms = 0.0
        self.observer: MetricsObserver | None = None

    def record_request(self, latency_ms: float) -> None:
        self.requests += 1
        self._latency_sum += latency_ms
        if latency_ms > self.request_latency_max_ms:
            self.request_latency_max_ms = latency_ms
        if self.observer is not None:
            self.observer.request_completed(latency_ms)

    def record_batch_sent(self, topic: str, records: int, nbytes: int) -> None:
        self.records_sent += records
        self.bytes_sent += nbytes
        self.batches_sent += 1
        if self.observer is not None:
            self.observer.batch_sent(topic, records, nbytes)

    def record_retry(self, topic: str, records: int, error: BaseException) -> None:
        self.retries += 1
        self.record_retries += records
        if self.observer is not None:
            self.observer.batch_retried(topic, records, error)

    def record_failure(self, records: int, error: BaseException, topic: str | None = None) -> None:
        if not records:
            return
        self.records_failed += records
        if self.observer is not None:
            self.observer.records_failed(topic, records, error)

    def record_buffer_wait(self, waited_ms: float) -> None:
        self.buffer_wait_ms += waited_ms
        if self.observer is not None:
            self.observer.buffer_waited(waited_ms)

    def snapshot(self) -> dict[str, float]:
        return {
            "records_sent": self.records_sent,
            "bytes_sent": self.bytes_sent,
            "batches_sent": self.batches_sent,
            "records_failed": self.records_failed,
            "retries": self.retries,
            "record_retries": self.record_retries,
            "batch_splits": self.batch_splits,
            "requests": self.requests,
            "request_latency_max_ms": round(self.request_latency_max_ms, 3),
            "request_latency_avg_ms": round(self._latency_sum / self.requests, 3) if self.requests else 0.0,
            "request_latency_sum_ms": round(self._latency_sum, 3),
            "buffer_wait_ms": round(self.buffer_wait_ms, 3),
        }
