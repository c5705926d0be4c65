"""The secured Apache Kafka fixture proves itself with confluent-kafka (librdkafka), independent of
our producer: every listener and SASL mechanism carries records both ways, and what must fail
(no client certificate on MTLS, a certificate for another host, an expired or unknown-CA
certificate, a wrong password) fails.  Also the test PKI's files and the token endpoint."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from sparkkafka_sink.testing.security import (
    HOST,
    LISTENERS,
    OAUTH_CLIENT_ID,
    OAUTH_CLIENT_SECRET,
    SASL_MECHANISMS,
    TestPki,
    sasl_probe,
    unsecured_jwt,
)

#: fail fast: nothing here should take long on a local broker
_FAST = {"socket.timeout.ms": 5000, "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
         "message.timeout.ms": 15000, "logger": logging.getLogger("rdkafka.secured-fixture")}


def round_trip(conf: dict, topic: str, count: int = 3, timeout: float = 15.0) -> None:
    """Produce ``count`` records with ``conf`` and read them back (assign(), CRCs checked)."""
    errors: list[object] = []
    sent = [(f"k{i}".encode(), f"value {i} {uuid.uuid4().hex}".encode()) for i in range(count)]
    delivered = []
    producer = Producer({**conf, **_FAST, "error_cb": errors.append, "acks": "all"})
    for key, value in sent:
        producer.produce(topic, value=value, key=key,
                         on_delivery=lambda err, msg: delivered.append((err, msg)))
    left = producer.flush(timeout)
    assert left == 0, f"{left} records not delivered within {timeout} s; errors: {errors}"
    assert [err for err, _ in delivered if err is not None] == []
    assert len(delivered) == count

    consumer = Consumer({**conf, **{k: v for k, v in _FAST.items() if k != "message.timeout.ms"},
                         "group.id": f"fixture-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "check.crcs": True, "error_cb": errors.append})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert got == sent, f"read {len(got)} of {count} records; errors: {errors}"


def connect_fails(conf: dict, timeout: float = 10.0) -> str:
    """The client must report a connection or authentication error (error_cb) within
    ``timeout`` and know no broker; returns the errors' text."""
    errors: list[object] = []
    producer = Producer({**conf, **_FAST, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, f"no error reported within {timeout} s"
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=0.5)
    return " | ".join(str(e) for e in errors)


def connects(conf: dict, timeout: float = 10.0) -> None:
    producer = Producer({**conf, **_FAST})
    md = producer.list_topics(timeout=timeout)
    assert md.brokers


# -- every listener and mechanism carries records --------------------------------------------------

TLS_CASES = [("SSL", {}), ("MTLS", {}), ("BADHOST", {"verify_hostname": False})]
SASL_CASES = [(listener, mech) for listener in ("SASL_PLAINTEXT", "SASL_SSL", "REAUTH")
              for mech in SASL_MECHANISMS]


@pytest.mark.parametrize("listener,kwargs", TLS_CASES, ids=[c[0] for c in TLS_CASES])
def test_tls_listener_round_trip(secured_kafka, secured_topic, confluent_config, listener, kwargs):
    round_trip(confluent_config(listener, **kwargs), secured_topic())


@pytest.mark.parametrize("listener,mechanism", SASL_CASES, ids=[f"{l}-{m}" for l, m in SASL_CASES])
def test_sasl_listener_round_trip(secured_kafka, secured_topic, confluent_config, listener, mechanism):
    round_trip(confluent_config(listener, mechanism), secured_topic())


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "carol"), ("SCRAM-SHA-512", "bob")])
def test_other_users(secured_kafka, secured_topic, confluent_config, mechanism, user):
    round_trip(confluent_config("SASL_SSL", mechanism, user=user), secured_topic(), count=1)


def test_plaintext_listener_still_plain(secured_kafka, secured_topic):
    round_trip({"bootstrap.servers": secured_kafka.bootstrap()}, secured_topic(), count=1)
    assert secured_kafka.bootstrap() == secured_kafka.bootstrap_servers


