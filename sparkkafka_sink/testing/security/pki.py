"""A throw-away PKI for the TLS tests, written with the ``cryptography`` package: a test CA and
the certificates a secured broker and its clients need, as PEM files, PKCS#12 stores and (with
``keytool``) JKS trust and key stores.  Fresh keys per run, so no secret is ever checked in."""

from __future__ import annotations

import datetime as _dt
import ipaddress
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sparkkafka_sink.testing.brokers import HOST

if TYPE_CHECKING:  # cryptography is imported when a PKI is made, not with this module
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    #: the keys ``key_type`` makes
    PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass
class CertKey:
    """A certificate with its private key and the files they were written to.

    ``chain_path``: the leaf followed by its issuing CA (PEM); ``key_path``: the unencrypted
    PKCS#8 key (PEM); ``bundle_path``: key then chain in one file (a Kafka ``PEM`` keystore
    location, or Python's ``load_cert_chain(bundle_path)``).
    """

    name: str
    cert: x509.Certificate
    key: PrivateKey
    chain: list[x509.Certificate]  # [leaf, issuer, ...]
    cert_path: Path    # the leaf alone
    chain_path: Path   # leaf + issuer
    key_path: Path     # PKCS#8, unencrypted
    bundle_path: Path  # key + leaf + issuer

    @property
    def cert_pem(self) -> str:
        return _cert_pem(self.cert)

    @property
    def chain_pem(self) -> str:
        return "".join(_cert_pem(c) for c in self.chain)

    @property
    def key_pem(self) -> str:
        return _key_pem(self.key)


def _cert_pem(cert: x509.Certificate) -> str:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: PrivateKey, password: str | None = None) -> str:
    from cryptography.hazmat.primitives import serialization

    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             enc).decode()


