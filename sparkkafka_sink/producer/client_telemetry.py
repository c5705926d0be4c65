"""The producer's metrics, pushed to the brokers that ask for them (KIP-714), as Java's client does.

A broker with a client-metrics subscription (``kafka-client-metrics.sh``, or the Admin API's
``CLIENT_METRICS`` resources) answers ``GetTelemetrySubscriptions`` with the metric names it
wants (prefixes), how often (``PushIntervalMs``), the compression types it takes, and whether
counters go as deltas; the client then sends ``PushTelemetry`` with its metrics as OpenTelemetry
``MetricsData`` (``protocol.otlp``) every interval -- the first after 0.5 to 1.5 intervals, so
that clients started together do not push together -- and once more, marked terminating, as it
closes.  A broker without subscriptions answers with no metric names: the client asks again an
interval later.  ``enable.metrics.push=false`` turns it off; a broker that does not offer the
APIs (before Apache Kafka 3.7, ZooKeeper mode, no metrics plugin to hand them to) is not asked.

States and errors follow Java's ``ClientTelemetryReporter``: an unknown subscription or a
compression the broker no longer takes means asking again at once; a payload too large or a
throttled request, waiting an interval; an invalid request, record or version, stopping for good.
The metrics are this producer's own counters (``ProducerMetrics``), named as Java's producer
names them (``org.apache.kafka.producer.record.send.total``...): :data:`METRICS` says what each
counts here.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.error_codes import (
    ERROR_CLASSES,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from sparkkafka_sink.protocol.otlp import MetricPoint, Temporality, encode_metrics_data
from sparkkafka_sink.protocol.schema import ProtocolMessage
from sparkkafka_sink.record.compression import CompressionType, compress
from sparkkafka_sink.version import __version__

log = logging.getLogger(__name__)

__all__ = ["ClientTelemetry", "METRICS", "TelemetryState"]

_PREFIX = "org.apache.kafka.producer."
#: Java's default when no subscription gave one (``ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS``)
DEFAULT_PUSH_INTERVAL_MS = 5 * 60 * 1000
#: the first push after this share of the interval, drawn at random (Java's jitter)
_FIRST_PUSH = (0.5, 1.5)
#: the codecs this client can compress a payload with, as Kafka numbers them
_CODECS = {c.value for c in CompressionType}


@dataclass(frozen=True)
class _Metric:
    """A metric pushed: its name after the prefix, whether a counter (a ``Sum``) or a ``Gauge``,
    its unit, what it counts here, and how it is read from the producer's metrics."""

    name: str
    counter: bool
    unit: str
    description: str
    read: Callable[[dict[str, float]], float | int]


#: every metric this producer can push, named as Java's producer metrics are
METRICS: tuple[_Metric, ...] = (
    _Metric("record.send.total", True, "{record}", "records the brokers acknowledged",
            lambda m: int(m["records_sent"])),
    _Metric("record.error.total", True, "{record}", "records that failed for good",
            lambda m: int(m["records_failed"])),
    _Metric("record.retry.total", True, "{record}", "records sent again after a retriable error",
            lambda m: int(m["record_retries"])),
    _Metric("batch.split.total", True, "{batch}", "batches split because a broker refused them as too large",
            lambda m: int(m["batch_splits"])),
    _Metric("bufferpool.wait.time.ns.total", True, "ns", "time callers waited for buffer memory",
            lambda m: int(m["buffer_wait_ms"] * 1_000_000)),
    _Metric("request.latency.avg", False, "ms", "mean time from a Produce request sent to its answer, "
            "since the producer started", lambda m: float(m["request_latency_avg_ms"])),
    _Metric("request.latency.max", False, "ms", "longest time from a Produce request sent to its answer",
            lambda m: float(m["request_latency_max_ms"])),
    _Metric("batch.size.avg", False, "By", "mean bytes of a record batch acknowledged",
            lambda m: float(m["bytes_sent"] / m["batches_sent"]) if m["batches_sent"] else 0.0),
    _Metric("buffer.available.bytes", False, "By", "buffer memory not taken by batches",
            lambda m: int(m["buffer_available_bytes"])),
    _Metric("buffer.total.bytes", False, "By", "buffer.memory", lambda m: int(m["buffer_total_bytes"])),
)


class TelemetryState(enum.Enum):
    SUBSCRIPTION_NEEDED = "subscription needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription in progress"
    PUSH_NEEDED = "push needed"
    PUSH_IN_PROGRESS = "push in progress"
    TERMINATING_PUSH_NEEDED = "terminating push needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating push in progress"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class Subscription:
    """What a broker asked for (``GetTelemetrySubscriptions``' answer)."""

    client_instance_id: uuid.UUID
    subscription_id: int
    push_interval_ms: int
    #: the codecs the broker takes, in its order of preference (none: uncompressed)
    compression: tuple[int, ...]
    delta: bool
    #: the metric name prefixes wanted ("" or "*": all); empty: none
    requested: tuple[str, ...]

    def wants(self, name: str) -> bool:
        return any(p in ("", "*") or name.startswith(p) for p in self.requested)