def test_listener_addresses(secured_kafka):
    assert secured_kafka.listener_names == ["PLAINTEXT", *LISTENERS]
    ports = {secured_kafka.bootstrap(name) for name in secured_kafka.listener_names}
    assert len(ports) == len(LISTENERS) + 1
    assert all(b.startswith(f"{HOST}:") for b in ports)
    assert secured_kafka.bootstrap("SSL", host="localhost").startswith("localhost:")
    with pytest.raises(KeyError):
        secured_kafka.bootstrap("NOPE")


# -- what must fail fails ------------------------------------------------------------------------------

def test_mtls_without_client_cert_fails(secured_kafka, confluent_config):
    report = connect_fails(confluent_config("MTLS", client_cert=False))
    assert "alert" in report, report  # the broker's TLS alert (bad certificate / certificate required)


def test_badhost_with_hostname_verification_fails(secured_kafka, confluent_config):
    report = connect_fails(confluent_config("BADHOST", verify_hostname=True))
    assert "certificate verify failed" in report, report


def test_localhost_matches_the_broker_certificate(secured_kafka, confluent_config):
    conf = confluent_config("SSL")
    conf["bootstrap.servers"] = secured_kafka.bootstrap("SSL", host="localhost")
    connects(conf)


def test_expired_certificate_fails_verification(secured_kafka, confluent_config):
    # librdkafka says "certificate verify failed" (Python's ssl names the expiry: see below)
    report = connect_fails(confluent_config("EXPIRED"))
    assert "certificate verify failed" in report, report


def test_unknown_ca_fails_until_trusted(secured_kafka, confluent_config, pki):
    assert "certificate verify failed" in connect_fails(confluent_config("UNTRUSTED"))
    assert "certificate verify failed" in connect_fails(confluent_config("SSL", ca=pki.unknown_ca_cert_path))
    connects(confluent_config("UNTRUSTED", ca=pki.unknown_ca_cert_path))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails(secured_kafka, confluent_config, mechanism):
    sec = secured_kafka.security
    report = connect_fails(confluent_config("SASL_SSL", mechanism, password=sec.wrong_password))
    assert "Authentication failed" in report, report


def test_scram_users_are_per_mechanism(secured_kafka, confluent_config):
    """bob exists for SCRAM-SHA-512 only."""
    connect_fails(confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user="bob", password="bob-secret"))


def test_librdkafka_reauthenticates_on_reauth_listener(secured_kafka, secured_topic, confluent_config):
    """Past connections.max.reauth.ms the client re-authenticates on its open connections
    (librdkafka >= 2.2 does, KIP-368): records still flow and no connection was made again."""
    topic = secured_topic()
    stats: list[dict] = []
    producer = Producer({**confluent_config("REAUTH", "PLAIN"), **_FAST, "statistics.interval.ms": 200,
                         "stats_cb": lambda s: stats.append(json.loads(s))})

    def send_and_count_connects(value: bytes) -> int:
        producer.produce(topic, value=value)
        assert producer.flush(10) == 0
        stats.clear()
        deadline = time.monotonic() + 5
        while not stats and time.monotonic() < deadline:
            producer.poll(0.1)
        assert stats, "no statistics from librdkafka"
        return sum(b["connects"] for b in stats[-1]["brokers"].values())

    before = send_and_count_connects(b"before")
    assert before >= 1
    time.sleep(secured_kafka.security.reauth_ms / 1000 + 1.0)
    after = send_and_count_connects(b"after")
    assert after == before, f"connects went from {before} to {after}: the broker closed a connection"


# -- the broker's SASL answers, seen with a hand-encoded client ------------------------------------