class TestPki:
    """A throw-away PKI written into ``directory`` (created if missing) at construction.

    Attributes (paths are :class:`pathlib.Path`; ``*_pem`` are ``str``):

    * ``ca`` (:class:`CertKey`, self-signed test CA), ``ca_cert_path``, ``ca_pem``
    * ``broker``: SAN ``IP:127.0.0.1, DNS:localhost``, signed by ``ca``
    * ``wrong_host``: SAN ``DNS:wrong-host.invalid`` only, signed by ``ca``
    * ``expired``: SAN ``IP:127.0.0.1, DNS:localhost``, signed by ``ca``, expired
      ``expired_days`` days ago
    * ``unknown_ca`` (a second, unrelated self-signed CA), ``unknown_ca_cert_path``, and
      ``untrusted``: SAN ``IP:127.0.0.1, DNS:localhost`` signed by ``unknown_ca``
    * ``client``: ``CN=client``, extended key usage clientAuth, signed by ``ca`` (mutual TLS);
      ``client_key_encrypted_path`` holds its key as encrypted PKCS#8 PEM with ``key_password``,
      ``client_bundle_encrypted_path`` that key plus the chain
    * ``truststore_p12_path``: PKCS#12 holding ``ca`` as a trusted certificate (Java's format,
      as ``keytool -importcert`` makes it), password ``store_password``
    * ``client_keystore_p12_path``: PKCS#12 with the client key, certificate and ``ca``,
      password ``store_password``
    * ``truststore_jks_path``: JKS truststore (``keytool -importcert``) with ``ca``, password
      ``store_password``; None when ``keytool`` is missing or ``jks=False``
    * ``client_keystore_jks_path``: JKS keystore (``keytool -importkeystore`` from
      ``client_keystore_p12_path``), store and key password ``store_password``;
      ``client_keystore_jks_key_password_path`` the same with the key under ``key_password``
      (Java's ``ssl.key.password``); None like ``truststore_jks_path``

    ``key_type`` is "rsa" (2048 bit, default) or "ec" (P-256).  The class is not a test
    (``__test__ = False``) despite its name.
    """

    __test__ = False

    def __init__(self, directory: str | Path, *, key_type: str = "rsa",
                 key_password: str = "key-secret", store_password: str = "store-secret",
                 jks: bool = True, expired_days: int = 1):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        if key_type not in ("rsa", "ec"):
            raise ValueError(f"key_type must be 'rsa' or 'ec', got {key_type!r}")
        self._x509, self._hashes, self._NameOID = x509, hashes, NameOID
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key_type = key_type
        self.key_password = key_password
        self.store_password = store_password
        now = _dt.datetime.now(_dt.timezone.utc)
        self._now = now
        local = [x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]
        server_eku = [ExtendedKeyUsageOID.SERVER_AUTH]
        client_eku = [ExtendedKeyUsageOID.CLIENT_AUTH]

        self.ca = self._make("ca", "sparkkafka test CA", None, is_ca=True)
        self.unknown_ca = self._make("unknown-ca", "sparkkafka unknown CA", None, is_ca=True)
        self.broker = self._make("broker", "127.0.0.1", self.ca, san=local, eku=server_eku)
        self.wrong_host = self._make("wrong-host", "wrong-host.invalid", self.ca,
                                     san=[x509.DNSName("wrong-host.invalid")], eku=server_eku)
        self.expired = self._make(
            "expired", "127.0.0.1", self.ca, san=local, eku=server_eku,
            not_before=now - _dt.timedelta(days=30 + expired_days),
            not_after=now - _dt.timedelta(days=expired_days))
        self.untrusted = self._make("untrusted", "127.0.0.1", self.unknown_ca, san=local,
                                    eku=server_eku)
        self.client = self._make("client", "client", self.ca, eku=client_eku)

        self.ca_cert_path = self.ca.cert_path
        self.ca_pem = self.ca.cert_pem
        self.unknown_ca_cert_path = self.unknown_ca.cert_path

        # encrypted PKCS#8 variant of the client key
        self.client_key_encrypted_path = self.dir / "client.key.encrypted.pem"
        self.client_key_encrypted_pem = _key_pem(self.client.key, key_password)
        self.client_key_encrypted_path.write_text(self.client_key_encrypted_pem)
        self.client_bundle_encrypted_path = self.dir / "client.bundle.encrypted.pem"
        self.client_bundle_encrypted_path.write_text(self.client_key_encrypted_pem
                                                     + self.client.chain_pem)

        # PKCS#12 stores
        enc = serialization.BestAvailableEncryption(store_password.encode())
        self.truststore_p12_path = self.dir / "truststore.p12"
        self.truststore_p12_path.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.ca.cert, b"ca")], enc))
        self.client_keystore_p12_path = self.dir / "client.keystore.p12"
        self.client_keystore_p12_path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"client", self.client.key, self.client.cert, [self.ca.cert], enc))

        self.truststore_jks_path: Path | None = None
        self.client_keystore_jks_path: Path | None = None
        self.client_keystore_jks_key_password_path: Path | None = None
        if jks and shutil.which("keytool"):
            self.truststore_jks_path = self.dir / "truststore.jks"
            self._keytool_import(self.truststore_jks_path, "JKS")
            self.client_keystore_jks_path = self.dir / "client.keystore.jks"
            self.keytool_convert(self.client_keystore_p12_path, self.client_keystore_jks_path, "JKS")
            self.client_keystore_jks_key_password_path = self.dir / "client.keystore.keypass.jks"
            self.keytool_convert(self.client_keystore_p12_path, self.client_keystore_jks_key_password_path, "JKS",
                                 alias="client", key_password=key_password)

    # -- internals ------------------------------------------------------------------------------
    def _new_key(self) -> PrivateKey:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        if self.key_type == "ec":
            return ec.generate_private_key(ec.SECP256R1())
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def _make(self, name: str, cn: str, issuer: CertKey | None, *, is_ca: bool = False,
              san: list[x509.GeneralName] | None = None, eku: list[x509.ObjectIdentifier] | None = None,
              not_before: _dt.datetime | None = None,
              not_after: _dt.datetime | None = None) -> CertKey:
        x509, hashes, NameOID = self._x509, self._hashes, self._NameOID
        key = self._new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sparkkafka-sink tests"),
                             x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        issuer_name = subject if issuer is None else issuer.cert.subject
        signing_key = key if issuer is None else issuer.key
        not_before = not_before or self._now - _dt.timedelta(hours=1)
        not_after = not_after or self._now + _dt.timedelta(days=3650 if is_ca else 825)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(not_before).not_valid_after(not_after)
             .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None if not is_ca else 0),
                            critical=True)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                            critical=False))
        if is_ca:
            b = b.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
        else:
            if issuer is None:
                raise ValueError(f"{name}: only a CA signs its own certificate")
            b = b.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=self.key_type == "rsa", data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False,
                decipher_only=False), critical=True)
            b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer.key.public_key()), critical=False)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        if eku:
            b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        cert = b.sign(signing_key, hashes.SHA256())
        chain = [cert] if issuer is None else [cert, *issuer.chain]
        ck = CertKey(name=name, cert=cert, key=key, chain=chain,
                     cert_path=self.dir / f"{name}.crt.pem",
                     chain_path=self.dir / f"{name}.chain.pem",
                     key_path=self.dir / f"{name}.key.pem",
                     bundle_path=self.dir / f"{name}.bundle.pem")
        ck.cert_path.write_text(ck.cert_pem)
        ck.chain_path.write_text(ck.chain_pem)
        ck.key_path.write_text(ck.key_pem)
        ck.key_path.chmod(0o600)
        ck.bundle_path.write_text(ck.key_pem + ck.chain_pem)
        ck.bundle_path.chmod(0o600)
        return ck

    def _keytool_import(self, path: Path, store_type: str) -> None:
        _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_cert_path),
                 "-keystore", str(path), "-storetype", store_type, "-storepass", self.store_password)

    def keytool_convert(self, source: Path, dest: Path, dest_type: str, *, source_type: str = "PKCS12",
                        alias: str | None = None, key_password: str | None = None,
                        dest_alias: str | None = None) -> Path:
        """``keytool -importkeystore`` of ``source`` into ``dest`` (added to it if it exists), both
        under ``store_password``; when ``alias`` is given only that entry, its key under
        ``key_password`` and named ``dest_alias`` if those are given.  Needs ``keytool`` on PATH."""
        args = ["-importkeystore", "-noprompt", "-srckeystore", str(source), "-srcstoretype", source_type,
                "-srcstorepass", self.store_password, "-destkeystore", str(dest), "-deststoretype", dest_type,
                "-deststorepass", self.store_password]
        if alias is not None:
            args += ["-srcalias", alias]
            if key_password is not None:
                args += ["-destkeypass", key_password]
            if dest_alias is not None:
                args += ["-destalias", dest_alias]
        _keytool(*args)
        return dest

    # -- conveniences for Python clients --------------------------------------------------------
    def client_ssl_context(self, *, client_cert: bool = False, check_hostname: bool = True,
                           ca: CertKey | None = None) -> ssl.SSLContext:
        """A Python ``ssl.SSLContext`` trusting ``ca`` (default the test CA), optionally with
        the client certificate for mutual TLS."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=str((ca or self.ca).cert_path))
        ctx.check_hostname = check_hostname
        if client_cert:
            ctx.load_cert_chain(str(self.client.chain_path), str(self.client.key_path))
        return ctx

    def __repr__(self) -> str:
        return f"<TestPki {self.key_type} {self.dir}>"


def _keytool(*args: str) -> None:
    cmd = ["keytool", *args]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {(proc.stdout + proc.stderr).strip()}")
