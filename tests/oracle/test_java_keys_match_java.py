"""``producer/java_keys.py`` lists every key of the Java producer: kafka-clients itself
(``ProducerConfig.configDef()`` of 3.9 and of the 4.x the brokers run) is asked for its keys,
and for the defaults and ranges of the keys this producer took over."""

from __future__ import annotations

import subprocess

import pytest

from sparkkafka_sink.producer import java_keys
from sparkkafka_sink.producer.config import KEYS
from sparkkafka_sink.record.compression import LEVELS
from sparkkafka_sink.testing.apache_kafka import KAFKA_VERSION, resolve_kafka

from .support import JAVA_SOURCES, JVM_OPTS, needs_java_oracle

pytestmark = needs_java_oracle

#: the 3.x line's last release, beside the 4.x the tests run
VERSIONS = ("3.9.1", KAFKA_VERSION)


def java_client_keys(version: str, tmp_path) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """The producer's keys -> (default, validator) as kafka-clients ``version`` declares them,
    and the consumer's and admin client's keys the producer lacks."""
    out, others = tmp_path / f"keys-{version}.tsv", tmp_path / f"others-{version}.txt"
    lib = resolve_kafka(version)
    subprocess.run(["java", *JVM_OPTS, "-cp", f"{lib}/*", str(JAVA_SOURCES / "ProducerKeys.java"), str(out),
                    str(others)], check=True, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    return ({name: (default, validator) for name, default, validator in rows},
            set(others.read_text(encoding="utf-8").split()))


@pytest.fixture(scope="module")
def java_clients(tmp_path_factory) -> dict[str, tuple[dict[str, tuple[str, str]], set[str]]]:
    tmp = tmp_path_factory.mktemp("java-keys")
    return {v: java_client_keys(v, tmp) for v in VERSIONS}


@pytest.fixture(scope="module")
def java_keys_by_version(java_clients) -> dict[str, dict[str, tuple[str, str]]]:
    return {v: producer for v, (producer, _) in java_clients.items()}


def test_the_other_clients_keys_are_noted(java_clients):
    """A properties file shared with a consumer (Confluent Cloud's has session.timeout.ms) carries over."""
    for version, (_, others) in java_clients.items():
        missing = sorted(others - java_keys.OTHER_CLIENT_KEYS - set(KEYS) - set(java_keys.JAVA_PRODUCER_KEYS))
        assert not missing, f"kafka-clients {version}'s consumer/admin keys missing from OTHER_CLIENT_KEYS: {missing}"
    assert java_keys.OTHER_CLIENT_KEYS == (set().union(*(o for _, o in java_clients.values())) - set(KEYS)
                                           - set(java_keys.JAVA_PRODUCER_KEYS))


def test_every_key_of_the_java_producer_is_listed(java_keys_by_version):
    for version, keys in java_keys_by_version.items():
        missing = sorted(set(keys) - set(java_keys.JAVA_PRODUCER_KEYS))
        assert not missing, f"kafka-clients {version} has keys producer/java_keys.py lacks: {missing}"
        line = "3.9" if version.startswith("3.") else "4.x"
        listed = {k for k, lines in java_keys.JAVA_PRODUCER_KEYS.items() if line in lines}
        assert listed == set(keys), f"kafka-clients {version}: the lines listed for its keys differ"


def test_the_compression_levels_have_javas_defaults_and_ranges(java_keys_by_version):
    for keys in java_keys_by_version.values():
        for key, default, low, high in LEVELS.values():
            java_default, validator = keys[key]
            assert int(java_default) == default == KEYS[key].default
            assert f"[{low},...,{high}]" in validator


@pytest.mark.parametrize("key", ["partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms",
                                 "partitioner.ignore.keys", "sasl.login.retry.backoff.ms",
                                 "sasl.login.retry.backoff.max.ms", "sasl.login.refresh.buffer.seconds",
                                 "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.jitter",
                                 "sasl.login.refresh.window.factor", "sasl.oauthbearer.sub.claim.name",
                                 "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.header.urlencode"])
def test_the_keys_taken_over_have_javas_defaults(java_keys_by_version, key):
    java_default = java_keys_by_version[KAFKA_VERSION][key][0]
    ours = KEYS[key].default
    assert java_default == (str(ours).lower() if isinstance(ours, bool) else str(ours))