def _probe(cluster, listener: str, mechanism: str, **kw):
    host, port = cluster.bootstrap(listener).split(",")[0].rsplit(":", 1)
    ctx = cluster.security.pki.client_ssl_context() if LISTENERS[listener].protocol == "SASL_SSL" else None
    return sasl_probe(host, int(port), mechanism, ssl_context=ctx, **kw)


def test_sasl_mechanisms_and_session_lifetime(secured_kafka):
    sec = secured_kafka.security
    user, pw = sec.credentials("PLAIN")
    plain = _probe(secured_kafka, "SASL_SSL", "PLAIN", user=user, password=pw)
    assert plain.handshake_error == 0 and set(plain.mechanisms) == set(SASL_MECHANISMS)
    assert (plain.error_code, plain.session_lifetime_ms) == (0, 0)
    reauth = _probe(secured_kafka, "REAUTH", "PLAIN", user=user, password=pw)
    assert reauth.error_code == 0 and 0 < reauth.session_lifetime_ms <= sec.reauth_ms
    # a session not re-authenticated in time: the broker closes the connection at the next
    # request (both connections wait at once)
    hold = sec.reauth_ms / 1000 + 1.0
    with ThreadPoolExecutor(2) as pool:
        kept, expired = pool.map(lambda listener: _probe(secured_kafka, listener, "PLAIN", user=user,
                                                         password=pw, hold_s=hold),
                                 ["SASL_SSL", "REAUTH"])
    assert kept.alive_after_hold is True, kept
    assert expired.alive_after_hold is False, expired
    wrong = _probe(secured_kafka, "SASL_PLAINTEXT", "PLAIN", user=user, password=sec.wrong_password)
    assert wrong.error_code == 58, wrong  # SASL_AUTHENTICATION_FAILED


def test_unsecured_jwt_accepted_and_bounds_the_session(secured_kafka):
    # the token's expiry bounds the session even where connections.max.reauth.ms is 0
    ok = _probe(secured_kafka, "SASL_PLAINTEXT", "OAUTHBEARER", token=unsecured_jwt("alice", 60))
    assert ok.error_code == 0 and 50_000 < ok.session_lifetime_ms <= 60_000, ok
    short = _probe(secured_kafka, "REAUTH", "OAUTHBEARER", token=unsecured_jwt("alice", 2))
    assert short.error_code == 0 and 0 < short.session_lifetime_ms <= 2000, short
    expired = _probe(secured_kafka, "SASL_PLAINTEXT", "OAUTHBEARER",
                     token=unsecured_jwt("alice", -60, now=time.time()))
    assert expired.error_code == 58 and "invalid_token" in expired.challenge, expired


# -- OAuth 2 client credentials (OIDC) --------------------------------------------------------------

def test_oidc_through_token_endpoint(secured_kafka, secured_topic, confluent_config, token_endpoint):
    round_trip(confluent_config("SASL_SSL", "OAUTHBEARER", token_endpoint=token_endpoint),
               secured_topic())
    assert token_endpoint.calls >= 1
    assert all(r["status"] == 200 for r in token_endpoint.requests)
    claims = json.loads(base64.urlsafe_b64decode(token_endpoint.tokens[0].split(".")[1] + "=="))
    assert claims["sub"] == OAUTH_CLIENT_ID and claims["scope"] == "kafka"


