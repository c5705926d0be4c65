"""Our per-record path: ``Producer.send(topic, value, key)`` for every record, then ``flush()``."""

from __future__ import annotations

import time

from benchmarks.common import ours_config, pool_chunks


def available() -> str | None:
    return None


def prepare(spec, keys, values):
    import sparkkafka_sink.producer  # noqa: F401  (imported before the memory baseline)

    return keys.to_pylist(), values.to_pylist()


def setup(spec):
    from sparkkafka_sink import Producer

    p = Producer(ours_config(spec))
    p.partitions_for(spec.topic)  # metadata outside the timed part, as for every contender
    return p


def run(spec, p, data, progress) -> dict:
    keys, values = data
    send = p.send
    topic = spec.topic
    done = 0
    for a, b in pool_chunks(spec.records, spec.pool_size, 10_000):
        for k, v in zip(keys[a:b], values[a:b], strict=True):
            send(topic, v, k)
        done += b - a
        progress.tick(done)
    t = time.perf_counter()
    p.flush()
    flush_s = time.perf_counter() - t
    m = p.metrics()
    return {"acked": m.get("records_sent"), "errors": m.get("records_failed", 0), "flush_s": flush_s,
            "client_metrics": m}


def teardown(p) -> None:
    p.close()
