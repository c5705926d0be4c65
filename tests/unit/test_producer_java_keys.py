"""Every Java producer key is honoured, noted or refused for its own reason (``producer/java_keys.py``);
the keys honoured for issue 33 change what the producer does: compression levels (KIP-390),
adaptive partitioning (KIP-794), the OAuth login's refresh schedule and claim names."""

from __future__ import annotations

import logging
import random

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
from sparkkafka_sink.network.sasl.settings import sasl_settings
from sparkkafka_sink.oauth.bearer_token import OAuthBearerToken
from sparkkafka_sink.oauth.token_source import refresh_at
from sparkkafka_sink.producer import java_keys
from sparkkafka_sink.producer.accumulator import RecordAccumulator
from sparkkafka_sink.producer.buffer_pool import BufferPool
from sparkkafka_sink.producer.config import KEYS, ProducerConfig, java_key_status, migration_table
from sparkkafka_sink.producer.partitioner import adaptive_choice, make_partitioner
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.record.compression import LEVELS, CompressionType, compress, decompress

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


# -- the classification ---------------------------------------------------------------------------
def test_every_java_key_has_exactly_one_status():
    for key in java_keys.JAVA_PRODUCER_KEYS:
        assert java_key_status(key) in (java_keys.HONOURED, java_keys.NOTED, java_keys.REFUSED), key
    # a rule for a key the producer honours would never be read: one place says what a key does
    assert not set(java_keys._RULES) & set(KEYS)
    assert set(java_keys._RULES) <= set(java_keys.JAVA_PRODUCER_KEYS)


def test_the_keys_named_by_the_issue_are_where_it_asks():
    honoured = ["compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
                "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
                "partitioner.availability.timeout.ms", "sasl.login.connect.timeout.ms",
                "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
                "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
                "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
                "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
                "send.buffer.bytes", "receive.buffer.bytes", "enable.metrics.push"]
    noted = ["client.dns.lookup", "metric.reporters", "metrics.num.samples", "metrics.recording.level",
             "metrics.sample.window.ms", "metadata.recovery.strategy"]
    refused = ["partitioner.class", "interceptor.classes", "key.serializer", "value.serializer"]
    for keys, expected in ((honoured, java_keys.HONOURED), (noted, java_keys.NOTED), (refused, java_keys.REFUSED)):
        assert {k: java_key_status(k) for k in keys} == {k: expected for k in keys}


def test_noted_keys_are_accepted_and_say_why():
    config = ProducerConfig({**BOOT, "client.dns.lookup": "use_all_dns_ips", "metric.reporters": "com.acme.Reporter",
                             "enable.metrics.push": "false", "metadata.recovery.strategy": "rebootstrap"})
    assert set(config.noted) == {"client.dns.lookup", "metric.reporters", "metadata.recovery.strategy"}
    assert config.enable_metrics_push is False  # honoured (KIP-714), not noted
    assert "every address" in config.noted["client.dns.lookup"]
    assert "Producer.metrics()" in config.noted["metric.reporters"]
    assert "client.dns.lookup" not in config  # no value: nothing reads it
    assert ProducerConfig(BOOT).noted == {}
    assert config.updated({"linger.ms": 7}).noted == config.noted


@pytest.mark.parametrize("key,value,reason,way", [
    ("partitioner.class", "com.acme.RegionPartitioner", "Java class", "'partition' column"),
    ("partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner", "Java class",
     "partitioner=round_robin"),
    ("interceptor.classes", "com.acme.Audit", "interceptors are Java classes", "Spark select"),
    ("key.serializer", "org.apache.kafka.common.serialization.StringSerializer", "keys are bytes here", "keyFormat"),
    ("value.serializer", "io.confluent.kafka.serializers.KafkaAvroSerializer", "values are bytes here", "valueFormat"),
    ("transaction.two.phase.commit.enable", "true", "KIP-939", "exactly-once"),
    ("sasl.oauthbearer.assertion.file", "/etc/assertion.jwt", "jwt-bearer grant", "token.provider"),
])
def test_refused_keys_give_their_own_reason_and_the_way_here(key, value, reason, way):
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BOOT, key: value})
    message = str(info.value)
    assert f"'{key}'" in message and reason in message and way in message
    assert "Unknown configuration" not in message


