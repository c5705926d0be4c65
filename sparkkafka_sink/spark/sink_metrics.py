"""Sink metrics as one Spark accumulator holding a dict.

Each write task adds its producer's counters once, after its final flush;
Spark merges successful tasks' updates into the driver's copy.  Counters add
up; ``*_max_ms`` keys merge with ``max``; the mean latency travels as a sum and
a count so tasks merge exactly.  Tasks of a streaming micro-batch (direct sink
or ``foreachBatch``) also file their counters under ``(query id, batch id)``,
read from the task's local properties, so per-batch numbers are exact even
when batches overlap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pyspark.accumulators import Accumulator, AccumulatorParam

COUNTERS = ("records_sent", "bytes_sent", "batches_sent", "records_failed", "records_skipped",
            "records_dead_lettered", "retries", "throttle_time_ms", "producers_created")
MICRO_BATCHES = "micro_batches"
#: Per micro-batch entries kept on the driver (oldest dropped first).
MAX_MICRO_BATCHES = 1000


def _merge(into: dict, other: dict) -> dict:
    for key, v in other.items():
        if key == MICRO_BATCHES:
            batches = into.setdefault(MICRO_BATCHES, {})
            for batch, counters in v.items():
                batches[batch] = _merge(batches.get(batch, {}), counters)
            if len(batches) > MAX_MICRO_BATCHES:
                for old in sorted(batches, key=lambda b: b[1])[: len(batches) - MAX_MICRO_BATCHES]:
                    del batches[old]
        elif key.endswith("_max_ms"):
            into[key] = max(into.get(key, 0), v)
        else:
            into[key] = into.get(key, 0) + v
    return into


def merged(contributions: Iterable[dict]) -> dict:
    """Tasks' contributions merged as the accumulator merges them."""
    total: dict = {}
    for contribution in contributions:
        total = _merge(total, contribution)
    return total


class MetricsParam(AccumulatorParam):
    """Merges metric dicts: sums, except ``*_max_ms`` (max) and the per-batch sub-dict."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:
        return _merge(value1, value2)


def task_metrics(producer_metrics: dict, delivered: int, failed: int, micro_batch: tuple | None = None,
                 throttled_s: float = 0.0, skipped: int = 0, dead_lettered: int = 0,
                 producers_created: int = 0) -> dict:
    """One task's contribution.  Record counts come from the task's own futures
    (exact by construction); bytes, batches, retries and latency from the producer.
    ``micro_batch`` is ``(query_id, batch_id)`` for a streaming task; ``throttled_s`` the time
    the task's rate limit held it back; ``skipped`` the bad rows tolerated (errors.tolerance=all),
    ``dead_lettered`` those written to the dead-letter topic; ``producers_created`` 1 when the task
    made a producer (0: it took one from the pool, or had no rows)."""
    pm = producer_metrics or {}
    num = lambda k: pm.get(k) or 0  # noqa: E731
    if "request_latency_sum_ms" in pm and "requests" in pm:
        lat_sum, lat_n = float(num("request_latency_sum_ms")), int(num("requests"))
    else:  # only a mean: weight it by batches (each request carries at least one)
        lat_n = int(num("batches_sent")) or (1 if num("request_latency_avg_ms") else 0)
        lat_sum = float(num("request_latency_avg_ms")) * lat_n
    out: dict[str, Any] = {
        "records_sent": delivered,
        "records_failed": failed,
        "records_skipped": skipped,
        "records_dead_lettered": dead_lettered,
        "bytes_sent": int(num("bytes_sent")),
        "batches_sent": int(num("batches_sent")),
        "retries": int(num("retries")),
        "produce_latency_max_ms": float(num("request_latency_max_ms")),
        "produce_latency_sum_ms": lat_sum,
        "produce_latency_weight": lat_n,
        "write_tasks": 1,
        "throttle_time_ms": int(throttled_s * 1000),
        "producers_created": producers_created,
    }
    if micro_batch is not None:
        out[MICRO_BATCHES] = {micro_batch: dict(out)}
    return out


def snapshot_of(raw: dict) -> dict:
    """The public view of a raw accumulator dict."""
    out: dict[str, float] = {k: int(raw.get(k, 0)) for k in COUNTERS}
    weight = raw.get("produce_latency_weight", 0)
    out["produce_latency_max_ms"] = float(raw.get("produce_latency_max_ms", 0.0))
    out["produce_latency_avg_ms"] = float(raw.get("produce_latency_sum_ms", 0.0)) / weight if weight else 0.0
    out["write_tasks"] = int(raw.get("write_tasks", 0))
    return out


class MetricsStore(Protocol):
    """Where tasks' metrics are kept when no accumulator carries them (``metrics_drop.MetricsDrop``):
    what they add up to, merged as :func:`merged` merges them, and a way to forget them."""

    def total(self) -> dict: ...

    def clear(self) -> None: ...


class SinkMetrics:
    """Driver-side handle returned by ``sparkkafka_sink.register(spark)``.

    ``snapshot()`` is cumulative over every ``pyprod-kafka`` write of the
    session since ``register``/``reset``; ``micro_batches()`` lists the
    streaming micro-batches' own counters.  Values arrive when tasks finish, so
    read them after the action (or after a micro-batch).  Under Spark Connect
    there is no SparkContext to own an accumulator: ``enabled`` is False and
    every counter stays 0, while writes work as usual.  Where Spark gives the
    registration no accumulator channel (pyspark 4.0), ``drop`` holds the
    metrics instead, counted the same way (``metrics_drop.py``).
    """

    def __init__(self, total: Accumulator | None = None, drop: MetricsStore | None = None):
        self._total = total
        self._drop = drop

    @property
    def enabled(self) -> bool:
        return self._total is not None or self._drop is not None

    @property
    def total(self) -> Accumulator | None:
        """The Spark accumulator summing every task's metrics (None under Spark Connect)."""
        return self._total

    def _raw(self) -> dict:
        if self._drop is not None:
            return self._drop.total()
        return self._total.value if self._total is not None else {}

    def snapshot(self) -> dict:
        """records_sent, bytes_sent, batches_sent, records_failed, records_skipped (bad rows
        tolerated), records_dead_lettered, retries, throttle_time_ms (time the rate limits held
        tasks back), producers_created (fewer than write_tasks when the pool served tasks),
        produce_latency_max_ms, produce_latency_avg_ms, write_tasks."""
        return snapshot_of(self._raw())

    def micro_batches(self, query_id: object = None) -> list:
        """One dict per streaming micro-batch written (query_id, batch_id + snapshot fields)."""
        batches = self._raw().get(MICRO_BATCHES, {})
        rows = [
            {"query_id": q, "batch_id": b, **snapshot_of(c)}
            for (q, b), c in batches.items()
            if query_id is None or q == str(query_id)
        ]
        return sorted(rows, key=lambda r: (r["query_id"], r["batch_id"]))

    def reset(self) -> None:
        if self._drop is not None:
            self._drop.clear()
        if self._total is not None:
            self._total.value = {}

    def __repr__(self) -> str:
        state = self.snapshot() if self.enabled else "disabled (Spark Connect)"
        return f"SinkMetrics({state})"
