"""Our producer over TLS and SASL, against Apache Kafka's own listeners (the ``secured_kafka``
fixture): every mechanism over SASL_PLAINTEXT and SASL_SSL, SSL alone, mutual TLS, every
truststore/keystore form, host name verification, OIDC with token refresh and KIP-368
re-authentication -- each round trip read back by confluent-kafka configured with the same
security.  Then the failures: each must be quick, say what is wrong, and never show a secret."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from kafka_helpers import consume_all

from sparkkafka_sink import Producer
from sparkkafka_sink.errors import AuthenticationError, ConfigError, KafkaTimeoutError, SslError
from sparkkafka_sink.testing.security import OAUTH_CLIENT_SECRET, WRONG_PASSWORD

pytestmark = [pytest.mark.broker, pytest.mark.security]

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_PROTOCOL = {"SSL": "SSL", "MTLS": "SSL", "BADHOST": "SSL", "EXPIRED": "SSL", "UNTRUSTED": "SSL",
             "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "REAUTH": "SASL_SSL",
             "PLAINTEXT": "PLAINTEXT"}
#: bounded waits: a local broker answers in milliseconds
_FAST = {"max.block.ms": 15000, "delivery.timeout.ms": 30000, "request.timeout.ms": 10000,
         "linger.ms": 5}


def ours(cluster, listener: str, **settings) -> dict:
    """Our producer's config for ``listener`` of the secured node (the test CA trusted)."""
    protocol = _PROTOCOL[listener]
    config = {"bootstrap.servers": cluster.bootstrap(listener), "security.protocol": protocol, **_FAST}
    if protocol.endswith("SSL"):
        config["ssl.truststore.location"] = str(cluster.security.pki.ca_cert_path)
    config.update(settings)
    return {k: v for k, v in config.items() if v is not None}


