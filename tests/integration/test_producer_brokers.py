"""The embedded producer against real brokers, checked with an independent consumer.

Every test reads back with confluent-kafka (librdkafka, ``check.crcs=True``,
``assign()``) so a bug in our own decoder cannot hide a bug in our encoder.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest
from confluent_kafka import Producer as CKProducer
from kafka_helpers import consume_all, producer_for

from sparkkafka_sink import Producer
from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError, RecordTooLargeError
from sparkkafka_sink.producer.partitioner import murmur2_partition

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


_producer = functools.partial(producer_for, defaults={"max.block.ms": 20000, "delivery.timeout.ms": 60000,
                                                    "linger.ms": 5})


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_with_keys_null_keys_null_values_and_headers(kafka, codec):
    topic = kafka.create_topic(partitions=6)
    sent = []
    with _producer(kafka, **{"compression.type": codec}) as p:
        futures = []
        for i in range(600):
            key = None if i % 5 == 0 else f"key-{i % 37}".encode()
            value = None if i % 7 == 0 else (f"value-{i}-" + "x" * (i % 50)).encode()
            headers = [("n", str(i).encode()), ("empty", b""), ("none", None)] if i % 3 == 0 else []
            futures.append(p.send(topic, value=value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i))
            sent.append((key, value, headers, 1_700_000_000_000 + i))
        p.flush(30)
        metas = [f.get(0) for f in futures]
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=600)
    assert len(got) == 600
    by_pos = {(r.partition, r.offset): r for r in got}
    for (key, value, headers, ts), md in zip(sent, metas, strict=True):
        r = by_pos[(md.partition, md.offset)]  # RecordMetadata offsets match the log
        assert (r.key, r.value, r.timestamp_ms) == (key, value, ts)
        assert r.headers == [(k, v) for k, v in headers]
    assert len({r.partition for r in got}) == 6


@pytest.mark.slow
def test_100k_records_exact_count_and_per_partition_order(kafka):
    topic = kafka.create_topic(partitions=6)
    n = 100_000
    with _producer(kafka, **{"compression.type": "lz4", "batch.size": 65536}) as p:
        for i in range(n):
            p.send(topic, value=b"%08d" % i, key=b"k%d" % (i % 1000))
        p.flush(60)
        assert p.metrics()["records_sent"] == n
        assert p.metrics()["records_failed"] == 0
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=n, timeout=120)
    assert len(got) == n
    values = [int(r.value) for r in got]
    assert sorted(values) == list(range(n))  # exactly once each
    last_by_key: dict[bytes, int] = {}
    for r in got:  # got is ordered by (partition, offset)
        v = int(r.value)
        assert last_by_key.get(r.key, -1) < v, f"order broken for key {r.key!r}"
        last_by_key[r.key] = v


def test_keyed_records_land_where_java_murmur2_puts_them(kafka):
    """confluent-kafka's murmur2_random partitioner is the Java one: compare placements."""
    ours, theirs = kafka.create_topic(partitions=6), kafka.create_topic(partitions=6)
    keys = [f"user-{i}".encode() for i in range(300)]
    with _producer(kafka) as p:
        for k in keys:
            p.send(ours, value=k, key=k)
    ck = CKProducer({"bootstrap.servers": kafka.bootstrap_servers, "partitioner": "murmur2_random"})
    for k in keys:
        ck.produce(theirs, value=k, key=k)
    assert ck.flush(30) == 0
    placed_ours = {r.key: r.partition for r in consume_all(kafka.bootstrap_servers, ours, expected_count=300)}
    placed_theirs = {r.key: r.partition for r in consume_all(kafka.bootstrap_servers, theirs, expected_count=300)}
    assert placed_ours == placed_theirs
    assert all(placed_ours[k] == murmur2_partition(k, 6) for k in keys)


@pytest.mark.parametrize("acks,idempotence", [("0", False), ("1", False), ("all", False), ("all", True)])
def test_acks_and_idempotence(kafka, acks, idempotence):
    topic = kafka.create_topic(partitions=3)
    with _producer(kafka, acks=acks, **{"enable.idempotence": idempotence}) as p:
        futures = [p.send(topic, value=b"v%d" % i, key=b"%d" % i) for i in range(2000)]
        p.flush(30)
        metas = [f.get(0) for f in futures]
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=2000)
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(2000))
    if acks == "0":
        assert all(m.offset == -1 for m in metas)  # nothing is acknowledged with acks=0
    else:
        logged = {(r.partition, r.offset): r.value for r in got}
        assert all(logged[(m.partition, m.offset)] == b"v%d" % i for i, m in enumerate(metas))


def test_explicit_partition_is_honoured_and_validated(kafka):
    topic = kafka.create_topic(partitions=3)
    with _producer(kafka) as p:
        md = p.send(topic, value=b"x", key=b"anything", partition=2).get(10)
        assert md.partition == 2
        assert p.partitions_for(topic) == [0, 1, 2]
        with pytest.raises(KafkaError, match=r"Partition 3 of topic .* does not exist: the topic has 3 partition"):
            p.send(topic, value=b"x", partition=3)
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=1)
    assert [(r.partition, r.value) for r in got] == [(2, b"x")]


