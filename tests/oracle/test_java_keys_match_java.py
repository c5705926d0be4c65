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


def java_producer_keys(version: str, tmp_path) -> dict[str, tuple[str, str]]:
    """key -> (default, validator) as kafka-clients ``version`` declares them."""
    out = tmp_path / f"keys-{version}.tsv"
    lib = resolve_kafka(version)
    subprocess.run(["java", *JVM_OPTS, "-cp", f"{lib}/*", str(JAVA_SOURCES / "ProducerKeys.java"), str(out)],
                   check=True, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    return {name: (default, validator) for name, default, validator in rows}


@pytest.fixture(scope="module")
def java_keys_by_version(tmp_path_factory) -> dict[str, dict[str, tuple[str, str]]]:
    tmp = tmp_path_factory.mktemp("java-keys")
    return {v: java_producer_keys(v, tmp) for v in VERSIONS}


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