def jaas(module: str, **options) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def send_and_read_back(config: dict, topic: str, reader: dict, count: int = 300) -> Producer:
    """Send ``count`` records (one by one and in bulk), flush, read them back with confluent-kafka
    (``reader``: its security settings) and compare; returns the closed producer."""
    values = [f"v{i}-{uuid.uuid4().hex[:8]}".encode() for i in range(count)]
    producer = Producer(config)
    try:
        futures = [producer.send(topic, value=v, key=b"k%d" % i) for i, v in enumerate(values[: count // 2])]
        bulk = producer.send_batch(topic, values=values[count // 2:])
        producer.flush(30)
        for f in futures:
            f.get(0)
        bulk.get(0)
    finally:
        producer.close(30)
    reader = {k: v for k, v in reader.items() if k != "bootstrap.servers"}
    got = consume_all(config["bootstrap.servers"], topic, expected_count=count, timeout=30, config=reader)
    assert sorted(r.value for r in got) == sorted(values)
    return producer


def assert_no_secret(secret: str, *texts) -> None:
    for text in texts:
        assert secret not in text, f"the secret shows in: {text[:300]}"


def exception_texts(exc: BaseException) -> list[str]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return out


# -- round trips ------------------------------------------------------------------------------
SASL_CASES = [
    # (mechanism, how the credentials are given)
    ("PLAIN", "jaas"),
    ("SCRAM-SHA-256", "username"),
    ("SCRAM-SHA-512", "jaas"),
    ("OAUTHBEARER", "unsecured-jaas"),
]


def sasl_settings_for(cluster, mechanism: str, form: str) -> dict:
    if mechanism == "OAUTHBEARER":
        return {"sasl.mechanism": mechanism, "sasl.jaas.config": jaas(_OAUTH_MODULE, unsecuredLoginStringClaim_sub="alice")}
    user, password = cluster.security.credentials(mechanism)
    if form == "username":
        return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
    return {"sasl.mechanism": mechanism, "sasl.jaas.config": jaas(module, username=user, password=password)}


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism,form", SASL_CASES, ids=[m for m, _ in SASL_CASES])
def test_sasl_round_trip(secured_kafka, secured_topic, confluent_config, listener, mechanism, form):
    topic = secured_topic(partitions=2)
    config = ours(secured_kafka, listener, **sasl_settings_for(secured_kafka, mechanism, form))
    producer = send_and_read_back(config, topic, confluent_config(listener, mechanism))
    assert producer.metrics()["records_failed"] == 0 if "records_failed" in producer.metrics() else True


def test_oidc_client_credentials_round_trip(secured_kafka, secured_topic, confluent_config, token_endpoint):
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_SSL", **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
        "sasl.oauthbearer.client.id": token_endpoint.client_id,
        "sasl.oauthbearer.client.secret": token_endpoint.client_secret,
        "sasl.oauthbearer.scope": "kafka"})
    send_and_read_back(config, topic, confluent_config("SASL_SSL", "OAUTHBEARER"))
    assert token_endpoint.calls >= 1


def test_oidc_from_jaas_options(secured_kafka, secured_topic, confluent_config, token_endpoint):
    """Java users' form: client id/secret/scope as options of the OAuthBearerLoginModule."""
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_PLAINTEXT", **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
        "sasl.jaas.config": jaas(_OAUTH_MODULE, clientId=token_endpoint.client_id,
                                 clientSecret=token_endpoint.client_secret, scope="kafka")})
    send_and_read_back(config, topic, confluent_config("SASL_PLAINTEXT", "OAUTHBEARER"), count=20)
    assert token_endpoint.calls >= 1


def _provided_token():
    from sparkkafka_sink.testing.security import unsecured_jwt

    return unsecured_jwt("alice", 600)


def test_token_provider_callable_and_import_string(secured_kafka, secured_topic, confluent_config):
    calls = []

    def provider():
        calls.append(1)
        return _provided_token()

    for spec in (provider, f"{__name__}:_provided_token"):
        topic = secured_topic()
        config = ours(secured_kafka, "SASL_SSL", **{"sasl.mechanism": "OAUTHBEARER",
                                                     "sasl.oauthbearer.token.provider": spec})
        send_and_read_back(config, topic, confluent_config("SASL_SSL", "OAUTHBEARER"), count=20)
    assert calls


def _needs_keytool(pki) -> None:
    if pki.truststore_jks_path is None:
        pytest.skip("JKS stores are made by the JDK's keytool, not on PATH")


@pytest.mark.parametrize("trust", ["pem-file", "pem-inline", "pkcs12", "pkcs12-typed", "jks", "jks-typed",
                                   "jks-no-password"])
def test_ssl_round_trip_every_truststore_form(secured_kafka, secured_topic, confluent_config, pki, trust):
    if trust.startswith("jks"):
        _needs_keytool(pki)
    topic = secured_topic()
    settings = {
        "pem-file": {"ssl.truststore.location": str(pki.ca_cert_path)},
        "pem-inline": {"ssl.truststore.location": None, "ssl.truststore.certificates": pki.ca_pem},
        "pkcs12": {"ssl.truststore.location": str(pki.truststore_p12_path),
                   "ssl.truststore.password": pki.store_password},
        "pkcs12-typed": {"ssl.truststore.location": str(pki.truststore_p12_path), "ssl.truststore.type": "PKCS12",
                         "ssl.truststore.password": pki.store_password},
        # found from the file's magic number
        "jks": {"ssl.truststore.location": str(pki.truststore_jks_path), "ssl.truststore.password": pki.store_password},
        "jks-typed": {"ssl.truststore.location": str(pki.truststore_jks_path), "ssl.truststore.type": "JKS",
                      "ssl.truststore.password": pki.store_password},
        # Java reads a JKS truststore's certificates without its password (no integrity check)
        "jks-no-password": {"ssl.truststore.location": str(pki.truststore_jks_path), "ssl.truststore.type": "JKS"},
    }[trust]
    send_and_read_back(ours(secured_kafka, "SSL", **settings), topic, confluent_config("SSL"), count=50)


@pytest.mark.parametrize("identity", ["pem-inline", "pem-file-encrypted", "pkcs12", "jks", "jks-key-password",
                                      "jks-both-stores"])
def test_mutual_tls_round_trip(secured_kafka, secured_topic, confluent_config, pki, identity):
    if identity.startswith("jks"):
        _needs_keytool(pki)
    topic = secured_topic()
    settings = {
        "pem-inline": {"ssl.keystore.certificate.chain": pki.client.chain_pem, "ssl.keystore.key": pki.client.key_pem},
        "pem-file-encrypted": {"ssl.keystore.location": str(pki.client_bundle_encrypted_path),
                               "ssl.key.password": pki.key_password},
        "pkcs12": {"ssl.keystore.location": str(pki.client_keystore_p12_path),
                   "ssl.keystore.password": pki.store_password},
        # keytool -importkeystore from the PKCS12 above; the key opens with the store password
        "jks": {"ssl.keystore.location": str(pki.client_keystore_jks_path), "ssl.keystore.password": pki.store_password},
        # the key under its own password: ssl.key.password
        "jks-key-password": {"ssl.keystore.location": str(pki.client_keystore_jks_key_password_path),
                             "ssl.keystore.type": "JKS", "ssl.keystore.password": pki.store_password,
                             "ssl.key.password": pki.key_password},
        "jks-both-stores": {"ssl.keystore.location": str(pki.client_keystore_jks_path), "ssl.keystore.type": "JKS",
                            "ssl.keystore.password": pki.store_password,
                            "ssl.truststore.location": str(pki.truststore_jks_path), "ssl.truststore.type": "JKS",
                            "ssl.truststore.password": pki.store_password},
    }[identity]
    send_and_read_back(ours(secured_kafka, "MTLS", **settings), topic, confluent_config("MTLS"), count=50)


def test_hostname_verification_off_accepts_another_name(secured_kafka, secured_topic, confluent_config):
    topic = secured_topic()
    config = ours(secured_kafka, "BADHOST", **{"ssl.endpoint.identification.algorithm": ""})
    send_and_read_back(config, topic, confluent_config("BADHOST", verify_hostname=False), count=20)


def test_large_requests_over_tls(secured_kafka, secured_topic, confluent_config):
    """Frames far bigger than a TLS record (16 KiB) and than the encryption budget (1 MiB)."""
    topic = secured_topic(partitions=3)
    producer = Producer(ours(secured_kafka, "SASL_SSL", **sasl_settings_for(secured_kafka, "SCRAM-SHA-512", "jaas"),
                             **{"batch.size": 1 << 20, "max.request.size": 4 << 20, "linger.ms": 50}))
    values = [bytes([i % 251]) * 200_000 for i in range(40)]
    try:
        futures = [producer.send(topic, value=v, partition=i % 3) for i, v in enumerate(values)]
        producer.flush(60)
        assert all(f.get(0).offset >= 0 for f in futures)
    finally:
        producer.close(30)
    got = consume_all(secured_kafka.bootstrap("SASL_SSL"), topic, expected_count=len(values), timeout=60,
                      config={k: v for k, v in confluent_config("SASL_SSL", "SCRAM-SHA-512").items()
                              if k != "bootstrap.servers"})
    assert sorted(r.value for r in got) == sorted(values)


# -- token refresh and re-authentication ------------------------------------------------------
def test_oidc_tokens_refreshed_and_sessions_reauthenticated_without_dropping_work(
        secured_kafka, secured_topic, confluent_config, token_endpoint):
    """Tokens live 10 s and the REAUTH listener's sessions at most 3 s: while records keep
    flowing, tokens are fetched again and sessions renewed on the same connections (no
    reconnect, nothing failed, every record read back)."""
    token_endpoint.lifetime_s = 10
    topic = secured_topic(partitions=2)
    producer = Producer(ours(secured_kafka, "REAUTH", **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
        "sasl.oauthbearer.client.id": token_endpoint.client_id,
        "sasl.oauthbearer.client.secret": token_endpoint.client_secret}))
    client = producer._client
    sent = []
    try:
        deadline = time.monotonic() + 60
        # Driven by events: keep sending until three re-authentications and two token refreshes
        # happened (bounded by the deadline), with records in flight all the while.
        while (client.reauthentications < 3 or token_endpoint.calls < 2) and time.monotonic() < deadline:
            for _ in range(50):
                value = uuid.uuid4().hex.encode()
                sent.append((producer.send(topic, value=value), value))
            time.sleep(0.02)
        producer.flush(30)
        assert client.reauthentications >= 3, client.reauthentications
        assert token_endpoint.calls >= 2, token_endpoint.calls
        connections = client.connections_created
        assert all(f.get(0).offset >= 0 for f, _ in sent)
    finally:
        producer.close(30)
    # one bootstrap connection and one to the broker itself; re-authentication never reconnects
    assert connections <= 2, f"{connections} connections: sessions were not renewed in place"
    got = consume_all(secured_kafka.bootstrap("REAUTH"), topic, expected_count=len(sent), timeout=60,
                      config={k: v for k, v in confluent_config("REAUTH", "OAUTHBEARER").items()
                              if k != "bootstrap.servers"})
    assert sorted(r.value for r in got) == sorted(v for _, v in sent)


