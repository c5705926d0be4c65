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
  uses it (no idle JVM for the rest of the session).  Skipped without java and mvn.
* ``secured_topic`` factory: a new topic (created over PLAINTEXT) on ``secured_kafka``.
* ``confluent_config(listener, mechanism=None, **kw)``: confluent-kafka settings for a listener
  (:func:`~sparkkafka_sink.testing.security.librdkafka_config` bound to ``secured_kafka``).
* ``token_endpoint`` (function): a fresh running
  :class:`~sparkkafka_sink.testing.security.TokenEndpoint` (client ``sparkkafka-client`` /
  ``sparkkafka-client-secret``).
"""

from __future__ import annotations

import functools
import re
import sys
import uuid
from typing import Callable, Optional

import pytest

from sparkkafka_sink.testing.apache_kafka import ApacheKafka, java_and_maven_available
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.security import (
    BrokerSecurity, TestPki, TokenEndpoint, librdkafka_config)

_secured: dict = {"cluster": None, "last_user": None}


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> TestPki:
    return TestPki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def secured_kafka(pki):
    if not java_and_maven_available():
        pytest.skip("the secured Apache Kafka node needs java and mvn on PATH (Kafka runs from its "
                    "Maven jars)")
    cluster = ApacheKafka(nodes=1, security=BrokerSecurity(pki, authorizer=True)).start()
    _secured["cluster"] = cluster
    print(f"\n[secured apache kafka {cluster.version}: 1 node, listeners "
          f"{', '.join(cluster.listener_names)}, up in {cluster.startup_seconds:.1f} s]",
          file=sys.stderr)
    try:
        yield cluster
    finally:
        _secured["cluster"] = None
        cluster.close()


def pytest_collection_finish(session):
    users = [it for it in session.items if "secured_kafka" in getattr(it, "fixturenames", ())]
    _secured["last_user"] = users[-1].nodeid if users else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    # the last test that uses the node has finished (and its fixtures are torn down): stop the
    # JVM now rather than at the end of the session; the fixture's own close() is then a no-op
    cluster = _secured["cluster"]
    if cluster is not None and item.nodeid == _secured["last_user"]:
        cluster.close()
        _secured["cluster"] = None
        print("\n[secured apache kafka stopped after the last test that uses it]", file=sys.stderr)


@pytest.fixture
def secured_topic(secured_kafka, request) -> Callable[..., str]:
    """``secured_topic(partitions=1, name=None) -> name``: a new topic on ``secured_kafka``."""
    counter = iter(range(1, 1 << 30))

    def make(partitions: int = 1, name: Optional[str] = None) -> str:
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[-40:] or "t"
            name = f"{stem}-{next(counter)}-{uuid.uuid4().hex[:6]}"
        create_topics(secured_kafka.bootstrap(), {name: partitions}, timeout=30)
        return name

    return make


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
