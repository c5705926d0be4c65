"""kafka-python: ``KafkaProducer.send(topic, value=, key=)`` per record, ``flush()`` at the end.
Futures are not kept (no per-record callback cost); delivery is checked by the broker count."""

from __future__ import annotations

import time

from benchmarks.common import kafka_python_config, pool_chunks


def available() -> str | None:
    try:
        import kafka  # noqa: F401
    except ImportError as e:
        return f"kafka-python not installed: {e}"
    return None


def prepare(spec, keys, values):
    import kafka  # noqa: F401

    return keys.to_pylist(), values.to_pylist()


def setup(spec):
    from kafka import KafkaProducer

    conf = kafka_python_config(spec)
    # kafka-python 2.1+ dropped buffer_memory (its accumulator is bounded by max_block_ms only)
    conf = {k: v for k, v in conf.items() if k in KafkaProducer.DEFAULT_CONFIG}
    p = KafkaProducer(**conf)
    p.partitions_for(spec.topic)
    return p


def run(spec, p, data, progress) -> dict:
    keys, values = data
    send = p.send
    topic = spec.topic
    done = 0
    last = None
    for a, b in pool_chunks(spec.records, spec.pool_size, 10_000):
        for k, v in zip(keys[a:b], values[a:b], strict=True):
            last = send(topic, value=v, key=k)
        done += b - a
        progress.tick(done)
    t = time.perf_counter()
    p.flush()
    flush_s = time.perf_counter() - t
    out = {"flush_s": flush_s}
    if last is not None and last.failed():
        out["errors"] = None
        out["note"] = f"last record failed: {last.exception}"
    return out


def teardown(p) -> None:
    p.close(timeout=30)