# -- failures -----------------------------------------------------------------------------------
def _fails(config: dict, topic: str, error_type, caplog) -> BaseException:
    """Sending with ``config`` raises ``error_type`` well before max.block.ms, without a
    reconnect storm; returns the exception (logs captured at DEBUG)."""
    caplog.set_level(logging.DEBUG)
    config = {**config, "max.block.ms": 20000}
    started = time.monotonic()
    producer = Producer(config)
    try:
        with pytest.raises(error_type) as info:
            producer.send(topic, value=b"x").get(20)
        elapsed = time.monotonic() - started
        again = time.monotonic()
        with pytest.raises(error_type):
            producer.send(topic, value=b"y")
        assert time.monotonic() - again < 0.5, "a second send waited instead of failing at once"
        attempts = producer._client.connections_created
    finally:
        producer.close(5)
    assert elapsed < 10, f"took {elapsed:.1f} s to fail"
    assert attempts <= 3, f"{attempts} connection attempts: a reconnect storm"
    return info.value


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_a_clear_authentication_error_without_the_secret(
        secured_kafka, secured_topic, mechanism, caplog):
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_SSL", **{"sasl.mechanism": mechanism, "sasl.jaas.config": jaas(
        _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE, username="alice", password=WRONG_PASSWORD)})
    exc = _fails(config, topic, AuthenticationError, caplog)
    text = str(exc)
    assert mechanism in text and "'alice'" in text and secured_kafka.bootstrap("SASL_SSL") in text, text
    producer_repr = repr(Producer(config))
    assert_no_secret(WRONG_PASSWORD, *exception_texts(exc), caplog.text, producer_repr,
                     repr(Producer.__new__(Producer)) if False else "")


