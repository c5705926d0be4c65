"""A stand-in for ``sparkkafka_sink.Producer`` that follows its contract, for unit tests of the
Spark task logic without a broker.  Futures resolve in ``flush()`` on another thread, as the real
Sender thread does, or inside ``send()`` (``resolve_on_send``: a very fast broker), in which case
callbacks added later run at once, as real futures do."""

from __future__ import annotations

import threading
from collections import namedtuple

from sparkkafka_sink.errors import InvalidPartitionError, KafkaTimeoutError

Metadata = namedtuple("Metadata", "topic partition offset timestamp serialized_key_size serialized_value_size")


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


class FakeProducer:
    """``partitions``: topic -> partition count.  ``fail_rows``: indexes (in send order) whose
    futures fail with ``error``.  ``block_after``: send() raises KafkaTimeoutError from then on."""

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

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        if self.block_after is not None and len(self.sent) >= self.block_after:
            raise KafkaTimeoutError("Topic not present in metadata after 100 ms (max.block.ms)")
        count = self.partitions.get(topic, 1)
        if partition is not None and partition >= count:
            raise InvalidPartitionError(f"Partition {partition} of topic {topic!r} does not exist")
        p = partition if partition is not None else (hash(key) % count if key is not None else 0)
        entry = (len(self.sent), topic, p, FakeFuture())
        self.sent.append((topic, value, key, headers, p, timestamp_ms))
        if self.resolve_on_send:
            self._resolve([entry])
        else:
            self._pending.append(entry)
        return entry[3]

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
