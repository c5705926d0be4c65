"""Partitioning: Java's murmur2 bit for bit (Kafka's UtilsTest vectors), sticky null keys."""

import collections

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparkkafka_sink.producer.partitioner import (
    make_partitioner,
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
    p = make_partitioner("murmur2", batch_size=100)
    assert p.partition("t", b"foobar", 50, list(range(50)), 10) == 16


def test_null_keys_stick_until_batch_size_then_move():
    p = make_partitioner("murmur2", batch_size=1000)
    seen = [p.partition("t", None, 6, list(range(6)), 100) for _ in range(10)]
    assert len(set(seen)) == 1  # 10 x 100 bytes = one batch worth
    nxt = p.partition("t", None, 6, list(range(6)), 100)
    assert nxt != seen[0]
    spread = collections.Counter(p.partition("t", None, 6, list(range(6)), 1000) for _ in range(600))
    assert set(spread) == set(range(6))


def test_null_keys_prefer_available_partitions():
    p = make_partitioner("murmur2", batch_size=10)
    assert {p.partition("t", None, 6, [2, 4], 10) for _ in range(50)} <= {2, 4}


def test_round_robin_and_custom():
    rr = make_partitioner("round_robin", batch_size=10)
    assert [rr.partition("t", b"k", 3, [0, 1, 2], 1) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    custom = make_partitioner(lambda topic, key, n: n - 1, batch_size=10)
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


@pytest.mark.parametrize("num_partitions", [1, 3, 300, 70000])
def test_group_by_partition_is_a_stable_grouping(num_partitions):
    from sparkkafka_sink.producer.bulk import group_by_partition

    rng = np.random.default_rng(num_partitions)
    parts = rng.integers(0, num_partitions, 5000).astype(np.int32)
    order, starts = group_by_partition(parts)
    assert order is not None or num_partitions == 1
    idx = np.arange(len(parts)) if order is None else order
    grouped = parts[idx]
    assert (np.diff(grouped) >= 0).all()  # ascending partitions
    assert starts.tolist() == [0] + (np.flatnonzero(np.diff(grouped)) + 1).tolist()
    for a, b in zip(starts.tolist(), starts.tolist()[1:] + [len(parts)], strict=False):
        assert (np.diff(idx[a:b]) > 0).all()  # stable: original order within a partition
    sorted_parts = np.sort(parts)
    assert group_by_partition(sorted_parts)[0] is None  # already grouped: no reordering


def _planned(keys, values, opens=None, batch_size=4096):
    """The bulk path's pieces for one call (no producer): each with what its records decode to."""
    import pyarrow as pa

    from sparkkafka_sink.producer.bulk import encode_pieces, group_rows, plan_pieces, resolve_partitions
    from sparkkafka_sink.record.arrow import RecordColumns
    from sparkkafka_sink.record.batch import EncodedRecordsBuilder, decode_batches, set_producer_state

    keys_b, values_b = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    columns = RecordColumns(keys_b, values_b)
    sizes = columns.size_bounds
    parts, _ = resolve_partitions("t", None, keys_b, sizes, 5, list(range(5)), make_partitioner("murmur2", batch_size))
    rows = group_rows(parts, columns)
    pieces = plan_pieces(rows, opens or {}, batch_size)
    encode_pieces(rows, pieces, 0)
    out = []
    for piece in pieces:
        if piece.kind.name == "FULL":  # stamped as the Sender does (the encoder leaves the CRC to it)
            (batch,) = decode_batches(bytes(set_producer_state(piece.data, -1, -1, -1)))
        elif piece.kind.name == "SEAL":
            out.append((piece, []))
            continue
        else:  # bare records, as an open batch would frame them
            builder = EncodedRecordsBuilder(0, rows.records.timestamp(piece.slice.start))
            builder.append(piece.data, len(piece.rows), piece.max_timestamp)
            (batch,) = decode_batches(builder.build())
        out.append((piece, batch.records))
    return out


def test_bulk_plan_maps_every_batch_to_its_partition_and_original_rows():
    n = 3000
    keys = [b"key-%d" % i for i in range(n)]
    values = [b"value-%d" % i for i in range(n)]
    seen = []
    for piece, records in _planned(keys, values):
        assert len(records) == len(piece.rows)
        assert [r.key for r in records] == [keys[i] for i in piece.rows]
        assert [r.value for r in records] == [values[i] for i in piece.rows]
        assert all(murmur2_partition(keys[i], 5) == piece.partition for i in piece.rows)
        seen.extend(piece.rows.tolist())
    assert sorted(seen) == list(range(n))
    kinds = {}
    for piece, _ in _planned(keys, values):
        kinds.setdefault(piece.partition, []).append(piece.kind.name)
    # whole batches while a partition's rows fill batch.size, the rest left open for the next call
    assert all(k[-1] == "OPEN" and set(k[:-1]) <= {"FULL"} for k in kinds.values()), kinds


def test_bulk_plan_extends_open_batches_then_seals_them_when_full():
    from sparkkafka_sink.producer.bulk import OpenBatch

    keys = [b"key-%d" % i for i in range(200)]
    values = [b"v" * 20 for _ in range(200)]
    opens = {0: OpenBatch(record_count=7, size=4096 - 100, base_timestamp=1), 1: OpenBatch(3, 4096, 1)}
    pieces = _planned(keys, values, opens)
    first = {}
    for piece, records in pieces:
        first.setdefault(piece.partition, (piece, records))
    extend, records = first[0]
    assert extend.kind.name == "EXTEND" and extend.slice.first_offset == 7 and 0 < len(extend.rows) <= 3
    assert [r.offset_delta for r in records] == list(range(7, 7 + len(extend.rows)))  # after the open batch's
    assert first[1][0].kind.name == "SEAL"  # full already: not even one more row fits
    assert all(piece.kind.name in ("FULL", "OPEN") for p, (piece, _) in first.items() if p not in opens)


# --- one partitioner for both paths -----------------------------------------------------------

def _column_and_sizes(keys, size=100):
    import pyarrow as pa

    return pa.array(keys, pa.binary()), np.full(len(keys), size, dtype=np.int64)


@pytest.mark.parametrize("kind", ["murmur2", "round_robin", "random"])
def test_record_and_column_paths_choose_among_the_same_partitions(kind):
    """Both paths of one partitioner spread over the partitions that have a leader (the
    ``random`` partitioner used to ignore availability record by record)."""
    p = make_partitioner(kind, batch_size=100)
    keys, sizes = _column_and_sizes([None] * 300)
    column = set(p.partition_many("t", keys, sizes, 6, [1, 4]).tolist())
    single = {p.partition("t", None, 6, [1, 4], 100) for _ in range(300)}
    assert column == single == {1, 4}


def test_round_robin_continues_across_paths():
    p = make_partitioner("round_robin", batch_size=10)
    keys, sizes = _column_and_sizes([b"k"] * 4)
    first = [p.partition("t", b"k", 3, [0, 1, 2], 1) for _ in range(2)]
    many = p.partition_many("t", keys, sizes, 3, [0, 1, 2]).tolist()
    assert first + many == [0, 1, 2, 0, 1, 2]


def test_sticky_null_keys_are_shared_by_both_paths():
    """The column path fills the partition the record path was filling, then moves on after
    ~batch.size bytes, exactly as records sent one by one would."""
    p = make_partitioner("murmur2", batch_size=1000)
    start = p.partition("t", None, 6, list(range(6)), 100)  # 100 of 1000 bytes used
    keys, sizes = _column_and_sizes([None] * 25)
    got = p.partition_many("t", keys, sizes, 6, list(range(6))).tolist()
    assert got[:9] == [start] * 9  # the 10th record of 100 bytes fills the batch
    assert got[9] != start and len(set(got[9:19])) == 1 and got[19] != got[9]
    keyed, sizes = _column_and_sizes([b"foobar", None])
    assert p.partition_many("t", keyed, sizes, 50, list(range(50)))[0] == 16  # murmur2 for keys


def test_the_column_path_sticks_for_a_bulk_batch_the_record_path_for_batch_size():
    """``send_batch`` fills batches of the producer's bulk size (``bulk_batch_size``): its rows
    stick to a partition that long, while ``send`` keeps to ``batch.size``."""
    p = make_partitioner("murmur2", batch_size=1000, bulk_batch_size=4000)
    keys, sizes = _column_and_sizes([None] * 60)  # 100 bytes each
    got = p.partition_many("t", keys, sizes, 6, list(range(6))).tolist()
    assert len(set(got[:40])) == 1 and got[40] != got[0] and len(set(got[40:60])) == 1
    one_by_one = [p.partition("t", None, 6, list(range(6)), 100) for _ in range(20)]
    assert one_by_one[0] != got[59]  # 2000 bytes there: over batch.size
    assert one_by_one[:10] == [one_by_one[0]] * 10 and one_by_one[10:] == [one_by_one[10]] * 10
    assert one_by_one[10] != one_by_one[0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.one_of(st.integers(1, 4), st.integers(1, 900)), min_size=1, max_size=40),
                          st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(0, 4200)))),
                min_size=1, max_size=12),
       st.integers(200, 4096))