def test_record_just_under_and_just_over_max_request_size(kafka):
    topic = kafka.create_topic(partitions=1)
    limit = 1_000_000
    with _producer(kafka, **{"max.request.size": limit}) as p:
        # batch overhead 61 + record framing; find the largest value that fits exactly
        from sparkkafka_sink.record.batch import BATCH_OVERHEAD, estimate_record_size

        size = limit
        while BATCH_OVERHEAD + estimate_record_size(1, size, None) > limit:
            size -= 1
        assert BATCH_OVERHEAD + estimate_record_size(1, size, None) <= limit
        md = p.send(topic, value=b"u" * size, key=b"k").get(30)
        assert md.offset >= 0
        with pytest.raises(RecordTooLargeError, match=rf"larger than {limit}, the value of max.request.size"):
            p.send(topic, value=b"o" * (size + 1), key=b"k")
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=1)
    assert [len(r.value) for r in got] == [size]


def test_callbacks_and_errbacks(kafka):
    topic = kafka.create_topic(partitions=1)
    seen, errors = [], []
    with _producer(kafka) as p:
        fut = p.send(topic, value=b"cb", key=b"k")
        fut.add_callback(seen.append).add_errback(errors.append)
        p.flush(10)
    assert len(seen) == 1 and seen[0].topic == topic and seen[0].offset == 0 and not errors


def test_flush_and_get_return_only_after_the_records_callbacks_ran(kafka):
    """As in the Java client: a callback still running holds flush() and get(), so counters
    kept by callbacks are complete when they return; a callback may wait for its own record,
    and a callback added by a callback runs before the waiters wake."""
    topic = kafka.create_topic(partitions=1)
    entered, release = threading.Event(), threading.Event()
    seen = []
    with _producer(kafka) as p:
        fut = p.send(topic, value=b"held", key=b"k")

        def held(md):
            entered.set()
            seen.append(("own get", fut.get(0).offset))  # its own record: no wait for itself
            fut.add_callback(lambda md2: seen.append(("added", md2.offset)))
            release.wait(30)
            seen.append(("held", md.offset))

        fut.add_callback(held)
        assert entered.wait(10), "the callback never ran"
        assert fut.done()  # the outcome is known...
        with pytest.raises(KafkaTimeoutError, match="flush"):
            p.flush(0.2)  # ...but its callback still runs: flush() waits for it
        with pytest.raises(KafkaTimeoutError, match="not acknowledged"):
            fut.get(0)
        release.set()
        p.flush(10)
        assert seen == [("own get", 0), ("held", 0), ("added", 0)]
        assert fut.get(0).offset == 0


def test_dead_bootstrap_fails_within_max_block_naming_the_address():
    start = time.monotonic()
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 1500, "reconnect.backoff.ms": 20})
    try:
        with pytest.raises(KafkaTimeoutError) as e:
            p.send("some-topic", value=b"x")
    finally:
        p.close(5)
    elapsed = time.monotonic() - start
    assert elapsed < 5, elapsed
    assert "127.0.0.1:1" in str(e.value)
    assert "max.block.ms" in str(e.value)


def test_versions_negotiated_with_the_broker(kafka):
    """What we speak to each broker: on Apache Kafka 4.x (which removed Produce v0-v2 and
    Metadata v0-v3, KIP-896, and offers Produce/Metadata v13) our own maxima."""
    from sparkkafka_sink.protocol.api import ApiKey

    topic = kafka.create_topic(partitions=1)
    with _producer(kafka) as p:
        assert p.send(topic, b"x").get(30).offset == 0
        client = p._sender.client
        node = p._metadata.cluster.leader_for(topic, 0)
        got = {k: client.api_version(node, k) for k in (ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID)}
        produce_sent = {v for (k, v) in client.requests_sent if k == ApiKey.PRODUCE}
    if kafka.kind == "apache":
        assert got == {ApiKey.PRODUCE: 12, ApiKey.METADATA: 12, ApiKey.INIT_PRODUCER_ID: 5}
        assert produce_sent == {11}  # v12 means transactions v2: only a v2 transaction sends it
    else:
        assert got[ApiKey.PRODUCE] >= 9 and got[ApiKey.METADATA] >= 9 and got[ApiKey.INIT_PRODUCER_ID] >= 3


def test_futures_kept_after_their_records_landed_hold_no_sent_bytes(kafka):
    """A caller keeping every ``send_batch`` future (to ``get()`` them later) keeps their
    records' metadata, not the bytes they were sent as: 20 calls of 4 MB each, every future
    kept and landed, leave Arrow holding less than two calls' worth -- while they held their
    batches, each call's records were fresh memory (a standalone producer spent 2-3x the CPU
    faulting it in) -- and every record is read back."""
    import pyarrow as pa

    topic = kafka.create_topic(partitions=4)
    rows, size = 4000, 1000
    values = pa.array([bytes([i % 251]) * size for i in range(rows)], pa.binary())
    with _producer(kafka) as p:
        futures = [p.send_batch(topic, values=values, partitions=i % 4) for i in range(20)]
        for f in futures:
            assert f.get(60).record_count == rows
        held = pa.total_allocated_bytes() - values.nbytes
        assert held < 2 * rows * size, f"{held:,} bytes held by Arrow after every call landed"
        assert sum(f.get(60).record_count for f in futures) == 20 * rows
    assert len(consume_all(kafka.bootstrap_servers, topic, timeout=60)) == 20 * rows
