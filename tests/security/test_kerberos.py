"""Kerberos (SASL GSSAPI) against an MIT KDC of the test's own realm and Apache Kafka's GSSAPI
listeners (the ``kerberos_kafka`` fixture), over SASL_PLAINTEXT and SASL_SSL: a keytab login and a
ticket-cache login, as Java's ``Krb5LoginModule`` lines write them; what lands is read back by
confluent-kafka on PLAINTEXT.  An unknown principal and an expired ticket fail where the producer
is made, naming Kerberos."""

from __future__ import annotations

import os
import subprocess

import pytest
from kafka_helpers import signed_in_round_trip

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.security]

_KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


@pytest.fixture
def krb5_env(kerberos_kafka, monkeypatch):
    """MIT's library finds the test realm's KDC (KRB5_CONFIG), and no default ticket cache."""
    for name, value in kerberos_kafka.kdc.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kerberos_kafka.kdc.dir}/no-default-cache")
    return kerberos_kafka


def write_and_read_back(setup, listener: str, jaas: str, count: int = 200) -> None:
    config = {"bootstrap.servers": setup.bootstrap(listener), "sasl.kerberos.service.name": "kafka",
              "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas,
              "security.protocol": "SASL_SSL" if listener == "KERBEROS_SSL" else "SASL_PLAINTEXT"}
    if listener == "KERBEROS_SSL":
        config["ssl.truststore.location"] = str(setup.cluster.security.pki.ca_cert_path)
    signed_in_round_trip(config, setup.cluster.bootstrap(), "krb", count)


@pytest.mark.parametrize("listener", ["KERBEROS", "KERBEROS_SSL"])
def test_a_keytab_login(krb5_env, listener):
    write_and_read_back(krb5_env, listener, krb5_env.keytab_jaas())


@pytest.mark.parametrize("listener", ["KERBEROS", "KERBEROS_SSL"])
def test_a_ticket_cache_login(krb5_env, tmp_path, listener):
    cache = krb5_env.kdc.kinit("alice", krb5_env.alice_keytab, tmp_path / "alice.cc")
    write_and_read_back(krb5_env, listener,
                        f'{_KRB5_MODULE} required useTicketCache=true ticketCache="FILE:{cache}";')


def test_an_unknown_principal_fails_naming_kerberos(krb5_env):
    kdc = krb5_env.kdc
    kdc.add_principal("mallory")
    keytab = kdc.keytab("mallory")
    kdc.delete_principal("mallory")
    with pytest.raises(AuthenticationError) as info:
        write_and_read_back(krb5_env, "KERBEROS", krb5_env.keytab_jaas(keytab, "mallory"), count=1)
    message = str(info.value)
    assert "Kerberos" in message and "mallory@" in message, message


def test_an_expired_ticket_fails_naming_kerberos(krb5_env, tmp_path):
    cache = krb5_env.kdc.kinit("alice", krb5_env.alice_keytab, tmp_path / "short.cc", lifetime="5s")
    env = {**os.environ, **krb5_env.kdc.env}
    wait_until("the ticket expired", lambda: subprocess.run(["klist", "-s", "-c", f"FILE:{cache}"], env=env)
               .returncode != 0, timeout=30, interval=0.5)
    with pytest.raises(AuthenticationError) as info:
        write_and_read_back(krb5_env, "KERBEROS",
                            f'{_KRB5_MODULE} required useTicketCache=true ticketCache="FILE:{cache}";', count=1)
    message = str(info.value)
    assert "Kerberos" in message and "expired" in message.lower(), message
