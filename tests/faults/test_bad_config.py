"""Configuration-level bad input: every option is checked against its allowed range (the Java
producer's validators), conflicting settings are rejected as the Java client rejects them, and
a rejected configuration starts nothing (no Sender thread, no socket)."""

from __future__ import annotations

import threading

import pytest

from sparkkafka_sink import Producer
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.producer.config import INT_MAX, KEYS, LONG_MAX, ProducerConfig

from .helpers import sender_threads

BS = {"bootstrap.servers": "127.0.0.1:9092"}

# key -> (smallest accepted, largest accepted, rejected values); the Java client's ranges:
# ConfigDef validators atLeast(0) / atLeast(1) / between(0, Integer.MAX_VALUE), INT vs LONG.
RANGES = {
    "linger.ms": (0, INT_MAX, [-1, INT_MAX + 1]),
    "batch.size": (0, INT_MAX, [-1, INT_MAX + 1]),
    "buffer.memory": (0, LONG_MAX, [-1, LONG_MAX + 1]),
    "max.block.ms": (0, LONG_MAX, [-1, LONG_MAX + 1]),
    "max.request.size": (0, INT_MAX, [-1, INT_MAX + 1]),
    "retries": (0, INT_MAX, [-1, INT_MAX + 1]),
    "retry.backoff.ms": (0, LONG_MAX, [-1]),
    "retry.backoff.max.ms": (0, LONG_MAX, [-1]),
    "delivery.timeout.ms": (30005, INT_MAX, [-1, INT_MAX + 1]),
    "request.timeout.ms": (0, 100000, [-1, INT_MAX + 1]),
    "max.in.flight.requests.per.connection": (1, 5, [0, -1, INT_MAX + 1]),
    "reconnect.backoff.ms": (0, LONG_MAX, [-1]),
    "reconnect.backoff.max.ms": (0, LONG_MAX, [-1]),
    "socket.connection.setup.timeout.ms": (0, LONG_MAX, [-1]),
    "socket.connection.setup.timeout.max.ms": (0, LONG_MAX, [-1]),
    "connections.max.idle.ms": (-1, LONG_MAX, [-2]),
    "metadata.max.age.ms": (0, LONG_MAX, [-1]),
    "metadata.max.idle.ms": (5000, LONG_MAX, [4999, -1]),
    "send.buffer.bytes": (-1, INT_MAX, [-2]),
    "receive.buffer.bytes": (-1, INT_MAX, [-2]),
    "compression.lz4.level": (1, 17, [0, 18]),
    "compression.zstd.level": (-131072, 22, [-131073, 23]),
    "partitioner.availability.timeout.ms": (0, LONG_MAX, [-1]),
    "sasl.login.connect.timeout.ms": (0, INT_MAX, [-1, INT_MAX + 1]),
    "sasl.login.read.timeout.ms": (0, INT_MAX, [-1, INT_MAX + 1]),
    "sasl.login.retry.backoff.ms": (0, LONG_MAX, [-1]),
    "sasl.login.retry.backoff.max.ms": (0, LONG_MAX, [-1]),
    "sasl.login.refresh.buffer.seconds": (0, 3600, [-1, 3601]),
    "sasl.login.refresh.min.period.seconds": (0, 900, [-1, 901]),
}
CHOICES = {
    "acks": (["all", "ALL", "-1", -1, "0", 0, "1", 1], ["2", 2, "none", "leader", True, 1.5]),
    "compression.type": (["none", "gzip", "snappy", "lz4", "zstd", "ZSTD"], ["brotli", "", 1, None.__class__]),
    "enable.idempotence": ([True, False, "true", "FALSE"], ["yes", 1, 0, "on"]),
    "enable.metrics.push": ([True, False, "false", "TRUE"], ["yes", 1, 0, "on"]),
    "allow.auto.create.topics": ([True, "false"], ["no", 1]),
    "partitioner.ignore.keys": ([False, "true"], ["maybe", 0]),
    "partitioner": (["murmur2", "round_robin", "random", lambda t, k, n: 0], ["sticky", 3]),
    "security.protocol": (["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "sasl_ssl", "plaintext "], ["TLS", "SASL", "", 1]),
    "sasl.mechanism": (["PLAIN", "scram-sha-512", "GSSAPI ", "AWS_MSK_IAM"], ["CRAM-MD5", "", 12345]),
    "sasl.login.refresh.window.factor": ([0.5, "0.8", 1, "1.0"], [0.4, "1.1", "soon", True]),
    "sasl.login.refresh.window.jitter": ([0, "0.05", 0.25], [-0.1, "0.26", "soon", True]),
    "compression.gzip.level": ([-1, "1", 9, "-1"], [0, 10, -2, "soon", True]),
    "partitioner.adaptive.partitioning.enable": ([True, "false"], ["maybe", 0]),
    "sasl.oauthbearer.header.urlencode": ([False, "TRUE"], ["maybe", 1]),
    "transaction.timeout.ms": ([1, "60000", 900000], [0, -1, "soon", True]),
    "client.id": (["x", ""], [5, b"x"]),
}
NOT_NUMBERS = ["soon", "1.5", 1.5, True, [1], b"5"]
#: security options read as text (their meaning is checked when the producer builds its TLS
#: context and SASL settings: tests/security)
TEXT_KEYS = sorted(k for k in KEYS if (k.startswith("ssl.") or k.startswith("sasl."))
                   and k not in CHOICES and k not in RANGES and k != "sasl.oauthbearer.token.provider")


def _conf(key, value):
    conf = dict(BS, **{key: value})
    if key in ("acks", "retries", "max.in.flight.requests.per.connection"):
        conf["enable.idempotence"] = False  # keep the range check apart from the combination check
    if key == "batch.size":
        conf["buffer.memory"] = LONG_MAX  # keep apart from the buffer.memory >= batch.size check
    if key == "buffer.memory":
        conf["batch.size"] = 0
    return conf


def test_every_key_has_a_range_or_choice_test():
    covered = set(RANGES) | set(CHOICES) | set(TEXT_KEYS) | {"bootstrap.servers", "transactional.id",
                                                            "sasl.oauthbearer.token.provider"}
    assert covered == set(KEYS), set(KEYS) ^ covered


@pytest.mark.parametrize("key", sorted(RANGES))
def test_numeric_option_accepts_its_whole_range_and_nothing_else(key):
    lo, hi, bad = RANGES[key]
    for ok in (lo, hi, str(lo), f" {hi} "):
        ProducerConfig(_conf(key, ok))
    for value in bad + NOT_NUMBERS:
        with pytest.raises(ConfigError) as info:
            ProducerConfig(_conf(key, value))
        msg = str(info.value)
        assert f"'{key}'" in msg and repr(value) in msg and "expected" in msg, msg


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_choice_option_accepts_only_its_values(key):
    good, bad = CHOICES[key]
    for ok in good:
        ProducerConfig(_conf(key, ok))
    for value in bad:
        with pytest.raises(ConfigError, match=rf"'{key}'.*expected"):
            ProducerConfig(_conf(key, value))


@pytest.mark.parametrize("key", TEXT_KEYS)
def test_security_text_option_must_be_a_string_and_a_secret_is_never_echoed(key):
    ProducerConfig(_conf(key, "some text"))
    with pytest.raises(ConfigError, match=rf"'{key}'.*expected a string") as info:
        ProducerConfig(_conf(key, 12345))
    if any(word in key for word in ("password", "secret", "jaas", "keystore.key")):
        assert "12345" not in str(info.value)


def test_token_provider_is_a_callable_or_an_import_string():
    ProducerConfig(_conf("sasl.oauthbearer.token.provider", lambda: "t"))
    ProducerConfig(_conf("sasl.oauthbearer.token.provider", "module:function"))
    with pytest.raises(ConfigError, match="'sasl.oauthbearer.token.provider'.*callable"):
        ProducerConfig(_conf("sasl.oauthbearer.token.provider", 5))


def test_config_repr_hides_secrets():
    config = ProducerConfig(dict(BS, **{"sasl.password": "pw-123", "sasl.jaas.config": "x password=\"jaas-456\";",
                                        "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----key-789",
                                        "sasl.oauthbearer.client.secret": "cs-000", "client.id": "visible"}))
    text = repr(config)
    for secret in ("pw-123", "jaas-456", "key-789", "cs-000"):
        assert secret not in text
    assert "visible" in text and "redacted" in text


@pytest.mark.parametrize("conf, fragment", [
    ({"enable.idempotence": True, "acks": 1}, "acks must be 'all' (got 1)"),
    ({"enable.idempotence": True, "acks": "0"}, "acks must be 'all' (got 0)"),
    ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": 6},
     "max.in.flight.requests.per.connection must be <= 5 (got 6)"),
    ({"enable.idempotence": True, "retries": 0}, "retries must be > 0"),
    ({"enable.idempotence": True, "acks": 1, "max.in.flight.requests.per.connection": 10},
     "acks must be 'all' (got 1); max.in.flight.requests.per.connection must be <= 5 (got 10)"),
    ({"delivery.timeout.ms": 1000, "request.timeout.ms": 2000, "linger.ms": 5},
     "delivery.timeout.ms (1000) must be >= linger.ms + request.timeout.ms (5 + 2000 = 2005)"),
    ({"buffer.memory": 1000, "batch.size": 16384}, "buffer.memory (1000) must be >= batch.size (16384)"),
    ({"transactional.id": "tx", "acks": 1}, "transactional.id needs idempotence"),
])
def test_conflicting_settings_are_rejected_like_the_java_client(conf, fragment):
    threads = set(sender_threads())
    with pytest.raises(ConfigError) as info:
        Producer(dict(BS, **conf))
    assert fragment in str(info.value), str(info.value)
    assert set(sender_threads()) == threads, "a rejected configuration started a Sender thread"


@pytest.mark.parametrize("conf", [{"acks": 1}, {"acks": 0}, {"max.in.flight.requests.per.connection": 6},
                                  {"retries": 0}])
def test_default_idempotence_yields_to_explicit_settings_like_java(conf):
    c = ProducerConfig(dict(BS, **conf))
    assert c["enable.idempotence"] is False
    for k, v in conf.items():
        assert c[k] == v


def test_default_delivery_timeout_grows_to_cover_linger_and_request_timeout():
    c = ProducerConfig(dict(BS, **{"request.timeout.ms": 150000, "linger.ms": 100}))
    assert c["delivery.timeout.ms"] == 150100


@pytest.mark.parametrize("value", ["", "host", "host:", ":9092", "host:0", "host:65536", "host:port", 5, None])
def test_bad_bootstrap_servers(value):
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        Producer({"bootstrap.servers": value})


def test_unknown_keys_and_typos_are_rejected_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"Did you mean 'delivery.timeout.ms'\?"):
        Producer(dict(BS, **{"delivery.timeout": 1000}))
    with pytest.raises(ConfigError, match="Unknown configuration 'key.serialiser'.*Did you mean"):
        Producer(dict(BS, **{"key.serialiser": "x"}))
    # a Java producer key this one refuses says why (producer/java_keys.py), not "unknown"
    with pytest.raises(ConfigError, match="'key.serializer' of the Java producer is not supported: keys are bytes"):
        Producer(dict(BS, **{"key.serializer": "x"}))


def test_config_error_is_also_a_value_error_and_starts_nothing():
    before = threading.active_count()
    with pytest.raises(ValueError):
        Producer(dict(BS, **{"linger.ms": -5}))
    assert threading.active_count() == before
