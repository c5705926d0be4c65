"""The Java producer's OAuth login keys (issue 33) against the local token endpoint and the secured
Apache Kafka node: ``sasl.login.read.timeout.ms`` bounds a slow endpoint, ``sasl.login.retry.backoff.*``
how long failures are retried, the claim names which claims are read; a Java client's OIDC
settings (Kafka 4's key names, Kafka's login callback handler, validation keys) produce as they are."""

from __future__ import annotations

import time

import pytest
from faults.helpers import SLACK_S

from sparkkafka_sink.errors import AuthenticationError, KafkaError
from sparkkafka_sink.network.sasl.settings import sasl_settings
from sparkkafka_sink.producer.config import ProducerConfig

from .test_producer_security import ours, send_and_read_back

pytestmark = [pytest.mark.security]


def _oidc(token_endpoint, **settings) -> ProducerConfig:
    return ProducerConfig({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanism": "OAUTHBEARER",
                           "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
                           "sasl.oauthbearer.client.credentials.client.id": token_endpoint.client_id,
                           "sasl.oauthbearer.client.credentials.client.secret": token_endpoint.client_secret,
                           **settings})


def _first_token(config: ProducerConfig):
    settings = sasl_settings(config)
    assert settings is not None and settings.token_source is not None
    try:
        return settings.token_source.current()
    finally:
        settings.close()


def test_the_read_timeout_bounds_a_slow_token_endpoint(token_endpoint):
    read_ms, backoff_ms, backoff_max_ms = 200, 50, 300
    # the last attempt starts within the retries' budget and waits read.timeout.ms at most
    bound_s = (backoff_max_ms + read_ms) / 1000 + SLACK_S
    token_endpoint.delay_s = bound_s + 1.0  # an answer waited for comes past the bound
    started = time.monotonic()
    with pytest.raises(KafkaError, match="timed out") as info:
        _first_token(_oidc(token_endpoint, **{"sasl.login.read.timeout.ms": str(read_ms),
                                              "sasl.login.retry.backoff.ms": str(backoff_ms),
                                              "sasl.login.retry.backoff.max.ms": str(backoff_max_ms)}))
    assert time.monotonic() - started < bound_s  # not one answer waited for
    assert "attempt(s)" in str(info.value) and token_endpoint.client_secret not in str(info.value)
    started = time.monotonic()
    token = _first_token(_oidc(token_endpoint, **{
        "sasl.login.read.timeout.ms": str(int((token_endpoint.delay_s + SLACK_S) * 1000))}))
    assert token.principal == token_endpoint.client_id and time.monotonic() - started >= token_endpoint.delay_s


def test_the_retry_backoff_settings_bound_the_retries(token_endpoint):
    token_endpoint.fail_next(3, status=503)
    token = _first_token(_oidc(token_endpoint, **{"sasl.login.retry.backoff.ms": "20",
                                                  "sasl.login.retry.backoff.max.ms": "5000"}))
    assert token.principal == token_endpoint.client_id and token_endpoint.calls == 4
    token_endpoint.reset()
    token_endpoint.fail_next(10, status=503)
    with pytest.raises(KafkaError, match=r"after 2 attempt\(s\)"):
        _first_token(_oidc(token_endpoint, **{"sasl.login.retry.backoff.ms": "150",
                                              "sasl.login.retry.backoff.max.ms": "150"}))
    assert token_endpoint.calls == 2


def test_the_claim_names_say_which_claims_are_read(token_endpoint):
    with pytest.raises(AuthenticationError, match="without the 'azp' claim"):
        _first_token(_oidc(token_endpoint, **{"sasl.oauthbearer.sub.claim.name": "azp"}))
    with pytest.raises(AuthenticationError, match="'iat' claim .* neither a string nor a list"):
        _first_token(_oidc(token_endpoint, **{"sasl.oauthbearer.scope.claim.name": "iat"}))
    # the endpoint's tokens carry sub and scope (a string): read under any name that holds them
    assert _first_token(_oidc(token_endpoint, **{"sasl.oauthbearer.sub.claim.name": "sub",
                                                 "sasl.oauthbearer.scope.claim.name": "scope"})).principal \
        == token_endpoint.client_id


@pytest.mark.broker
def test_a_java_clients_oidc_settings_produce_as_they_are(secured_kafka, secured_topic, confluent_config,
                                                           token_endpoint):
    topic = secured_topic()
    config = ours(secured_kafka, "SASL_SSL", **{
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
        "sasl.oauthbearer.client.credentials.client.id": token_endpoint.client_id,
        "sasl.oauthbearer.client.credentials.client.secret": token_endpoint.client_secret,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.expected.audience": "kafka-brokers",
        "sasl.login.connect.timeout.ms": "5000", "sasl.login.read.timeout.ms": "5000",
        "sasl.login.retry.backoff.ms": "100", "sasl.login.retry.backoff.max.ms": "10000",
        "sasl.login.refresh.buffer.seconds": "300", "sasl.login.refresh.min.period.seconds": "60",
        "sasl.login.refresh.window.factor": "0.8", "sasl.login.refresh.window.jitter": "0.05",
        "client.dns.lookup": "use_all_dns_ips", "metadata.recovery.strategy": "rebootstrap"})
    # Kafka's login callback handler is honoured: it names the client-credentials grant, built in
    assert set(ProducerConfig(config).noted) == {"client.dns.lookup", "sasl.oauthbearer.expected.audience",
                                                 "metadata.recovery.strategy"}
    send_and_read_back(config, topic, confluent_config("SASL_SSL", "OAUTHBEARER"))
    assert token_endpoint.calls >= 1