@example([([100, 100, 100], (1, 3896)), ([1939, 2000, 5], None)], 4000)  # exact fits: an open batch's room, a batch
def test_bulk_plan_cuts_like_the_greedy_rule_row_by_row(groups, batch_size):
    """The plan finds every partition's first cuts at once: the same pieces as taking rows one
    by one while they fit (an open batch's room, then ``batch.size`` less the header, one row at
    least), whatever the sizes and open batches."""
    from sparkkafka_sink.producer.bulk import OpenBatch, PartitionedRows, plan_pieces
    from sparkkafka_sink.record.batch import BATCH_OVERHEAD

    sizes = np.array([s for row_sizes, _ in groups for s in row_sizes], dtype=np.int64)
    starts = np.cumsum([0] + [len(r) for r, _ in groups[:-1]])
    opens = {p: OpenBatch(o[0], o[1], 1) for p, (_, o) in enumerate(groups) if o is not None}

    class Records:  # the size bounds the planner asks for, as given
        def size_bounds(self, first_offsets, base_timestamps=()):
            return sizes

    rows = PartitionedRows(Records(), None, starts, list(range(len(groups))))
    got = [(p.kind.name, p.partition, p.slice.start, p.slice.stop) for p in plan_pieces(rows, opens, batch_size)]

    expected, budget = [], batch_size - BATCH_OVERHEAD
    for partition, start in enumerate(starts.tolist()):
        end = start + len(groups[partition][0])
        if partition in opens:
            stop, used = start, 0
            while stop < end and used + sizes[stop] <= batch_size - opens[partition].size:
                used += sizes[stop]
                stop += 1
            expected.append(("EXTEND" if stop > start else "SEAL", partition, start, stop))
            start = stop
        while start < end:
            stop, used = start + 1, sizes[start]
            while stop < end and used + sizes[stop] <= budget:
                used += sizes[stop]
                stop += 1
            expected.append(("FULL" if stop < end else "OPEN", partition, start, stop))
            start = stop
    assert got == expected
