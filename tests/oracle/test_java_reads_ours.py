"""Java's KafkaConsumer reads what our Producer wrote, every codec, per-record and bulk paths.

The expected lines come from the records the test sent (and where our producer said they
landed); the Java consumer checks CRCs and decompresses with the Java codecs.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import defaultdict

import pyarrow as pa
import pytest
from encoder_paths import PATHS, encoder_path

from sparkkafka_sink import Producer
from sparkkafka_sink.producer.partitioner import murmur2_partition
from sparkkafka_sink.record.arrow import HEADERS_TYPE
from sparkkafka_sink.testing.brokers import create_topics

from .support import first_differences, needs_java_oracle, record_line, sample_records

pytestmark = [needs_java_oracle, pytest.mark.broker]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def _bulk_columns(records, arrow_headers: bool):
    """send_batch arguments for ``records``: explicit partitions only where the key is null;
    Arrow columns in pieces of 130 rows, as a Spark task hands them over (its batches grouped)."""
    def pieces(items, arrow_type):
        return pa.chunked_array([pa.array(items[i:i + 130], arrow_type) for i in range(0, len(items), 130)],
                                arrow_type)

    keys = pieces([r.key for r in records], pa.binary())
    values = pieces([r.value for r in records], pa.binary())
    timestamps = pieces([r.timestamp for r in records], pa.int64())
    partitions = pieces([r.partition for r in records], pa.int32())
    headers = [[(k, v) for k, v in r.headers] for r in records]
    if arrow_headers:
        headers = pieces([[{"key": k, "value": v} for k, v in h] for h in headers], HEADERS_TYPE)
    return dict(keys=keys, values=values, timestamps=timestamps, partitions=partitions, headers=headers)


@pytest.mark.parametrize("path", PATHS)
def test_java_consumer_reads_our_records_byte_for_byte(oracle_broker, java, tmp_path, path):
    """Records sent one by one and in bulk (regrouped by partition on either encoder path, from
    columns in pieces), with every codec, read back by Java's consumer: each byte of each record
    as sent."""
    bootstrap = oracle_broker.bootstrap_servers
    run = uuid.uuid4().hex[:8]
    topics = {codec: f"oracle-ours-{codec}-{run}" for codec in CODECS}
    create_topics(bootstrap, {t: PARTITIONS for t in topics.values()})

    expected = []
    for n, (codec, topic) in enumerate(topics.items()):
        single = sample_records(seed=100 + n, n=300, partitions=PARTITIONS)
        # bulk rows: the test must know each row's partition, so null keys get an explicit one
        bulk = [r if r.key is not None or r.partition is not None
                else dataclasses.replace(r, partition=i % PARTITIONS)
                for i, r in enumerate(sample_records(seed=200 + n, n=400, partitions=PARTITIONS))]
        per_partition = defaultdict(list)  # partition -> [(offset, record)]
        config = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                  "max.block.ms": 20000}
        with Producer(config) as producer:
            futures = [producer.send(topic, value=r.value, key=r.key, headers=r.headers or None,
                                     partition=r.partition, timestamp_ms=r.timestamp) for r in single]
            producer.flush(30)
            for r, fut in zip(single, futures, strict=True):
                md = fut.get(30)
                if r.partition is not None:
                    assert md.partition == r.partition
                per_partition[md.partition].append((md.offset, r))
            with encoder_path(path):
                result = producer.send_batch(topic, **_bulk_columns(bulk, arrow_headers=n % 2 == 0)).get(30)
            # bulk rows land in row order within their partition, from the result's first offset
            # on; keyed rows where murmur2 puts them (test_partitioner_matches_java checks it)
            rows_by_partition = defaultdict(list)
            for r in bulk:
                part = r.partition if r.partition is not None else murmur2_partition(r.key, PARTITIONS)
                rows_by_partition[part].append(r)
            assert {p: len(rows) for p, rows in rows_by_partition.items()} == \
                {p: count for p, (count, _, _) in result.partitions.items()}
            for part, rows in rows_by_partition.items():
                count, first, last = result.partitions[part]
                assert last - first + 1 == count
                per_partition[part].extend((first + i, r) for i, r in enumerate(rows))
        for part, entries in per_partition.items():
            # one producer, fresh topic: offsets are 0, 1, 2... in send order
            assert [o for o, _ in entries] == list(range(len(entries))), (codec, part)
            expected += [record_line(topic, part, o, r.timestamp, r.content()) for o, r in entries]

    out = tmp_path / "digest.tsv"
    java.run("ConsumeDigest", bootstrap, out, *topics.values())
    got = out.read_text(encoding="utf-8").splitlines()

    def order(line):
        t, p, o = line.split("\t", 3)[:3]
        return t, int(p), int(o)

    got.sort(key=order)
    expected.sort(key=order)
    assert got == expected, first_differences(got, expected)
