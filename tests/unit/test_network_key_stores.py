"""JKS trust and key stores made by the JDK's keytool, read by ``build_ssl_context``: the format
found from the file's bytes (with or without ``ssl.*.type``), Java's password semantics, and
one clear error per way a store can be wrong, naming the option and the file and never a
password.  The round trips over TLS and mutual TLS against Apache Kafka are in
tests/security/test_producer_security.py."""

from __future__ import annotations

import shutil
import ssl
import sys

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.network import key_stores
from sparkkafka_sink.network.ssl_context import build_ssl_context
from sparkkafka_sink.testing.security import TestPki

pytestmark = pytest.mark.skipif(shutil.which("keytool") is None, reason="the stores are made by the JDK's keytool")

STORE_PW, KEY_PW = "store-secret", "key-secret"
WRONG = "not-the-password"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:
    return TestPki(tmp_path_factory.mktemp("jks-pki"), key_type="ec", store_password=STORE_PW, key_password=KEY_PW)


def context(**settings) -> ssl.SSLContext:
    ctx = build_ssl_context({"security.protocol": "SSL", **settings})
    assert ctx is not None
    return ctx


def refused(**settings) -> str:
    """The ConfigError text ``settings`` give; no password ever shows in it."""
    with pytest.raises(ConfigError) as info:
        context(**settings)
    text = str(info.value)
    for secret in (STORE_PW, KEY_PW, WRONG):
        assert secret not in text, text
    return text


def trusted_subjects(ctx: ssl.SSLContext) -> list[str]:
    return [dict(rdn[0] for rdn in c["subject"])["commonName"] for c in ctx.get_ca_certs()]


# -- the format, from the file ------------------------------------------------------------------
def test_format_found_from_the_bytes(pki, tmp_path):
    jceks = pki.keytool_convert(pki.truststore_jks_path, tmp_path / "trust.jceks", "JCEKS", source_type="JKS")
    bag_attributes = tmp_path / "openssl-export.pem"  # what `openssl pkcs12 -nokeys` writes
    bag_attributes.write_text("Bag Attributes\n    friendlyName: ca\n" + pki.ca_pem)
    found = {path.name: key_stores.file_format(path.read_bytes()) for path in (
        pki.truststore_jks_path, pki.client_keystore_jks_path, jceks, pki.truststore_p12_path,
        pki.client_keystore_p12_path, pki.ca_cert_path, pki.client.bundle_path, bag_attributes)}
    assert found == {"truststore.jks": "JKS", "client.keystore.jks": "JKS", "trust.jceks": "JCEKS",
                     "truststore.p12": "PKCS12", "client.keystore.p12": "PKCS12", "ca.crt.pem": "PEM",
                     "client.bundle.pem": "PEM", "openssl-export.pem": "PEM"}
    assert key_stores.file_format(b"") is None and key_stores.file_format(b"just some text") is None


def test_jks_truststore_found_from_its_content_whatever_its_name(pki, tmp_path):
    renamed = tmp_path / "ca-bundle.pem"  # a misleading name: the bytes decide
    shutil.copy(pki.truststore_jks_path, renamed)
    ctx = context(**{"ssl.truststore.location": str(renamed), "ssl.truststore.password": STORE_PW})
    assert trusted_subjects(ctx) == ["sparkkafka test CA"]


@pytest.mark.parametrize("declared", ["JKS", "jks", "PKCS12"])
def test_jks_and_pkcs12_types_each_open_both_formats_as_in_java(pki, declared):
    for store in (pki.truststore_jks_path, pki.truststore_p12_path):
        ctx = context(**{"ssl.truststore.location": str(store), "ssl.truststore.type": declared,
                         "ssl.truststore.password": STORE_PW})
        assert trusted_subjects(ctx) == ["sparkkafka test CA"], store
    for store in (pki.client_keystore_jks_path, pki.client_keystore_p12_path):
        ctx = context(**{"ssl.keystore.location": str(store), "ssl.keystore.type": declared,
                         "ssl.keystore.password": STORE_PW, "ssl.truststore.location": str(pki.ca_cert_path)})
        assert presented_in_a_handshake(pki, ctx) == "client", store  # the store's key and chain were loaded


