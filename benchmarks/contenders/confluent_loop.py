"""confluent-kafka (librdkafka): ``produce(topic, value, key)`` per record, ``poll(0)`` once per
10,000 records to serve delivery reports, ``flush()`` at the end.  When the local queue
(buffer.memory bytes) is full, ``produce`` raises BufferError: poll briefly and retry, as the
confluent docs do.  Delivery reports only for errors (``delivery.report.only.error``)."""

from __future__ import annotations

import time

from benchmarks.common import confluent_config, pool_chunks, produce_when_room


def available() -> str | None:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        return f"confluent-kafka not installed: {e}"
    return None


def prepare(spec, keys, values):
    import confluent_kafka  # noqa: F401

    return keys.to_pylist(), values.to_pylist()


def setup(spec):
    from confluent_kafka import Producer

    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    conf = confluent_config(spec)
    conf["on_delivery"] = on_delivery
    p = Producer(conf)
    p.list_topics(spec.topic, timeout=10)
    return p, errors


def run(spec, client, data, progress) -> dict:
    p, errors = client
    keys, values = data
    produce, poll = p.produce, p.poll
    topic = spec.topic
    done = 0
    for a, b in pool_chunks(spec.records, spec.pool_size, 10_000):
        for k, v in zip(keys[a:b], values[a:b], strict=True):
            try:
                produce(topic, v, k)
            except BufferError:
                produce_when_room(produce, poll, topic, v, k)
        poll(0)
        done += b - a
        progress.tick(done)
    t = time.perf_counter()
    left = p.flush(120)
    flush_s = time.perf_counter() - t
    out = {"errors": len(errors) + left, "flush_s": flush_s}
    if errors:
        out["note"] = f"first delivery error: {errors[0]}"
    if left:
        out["note"] = f"{left} record(s) still queued after flush(120)"
    return out


def teardown(client) -> None:
    pass  # confluent's Producer has no close(); it is freed with the process