def test_unknown_user_and_disabled_mechanism(secured_kafka, secured_topic, caplog):
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_PLAINTEXT", **{"sasl.mechanism": "SCRAM-SHA-256",
                                                       "sasl.username": "mallory", "sasl.password": "mallory-pw"})
    exc = _fails(config, topic, AuthenticationError, caplog)
    assert "'mallory'" in str(exc) and "mallory-pw" not in caplog.text


def test_wrong_oidc_client_secret_fails_when_the_producer_is_made(secured_kafka, token_endpoint, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "definitely-not-the-client-secret"
    with pytest.raises(AuthenticationError) as info:
        Producer(ours(secured_kafka, "SASL_SSL", **{
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
            "sasl.oauthbearer.client.id": token_endpoint.client_id, "sasl.oauthbearer.client.secret": wrong}))
    text = str(info.value)
    assert "401" in text and token_endpoint.url in text, text
    assert_no_secret(wrong, *exception_texts(info.value), caplog.text)
    assert_no_secret(OAUTH_CLIENT_SECRET, caplog.text)


def test_client_without_certificate_rejected_by_mutual_tls(secured_kafka, secured_topic, caplog):
    exc = _fails(ours(secured_kafka, "MTLS"), secured_topic(), SslError, caplog)
    assert "certificate" in str(exc) and secured_kafka.bootstrap("MTLS") in str(exc), str(exc)


@pytest.mark.parametrize("listener,reason", [
    ("BADHOST", "host name mismatch"),
    ("EXPIRED", "expired"),
    ("UNTRUSTED", "unknown CA"),
])
def test_certificate_that_does_not_verify(secured_kafka, secured_topic, listener, reason, caplog):
    exc = _fails(ours(secured_kafka, listener), secured_topic(), SslError, caplog)
    text = str(exc)
    assert reason in text and secured_kafka.bootstrap(listener) in text, text


def test_plaintext_client_on_a_tls_listener(secured_kafka, secured_topic, caplog):
    config = ours(secured_kafka, "SSL", **{"security.protocol": "PLAINTEXT", "ssl.truststore.location": None})
    exc = _fails(config, secured_topic(), (SslError, KafkaTimeoutError), caplog)
    assert "security.protocol=SSL" in str(exc), str(exc)


def test_tls_client_on_a_plaintext_listener(secured_kafka, secured_topic, pki, caplog):
    config = {"bootstrap.servers": secured_kafka.bootstrap("PLAINTEXT"), "security.protocol": "SSL",
              "ssl.truststore.location": str(pki.ca_cert_path), **_FAST}
    exc = _fails(config, secured_topic(), SslError, caplog)
    assert "PLAINTEXT" in str(exc) and "security.protocol" in str(exc), str(exc)


def test_plaintext_client_on_a_sasl_listener(secured_kafka, secured_topic, caplog):
    """The broker answers ApiVersions, then hangs up at the first other request: after three
    such hang-ups in a row the client says the listener wants SASL."""
    config = ours(secured_kafka, "SASL_PLAINTEXT", **{"security.protocol": "PLAINTEXT"})
    exc = _fails(config, secured_topic(), AuthenticationError, caplog)
    assert "security.protocol=SASL_PLAINTEXT" in str(exc), str(exc)


# -- configuration checked before anything connects ------------------------------------------
def test_truststore_errors_are_clear(pki, tmp_path):
    base = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SSL"}
    cases = [
        ({"ssl.truststore.location": str(tmp_path / "missing.pem")}, "Cannot read ssl.truststore.location"),
        ({"ssl.truststore.location": str(pki.truststore_p12_path), "ssl.truststore.password": "wrong-store-pw"},
         "wrong password"),
        ({"ssl.truststore.location": str(pki.truststore_p12_path), "ssl.truststore.type": "PEM"}, "not a PEM file"),
        ({"ssl.truststore.location": str(pki.ca_cert_path), "ssl.truststore.type": "JKS2"}, "expected PEM, PKCS12 or JKS"),
        ({"ssl.truststore.certificates": "not pem"}, "PEM text"),
        ({"ssl.keystore.certificate.chain": pki.client.chain_pem}, "go together"),
        ({"ssl.keystore.location": str(pki.client_bundle_encrypted_path)}, "encrypted: set ssl.key.password"),
        ({"ssl.keystore.location": str(pki.client_bundle_encrypted_path), "ssl.key.password": "nope-key-pw"},
         "wrong ssl.key.password"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "TLS_NOT_A_REAL_SUITE_WITH_NOTHING"}, "ssl.cipher.suites"),
        ({"ssl.endpoint.identification.algorithm": "http"}, "ssl.endpoint.identification.algorithm"),
    ]
    if pki.truststore_jks_path is not None:  # every JKS error: tests/unit/test_network_key_stores.py
        cases.append(({"ssl.truststore.location": str(pki.truststore_jks_path),
                       "ssl.truststore.password": "wrong-store-pw"}, "wrong ssl.truststore.password"))
        cases.append(({"ssl.keystore.location": str(pki.client_keystore_jks_key_password_path),
                       "ssl.keystore.password": pki.store_password, "ssl.key.password": "nope-key-pw"},
                      "wrong ssl.key.password"))
    for settings, expected in cases:
        with pytest.raises(ConfigError) as info:
            Producer({**base, **settings})
        text = str(info.value)
        assert expected in text, (settings, text)
        for secret in ("wrong-store-pw", "nope-key-pw", pki.store_password, pki.key_password):
            assert secret not in text


