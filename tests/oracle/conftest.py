"""Fixtures of the Java-oracle tests: the Kafka jars and the compiled Java programs.

Every test module carries ``support.needs_java_oracle`` (skips without java, javac and mvn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkkafka_sink.testing.apache_kafka import KAFKA_VERSION, resolve_kafka

from .support import JavaPrograms


@pytest.fixture(scope="session")
def kafka_lib() -> Path:
    """The jars of Apache Kafka KAFKA_VERSION: the same the ``apache_kafka`` broker runs from."""
    return resolve_kafka(KAFKA_VERSION)


@pytest.fixture(scope="session")
def java(kafka_lib, tmp_path_factory) -> JavaPrograms:
    """tests/oracle/java/*.java compiled once against kafka-clients (and its dependencies)."""
    return JavaPrograms.compile(kafka_lib, tmp_path_factory.mktemp("java-oracle"))


@pytest.fixture(scope="session")
def oracle_broker(apache_kafka, kafka_lib):
    """The session's Apache Kafka node, checked to be the version the Java programs use."""
    assert apache_kafka.version == KAFKA_VERSION and Path(apache_kafka.lib) == kafka_lib
    return apache_kafka
