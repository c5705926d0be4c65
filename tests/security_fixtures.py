"""TLS and SASL test fixtures (issue 11), a plugin of the root conftest so that the security
tests and the Spark tests (tests/spark/test_spark_security.py) share one secured node.

* ``pki`` (session): a :class:`~sparkkafka_sink.testing.security.TestPki` (test CA, broker,
  wrong-host, expired, unknown-CA and client certificates; PEM, PKCS#12 and JKS stores).  No
  broker needed.
* ``secured_kafka`` (session): one Apache Kafka node (Maven jars) with every secured listener
  of :data:`~sparkkafka_sink.testing.security.LISTENERS` beside PLAINTEXT and ACLs on (only the
  topics a test puts ACLs on are restricted; PLAINTEXT is a super user); an
  :class:`~sparkkafka_sink.testing.apache_kafka.ApacheKafka` whose ``security`` is the
  :class:`~sparkkafka_sink.testing.security.BrokerSecurity` (users, passwords, PKI).  Started
  the first time a test asks for it, and stopped right after the last test of the run that
  uses it (``session_resources``: no idle JVM for the rest of the session).  Skipped without
  java and mvn.
* ``secured_topic`` factory: a new topic (created over PLAINTEXT) on ``secured_kafka``.
* ``acl_topics``: topics ``writable``, ``describe_only`` and ``hidden`` with ACLs for
  :data:`CAROL` (the producer's and the sink's ACL tests share the cases).
* ``confluent_config(listener, mechanism=None, **kw)``: confluent-kafka settings for a listener
  (:func:`~sparkkafka_sink.testing.security.librdkafka_config` bound to ``secured_kafka``).
* ``token_endpoint`` (function): a fresh running
  :class:`~sparkkafka_sink.testing.security.TokenEndpoint` (client ``sparkkafka-client`` /
  ``sparkkafka-client-secret``).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable

import pytest
from broker_kinds import running_apache_kafka
from session_resources import stop_after_last_use

from sparkkafka_sink.testing.apache_kafka import java_and_maven_available
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.security import BrokerSecurity, TestPki, TokenEndpoint, librdkafka_config

#: the PLAIN user the ACL tests write as (``carol``/``carol-secret``: PLAIN only)
CAROL = "User:carol"


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> TestPki:
    return TestPki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def secured_kafka(pki):
    if not java_and_maven_available():
        pytest.skip("the secured Apache Kafka node needs java and mvn on PATH (Kafka runs from its "
                    "Maven jars)")
    with running_apache_kafka(" secured", nodes=1, security=BrokerSecurity(pki, authorizer=True)) as cluster:
        # the cluster's own close() on leaving is then a no-op
        stop_after_last_use("secured_kafka", cluster.close,
                            "[secured apache kafka stopped after the last test that uses it]")
        yield cluster


@pytest.fixture
def secured_topic(secured_kafka, request) -> Callable[..., str]:
    """``secured_topic(partitions=1, name=None) -> name``: a new topic on ``secured_kafka``."""
    counter = iter(range(1, 1 << 30))

    def make(partitions: int = 1, name: str | None = None) -> str:
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[-40:] or "t"
            name = f"{stem}-{next(counter)}-{uuid.uuid4().hex[:6]}"
        create_topics(secured_kafka.bootstrap(), {name: partitions}, timeout=30)
        return name

    return make


@pytest.fixture
def acl_topics(secured_kafka, secured_topic) -> dict:
    """``{"writable": ..., "describe_only": ..., "hidden": ...}``: carol may write the first, may
    describe (and read) but not write the second, and may not see the third (it has an ACL, for
    alice only, so it is not open to everyone)."""
    from kafka_helpers import allow_on_topic  # confluent-kafka: only when a test asks

    topics = {kind: secured_topic(partitions=2) for kind in ("writable", "describe_only", "hidden")}
    bootstrap = secured_kafka.bootstrap()
    allow_on_topic(bootstrap, topics["writable"], CAROL, ["WRITE", "DESCRIBE"])
    allow_on_topic(bootstrap, topics["describe_only"], CAROL, ["DESCRIBE", "READ"])
    allow_on_topic(bootstrap, topics["hidden"], "User:alice", ["WRITE", "DESCRIBE"])
    return topics


@pytest.fixture
def confluent_config(secured_kafka) -> Callable[..., dict]:
    """``confluent_config(listener, mechanism=None, *, user=None, password=None,
    client_cert=None, verify_hostname=True, ca=None, token_endpoint=None, **settings)``."""
    return functools.partial(librdkafka_config, secured_kafka)


@pytest.fixture
def token_endpoint():
    endpoint = TokenEndpoint().start()
    try:
        yield endpoint
    finally:
        endpoint.close()
