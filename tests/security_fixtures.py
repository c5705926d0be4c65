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
* ``cloud_kafka`` (session): one Apache Kafka node whose listeners (SASL_SSL) check sign-ins as
  the cloud services do (tests/security/java): ``MSK`` Amazon MSK's IAM in both forms
  (``AWS_MSK_IAM`` and OAUTHBEARER; SigV4 recomputed by the broker), ``GCP`` Google Managed
  Kafka's token, ``AZURE`` Event Hubs' connection string over PLAIN; a :class:`CloudSignIn`;
  stopped after its last test.
* ``kerberos_kafka`` (session): an MIT KDC of the test's own realm (Debian's krb5-kdc) and one
  Apache Kafka node with GSSAPI listeners ``KERBEROS`` (SASL_PLAINTEXT) and ``KERBEROS_SSL``
  (SASL_SSL), advertised as ``localhost`` (service principal ``kafka/localhost``); a
  :class:`KerberosSetup`.  Skipped without the KDC programs or python-gssapi.
* ``token_endpoint`` (function): a fresh running
  :class:`~sparkkafka_sink.testing.security.TokenEndpoint` (client ``sparkkafka-client`` /
  ``sparkkafka-client-secret``).
"""

from __future__ import annotations

import functools
import re
import secrets
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from broker_kinds import running_apache_kafka
from session_resources import stop_after_last_use

import sparkkafka_sink.testing
from sparkkafka_sink.testing.apache_kafka import (
    KAFKA_VERSION,
    java_and_maven_available,
    resolve_kafka,
    resolve_maven_artifacts,
)
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.kdc import Kdc, kdc_available
from sparkkafka_sink.testing.security import BrokerSecurity, TestPki, TokenEndpoint, librdkafka_config
from sparkkafka_sink.testing.security.broker_security import Listener
from sparkkafka_sink.testing.security.google_endpoint import GoogleTokenEndpoint

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


# -- the cloud services' sign-ins, verified by the broker as the services verify them -----------
JAVA_SOURCES = Path(__file__).parent / "security" / "java"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class CloudSignIn:
    """The node and what its cloud listeners accept: ``MSK`` -- the region and the one AWS key
    pair its verifier knows (AWS_MSK_IAM signs the broker's host name: 127.0.0.1 or localhost);
    ``GCP`` -- tokens of the service account whose access tokens ``google`` (the stand-in for
    Google's token endpoint) issues; ``AZURE`` -- PLAIN as Event Hubs: ``$ConnectionString`` and
    ``connection_string``."""

    cluster: object
    region: str
    access_key_id: str
    secret_access_key: str
    #: the broker's verifiers append each refusal and its reason here
    refusals_file: Path
    google: object
    connection_string: str

    def refusals(self) -> str:
        return self.refusals_file.read_text() if self.refusals_file.exists() else ""

    def bootstrap(self, listener: str = "MSK") -> str:
        return self.cluster.bootstrap(listener)  # type: ignore[attr-defined]

    @property
    def ca(self) -> str:
        return str(self.cluster.security.pki.ca_cert_path)  # type: ignore[attr-defined]


def compile_broker_classes(work: Path) -> Path:
    """tests/security/java compiled against the broker's own jars: a class directory."""
    classes = work / "classes"
    lib = resolve_kafka(KAFKA_VERSION)
    subprocess.run(["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes),
                    *map(str, sorted(JAVA_SOURCES.glob("*.java")))], check=True)
    return classes


@pytest.fixture(scope="session")
def cloud_kafka(pki, tmp_path_factory):
    if not java_and_maven_available():
        pytest.skip("the cloud sign-in node needs java and mvn on PATH (Kafka runs from its Maven jars)")
    region, key, secret = "eu-west-1", "AKIDSPARKKAFKATEST", secrets.token_urlsafe(30)
    work = tmp_path_factory.mktemp("cloud-sign-in")
    refusals = work / "refusals.txt"
    keys = f'{key}:{secret}" refusals="{refusals}'  # (two JAAS options)
    msk = Listener("MSK", "SASL_SSL", "broker", sasl=True, mechanisms=("AWS_MSK_IAM", "OAUTHBEARER"), properties=(
        ("aws_msk_iam.sasl.jaas.config",
         f'{_PLAIN_MODULE} required region="{region}" hosts="127.0.0.1,localhost" keys="{keys}";'),
        ("aws_msk_iam.sasl.server.callback.handler.class", "MskIamSaslServer$Handler"),
        ("oauthbearer.sasl.jaas.config",
         f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="broker" region="{region}" keys="{keys}";'),
        ("oauthbearer.sasl.server.callback.handler.class", "MskOAuthValidator"),
    ))
    google_secret = secrets.token_urlsafe(24)
    gcp = Listener("GCP", "SASL_SSL", "broker", sasl=True, mechanisms=("OAUTHBEARER",), properties=(
        ("oauthbearer.sasl.jaas.config", f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="broker" '
                                         f'secret="{google_secret}" refusals="{refusals}";'),
        ("oauthbearer.sasl.server.callback.handler.class", "GoogleTokenValidator"),
    ))
    connection_string = (f"Endpoint=sb://sparkkafka-test.servicebus.windows.net/;SharedAccessKeyName=writer;"
                         f"SharedAccessKey={secrets.token_urlsafe(24)}")
    azure = Listener("AZURE", "SASL_SSL", "broker", sasl=True, mechanisms=("PLAIN",), properties=(
        ("plain.sasl.jaas.config", f'{_PLAIN_MODULE} required connectionString="{connection_string}" '
                                   f'refusals="{refusals}";'),
        ("plain.sasl.server.callback.handler.class", "EventHubsPlainHandler"),
    ))
    classes = compile_broker_classes(work)
    google = GoogleTokenEndpoint(google_secret).start()
    try:
        with running_apache_kafka(" cloud sign-in", nodes=1, classpath=[classes],
                                  security=BrokerSecurity(pki, listeners=(), custom=(msk, gcp, azure)),
                                  broker_config={"security.providers": "MskIamSaslServer$Creator"}) as cluster:
            stop_after_last_use("cloud_kafka", cluster.close, "[cloud sign-in apache kafka stopped after its last test]")
            yield CloudSignIn(cluster, region, key, secret, refusals, google, connection_string)
    finally:
        google.close()


@pytest.fixture(scope="session")
def java_msk_client(tmp_path_factory) -> Callable[..., subprocess.CompletedProcess]:
    """``java_msk_client(properties_file, topic, count, env)``: Java's KafkaProducer with AWS's
    aws-msk-iam-auth (Maven, cached) sending ``count`` values; the finished process."""
    if not java_and_maven_available():
        pytest.skip("the Java MSK client needs java and mvn on PATH")
    pom = (Path(sparkkafka_sink.testing.__file__).with_name("maven") / "aws-msk-iam-client.pom.xml").read_text()
    lib = resolve_maven_artifacts(f"aws-msk-iam-client-{KAFKA_VERSION}", pom.replace("@KAFKA_VERSION@", KAFKA_VERSION))
    classes = tmp_path_factory.mktemp("java-msk-client")
    subprocess.run(["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes),
                    str(JAVA_SOURCES / "client" / "JavaProduce.java")], check=True)

    def run(properties: Path, topic: str, count: int, env: dict) -> subprocess.CompletedProcess:
        return subprocess.run(["java", "-cp", f"{classes}:{lib}/*", "JavaProduce", str(properties), topic, str(count)],
                              env=env, capture_output=True, text=True, timeout=120)

    return run


# -- Kerberos -----------------------------------------------------------------------------------------
_KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


@dataclass(frozen=True)
class KerberosSetup:
    """The KDC, the node, and the client principal ``alice`` with her keytab."""

    kdc: Kdc
    cluster: object
    alice_keytab: Path

    def bootstrap(self, listener: str) -> str:
        return self.cluster.bootstrap(listener, host="localhost")  # type: ignore[attr-defined]

    def keytab_jaas(self, keytab: Path | str | None = None, principal: str = "alice") -> str:
        return (f'{_KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{keytab or self.alice_keytab}" '
                f'principal="{self.kdc.principal(principal)}";')


#: why the Kerberos tests skip without python-gssapi (it is in no extra but its own)
GSSAPI_MISSING = ("python-gssapi is not installed: it builds against the Kerberos development files "
                  "(Debian: apt-get install libkrb5-dev; RHEL: krb5-devel) with a C compiler, then "
                  "pip install -e '.[gssapi]' --config-settings editable_mode=compat")


@pytest.fixture(scope="session")
def kerberos_kafka(pki, tmp_path_factory):
    if not java_and_maven_available():
        pytest.skip("the Kerberos node needs java and mvn on PATH (Kafka runs from its Maven jars)")
    if not kdc_available():
        pytest.skip("an MIT KDC is not installed (Debian: apt-get install krb5-kdc krb5-admin-server krb5-user)")
    pytest.importorskip("gssapi", reason=GSSAPI_MISSING)
    kdc = Kdc(tmp_path_factory.mktemp("kdc")).start()
    try:
        kdc.add_principal("kafka/localhost")
        broker_keytab = kdc.keytab("kafka/localhost")
        kdc.add_principal("alice")
        alice = kdc.keytab("alice")
        jaas = (f'{_KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{broker_keytab}" '
                f'principal="{kdc.principal("kafka/localhost")}";')
        listeners = [Listener(name, protocol, cert, sasl=True, mechanisms=("GSSAPI",), host="localhost",
                              properties=(("gssapi.sasl.jaas.config", jaas),))
                     for name, protocol, cert in (("KERBEROS", "SASL_PLAINTEXT", None),
                                                  ("KERBEROS_SSL", "SASL_SSL", "broker"))]
        with running_apache_kafka(" kerberos", nodes=1, jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
                                  security=BrokerSecurity(pki, listeners=(), custom=listeners),
                                  broker_config={"sasl.kerberos.service.name": "kafka"}) as cluster:
            stop_after_last_use("kerberos_kafka", cluster.close, "[kerberos apache kafka stopped after its last test]")
            yield KerberosSetup(kdc, cluster, alice)
    finally:
        kdc.close()
