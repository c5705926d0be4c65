"""Bad rows cost one pass: ``python -m benchmarks.bad_rows [--rows N] [--runs R]``.

Starts its own Apache Kafka (``benchmarks.run.start_bench_broker``) and runs a write task's row
path (``spark/task/routing.route``, the producer, the dead letters of
``errors.tolerance=all``) over one Arrow batch of ``--rows`` rows (10-byte keys, 100-byte
values) into a 4-partition topic, with 0, 10 and 1,000 of its rows naming a partition that does
not exist (the producer refuses them before sending: they go to the dead letters).  Each run
times the call and the flush; the cases alternate, ``--runs`` times each, and the medians are
compared with the batch without bad rows.  The producer refuses every bad row in the one
``send_batch`` call (``refused="return"``), so 1,000 bad rows cost about what none cost; taking
them out one by one, as the task did before, meant a pass over the batch per bad row.  Every
good row is counted on the broker, every bad one in the dead letters.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from benchmarks.common import create_topic, delete_topic, log, new_topic
from benchmarks.run import start_bench_broker

KEY_SIZE, VALUE_SIZE, PARTITIONS = 10, 100, 4
BAD_COUNTS = (0, 10, 1000)


def batch_with_bad_rows(rows: int, bad: int) -> pa.RecordBatch:
    """``rows`` rows spread over the topic's partitions, ``bad`` of them (evenly spaced) naming
    partition 7, which does not exist."""
    partitions = np.arange(rows, dtype=np.int32) % PARTITIONS
    if bad:
        partitions[np.linspace(0, rows - 1, bad).astype(np.int64)] = 7
    keys = pa.array([b"k%09d" % i for i in range(rows)], pa.binary())
    values = pa.array([b"v" * VALUE_SIZE] * rows, pa.binary())
    return pa.record_batch({"key": keys, "value": values, "partition": pa.array(partitions)})


def one_run(bootstrap: str, topic: str, batch: pa.RecordBatch) -> tuple[float, int, int]:
    """(seconds for the call and the flush, rows delivered, rows dead-lettered)."""
    from sparkkafka_sink import Producer
    from sparkkafka_sink.spark.plan import ColumnLayout
    from sparkkafka_sink.spark.task.dead_letters import DeadLetters
    from sparkkafka_sink.spark.task.delivery import DeliveryTracker
    from sparkkafka_sink.spark.task.part import Part
    from sparkkafka_sink.spark.task.routing import route

    layout = ColumnLayout("value", key="key", partition="partition")
    dead_letters = DeadLetters(None, True, False, 0, 0, 1 << 20, layout)
    tracker = DeliveryTracker(dead_letters)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, "batch.size": 262_144}) as producer:
        producer.partitions_for(topic)  # metadata outside the clock
        started = time.perf_counter()
        tracker.record(route(producer, Part.of(batch, 0), layout, topic, None, tracker.tolerant))
        producer.flush(60)
        took = time.perf_counter() - started
    assert tracker.wait_all(30) and not tracker.failed, tracker.first_failure
    return took, tracker.delivered, dead_letters.skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bad_rows")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    broker = start_bench_broker("apache")
    try:
        topic = new_topic("bad-rows")
        create_topic(broker.bootstrap, topic, PARTITIONS)
        batches = {bad: batch_with_bad_rows(args.rows, bad) for bad in BAD_COUNTS}
        one_run(broker.bootstrap, topic, batches[0])  # warm-up: connections, imports
        times: dict[int, list[float]] = {bad: [] for bad in BAD_COUNTS}
        for run in range(args.runs):
            for bad in BAD_COUNTS if run % 2 == 0 else reversed(BAD_COUNTS):
                took, delivered, skipped = one_run(broker.bootstrap, topic, batches[bad])
                assert (delivered, skipped) == (args.rows - bad, bad), (bad, delivered, skipped)
                times[bad].append(took)
        base = statistics.median(times[0])
        print(f"{args.rows} rows, {args.runs} runs each (median seconds for the call and the flush):")
        for bad in BAD_COUNTS:
            median = statistics.median(times[bad])
            print(f"  {bad:5d} bad rows: {median:.3f} s  ({median / base:.2f}x the batch without bad rows)")
        delete_topic(broker.bootstrap, topic)
    finally:
        log("stopping the broker")
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
