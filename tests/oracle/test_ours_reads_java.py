"""Java's KafkaProducer writes, our decoder reads, and our encoder writes the same bytes.

The raw batches come straight from the broker (``raw_fetch``), so they are the bytes Java's
producer built (the broker only sets base offset and partition leader epoch).  Every record
must equal the one the test asked Java to send; each batch is then rebuilt with our
``RecordBatchBuilder`` from those records and Java's batch fields: an uncompressed batch must be
identical from the length field on (CRC included), a compressed one must carry the same header
fields and, decompressed, the same records section (codec output differs between libraries).
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from sparkkafka_sink.producer.partitioner import murmur2_partition
from sparkkafka_sink.record.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    PARTITION_LEADER_EPOCH_OFFSET,
    RecordBatchBuilder,
    decode_batches,
)
from sparkkafka_sink.record.compression import CompressionType, decompress
from sparkkafka_sink.testing.brokers import create_topics

from .raw_fetch import RawFetchClient
from .support import Rec, needs_java_oracle, sample_records

pytestmark = [needs_java_oracle, pytest.mark.broker]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def _rebuild(records, codec: CompressionType, batch) -> bytes:
    """Our batch of ``records`` with the producer fields of Java's ``batch``."""
    builder = RecordBatchBuilder(codec, write_limit=1 << 30)
    for r in records:
        assert builder.try_append(r.timestamp, r.key, r.value, r.headers)
    return builder.build(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                         is_transactional=batch.is_transactional)


def _assert_same_bytes(raw: bytes, batch, records, codec: CompressionType, where: str) -> None:
    """Java's fetched batch ``raw`` against ours of the same records and producer fields."""
    ours = _rebuild(records, codec, batch)
    if codec == CompressionType.NONE:
        # base offset and partition leader epoch are the broker's; all the rest is Java's
        epoch_end = PARTITION_LEADER_EPOCH_OFFSET + 4
        assert raw[8:PARTITION_LEADER_EPOCH_OFFSET] == ours[8:PARTITION_LEADER_EPOCH_OFFSET], where
        assert raw[epoch_end:] == ours[epoch_end:], where
    else:
        assert raw[ATTRIBUTES_OFFSET:BATCH_OVERHEAD] == ours[ATTRIBUTES_OFFSET:BATCH_OVERHEAD], where
        plain = _rebuild(records, CompressionType.NONE, batch)
        assert decompress(codec, raw[BATCH_OVERHEAD:]) == plain[BATCH_OVERHEAD:], where


def _java_produced(java, bootstrap: str, tmp_path, name: str, spec, topics: dict[str, str],
                   partitions: int) -> list[int]:
    """Java's producer sends ``spec`` to each codec's topic (``topics``: codec -> topic, made with
    ``partitions``); each fetched batch is checked record by record and rebuilt by ours.  Returns
    the records per batch."""
    create_topics(bootstrap, {t: partitions for t in topics.values()})
    spec_file = tmp_path / f"{name}.tsv"
    spec_file.write_text("".join(r.spec_line() + "\n" for r in spec), encoding="utf-8")
    landed_file = tmp_path / f"{name}-landed.tsv"
    java.run("ProduceFromSpec", bootstrap, spec_file, landed_file,
             *(f"{codec}={topic}" for codec, topic in topics.items()))

    landed = defaultdict(list)  # topic -> [(partition, offset)] in spec order
    for line in landed_file.read_text().splitlines():
        topic, partition, offset = line.split("\t")
        landed[topic].append((int(partition), int(offset)))

    batch_sizes = []
    with RawFetchClient(bootstrap) as client:
        for codec_name, topic in topics.items():
            codec = CompressionType[codec_name.upper()]
            assert len(landed[topic]) == len(spec)
            sent = {}  # (partition, offset) -> the record Java was asked to send
            for r, (partition, offset) in zip(spec, landed[topic], strict=True):
                if r.partition is not None:
                    assert partition == r.partition
                elif r.key is not None:  # Java's partitioner chose: ours must agree
                    assert partition == murmur2_partition(r.key, partitions), r
                sent[(partition, offset)] = r
            seen = set()
            for partition in range(partitions):
                for raw in client.batches(topic, partition):
                    (batch,) = decode_batches(raw)  # checks the CRC and every length
                    where = f"{topic}-{partition} batch at offset {batch.base_offset}"
                    assert batch.compression_type == codec, where
                    assert batch.producer_id >= 0 and batch.producer_epoch >= 0, where
                    offsets = [batch.base_offset + rec.offset_delta for rec in batch.records]
                    assert offsets == list(range(batch.base_offset, batch.base_offset + len(offsets))), where
                    records = [sent[(partition, o)] for o in offsets]
                    for rec, want in zip(batch.records, records, strict=True):
                        assert (rec.timestamp, rec.key, rec.value, rec.headers) == \
                            (want.timestamp, want.key, want.value, want.headers), where
                    seen.update((partition, o) for o in offsets)
                    batch_sizes.append(len(records))
                    _assert_same_bytes(raw, batch, records, codec, where)
            assert seen == set(sent), f"{topic}: records missing from the fetched batches"
    return batch_sizes


def test_we_decode_and_reencode_what_java_produced(oracle_broker, java, tmp_path):
    """Every kind of record (``sample_records``) through every codec on three partitions; and
    200 small records on one partition, which Java's producer puts in one batch (5 KiB against
    its 16 KiB batch.size, closed by its flush: nothing else makes a batch ready), so offset
    deltas of two varint bytes (>= 64) are there on every run -- how many records the
    three-partition batches hold depends on when Java's sender drains them (a full batch drains
    its node's other batches too)."""
    bootstrap = oracle_broker.bootstrap_servers
    run = uuid.uuid4().hex[:8]
    mixed = _java_produced(java, bootstrap, tmp_path, "mixed", sample_records(seed=7, n=500, partitions=PARTITIONS),
                           {codec: f"oracle-java-{codec}-{run}" for codec in CODECS}, PARTITIONS)
    assert sum(n > 1 for n in mixed) >= 5 * len(CODECS), mixed
    small = [Rec(1_700_000_000_000 + i, str(i).encode(), bytes([i % 256]) * 8, [], 0) for i in range(200)]
    dense = _java_produced(java, bootstrap, tmp_path, "dense", small,
                           {codec: f"oracle-java-dense-{codec}-{run}" for codec in ("none", "zstd")}, 1)
    assert dense == [200, 200], dense
