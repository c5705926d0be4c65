"""Our partitioners put every key where the Java producer does.

``KeyPartitions.java`` gives ``Utils.murmur2`` of 10,000 random keys and
``BuiltInPartitioner.partitionForKey`` (``toPositive(murmur2(key)) % n``, the Java producer's
choice for a keyed record) for every partition count 1..500.  Compared with our per-record
``murmur2``/``murmur2_partition`` (``Producer.send``) and the vectorised path of
``Producer.send_batch`` (``murmur2_many`` and ``Partitioner.partition_many`` over an Arrow key column:
mixed key lengths take the general word loop, keys of one length the 2-D word matrix).

Every hash is compared, and every partition count from those hashes; the partition functions
themselves run at a spread of counts (calling them 5 million times would take minutes here).
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pyarrow as pa

from sparkkafka_sink.producer.partitioner import make_partitioner, murmur2, murmur2_many, murmur2_partition

from .support import needs_java_oracle

pytestmark = needs_java_oracle

KEYS = 10_000
MAX_PARTITIONS = 500
#: counts at which our partition functions themselves are called: small ones, powers of two and
#: their neighbours, the largest
COUNTS = (*range(1, 13), 16, 31, 32, 64, 100, 127, 128, 255, 256, 257, 333, 499, 500)


def _keys(seed: int):
    rng = random.Random(seed)
    keys = [b"", b"\x00", b"\xff" * 3, b"\x80" * 4, b"\xff" * 4, b"\x7f\xff\xff\xff\xff", rng.randbytes(1000)]
    keys += [str(i).encode() for i in range(1000)]  # the usual keys: short ASCII ids
    while len(keys) < KEYS:
        keys.append(rng.randbytes(rng.choice((rng.randrange(0, 16), rng.randrange(16, 70)))))
    return keys


def _vectorised_hashes(keys):
    """``murmur2_many`` of ``keys`` as signed ints, like Java's."""
    data = np.frombuffer(b"".join(keys), np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys])]).astype(np.int64)
    return murmur2_many(data, offsets).view(np.int32).astype(np.int64)


def test_partitions_match_java_for_1_to_500_partitions(java, tmp_path):
    keys = _keys(seed=11)
    keys_file = tmp_path / "keys.bin"
    keys_file.write_bytes(struct.pack(">i", len(keys))
                          + b"".join(struct.pack(">i", len(k)) + k for k in keys))
    out = tmp_path / "partitions.bin"
    java.run("KeyPartitions", keys_file, out, MAX_PARTITIONS)
    data = out.read_bytes()
    assert len(data) == 4 * KEYS + 2 * KEYS * MAX_PARTITIONS
    java_hash = np.frombuffer(data, ">i4", KEYS).astype(np.int64)
    java_parts = np.frombuffer(data, ">i2", offset=4 * KEYS).reshape(MAX_PARTITIONS, KEYS).astype(np.int64)

    # per record (Producer.send): the hash of every key, murmur2_partition at COUNTS
    ours_hash = np.array([murmur2(k) for k in keys], dtype=np.int64)
    bad = np.flatnonzero(ours_hash != java_hash)
    assert not len(bad), [(keys[i].hex(), int(ours_hash[i]), int(java_hash[i])) for i in bad[:5]]
    for n in COUNTS[::2]:
        ours = [murmur2_partition(k, n) for k in keys]
        assert ours == java_parts[n - 1].tolist(), n
    # every count, from the checked hashes: Java's arithmetic is toPositive(hash) % n
    positive = ours_hash & 0x7FFFFFFF
    for n in range(1, MAX_PARTITIONS + 1):
        assert np.array_equal(positive % n, java_parts[n - 1]), n

    # bulk (Producer.send_batch): partition_many over an Arrow column of all keys at COUNTS
    partitioner = make_partitioner("murmur2", batch_size=16384)
    column = pa.array(keys, pa.binary())
    sizes = np.zeros(KEYS, dtype=np.int64)
    for n in COUNTS:
        got = partitioner.partition_many("t", column, sizes, n, list(range(n)))
        bad = np.flatnonzero(got != java_parts[n - 1])
        assert not len(bad), (n, [(keys[i].hex(), int(got[i]), int(java_parts[n - 1][i])) for i in bad[:5]])

    # the vectorised hashes of all keys at once (the general loop), then of the keys of each
    # length on their own (the 2-D word matrix), and partitions of a sliced column (offset != 0)
    assert np.array_equal(_vectorised_hashes(keys), java_hash)
    for length in sorted(set(map(len, keys))):
        idx = [i for i, k in enumerate(keys) if len(k) == length]
        assert np.array_equal(_vectorised_hashes([keys[i] for i in idx]), java_hash[idx]), length
    sliced = pa.array([b"pad"] * 3 + keys, pa.binary()).slice(3)
    for n in (1, 10, 500):
        got = partitioner.partition_many("t", sliced, sizes, n, list(range(n)))
        assert np.array_equal(got, java_parts[n - 1]), n
