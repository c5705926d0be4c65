"""A stand-in for ``sparkkafka_sink.Producer.send_batch`` that follows its contract, for unit
tests of the Spark task logic without a broker.  Futures resolve in ``flush()`` on another
thread, as the real Sender thread does, or inside ``send_batch()`` (``resolve_on_send``: a very
fast broker), in which case callbacks added later run at once, as real futures do."""

from __future__ import annotations

import threading
from collections import namedtuple

import numpy as np

from sparkkafka_sink.errors import InvalidPartitionError, KafkaTimeoutError

Metadata = namedtuple("Metadata", "topic partition offset timestamp serialized_key_size serialized_value_size")
BulkResult = namedtuple("BulkResult", "record_count partitions")


class FakeFuture:
    def __init__(self):
        self._callbacks, self._errbacks = [], []
        self._value = self._error = None
        self._done = False

    def add_callback(self, fn):
        if self._done:
            if self._error is None:
                fn(self._value)
        else:
            self._callbacks.append(fn)
        return self

    def add_errback(self, fn):
        if self._done:
            if self._error is not None:
                fn(self._error)
        else:
            self._errbacks.append(fn)
        return self

    def done(self):
        return self._done

    def resolve(self, value=None, error=None):
        self._value, self._error, self._done = value, error, True
        for fn in (self._errbacks if error is not None else self._callbacks):
            fn(error if error is not None else value)


class FakeBulkFuture:
    """``BulkFuture``'s contract: one future for a ``send_batch`` call, per-row outcomes."""

    def __init__(self, topic, entries):
        self.topic = topic
        self.entries = entries  # [(row, partition, FakeFuture)]
        self.record_count = len(entries)
        self._callbacks = []
        self._left = len(entries)
        for _, _, fut in entries:
            fut.add_callback(self._one_done).add_errback(self._one_done)

    def _one_done(self, _):
        self._left -= 1
        if self._left == 0:
            for fn in self._callbacks:
                fn(None, None)

    def add_callback(self, fn):
        if self._left == 0:
            fn(None, None)
        else:
            self._callbacks.append(fn)

    def errors(self):
        by_partition = {}
        for row, partition, fut in self.entries:
            if fut._error is not None:
                by_partition.setdefault(partition, (fut._error, []))[1].append(row)
        return [(err, p, np.array(rows)) for p, (err, rows) in by_partition.items()]

    def landed(self):
        per = {}
        for _, partition, fut in self.entries:
            if fut._error is not None:
                continue
            count, first, last = per.get(partition, (0, None, None))
            off = fut._value.offset
            per[partition] = (count + 1, off if first is None else min(first, off), off if last is None else max(last, off))
        return BulkResult(sum(c for c, _, _ in per.values()), per)

    def get(self, timeout=None):
        if self.errors():
            raise self.errors()[0][0]
        return self.landed()


class FakeProducer:
    """``partitions``: topic -> partition count.  ``fail_rows``: indexes (in send order) whose
    futures fail with ``error``.  ``block_after``: once that many rows were handed over,
    send_batch() raises KafkaTimeoutError (as the real one does when buffer memory stays full),
    with the rows it had queued by then under ``partial``."""

    def __init__(self, config, partitions=None, fail_rows=(), error=None, block_after=None,
                 resolve_on_send=False):
        self.config = config
        self.partitions = partitions or {}
        self.fail_rows = set(fail_rows)
        self.error = error or RuntimeError("boom")
        self.block_after = block_after
        self.resolve_on_send = resolve_on_send
        self.sent = []  # (topic, value, key, headers, partition, timestamp_ms)
        self._pending = []
        self._next_offset = {}
        self.closed_with = "open"
        self.flushes = 0

    def send_batch(self, topic, values=None, keys=None, headers=None, partitions=None, timestamps=None):
        n = len(values)
        count = self.partitions.get(topic, 1)
        parts = partitions.to_pylist() if partitions is not None else [None] * n
        for row, partition in enumerate(parts):
            if partition is not None and partition >= count:
                exc = InvalidPartitionError(f"Row {row}: partition {partition} of topic {topic!r} does not exist")
                exc.row, exc.partition = row, partition
                raise exc
        keys_l = keys.to_pylist() if keys is not None else [None] * n
        values_l = values.to_pylist()
        entries = []
        for row in range(n):
            if self.block_after is not None and len(self.sent) >= self.block_after:
                exc = KafkaTimeoutError("Failed to allocate memory within the configured max blocking time 100 ms")
                exc.row, exc.rows_not_sent = row, np.arange(row, n)
                exc.partial = FakeBulkFuture(topic, entries) if entries else None
                raise exc
            value = values_l[row].encode() if isinstance(values_l[row], str) else values_l[row]
            key = keys_l[row]
            p = parts[row] if parts[row] is not None else (hash(key) % count if key is not None else 0)
            fut = FakeFuture()
            self.sent.append((topic, value, key, None, p, None))
            entries.append((row, p, fut))
            entry = (len(self.sent) - 1, topic, p, fut)
            if self.resolve_on_send:
                self._resolve([entry])
            else:
                self._pending.append(entry)
        return FakeBulkFuture(topic, entries)

    def flush(self, timeout=None):
        self.flushes += 1
        pending, self._pending = self._pending, []
        t = threading.Thread(target=self._resolve, args=(pending,))
        t.start()
        t.join()

    def _resolve(self, entries):
        for index, topic, p, fut in entries:
            if index in self.fail_rows:
                fut.resolve(error=self.error)
            else:
                off = self._next_offset.get((topic, p), 0)
                self._next_offset[(topic, p)] = off + 1
                fut.resolve(Metadata(topic, p, off, 0, 0, 0))

    def close(self, timeout=None):
        self.closed_with = timeout

    def partitions_for(self, topic):
        return list(range(self.partitions.get(topic, 1)))

    def metrics(self):
        return {"records_sent": len(self.sent) - len(self.fail_rows), "bytes_sent": 100 * len(self.sent),
                "batches_sent": 2, "records_failed": len(self.fail_rows), "retries": 1,
                "request_latency_max_ms": 7.0, "request_latency_avg_ms": 3.0}