@pytest.mark.parametrize("key,value", [
    ("partitioner.class", "org.apache.kafka.clients.producer.internals.DefaultPartitioner"),
    ("interceptor.classes", ""),
    ("transaction.two.phase.commit.enable", "false"),
])
def test_a_refused_key_naming_what_happens_here_anyway_is_noted(key, value):
    assert key in ProducerConfig({**BOOT, key: value}).noted


def test_the_consumers_keys_in_a_shared_properties_file_are_noted():
    config = ProducerConfig({**BOOT, "session.timeout.ms": "45000", "group.id": "g", "acks": "all"})
    assert set(config.noted) == {"session.timeout.ms", "group.id"}
    assert "consumer" in config.noted["session.timeout.ms"]
    assert not java_keys.OTHER_CLIENT_KEYS & set(java_keys.JAVA_PRODUCER_KEYS)


def test_a_misspelling_still_gets_did_you_mean():
    for typo, meant in (("compression.zstd.levle", "compression.zstd.level"),
                        ("partitioner.adaptive.partitioning.enabled", "partitioner.adaptive.partitioning.enable"),
                        ("client.dns.lookups", "client.dns.lookup"), ("interceptor.class", "interceptor.classes"),
                        ("session.timeout", "session.timeout.ms")):
        with pytest.raises(ConfigError, match=f"Unknown configuration '{typo}'") as info:
            ProducerConfig({**BOOT, typo: "1"})
        if meant:
            assert f"Did you mean '{meant}'?" in str(info.value)


def test_the_spark_driver_logs_one_line_per_noted_key(caplog):
    from sparkkafka_sink.spark.options import parse_options

    with caplog.at_level(logging.WARNING, logger="sparkkafka_sink.spark.options"):
        parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t", "kafka.client.dns.lookup": "use_all_dns_ips",
                       "kafka.metrics.recording.level": "DEBUG", "kafka.compression.zstd.level": "7"})
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert any(line.startswith("option 'kafka.client.dns.lookup' has no effect") for line in lines)
    assert any(line.startswith("option 'kafka.metrics.recording.level' has no effect") for line in lines)


def test_the_spark_sink_reports_a_refused_key_in_option_names():
    from sparkkafka_sink.spark.options import parse_options
    from sparkkafka_sink.spark.sink_errors import SinkValidationError

    with pytest.raises(SinkValidationError, match="'kafka.partitioner.class'.*Java class") as info:
        parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t",
                       "kafka.partitioner.class": "org.apache.kafka.clients.producer.UniformStickyPartitioner"})
    assert "kafka.partitioner.ignore.keys=true" in str(info.value)


# -- the migration table --------------------------------------------------------------------------
def test_the_migration_table_has_one_row_per_java_key():
    rows = migration_table()
    assert [key for key, *_ in rows] == sorted(java_keys.JAVA_PRODUCER_KEYS)
    assert {status for _, _, status, _ in rows} == {java_keys.HONOURED, java_keys.NOTED, java_keys.REFUSED}
    here = dict((key, (status, text)) for key, _, status, text in rows)
    assert here["interceptor.classes"][0] == java_keys.REFUSED and "Instead:" in here["interceptor.classes"][1]


# -- compression levels (KIP-390) ----------------------------------------------------------------
TEXT = b"".join(b"%d the quick brown fox %d jumps over the lazy dog %x\n" % (i, i * 7 % 113, i * i)
                for i in range(4000))


@pytest.mark.parametrize("ctype,low,high", [(CompressionType.GZIP, 1, 9), (CompressionType.LZ4, 1, 17),
                                            (CompressionType.ZSTD, -5, 19)])
def test_a_level_changes_the_bytes_and_every_level_reads_back(ctype, low, high):
    fast, small = compress(ctype, TEXT, low), compress(ctype, TEXT, high)
    assert len(small) < len(fast)
    assert decompress(ctype, fast) == decompress(ctype, small) == TEXT


def test_kafkas_default_levels():
    assert {LEVELS[c][0]: LEVELS[c][1] for c in LEVELS} == {
        "compression.gzip.level": -1, "compression.lz4.level": 9, "compression.zstd.level": 3}
    config = ProducerConfig(BOOT)
    for key, default, _, _ in LEVELS.values():
        assert config[key] == default == KEYS[key].default
    # the default level writes what the codec's default always wrote (lz4's fast mode, zlib's 6)
    assert compress(CompressionType.LZ4, TEXT, 9) == compress(CompressionType.LZ4, TEXT, None)
    assert compress(CompressionType.GZIP, TEXT, -1) == compress(CompressionType.GZIP, TEXT, 6)