def test_tls_options_with_a_plaintext_protocol_are_refused(pki):
    with pytest.raises(ConfigError, match="security.protocol is PLAINTEXT"):
        Producer({"bootstrap.servers": "127.0.0.1:9", "ssl.truststore.location": str(pki.ca_cert_path)})


def test_cipher_suites_in_java_names(secured_kafka, secured_topic, confluent_config):
    topic = secured_topic()
    config = ours(secured_kafka, "SSL", **{"ssl.protocol": "TLSv1.2",
                                            "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"})
    send_and_read_back(config, topic, confluent_config("SSL"), count=10)


def test_connection_setup_timeout_covers_the_tls_handshake(pki):
    """A listener that accepts TCP and never answers the ClientHello: the set-up timeout ends
    each attempt, and the metadata wait says where it got stuck."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{listener.getsockname()[1]}", "security.protocol": "SSL",
                             "ssl.truststore.location": str(pki.ca_cert_path), "max.block.ms": 2000,
                             "socket.connection.setup.timeout.ms": 300, "socket.connection.setup.timeout.max.ms": 600})
        try:
            with pytest.raises(KafkaTimeoutError, match="stuck in tls_handshake"):
                producer.send("t", b"x")
            assert producer._client.connections_created >= 2, "the stalled handshake was not abandoned and retried"
        finally:
            producer.close(5)
    finally:
        listener.close()


def test_oauthbearer_extensions_reach_the_broker(secured_kafka, secured_topic, confluent_config, monkeypatch):
    """SASL extensions (Confluent Cloud's logicalCluster, identityPoolId) from the JAAS options and
    from sasl.oauthbearer.extensions travel in the first message; Kafka accepts them."""
    from sparkkafka_sink.network.sasl.oauthbearer import OAuthBearerClient

    sent = []
    original = OAuthBearerClient.first_message
    monkeypatch.setattr(OAuthBearerClient, "first_message",
                        lambda self: sent.append(original(self)) or sent[-1])
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_PLAINTEXT", **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas(_OAUTH_MODULE, unsecuredLoginStringClaim_sub="alice", extension_logicalCluster="lkc-1"),
        "sasl.oauthbearer.extensions": "identityPoolId=pool-2"})
    send_and_read_back(config, topic, confluent_config("SASL_PLAINTEXT", "OAUTHBEARER"), count=10)
    assert sent and all(b"\x01logicalCluster=lkc-1\x01" in m and b"\x01identityPoolId=pool-2\x01" in m for m in sent)


def test_system_cas_are_trusted_when_no_truststore_is_given():
    """As Java and librdkafka do: without ssl.truststore.* the operating system's CAs verify brokers
    (a managed service's certificate needs no configuration)."""
    import ssl as _ssl

    from sparkkafka_sink.network.ssl_context import build_ssl_context
    from sparkkafka_sink.producer.config import ProducerConfig

    ctx = build_ssl_context(ProducerConfig({"bootstrap.servers": "x:9093", "security.protocol": "SASL_SSL",
                                            "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}))
    reference = _ssl.create_default_context()
    assert ctx.cert_store_stats()["x509_ca"] == reference.cert_store_stats()["x509_ca"]
    assert ctx.check_hostname and ctx.verify_mode == _ssl.CERT_REQUIRED
    assert ctx.minimum_version == _ssl.TLSVersion.TLSv1_2
