"""Producer.send_batch (the vectorised Arrow path) against real brokers."""

from __future__ import annotations

import functools

import pyarrow as pa
import pytest
from kafka_helpers import consume_all, producer_for

from sparkkafka_sink import BulkSendError
from sparkkafka_sink.errors import InvalidPartitionError, RecordTooLargeError
from sparkkafka_sink.producer.partitioner import murmur2_partition
from sparkkafka_sink.record.arrow import HEADERS_TYPE

_producer = functools.partial(producer_for, defaults={"max.block.ms": 20000, "linger.ms": 5})


@pytest.mark.parametrize("codec,idempotent", [("none", True), ("zstd", True), ("none", False)])
def test_bulk_rows_land_with_keys_headers_timestamps_and_nulls(kafka, codec, idempotent):
    """(Whole batches leave the encoder without a CRC, which the Sender writes as it stamps them,
    with or without a producer id: the consumer checks every CRC.)"""
    topic = kafka.create_topic(partitions=4)
    n = 3000
    keys = pa.array([None if i % 10 == 0 else f"k{i % 97}" for i in range(n)], pa.string())
    values = pa.array([None if i % 13 == 0 else b"v%d" % i for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "row", "value": str(i).encode()}] if i % 2 else [] for i in range(n)],
                       HEADERS_TYPE)
    timestamps = pa.array([1_600_000_000_000 + i for i in range(n)], pa.int64())
    settings = {} if idempotent else {"enable.idempotence": "false", "acks": "1"}
    with _producer(kafka, **{"compression.type": codec, "batch.size": 8192, **settings}) as p:
        fut = p.send_batch(topic, values, keys=keys, headers=headers, timestamps=timestamps)
        result = fut.get(30)
    assert result.record_count == n
    assert sum(c for c, _, _ in result.partitions.values()) == n
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=n)
    assert len(got) == n
    by_ts = {r.timestamp_ms - 1_600_000_000_000: r for r in got}
    for i in range(n):
        r = by_ts[i]
        assert r.key == (None if i % 10 == 0 else f"k{i % 97}".encode())
        assert r.value == (None if i % 13 == 0 else b"v%d" % i)
        assert r.headers == ([("row", str(i).encode())] if i % 2 else [])
        if r.key is not None:
            assert r.partition == murmur2_partition(r.key, 4)
    for p, (count, first, last) in result.partitions.items():
        offsets = [r.offset for r in got if r.partition == p]
        assert (count, first, last) == (len(offsets), min(offsets), max(offsets))


def test_bulk_explicit_partitions_and_order(kafka):
    topic = kafka.create_topic(partitions=3)
    n = 900
    parts = pa.array([None if i % 4 == 0 else i % 3 for i in range(n)], pa.int32())
    with _producer(kafka) as p:
        p.send_batch(topic, pa.array([b"%05d" % i for i in range(n)]), partitions=parts).get(30)
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=n)
    for r in got:
        i = int(r.value)
        if i % 4:
            assert r.partition == i % 3
    for part in range(3):
        seq = [int(r.value) for r in got if r.partition == part]
        assert seq == sorted(seq)  # order within a partition follows row order


def test_bulk_rejects_bad_partitions_and_oversized_rows_before_sending(kafka):
    topic = kafka.create_topic(partitions=2)
    with _producer(kafka, **{"max.request.size": 10_000}) as p:
        with pytest.raises(BulkSendError, match=r"Row 1: partition 5 of topic .* has 2 partition") as refused:
            p.send_batch(topic, [b"a", b"b"], partitions=[0, 5])
        assert isinstance(refused.value.error, InvalidPartitionError)
        assert (refused.value.row, refused.value.partition) == (1, 5)
        with pytest.raises(BulkSendError, match=r"Row 2 for topic .* larger than 10000") as refused:
            p.send_batch(topic, [b"a", b"b", b"x" * 20_000])
        assert isinstance(refused.value.error, RecordTooLargeError) and refused.value.row == 2
        assert p.metrics()["records_sent"] == 0