@pytest.mark.parametrize("key,bad", [("compression.gzip.level", 0), ("compression.gzip.level", 10),
                                     ("compression.gzip.level", -2), ("compression.lz4.level", 0),
                                     ("compression.lz4.level", 18), ("compression.zstd.level", 23),
                                     ("compression.zstd.level", -131073)])
def test_levels_outside_javas_ranges_are_refused(key, bad):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        ProducerConfig({**BOOT, key: str(bad)})


# -- adaptive partitioning (KIP-794) -------------------------------------------------------------
def _cluster() -> Cluster:
    """Partitions 0 and 1 led by broker 1, 2 and 3 by broker 2."""
    return Cluster(brokers={1: BrokerNode(1, "127.0.0.1", 9092), 2: BrokerNode(2, "127.0.0.1", 9093)},
                   partitions={"t": {p: PartitionInfo("t", p, 1 if p < 2 else 2) for p in range(4)}})


def _accumulator(availability_timeout_ms: int = 0) -> RecordAccumulator:
    return RecordAccumulator(batch_size=1000, compression_type=0, linger_ms=0, retry_backoff_ms=100,
                             retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=BufferPool(1 << 24),
                             availability_timeout_ms=availability_timeout_ms)


def _sticky_choices(partitioner, switches: int = 2000) -> list[int]:
    """The sticky partition of ``switches`` null-key records of a whole batch each (each switches)."""
    return [partitioner.partition("t", None, 4, [0, 1, 2, 3], 1000) for _ in range(switches)]


def test_adaptive_choice_weighs_by_queue_size():
    rng = random.Random(5)
    picks = [adaptive_choice([0, 1, 2, 3], [4, 0, 0, 0], rng) for _ in range(4000)]
    # weights max + 1 - size: 1, 5, 5, 5 -> partition 0 gets 1/16 of the switches
    assert 0.04 < picks.count(0) / len(picks) < 0.09
    assert adaptive_choice([7], [3]) == 7


def test_the_sticky_partition_avoids_a_partition_whose_queue_grows():
    random.seed(11)
    acc = _accumulator()
    for _ in range(4):  # broker 1 is slow: partition 0 has four batches waiting
        acc.queue_batch(ProducerBatch.prebuilt("t", 0, bytes(100), 1, 0, 0))
    assert acc.queue_sizes("t", [0, 1, 2, 3]) == [4, 0, 0, 0]
    adaptive = _sticky_choices(make_partitioner("murmur2", 1000, load=acc))
    uniform = _sticky_choices(make_partitioner("murmur2", 1000))
    assert adaptive.count(0) / len(adaptive) < 0.1 < 0.2 < uniform.count(0) / len(uniform)


def test_equal_queues_spread_as_without_adaptive_partitioning():
    random.seed(3)
    choices = _sticky_choices(make_partitioner("murmur2", 1000, load=_accumulator()))
    assert all(0.2 < choices.count(p) / len(choices) < 0.3 for p in range(4))


def test_a_broker_that_takes_no_batch_past_the_availability_timeout_gets_none():
    random.seed(7)
    acc = _accumulator(availability_timeout_ms=500)
    cluster = _cluster()
    for partition in (0, 2):  # a batch ready on each broker
        acc.queue_batch(ProducerBatch.prebuilt("t", partition, bytes(100), 1, 0, 0))
    assert acc.ready(cluster, 0).ready_nodes == {1, 2}
    acc.drain(cluster, [1], 1 << 20, 0)  # broker 1 takes its batch; broker 2 (say, paused) does not
    assert acc.ready(cluster, 400).ready_nodes == {2}
    partitioner = make_partitioner("murmur2", 1000, load=acc)
    assert acc.lagging("t", [0, 1, 2, 3]) == set()  # 400 ms: within the timeout
    acc.ready(cluster, 1000)
    assert acc.lagging("t", [0, 1, 2, 3]) == {2, 3}
    assert set(_sticky_choices(partitioner, 200)) == {0, 1}
    acc.drain(cluster, [2], 1 << 20, 1100)  # broker 2 is back
    acc.ready(cluster, 1100)
    assert acc.lagging("t", [0, 1, 2, 3]) == set()
    assert set(_sticky_choices(partitioner, 400)) == {0, 1, 2, 3}


