"""ProducerMetrics: the counters a Producer exposes (and the Spark sink ships home).

Only the Sender thread writes them; readers take a snapshot dict.
"""

from __future__ import annotations


class ProducerMetrics:
    __slots__ = ("records_sent", "bytes_sent", "batches_sent", "records_failed", "retries",
                 "requests", "_latency_sum", "request_latency_max_ms", "batch_splits")

    def __init__(self) -> None:
        self.records_sent = 0
        self.bytes_sent = 0
        self.batches_sent = 0
        self.records_failed = 0
        self.retries = 0
        self.requests = 0
        self._latency_sum = 0.0
        self.request_latency_max_ms = 0.0
        #: batches split because a broker refused them as too large
        self.batch_splits = 0

    def record_request(self, latency_ms: float) -> None:
        self.requests += 1
        self._latency_sum += latency_ms
        if latency_ms > self.request_latency_max_ms:
            self.request_latency_max_ms = latency_ms

    def record_batch_sent(self, records: int, nbytes: int) -> None:
        self.records_sent += records
        self.bytes_sent += nbytes
        self.batches_sent += 1

    def snapshot(self) -> dict[str, float]:
        return {
            "records_sent": self.records_sent,
            "bytes_sent": self.bytes_sent,
            "batches_sent": self.batches_sent,
            "records_failed": self.records_failed,
            "retries": self.retries,
            "batch_splits": self.batch_splits,
            "requests": self.requests,
            "request_latency_max_ms": round(self.request_latency_max_ms, 3),
            "request_latency_avg_ms": round(self._latency_sum / self.requests, 3) if self.requests else 0.0,
            "request_latency_sum_ms": round(self._latency_sum, 3),
        }