class ClientTelemetry:
    """KIP-714's client side for one producer: what to send next and when, and what the answers
    change.  The Sender thread drives it (``due_in``, ``request``, ``answered``, ``failed``);
    ``initiate_close`` (any thread) asks for the terminating push."""

    def __init__(self, metrics: Callable[[], dict[str, float]], client_id: str):
        self._metrics = metrics
        self._client_id = client_id
        self._lock = threading.Lock()
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self.subscription: Subscription | None = None
        #: when the last request went (ms, the Sender's clock) and how long after it the next may
        self._last_ms = 0.0
        self._interval_ms = 0.0
        self.enabled = True
        self._started_ns = time.time_ns()
        #: counters' values at the last push (delta temporality) and when that was
        self._sent: dict[str, float] = {}
        self._sent_ns = self._started_ns
        #: pushes answered without an error (the tests and the docs' figures read it)
        self.pushes = 0

    # -- when ------------------------------------------------------------------------------
    def due_in(self, now: float, request_timeout_ms: float) -> float:
        """How long until a request should go (0: now; inf: never)."""
        if not self.enabled:  # (once off, never on again: read without the lock, as every Sender loop asks)
            return float("inf")
        with self._lock:
            state, last, interval = self.state, self._last_ms, self._interval_ms
            if not self.enabled:
                return float("inf")
        if state in (TelemetryState.SUBSCRIPTION_IN_PROGRESS, TelemetryState.PUSH_IN_PROGRESS):
            return request_timeout_ms
        if state in (TelemetryState.TERMINATING_PUSH_IN_PROGRESS, TelemetryState.TERMINATED):
            return float("inf")
        if state is TelemetryState.TERMINATING_PUSH_NEEDED:
            return 0.0
        return max(last + interval - now, 0.0)

    @property
    def closing(self) -> bool:
        """A terminating push is still to go or to be answered."""
        with self._lock:
            return self.enabled and self.state in (TelemetryState.TERMINATING_PUSH_NEEDED,
                                                   TelemetryState.TERMINATING_PUSH_IN_PROGRESS)

    # -- what -------------------------------------------------------------------------------
    def request(self, now: float) -> ProtocolMessage | None:
        """The request to send now (its state set in progress), or None."""
        with self._lock:
            state, subscription = self.state, self.subscription
            if not self.enabled:
                return None
            if state is TelemetryState.SUBSCRIPTION_NEEDED:
                self.state = TelemetryState.SUBSCRIPTION_IN_PROGRESS
                instance = subscription.client_instance_id if subscription is not None else uuid.UUID(int=0)
                return messages.GetTelemetrySubscriptionsRequest(client_instance_id=instance)
            if state not in (TelemetryState.PUSH_NEEDED, TelemetryState.TERMINATING_PUSH_NEEDED):
                return None
            if subscription is None:
                self.state = TelemetryState.SUBSCRIPTION_NEEDED
                return None
            terminating = state is TelemetryState.TERMINATING_PUSH_NEEDED
            self.state = (TelemetryState.TERMINATING_PUSH_IN_PROGRESS if terminating
                          else TelemetryState.PUSH_IN_PROGRESS)
        codec, payload = self._payload(subscription)
        return messages.PushTelemetryRequest(client_instance_id=subscription.client_instance_id,
                                             subscription_id=subscription.subscription_id, terminating=terminating,
                                             compression_type=codec, metrics=payload)

    def points(self, subscription: Subscription) -> list[MetricPoint]:
        """The metrics the subscription wants, now: counters as sums (cumulative since the
        producer started, or deltas since the last push), the rest as gauges."""
        values = self._metrics()
        now_ns = time.time_ns()
        out = []
        for metric in METRICS:
            name = _PREFIX + metric.name
            if not subscription.wants(name):
                continue
            value = metric.read(values)
            if not metric.counter:
                out.append(MetricPoint(name, value, now_ns, description=metric.description, unit=metric.unit))
            elif subscription.delta:
                out.append(MetricPoint(name, value - self._sent.get(name, 0), now_ns, self._sent_ns,
                                       Temporality.DELTA, metric.description, metric.unit))
            else:
                out.append(MetricPoint(name, value, now_ns, self._started_ns, Temporality.CUMULATIVE,
                                       metric.description, metric.unit))
            self._sent[name] = value
        self._sent_ns = now_ns
        return out

    def _payload(self, subscription: Subscription) -> tuple[int, bytes]:
        """The codec and the bytes of a push: the broker's first codec this client has."""
        data = encode_metrics_data({"client_id": self._client_id, "client_software_name": "sparkkafka-sink",
                                    "client_software_version": __version__},
                                   "sparkkafka_sink.producer", __version__, self.points(subscription))
        codec = next((c for c in subscription.compression if c in _CODECS), CompressionType.NONE)
        if codec == CompressionType.NONE:
            return 0, data
        return int(codec), compress(codec, data)

    # -- what came back ---------------------------------------------------------------------
    def answered(self, response: ProtocolMessage, now: float) -> None:
        """A ``GetTelemetrySubscriptions`` or ``PushTelemetry`` answer."""
        error = response.error_code
        with self._lock:
            if self.state in (TelemetryState.TERMINATING_PUSH_IN_PROGRESS, TelemetryState.TERMINATED):
                if error == 0 and self.state is TelemetryState.TERMINATING_PUSH_IN_PROGRESS:
                    self.pushes += 1
                self.state = TelemetryState.TERMINATED
                return
            if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
                return  # closing began while this was in flight: the terminating push goes next
            if error:
                self._error(error, now)
                return
            if self.state is TelemetryState.SUBSCRIPTION_IN_PROGRESS:
                self._subscribed(response, now)
            else:
                self.pushes += 1
                self.state = TelemetryState.PUSH_NEEDED
                self._last_ms = now
                self._interval_ms = self._push_interval()

    def _push_interval(self) -> float:
        """The subscription's interval between pushes (none loaded yet: Java's default)."""
        return self.subscription.push_interval_ms if self.subscription else DEFAULT_PUSH_INTERVAL_MS

    def _subscribed(self, response: ProtocolMessage, now: float) -> None:
        interval = response.push_interval_ms if response.push_interval_ms > 0 else DEFAULT_PUSH_INTERVAL_MS
        old = self.subscription
        if old is not None and old.delta != response.delta_temporality:
            self._sent.clear()  # the ledger of values sent counts from now
        self.subscription = Subscription(
            response.client_instance_id if response.client_instance_id.int else
            (old.client_instance_id if old is not None else uuid.UUID(int=0)),
            response.subscription_id, interval, tuple(response.accepted_compression_types),
            bool(response.delta_temporality), tuple(response.requested_metrics))
        self._last_ms = now
        if self.subscription.requested:
            self.state = TelemetryState.PUSH_NEEDED
            self._interval_ms = interval * random.uniform(*_FIRST_PUSH)
        else:  # nothing wanted: ask again an interval later
            self.state = TelemetryState.SUBSCRIPTION_NEEDED
            self._interval_ms = interval
        log.debug("client telemetry: subscription %d, %s every %d ms", response.subscription_id,
                  list(self.subscription.requested) or "no metrics", interval)

    def _error(self, code: int, now: float) -> None:
        """As Java's ``ClientTelemetryUtils.maybeFetchErrorIntervalMs``: ask again now, later, or never."""
        error = ERROR_CLASSES.get(code)
        interval = self._push_interval()
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self._last_ms = now
        if error in (UnknownSubscriptionIdError, UnsupportedCompressionTypeError):
            self._interval_ms = 0
        elif error in (TelemetryTooLargeError, ThrottlingQuotaExceededError):
            self._interval_ms = interval
        else:  # invalid request or record, unsupported version, anything else: never again
            self.enabled = False
            log.warning("client telemetry stops: a broker answered %s", error.__name__ if error else code)

    def failed(self, now: float) -> None:
        """No answer (a disconnection, a timeout): ask for a subscription again an interval later
        (after a terminating push: done)."""
        with self._lock:
            if self.state in (TelemetryState.TERMINATING_PUSH_IN_PROGRESS, TelemetryState.TERMINATED):
                self.state = TelemetryState.TERMINATED
                return
            if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
                return
            self.state = TelemetryState.SUBSCRIPTION_NEEDED
            self._last_ms = now
            self._interval_ms = self._push_interval()

    def unsupported(self) -> None:
        """The broker asked does not speak the telemetry APIs: this producer pushes nothing."""
        with self._lock:
            self.enabled = False

    def initiate_close(self) -> None:
        """The producer closes: push once more, marked terminating, if a subscription was loaded."""
        with self._lock:
            if (not self.enabled or self.subscription is None or not self.subscription.requested
                    or self.state in (TelemetryState.TERMINATING_PUSH_NEEDED,
                                      TelemetryState.TERMINATING_PUSH_IN_PROGRESS, TelemetryState.TERMINATED)):
                self.state = TelemetryState.TERMINATED
                return
            self.state = TelemetryState.TERMINATING_PUSH_NEEDED

