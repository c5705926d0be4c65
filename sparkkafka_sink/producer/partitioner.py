"""Partitioners: Java-compatible murmur2 for keys, sticky spreading for null keys.

A keyed record must land where the Java client puts it (users mix clients on
one topic), so ``murmur2`` reproduces ``org.apache.kafka.common.utils.Utils.murmur2``
bit for bit.  Null keys stick to one partition until about ``batch.size``
bytes went there (KIP-480/KIP-794), which fills batches instead of spraying
one-record batches over every partition.
"""

from __future__ import annotations

import random
import struct
import threading
from typing import Callable, Sequence

import numpy as np

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_WORDS: dict[int, object] = {}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int (as Java returns it)."""
    length = len(data)
    h = _SEED ^ length
    n4 = length >> 2
    if n4:
        unpack = _WORDS.get(n4)
        if unpack is None:
            unpack = _WORDS.setdefault(n4, struct.Struct("<%dI" % n4).unpack_from)
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


def _tail_general(h, padded, tail_at, rem, m):
    sel = rem == 3
    h[sel] ^= padded[tail_at[sel] + 2].astype(np.uint32) << 16
    sel = rem >= 2
    h[sel] ^= padded[tail_at[sel] + 1].astype(np.uint32) << 8
    sel = rem >= 1
    h[sel] ^= padded[tail_at[sel]].astype(np.uint32)
    h[sel] *= m
    return h


def _finish(h, tail, m):
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


class StickyPartitionCache:
    """Per-topic partition for null keys; switches after ``batch_size`` bytes.

    Picks among partitions with a known leader when there are any, so records
    do not pile up behind an unavailable partition.
    """

    def __init__(self, batch_size: int):
        self._batch_size = max(batch_size, 1)
        self._state: dict[str, list[int]] = {}  # topic -> [partition, bytes_since_switch]
        self._lock = threading.Lock()

    def partition(self, topic: str, available: Sequence[int], all_partitions: int, size: int) -> int:
        with self._lock:
            state = self._state.get(topic)
            if state is None or state[1] >= self._batch_size or state[0] >= all_partitions:
                state = [self._next(state[0] if state else -1, available, all_partitions), 0]
                self._state[topic] = state
            state[1] += size
            return state[0]

    @staticmethod
    def _next(previous: int, available: Sequence[int], all_partitions: int) -> int:
        choices = list(available) if available else list(range(all_partitions))
        if len(choices) > 1 and previous in choices:
            choices.remove(previous)
        return random.choice(choices)


class Partitioner:
    """Chooses the partition of a record whose partition the caller left open."""

    def __init__(self, kind: str | Callable, batch_size: int, ignore_keys: bool = False):
        self._custom = kind if callable(kind) else None
        self._kind = "custom" if callable(kind) else kind
        self._ignore_keys = ignore_keys
        self._sticky = StickyPartitionCache(batch_size)
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int], size: int) -> int:
        if self._custom is not None:
            return int(self._custom(topic, key, num_partitions))
        if key is not None and not self._ignore_keys and self._kind == "murmur2":
            return murmur2_partition(key, num_partitions)
        if self._kind == "round_robin":
            with self._lock:
                n = self._counters.get(topic, 0)
                self._counters[topic] = n + 1
            choices = list(available) or list(range(num_partitions))
            return choices[n % len(choices)]
        if self._kind == "random":
            return random.randrange(num_partitions)
        return self._sticky.partition(topic, available, num_partitions, size)
