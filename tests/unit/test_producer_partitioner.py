"""Partitioning: Java's murmur2 bit for bit (Kafka's UtilsTest vectors), sticky null keys."""

import collections

import numpy as np
import pytest

from sparkkafka_sink.producer.partitioner import (
    Partitioner,
    murmur2,
    murmur2_many,
    murmur2_partition,
    murmur2_partitions,
)

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("data,expected", list(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka_vectors(data, expected):
    assert murmur2(data) == expected


def test_partition_uses_to_positive_modulo():
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert murmur2_partition(b"foobar", 50) == 16


def test_vectorised_murmur2_equals_scalar():
    rng = np.random.default_rng(7)
    keys = list(KAFKA_VECTORS) + [b"", b"a"] + [rng.bytes(int(n)) for n in rng.integers(0, 40, 500)]
    offsets = np.cumsum([0] + [len(k) for k in keys])
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    hashes = murmur2_many(data, offsets)
    assert [int(h) - (1 << 32) if h & 0x80000000 else int(h) for h in hashes] == [murmur2(k) for k in keys]
    parts = murmur2_partitions(data, offsets, 7)
    assert list(parts) == [murmur2_partition(k, 7) for k in keys]


def test_keyed_records_use_murmur2():
    p = Partitioner("murmur2", batch_size=100)
    assert p.partition("t", b"foobar", 50, list(range(50)), 10) == 16


def test_null_keys_stick_until_batch_size_then_move():
    p = Partitioner("murmur2", batch_size=1000)
    seen = [p.partition("t", None, 6, list(range(6)), 100) for _ in range(10)]
    assert len(set(seen)) == 1  # 10 x 100 bytes = one batch worth
    nxt = p.partition("t", None, 6, list(range(6)), 100)
    assert nxt != seen[0]
    spread = collections.Counter(p.partition("t", None, 6, list(range(6)), 1000) for _ in range(600))
    assert set(spread) == set(range(6))


def test_null_keys_prefer_available_partitions():
    p = Partitioner("murmur2", batch_size=10)
    assert {p.partition("t", None, 6, [2, 4], 10) for _ in range(50)} <= {2, 4}


def test_round_robin_and_custom():
    rr = Partitioner("round_robin", batch_size=10)
    assert [rr.partition("t", b"k", 3, [0, 1, 2], 1) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    custom = Partitioner(lambda topic, key, n: n - 1, batch_size=10)
    assert custom.partition("t", b"k", 4, [0], 1) == 3


@pytest.mark.parametrize("width", [0, 1, 2, 3, 4, 5, 7, 8, 10, 13])
def test_vectorised_murmur2_fixed_width_keys_equal_scalar(width):
    """Fixed-width keys take the word-matrix path, also inside a larger buffer (sliced arrays)."""
    rng = np.random.default_rng(width)
    keys = [rng.bytes(width) for _ in range(257)]
    blob = b"xyz" + b"".join(keys) + b"tail"
    offsets = 3 + np.arange(len(keys) + 1, dtype=np.int64) * width
    hashes = murmur2_many(np.frombuffer(blob, dtype=np.uint8), offsets)
    assert [int(h) for h in hashes] == [murmur2(k) & 0xFFFFFFFF for k in keys]