def test_without_the_timeout_no_broker_is_left_out():
    acc = _accumulator(availability_timeout_ms=0)
    acc.queue_batch(ProducerBatch.prebuilt("t", 2, bytes(100), 1, 0, 0))
    acc.ready(_cluster(), 0)
    acc.ready(_cluster(), 1_000_000)
    assert acc.lagging("t", [0, 1, 2, 3]) == set()


def test_the_producer_wires_adaptive_partitioning_to_its_accumulator():
    from sparkkafka_sink.producer.producer import Producer

    with Producer({**BOOT, "partitioner.availability.timeout.ms": "250", "compression.type": "zstd",
                   "compression.zstd.level": "9", "max.block.ms": 1}) as on:
        assert on._partitioner.load is on._accumulator
        assert on._accumulator.availability_timeout_ms == 250
        assert on._accumulator.compression_level == 9
    with Producer({**BOOT, "partitioner.adaptive.partitioning.enable": "false", "max.block.ms": 1}) as off:
        assert off._partitioner.load is None
        assert off._accumulator.compression_level is None  # compression.type none: no level


# -- the OAuth login's settings -----------------------------------------------------------------
def test_refresh_buffer_and_min_period():
    token = OAuthBearerToken("v", expires_at_ms=4_600_000, issued_at_ms=1_000_000)  # an hour
    assert refresh_at(token, 1000, 0.95) == pytest.approx(4420)
    assert refresh_at(token, 1000, 0.95, buffer_s=300) == 4300  # no later than 300 s before expiry
    assert refresh_at(token, 1000, 0.5, buffer_s=300) == 2800
    # a token too short for both the buffer and the minimum period keeps the window
    short = OAuthBearerToken("v", expires_at_ms=1_200_000, issued_at_ms=1_000_000)
    assert refresh_at(short, 1000, 0.8, min_period_s=60, buffer_s=300) == 1160
    assert refresh_at(token, 1000, 0.5, min_period_s=900, buffer_s=300) == 2800
    late = OAuthBearerToken("v", expires_at_ms=4_600_000, issued_at_ms=1_000_000)
    assert refresh_at(late, 4000, 0.5, min_period_s=120, buffer_s=300) == 4120


def test_the_login_keys_reach_the_token_endpoint_client_and_refresher():
    settings = sasl_settings(ProducerConfig({
        **BOOT, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.client.credentials.client.id": "app",
        "sasl.oauthbearer.client.credentials.client.secret": "s3cret",
        "sasl.login.connect.timeout.ms": "1500", "sasl.login.read.timeout.ms": "2500",
        "sasl.login.retry.backoff.ms": "50", "sasl.login.retry.backoff.max.ms": "800",
        "sasl.login.refresh.window.jitter": "0", "sasl.login.refresh.min.period.seconds": "30",
        "sasl.login.refresh.buffer.seconds": "120", "sasl.oauthbearer.sub.claim.name": "client_id",
        "sasl.oauthbearer.scope.claim.name": "scp", "sasl.oauthbearer.header.urlencode": "true"}))
    assert settings is not None and settings.token_source is not None
    source, provider = settings.token_source, settings.token_source._provider
    assert (provider.client_id, provider.connect_timeout_s, provider.read_timeout_s) == ("app", 1.5, 2.5)
    assert (provider.retry_backoff_ms, provider.retry_backoff_max_ms) == (50, 800)
    assert (provider.sub_claim_name, provider.scope_claim_name) == ("client_id", "scp")
    assert (source.jitter, source.min_refresh_period_s, source.refresh_buffer_s) == (0.0, 30.0, 120.0)
    settings.close()


def test_kafka4_and_older_client_id_keys_cannot_both_be_given():
    with pytest.raises(ConfigError, match="give the same setting"):
        sasl_settings(ProducerConfig({
            **BOOT, "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            "sasl.oauthbearer.client.id": "a", "sasl.oauthbearer.client.credentials.client.id": "b",
            "sasl.oauthbearer.client.secret": "s"}))


def test_a_config_with_noted_keys_pickles():
    """The Spark plan carries the producer config to every task."""
    import pickle

    config = ProducerConfig({**BOOT, "client.dns.lookup": "use_all_dns_ips", "compression.lz4.level": "12"})
    again = pickle.loads(pickle.dumps(config))
    assert again.noted == config.noted and again["compression.lz4.level"] == 12