def test_jks_truststore_without_a_password_is_read_without_the_integrity_check(pki):
    """As Java's KeyStore.load(stream, null): certificates are public, the check needs the password."""
    ctx = context(**{"ssl.truststore.location": str(pki.truststore_jks_path), "ssl.truststore.type": "JKS"})
    assert trusted_subjects(ctx) == ["sparkkafka test CA"]


def test_jks_truststore_trusts_the_leaf_of_key_entries_too_as_java_does(pki):
    ctx = context(**{"ssl.truststore.location": str(pki.client_keystore_jks_path), "ssl.truststore.password": STORE_PW})
    assert ctx.cert_store_stats() == {"x509": 1, "crl": 0, "x509_ca": 0}  # the client's own certificate


def presented_in_a_handshake(pki, ctx: ssl.SSLContext) -> str:
    """Mutual TLS in memory between ``ctx`` and a server with the broker's certificate that
    requires a client certificate from the test CA: the common name of the certificate the
    client presented, as the server verified it."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pki.broker.chain_path), str(pki.broker.key_path))
    server.load_verify_locations(str(pki.ca_cert_path))
    server.verify_mode = ssl.CERT_REQUIRED
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_out, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ctx.wrap_bio(to_client, client_out, server_hostname="127.0.0.1")
    end = server.wrap_bio(to_server, server_out, server_side=True)
    done = {client: False, end: False}
    for _ in range(20):
        for side, out, peer in ((client, client_out, to_server), (end, server_out, to_client)):
            if not done[side]:
                try:
                    side.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
            peer.write(out.read())
        if all(done.values()):
            break
    assert all(done.values()), "the handshake did not complete"
    return dict(rdn[0] for rdn in end.getpeercert()["subject"])["commonName"]


def test_key_password_defaults_to_the_store_password_and_may_differ(pki):
    """Either way the keystore's one key and its chain are read, and the context presents them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    stores = [(pki.client_keystore_jks_path, {}),  # the key opens with the store password
              (pki.client_keystore_jks_key_password_path, {"ssl.key.password": KEY_PW})]
    for path, key_password in stores:
        found = key_stores.identity("ssl.keystore.location", str(path), path.read_bytes(), STORE_PW,
                                    key_password.get("ssl.key.password"))
        chain = [x509.load_der_x509_certificate(der) for der in found.chain_der]
        assert chain[0] == pki.client.cert and chain[-1] == pki.ca.cert  # leaf first, up to the CA
        public = serialization.PublicFormat.SubjectPublicKeyInfo
        key = serialization.load_der_private_key(found.private_key_der, None)
        assert (key.public_key().public_bytes(serialization.Encoding.DER, public)
                == chain[0].public_key().public_bytes(serialization.Encoding.DER, public))  # the leaf's key

        ctx = context(**{"ssl.keystore.location": str(path), "ssl.keystore.password": STORE_PW, **key_password,
                         "ssl.truststore.location": str(pki.ca_cert_path),
                         "ssl.endpoint.identification.algorithm": "https"})  # the producer's default
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
        assert trusted_subjects(ctx) == ["sparkkafka test CA"]
        assert presented_in_a_handshake(pki, ctx) == "client"


# -- errors: each names the option and the file -----------------------------------------------
def test_wrong_truststore_password(pki):
    path = str(pki.truststore_jks_path)
    text = refused(**{"ssl.truststore.location": path, "ssl.truststore.password": WRONG})
    assert f"ssl.truststore.location {path}: wrong ssl.truststore.password" in text, text


def test_wrong_keystore_password(pki):
    path = str(pki.client_keystore_jks_path)
    text = refused(**{"ssl.keystore.location": path, "ssl.keystore.password": WRONG})
    assert f"ssl.keystore.location {path}: wrong ssl.keystore.password" in text, text


def test_keystore_without_a_password(pki):
    path = str(pki.client_keystore_jks_path)
    text = refused(**{"ssl.keystore.location": path})
    assert f"ssl.keystore.location {path} is a JKS keystore: set ssl.keystore.password" in text, text


def test_key_with_its_own_password_and_no_key_password(pki):
    path = str(pki.client_keystore_jks_key_password_path)
    text = refused(**{"ssl.keystore.location": path, "ssl.keystore.password": STORE_PW})
    assert path in text and "'client'" in text and "does not open with ssl.keystore.password" in text, text
    assert "set ssl.key.password" in text, text


