"""``send()`` and ``send_batch()`` place records the same way: the sticky partitioner counts the
same size for each record on both paths, so it switches partitions at the same records."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkkafka_sink.producer.partitioner import Murmur2Partitioner
from sparkkafka_sink.record.arrow import HEADERS_TYPE, RecordColumns
from sparkkafka_sink.record.batch import estimate_record_size

PARTITIONS = 4


def _rows():
    """Null and non-null keys, values of many lengths (one-, two- and three-byte varints),
    tombstones and headers."""
    rows = []
    for i in range(400):
        key = None if i % 3 else f"k{i}".encode()
        value = None if i % 37 == 5 else bytes([65 + i % 26]) * (i * 53 % 9000)
        headers = [("h", b"x" * (i % 7)), ("n", None)] if i % 5 == 0 else []
        rows.append((key, value, headers))
    return rows


@pytest.fixture
def next_partition_in_turn(monkeypatch):
    """The sticky partitioner's random choice made deterministic: what is compared is where it
    switches, not which partition it draws."""
    monkeypatch.setattr(Murmur2Partitioner, "_next", lambda self, topic, previous, available, n: (previous + 1) % n)


def test_the_partitioner_counts_the_same_sizes_on_both_paths():
    rows = _rows()
    keys = pa.array([k for k, _, _ in rows], pa.binary())
    values = pa.array([v for _, v, _ in rows], pa.binary())
    headers = pa.array([[{"key": k, "value": v} for k, v in h] for _, _, h in rows], HEADERS_TYPE)
    expected = [estimate_record_size(None if k is None else len(k), None if v is None else len(v), h)
                for k, v, h in rows]
    assert RecordColumns(keys, values, None, headers).size_bounds.tolist() == expected
    assert RecordColumns(keys, values, None, [h for _, _, h in rows]).size_bounds.tolist() == expected


def test_send_and_send_batch_put_the_same_records_in_the_same_partitions(broker, cluster, make_producer,
                                                                         next_partition_in_turn):
    cluster.add_topic("one-by-one", PARTITIONS, broker.node_id)
    cluster.add_topic("in-bulk", PARTITIONS, broker.node_id)
    rows = _rows()
    # batch.size well below the rows' total: the sticky partitioner switches many times
    single = make_producer(broker, batch_size=20_000, enable_idempotence=False)
    single.partitions_for("one-by-one")
    for key, value, headers in rows:
        single.send("one-by-one", value, key=key, headers=headers or None)
    single.flush(10)
    bulk = make_producer(broker, batch_size=20_000, enable_idempotence=False)
    bulk.partitions_for("in-bulk")
    bulk.send_batch("in-bulk", values=pa.array([v for _, v, _ in rows], pa.binary()),
                    keys=pa.array([k for k, _, _ in rows], pa.binary()),
                    headers=pa.array([[{"key": k, "value": v} for k, v in h] for _, _, h in rows],
                                     HEADERS_TYPE)).get(10)
    placed = {topic: [broker.log_values(topic, p) for p in range(PARTITIONS)] for topic in ("one-by-one", "in-bulk")}
    assert sum(map(len, placed["one-by-one"])) == len(rows)
    assert sum(1 for values in placed["one-by-one"] if values) == PARTITIONS  # it did switch
    assert placed["in-bulk"] == placed["one-by-one"]
