"""Our bulk path: ``Producer.send_batch(topic, values, keys=...)`` with Arrow arrays.

The records are handed over ``spec.arrow_batch`` rows per call (zero-copy slices of the pool),
as the Spark sink gets them from Spark's Arrow batches; one future per call.  Completed
futures are drained as the loop goes, so the harness itself holds no per-record state.
"""

from __future__ import annotations

import time
from collections import deque

from benchmarks.common import ours_config, pool_chunks
from benchmarks.contenders import Skip


def available() -> str | None:
    from sparkkafka_sink import Producer

    if not hasattr(Producer, "send_batch"):
        return "not available: Producer.send_batch() does not exist yet"
    return None


def prepare(spec, keys, values):
    import sparkkafka_sink.producer  # noqa: F401

    return keys, values


def setup(spec):
    from sparkkafka_sink import Producer

    if not hasattr(Producer, "send_batch"):
        raise Skip("not available: Producer.send_batch() does not exist yet")
    p = Producer(ours_config(spec))
    p.partitions_for(spec.topic)
    return p


def _settle(fut) -> tuple[int, str | None]:
    try:
        fut.get()
        return 0, None
    except Exception as e:  # noqa: BLE001 - reported, and the broker count decides
        failed = getattr(fut, "failed_count", lambda: None)()
        return (failed if failed is not None else getattr(fut, "record_count", 0)), f"{type(e).__name__}: {e}"


def run(spec, p, data, progress) -> dict:
    keys, values = data
    send_batch = p.send_batch
    topic = spec.topic
    pending: deque = deque()
    done = errors = 0
    first_error = None

    def drain(block: bool) -> None:
        nonlocal errors, first_error
        while pending and (block or pending[0].done()):
            n, err = _settle(pending.popleft())
            errors += n
            first_error = first_error or err

    for a, b in pool_chunks(spec.records, spec.pool_size, spec.arrow_batch):
        pending.append(send_batch(topic, values.slice(a, b - a), keys=keys.slice(a, b - a)))
        done += b - a
        drain(block=False)
        progress.tick(done)
    t = time.perf_counter()
    p.flush()
    drain(block=True)
    flush_s = time.perf_counter() - t
    m = p.metrics()
    out = {"acked": m.get("records_sent"), "errors": errors, "flush_s": flush_s, "client_metrics": m}
    if first_error:
        out["note"] = f"first delivery error: {first_error}"
    return out


def teardown(p) -> None:
    p.close()