def test_wrong_key_password(pki):
    path = str(pki.client_keystore_jks_key_password_path)
    text = refused(**{"ssl.keystore.location": path, "ssl.keystore.password": STORE_PW, "ssl.key.password": WRONG})
    assert f"ssl.keystore.location {path}: cannot decrypt the private key 'client': wrong ssl.key.password" in text


def test_keystore_without_a_private_key(pki):
    path = str(pki.truststore_jks_path)
    text = refused(**{"ssl.keystore.location": path, "ssl.keystore.password": STORE_PW})
    assert f"ssl.keystore.location {path} holds no private key (only trusted certificates: ca)" in text, text


def test_keystore_with_several_private_keys(pki, tmp_path):
    both = pki.keytool_convert(pki.client_keystore_p12_path, tmp_path / "two-keys.jks", "JKS")
    pki.keytool_convert(pki.client_keystore_p12_path, both, "JKS", alias="client", dest_alias="second")
    text = refused(**{"ssl.keystore.location": str(both), "ssl.keystore.password": STORE_PW})
    assert f"ssl.keystore.location {both} holds 2 private keys (client, second)" in text, text


def test_not_a_jks_file(pki, tmp_path):
    garbage = tmp_path / "garbage.jks"
    garbage.write_bytes(b"\x00\x01 not a key store at all")
    text = refused(**{"ssl.truststore.location": str(garbage), "ssl.truststore.type": "JKS"})
    assert f"ssl.truststore.location {garbage} is not a JKS store" in text, text
    text = refused(**{"ssl.keystore.location": str(garbage), "ssl.keystore.password": STORE_PW})
    assert f"ssl.keystore.location {garbage} is neither PEM text, a PKCS12 store (DER) nor a JKS store" in text, text
    cut = tmp_path / "cut.jks"
    cut.write_bytes(pki.truststore_jks_path.read_bytes()[:40])
    text = refused(**{"ssl.truststore.location": str(cut), "ssl.truststore.password": STORE_PW})
    assert f"ssl.truststore.location {cut} is not a readable JKS store" in text, text


def test_declared_type_that_contradicts_the_file(pki):
    jks, pem = str(pki.truststore_jks_path), str(pki.ca_cert_path)
    text = refused(**{"ssl.truststore.location": jks, "ssl.truststore.type": "PEM"})
    assert f"ssl.truststore.location {jks} is not a PEM file: it is a JKS store; set ssl.truststore.type=JKS" in text
    text = refused(**{"ssl.keystore.location": pem, "ssl.keystore.type": "JKS", "ssl.keystore.password": STORE_PW})
    assert f"ssl.keystore.location {pem} is a PEM file, not a JKS store: set ssl.keystore.type=PEM" in text, text
    text = refused(**{"ssl.truststore.location": pem, "ssl.truststore.type": "BKS"})
    assert "'ssl.truststore.type': expected PEM, PKCS12 or JKS" in text, text


def test_jceks_is_refused_with_the_conversion(pki, tmp_path):
    jceks = pki.keytool_convert(pki.truststore_jks_path, tmp_path / "trust.jceks", "JCEKS", source_type="JKS")
    text = refused(**{"ssl.truststore.location": str(jceks), "ssl.truststore.password": STORE_PW})
    assert f"ssl.truststore.location {jceks} is a JCEKS store" in text and "keytool -importkeystore" in text, text


def test_jks_needs_no_package_beyond_the_standard_library(pki, monkeypatch):
    """The store is read by the package itself (network/jks_file.py): pyjks, and the C extension it
    pulled, are not needed, installed or not."""
    monkeypatch.setitem(sys.modules, "jks", None)  # import jks -> ImportError
    ctx = context(**{"ssl.keystore.location": str(pki.client_keystore_jks_path), "ssl.keystore.password": STORE_PW,
                     "ssl.truststore.location": str(pki.truststore_jks_path)})
    assert ctx.get_ca_certs()


def test_a_jks_store_altered_after_it_was_written_fails_its_integrity_check(pki, tmp_path):
    data = bytearray(pki.truststore_jks_path.read_bytes())
    data[60] ^= 0x01  # a byte of the first entry's certificate
    altered = tmp_path / "altered.jks"
    altered.write_bytes(bytes(data))
    text = refused(**{"ssl.truststore.location": str(altered), "ssl.truststore.password": STORE_PW})
    assert "wrong ssl.truststore.password (the JKS store's integrity check fails with it)" in text, text