def _token_request(endpoint, secret=OAUTH_CLIENT_SECRET, grant="client_credentials"):
    basic = base64.b64encode(f"{endpoint.client_id}:{secret}".encode()).decode()
    req = urllib.request.Request(endpoint.url, data=f"grant_type={grant}&scope=s1".encode(),
                                 headers={"Authorization": f"Basic {basic}",
                                          "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_token_endpoint_answers(token_endpoint):
    token_endpoint.lifetime_s = 5
    status, body = _token_request(token_endpoint)
    assert status == 200 and body["token_type"] == "bearer" and body["expires_in"] == 5
    header, payload, signature = body["access_token"].split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"} and signature == ""
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    assert claims["sub"] == OAUTH_CLIENT_ID and claims["scope"] == "s1"
    assert claims["exp"] - claims["iat"] == 5
    assert _token_request(token_endpoint, secret="nope")[0] == 401
    assert _token_request(token_endpoint, grant="password")[0] == 400
    token_endpoint.fail_next(2)
    assert [_token_request(token_endpoint)[0] for _ in range(3)] == [503, 503, 200]
    assert token_endpoint.calls == 6


def test_token_endpoint_over_https(pki):
    from sparkkafka_sink.testing.security import TokenEndpoint

    with TokenEndpoint(pki=pki) as endpoint:
        assert endpoint.url.startswith("https://127.0.0.1:")
        basic = base64.b64encode(f"{OAUTH_CLIENT_ID}:{OAUTH_CLIENT_SECRET}".encode()).decode()
        req = urllib.request.Request(endpoint.url, data=b"grant_type=client_credentials",
                                     headers={"Authorization": f"Basic {basic}"})
        with urllib.request.urlopen(req, timeout=5, context=pki.client_ssl_context()) as resp:
            assert json.loads(resp.read())["scope"] == "kafka"
        assert endpoint.calls == 1


# -- the PKI's files -------------------------------------------------------------------------------

def test_pki_files(pki: TestPki):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    if shutil.which("keytool"):
        assert pki.truststore_jks_path.read_bytes()[:4] == b"\xfe\xed\xfe\xed"  # JKS magic
        for store in (pki.client_keystore_jks_path, pki.client_keystore_jks_key_password_path):
            # keytool itself lists one private key entry, alias client, in a JKS store
            listed = subprocess.run(["keytool", "-list", "-keystore", str(store), "-storepass", pki.store_password],
                                    capture_output=True, text=True, timeout=120, check=True).stdout
            assert "Keystore type: JKS" in listed and "client, " in listed and "PrivateKeyEntry" in listed, listed
    trust = pkcs12.load_pkcs12(pki.truststore_p12_path.read_bytes(), pki.store_password.encode())
    assert trust.key is None and [c.certificate for c in trust.additional_certs] == [pki.ca.cert]
    keystore = pkcs12.load_pkcs12(pki.client_keystore_p12_path.read_bytes(), pki.store_password.encode())
    assert keystore.cert.certificate == pki.client.cert and keystore.key is not None
    assert pki.expired.cert.not_valid_after_utc.timestamp() < time.time()
    san = pki.broker.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == [HOST]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    # the encrypted key needs its password (Python's ssl as the loader)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_cert_chain(str(pki.client.chain_path), str(pki.client_key_encrypted_path),
                        password=pki.key_password)
    with pytest.raises(ssl.SSLError):
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            str(pki.client.chain_path), str(pki.client_key_encrypted_path), password="wrong")


def test_python_ssl_handshakes(secured_kafka, pki):
    """Python's ssl module against the TLS listeners (what our producer will use)."""
    import socket

    from sparkkafka_sink.testing.brokers import _api_versions_v0

    def handshake(listener, ctx):
        host, port = secured_kafka.bootstrap(listener).rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.settimeout(5)
                # one ApiVersions round trip (TLS 1.3: a refused client certificate shows on
                # the first read)
                tls.sendall(_api_versions_v0(7))
                assert len(tls.recv(4)) == 4
                return tls.version()

    assert handshake("SSL", pki.client_ssl_context()) in ("TLSv1.2", "TLSv1.3")
    assert handshake("MTLS", pki.client_ssl_context(client_cert=True))
    with pytest.raises(ssl.SSLError):
        handshake("MTLS", pki.client_ssl_context())
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake("BADHOST", pki.client_ssl_context())
    assert handshake("BADHOST", pki.client_ssl_context(check_hostname=False))
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        handshake("EXPIRED", pki.client_ssl_context())
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake("UNTRUSTED", pki.client_ssl_context())
