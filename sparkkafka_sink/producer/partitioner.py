"""Partitioners: Java-compatible murmur2 for keys, sticky spreading for null keys.

A keyed record must land where the Java client puts it (users mix clients on
one topic), so ``murmur2`` reproduces ``org.apache.kafka.common.utils.Utils.murmur2``
bit for bit, one key at a time or a whole column at once (``murmur2_many``).
One strategy object per ``partitioner`` setting serves both ``send`` (record by
record) and ``send_batch`` (Arrow columns), with one state.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_WORDS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int (as Java returns it)."""
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    if n4:
        unpack = _WORDS.get(n4)
        if unpack is None:
            unpack = _WORDS.setdefault(n4, struct.Struct(f"<{n4}I").unpack_from)
        for k in unpack(data):  # all little-endian 4-byte words in one C call
            k = (k * _M) & _MASK
            k ^= k >> 24
            h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    rem = length & 3
    if rem:
        tail = n4 << 2
        if rem == 3:
            h ^= data[tail + 2] << 16
        if rem >= 2:
            h ^= data[tail + 1] << 8
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


def murmur2_many(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """murmur2 of many keys at once: ``data`` uint8 bytes, ``offsets`` int64 (n+1).

    Returns the unsigned 32-bit hashes (uint32).  Vectorised over keys: the loop
    runs over 4-byte word positions, not over records; uint32 arrays wrap on
    overflow exactly as Java's int arithmetic does.  Keys of one length laid out
    back to back (the usual Arrow column) are read as a 2-D word matrix.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = offsets[1:] - offsets[:-1]
    n = len(lengths)
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    if n == 0:
        return h
    data = np.asarray(data, dtype=np.uint8)
    width = int(lengths[0])
    if (lengths == width).all() and offsets[-1] - offsets[0] == n * width:
        rows = data[offsets[0]:offsets[-1]].reshape(n, width)
        nw = width >> 2
        if nw:
            words = np.ascontiguousarray(rows[:, :nw * 4]).view("<u4")
            for w in range(nw):
                h = _mix(h, words[:, w], m)
        tail = [rows[:, nw * 4 + i] for i in range(width & 3)]
        return _finish(h, tail, m)
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    starts = offsets[:-1]
    nwords = lengths >> 2
    for w in range(int(nwords.max())):
        active = nwords > w
        idx = starts[active] + 4 * w
        k = (padded[idx].astype(np.uint32) | (padded[idx + 1].astype(np.uint32) << 8)
             | (padded[idx + 2].astype(np.uint32) << 16) | (padded[idx + 3].astype(np.uint32) << 24))
        h[active] = _mix(h[active], k, m)
    rem = lengths & 3
    tail_at = starts + (lengths & ~3)
    h = _tail_general(h, padded, tail_at, rem, m)
    return _finish(h, [], m)


def _mix(h: np.ndarray, k: np.ndarray, m: np.uint32) -> np.ndarray:
    k = k * m
    k ^= k >> np.uint32(24)
    k *= m
    return (h * m) ^ k


def _tail_general(h: np.ndarray, padded: np.ndarray, tail_at: np.ndarray, rem: np.ndarray,
                  m: np.uint32) -> np.ndarray:
    sel = rem == 3
    h[sel] ^= padded[tail_at[sel] + 2].astype(np.uint32) << 16
    sel = rem >= 2
    h[sel] ^= padded[tail_at[sel] + 1].astype(np.uint32) << 8
    sel = rem >= 1
    h[sel] ^= padded[tail_at[sel]].astype(np.uint32)
    h[sel] *= m
    return h


def _finish(h: np.ndarray, tail: list[np.ndarray], m: np.uint32) -> np.ndarray:
    """Fold a uniform tail (bytes 0..2 of the last partial word) then the final avalanche."""
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i].astype(np.uint32) << np.uint32(8 * i)
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h


def murmur2_partitions(data: np.ndarray, offsets: np.ndarray, num_partitions: int) -> np.ndarray:
    """Java's partition for each key: toPositive(murmur2(key)) % num_partitions."""
    return ((murmur2_many(data, offsets) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)


def key_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64) of an Arrow binary column, zero-copy where possible."""
    offsets = np.frombuffer(keys.buffers()[1], np.int32, len(keys) + 1, keys.offset * 4).astype(np.int64)
    data_buf = keys.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


class Partitioner:
    """Chooses partitions for records whose partition the caller left open, one record at a
    time (``partition``, for ``send``) or a whole Arrow column at once (``partition_many``, for
    ``send_batch``); both share one state, so the two paths place records the same way.

    ``available``: partitions with a known leader (records are spread over those when there are
    any, so they do not pile up behind an unavailable one); ``size``/``sizes``: each record's
    encoded size bound (``record.batch.estimate_record_size``), the same on both paths.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        raise NotImplementedError

    def partition_many(self, topic: str, keys: pa.Array | None, sizes: np.ndarray, num_partitions: int,
                       available: Sequence[int]) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _choices(available: Sequence[int], num_partitions: int) -> list[int]:
        return list(available) if available else list(range(num_partitions))


class PartitionLoad(Protocol):
    """What adaptive partitioning (KIP-794) weighs partitions by: the accumulator's queues."""

    def queue_sizes(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """Batches queued for each partition (not yet sent)."""
        ...

    def lagging(self, topic: str, partitions: Sequence[int]) -> set[int]:
        """Those whose broker has had batches ready but taken none for longer than
        ``partitioner.availability.timeout.ms`` (none while that is 0)."""
        ...


def adaptive_choice(partitions: Sequence[int], queue_sizes: Sequence[int], rng: random.Random | None = None) -> int:
    """A partition drawn with weight ``max + 1 - queue size`` (Java's BuiltInPartitioner): a
    partition whose broker keeps up gets more of the sticky batches than one whose queue grows."""
    top = max(queue_sizes)
    weights = [top + 1 - q for q in queue_sizes]
    return (rng or random).choices(partitions, weights)[0]


class Murmur2Partitioner(Partitioner):
    """Java's default: murmur2 of the key; null keys (or every key, with ``ignore_keys``) stick
    to one partition until about ``batch.size`` bytes went there (KIP-480/KIP-794), which fills
    batches instead of spraying one-record batches over every partition.

    With ``load`` (``partitioner.adaptive.partitioning.enable``, Java's default) the next sticky
    partition is drawn weighted by the queues (:func:`adaptive_choice`), leaving out partitions
    whose broker lags (``partitioner.availability.timeout.ms``) unless all do; equal queues
    (the usual case) draw uniformly, as without it."""

    def __init__(self, batch_size: int, ignore_keys: bool = False, load: PartitionLoad | None = None,
                 bulk_batch_size: int | None = None):
        super().__init__()
        self.batch_size = max(batch_size, 1)
        #: ``partition_many``'s stride: the batches ``send_batch`` fills (the producer's bulk batch size)
        self.bulk_batch_size = max(bulk_batch_size or batch_size, 1)
        self.ignore_keys = ignore_keys
        self.load = load
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes since the switch]

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        if key is not None and not self.ignore_keys:
            return murmur2_partition(key, num_partitions)
        with self._lock:
            state = self._sticky_state(topic, available, num_partitions, self.batch_size)
            state[1] += size
            return state[0]

    def partition_many(self, topic: str, keys: pa.Array | None, sizes: np.ndarray, num_partitions: int,
                       available: Sequence[int]) -> np.ndarray:
        n = len(sizes)
        out = np.empty(n, dtype=np.int32)
        keyed = np.zeros(n, dtype=bool)
        if keys is not None and not self.ignore_keys:
            keyed = keys.is_valid().to_numpy(zero_copy_only=False)
            if keyed.any():
                data, offsets = key_buffers(keys)
                out[keyed] = murmur2_partitions(data, offsets, num_partitions)[keyed]
        rest = ~keyed
        if rest.any():
            with self._lock:
                out[rest] = self._sticky_many(topic, sizes[rest], available, num_partitions)
        return out

    def _sticky_state(self, topic: str, available: Sequence[int], num_partitions: int, stride: int) -> list[int]:
        state = self._sticky.get(topic)
        if state is None or state[1] >= stride or state[0] >= num_partitions:
            previous = state[0] if state else -1
            state = self._sticky[topic] = [self._next(topic, previous, available, num_partitions), 0]
        return state

    def _sticky_many(self, topic: str, sizes: np.ndarray, available: Sequence[int], num_partitions: int) -> np.ndarray:
        """Rows in order, switching partition whenever ~a bulk batch of bytes went to the current
        one (the per-record rule, applied chunk by chunk)."""
        out = np.empty(len(sizes), dtype=np.int32)
        start = 0
        while start < len(sizes):
            state = self._sticky_state(topic, available, num_partitions, self.bulk_batch_size)
            room = self.bulk_batch_size - state[1]
            filled = np.cumsum(sizes[start:])
            stop = start + int(np.searchsorted(filled, room, side="left")) + 1  # the row crossing it stays
            stop = min(stop, len(sizes))
            out[start:stop] = state[0]
            state[1] += int(filled[stop - start - 1])
            start = stop
        return out

    def _next(self, topic: str, previous: int, available: Sequence[int], num_partitions: int) -> int:
        choices = self._choices(available, num_partitions)
        if self.load is not None and len(choices) > 1:
            lagging = self.load.lagging(topic, choices)
            keeping_up = [p for p in choices if p not in lagging] or choices
            sizes = self.load.queue_sizes(topic, keeping_up)
            if len(set(sizes)) > 1:
                return adaptive_choice(keeping_up, sizes)
            choices = keeping_up
        if len(choices) > 1 and previous in choices:
            choices.remove(previous)
        return random.choice(choices)


class RoundRobinPartitioner(Partitioner):
    """Each record to the next partition in turn (keys ignored), per topic."""

    def __init__(self) -> None:
        super().__init__()
        self._counters: dict[str, int] = {}

    def _take(self, topic: str, count: int) -> int:
        with self._lock:
            start = self._counters.get(topic, 0)
            self._counters[topic] = start + count
        return start

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        choices = self._choices(available, num_partitions)
        return choices[self._take(topic, 1) % len(choices)]

    def partition_many(self, topic: str, keys: pa.Array | None, sizes: np.ndarray, num_partitions: int,
                       available: Sequence[int]) -> np.ndarray:
        choices = np.asarray(self._choices(available, num_partitions), dtype=np.int32)
        start = self._take(topic, len(sizes))
        return choices[(start + np.arange(len(sizes))) % len(choices)]


class RandomPartitioner(Partitioner):
    """A random partition with a leader for each record (keys ignored)."""

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        return random.choice(self._choices(available, num_partitions))

    def partition_many(self, topic: str, keys: pa.Array | None, sizes: np.ndarray, num_partitions: int,
                       available: Sequence[int]) -> np.ndarray:
        choices = np.asarray(self._choices(available, num_partitions), dtype=np.int32)
        return np.random.default_rng().choice(choices, len(sizes)).astype(np.int32)


class CallablePartitioner(Partitioner):
    """The user's ``fn(topic, key, num_partitions) -> partition``, record by record."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        return int(self.fn(topic, key, num_partitions))

    def partition_many(self, topic: str, keys: pa.Array | None, sizes: np.ndarray, num_partitions: int,
                       available: Sequence[int]) -> np.ndarray:
        key_list = keys.to_pylist() if keys is not None else [None] * len(sizes)
        return np.fromiter((int(self.fn(topic, k, num_partitions)) for k in key_list),
                           dtype=np.int32, count=len(sizes))


def make_partitioner(kind: str | Callable, batch_size: int, ignore_keys: bool = False,
                     load: PartitionLoad | None = None, bulk_batch_size: int | None = None) -> Partitioner:
    """The partitioner the ``partitioner`` setting names (validated by the config); ``load``:
    adaptive partitioning of the sticky choice (murmur2 only, as Java's built-in partitioner)."""
    if callable(kind):
        return CallablePartitioner(kind)
    if kind == "round_robin":
        return RoundRobinPartitioner()
    if kind == "random":
        return RandomPartitioner()
    return Murmur2Partitioner(batch_size, ignore_keys, load, bulk_batch_size)
