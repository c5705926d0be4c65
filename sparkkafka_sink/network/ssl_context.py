"""The ``ssl.SSLContext`` of a producer, from the Java client's ``ssl.*`` options.

Built once per producer (so a bad truststore fails the constructor, not the first send) and
shared by every connection.  Python's ``ssl`` reads PEM only; PKCS12 stores are converted in
memory with ``cryptography``, JKS stores with ``jks_file`` (``key_stores``).  A store's format comes from
its bytes (``key_stores.file_format``); ``ssl.*.type`` JKS and PKCS12 each accept both formats, as
Java's do.  A private key never touches the disk unencrypted: keys that must go through a file
(``load_cert_chain`` takes paths only) are written encrypted with a one-off password into a
private directory and deleted at once.  Error messages name the option and the file, never a
password or key.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkkafka_sink.config_def import Declared, value_of
from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.network import key_stores
from sparkkafka_sink.security_protocol import SECURITY_PROTOCOL, uses_tls
from sparkkafka_sink.tls_keys import TLS_KEYS, TlsSettings

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

STORE_TYPES = ("PEM", "PKCS12", "JKS")
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: TLS 1.3 suites: OpenSSL enables all of them and Python cannot narrow them down.
_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


def build_ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The client context for ``security.protocol`` SSL/SASL_SSL, or None for plaintext ones
    (``config``: the settings by name, as given or parsed: a ``ProducerConfig``, whose
    ``explicit`` keys alone count as given)."""
    protocol = value_of(SECURITY_PROTOCOL, config.get(SECURITY_PROTOCOL.name))
    if not uses_tls(protocol):
        explicit = getattr(config, "explicit", config.keys())
        never_off = TlsSettings.ssl_endpoint_identification_algorithm.key.name  # (on by default, whatever the protocol)
        given = [key.name for key in TLS_KEYS
                 if key.name in explicit and config.get(key.name) not in (None, "") and key.name != never_off]
        if given:
            raise ConfigError(Message("{} given but {} is {}: TLS options need SSL or SASL_SSL",
                                      _listed(sorted(given)), Setting(SECURITY_PROTOCOL.name), protocol))
        return None
    tls = TlsSettings.read(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    algorithm = tls.ssl_endpoint_identification_algorithm.strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(Message("Invalid value {!r} for configuration {!r}: expected 'https' (verify the broker's "
                                  "host name) or '' (do not)", algorithm,
                                  _setting(TlsSettings.ssl_endpoint_identification_algorithm)))
    ctx.check_hostname = algorithm == "https"
    _set_protocols(ctx, tls)
    _set_ciphers(ctx, tls.ssl_cipher_suites)
    _load_trust(ctx, tls)
    _load_identity(ctx, tls)
    return ctx


def _setting(declared: Declared[Any]) -> Setting:
    """The setting ``declared`` as messages name it."""
    return Setting(declared.key.name)


def _listed(keys: list[str]) -> Message:
    """``a, b, c``: the keys as one message part, each a :class:`Setting`."""
    return Message(", ".join("{}" for _ in keys), *map(Setting, keys))


# -- protocols and ciphers ----------------------------------------------------------------
def _set_protocols(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    enabled_setting, protocol_setting = _setting(TlsSettings.ssl_enabled_protocols), _setting(TlsSettings.ssl_protocol)
    enabled = [p.strip() for p in tls.ssl_enabled_protocols.split(",") if p.strip()]
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise ConfigError(Message("Invalid value {!r} for configuration {!r}: expected a list of TLSv1.2, TLSv1.3 "
                                  "(older versions are insecure)", tls.ssl_enabled_protocols, enabled_setting))
    protocol = tls.ssl_protocol.strip()
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise ConfigError(Message("Invalid value {!r} for configuration {!r}: expected TLSv1.3, TLSv1.2 or TLS",
                                  protocol, protocol_setting))
    versions = sorted(_VERSIONS[p] for p in enabled)
    ceiling = _VERSIONS.get(protocol, ssl.TLSVersion.TLSv1_3)
    if versions[0] > ceiling:
        raise ConfigError(Message("{}={} is lower than every version in {}={}", protocol_setting, protocol,
                                  enabled_setting, ",".join(enabled)))
    ctx.minimum_version = versions[0]
    ctx.maximum_version = min(versions[-1], ceiling)


def _openssl_cipher_name(iana: str) -> str:
    """Java/IANA TLS 1.2 suite names (``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``) in OpenSSL's
    spelling (``ECDHE-RSA-AES256-GCM-SHA384``); OpenSSL names pass through."""
    if not iana.startswith("TLS_") or "_WITH_" not in iana:
        return iana
    kx, _, cipher = iana[4:].partition("_WITH_")
    kx = {"RSA": ""}.get(kx, kx.replace("_", "-"))
    parts = cipher.split("_")
    if parts[0] == "AES":  # AES_256_GCM_SHA384 -> AES256-GCM-SHA384
        parts = [f"AES{parts[1]}", *parts[2:]]
    elif parts[0] == "CHACHA20":  # CHACHA20_POLY1305_SHA256 -> CHACHA20-POLY1305
        parts = ["CHACHA20", "POLY1305"]
    name = "-".join(p for p in [kx, *parts] if p)
    return name.replace("AES128-CBC-SHA", "AES128-SHA").replace("AES256-CBC-SHA", "AES256-SHA")


def _set_ciphers(ctx: ssl.SSLContext, suites: str | None) -> None:
    if not suites:
        return
    names = [s.strip() for s in suites.split(",") if s.strip()]
    tls12 = [_openssl_cipher_name(n) for n in names if n not in _TLS13_SUITES]
    if not tls12:
        return  # only TLS 1.3 suites named: OpenSSL offers exactly those
    available = {c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).get_ciphers()} | _all_cipher_names()
    unknown = [n for n, o in zip([n for n in names if n not in _TLS13_SUITES], tls12, strict=True) if o not in available]
    if unknown:
        raise ConfigError(Message("Invalid value for configuration {!r}: unknown or unavailable cipher suite(s) {} "
                                  "(Java/IANA names such as TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, or OpenSSL names)",
                                  _setting(TlsSettings.ssl_cipher_suites), ", ".join(unknown)))
    ctx.set_ciphers(":".join(tls12))


def _all_cipher_names() -> set[str]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except ssl.SSLError:
        return set()
    return {c["name"] for c in ctx.get_ciphers()}


# -- trust ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Store:
    """A trust- or keystore file as its settings name it: its location, the type it was given
    (None: unset) and its password."""

    location: Setting
    type: Setting
    given_type: str | None
    password: str | None


def _truststore(tls: TlsSettings) -> _Store:
    return _Store(_setting(TlsSettings.ssl_truststore_location), _setting(TlsSettings.ssl_truststore_type),
                  tls.ssl_truststore_type, tls.ssl_truststore_password)


def _keystore(tls: TlsSettings) -> _Store:
    return _Store(_setting(TlsSettings.ssl_keystore_location), _setting(TlsSettings.ssl_keystore_type),
                  tls.ssl_keystore_type, tls.ssl_keystore_password)


def _store_type(store: _Store, path: str, data: bytes) -> str:
    """PEM, PKCS12 or JKS: what the file is.  The store's type only has to agree with it, JKS and
    PKCS12 each naming either binary format (Java's ``keystore.type.compat``)."""
    type_setting, location = store.type, store.location
    given = (store.given_type or "").strip().upper()
    if given and given not in STORE_TYPES:
        raise ConfigError(Message("Invalid value {!r} for configuration {!r}: expected PEM, PKCS12 or JKS",
                                  store.given_type, type_setting))
    found = key_stores.file_format(data)
    if found == "JCEKS":
        raise ConfigError(Message("{} {} is a JCEKS store, which is not read here: convert it once to PKCS12 with "
                                  "{} -srcstoretype JCEKS", location, path, key_stores.to_pkcs12_hint(path)))
    if found is None:
        what = f"is not a {given} store: it is" if given in ("JKS", "PKCS12") else "is"
        raise ConfigError(Message("{} {} {} neither PEM text, a PKCS12 store (DER) nor a JKS store "
                                  "(magic 0xFEEDFEED)", location, path, what))
    if given == "PEM" and found != "PEM":
        raise ConfigError(Message("{} {} is not a PEM file: it is a {} store; set {}={} or leave it unset",
                                  location, path, found, type_setting, found))
    if given in ("JKS", "PKCS12") and found == "PEM":
        raise ConfigError(Message("{} {} is a PEM file, not a {} store: set {}=PEM or leave it unset",
                                  location, path, given, type_setting))
    return found


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(Message("Cannot read {} {!r}: {} (in Spark, files named in options must exist where tasks "
                                  "run: ship them with --files / SparkFiles, or give PEM text inline)",
                                  Setting(key), path, e.strerror or e)) from None


def _read_store(store: _Store, path: str) -> tuple[bytes, str]:
    """The bytes of a trust- or keystore file and its format (PEM, PKCS12 or JKS)."""
    data = _read(store.location.key, path)
    return data, _store_type(store, path, data)


def _text(value: str | None) -> str | None:
    return value or None


def _password(value: str | None) -> bytes | None:
    return value.encode() if value else None


def _load_trust(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    store = _truststore(tls)
    location = tls.ssl_truststore_location or None
    inline = tls.ssl_truststore_certificates or None
    inline_setting = _setting(TlsSettings.ssl_truststore_certificates)
    if location and inline:
        raise ConfigError(Message("Give either {} or {}, not both", store.location, inline_setting))
    if inline:
        if "-----BEGIN CERTIFICATE-----" not in inline:
            raise ConfigError(Message("{} must hold PEM text (-----BEGIN CERTIFICATE----- blocks)", inline_setting))
        _load_cadata(ctx, inline_setting, inline)
        return
    if not location:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)  # system CAs, as Java and librdkafka do
        return
    key = store.location.key
    data, kind = _read_store(store, location)
    if kind == "PKCS12":
        _load_cadata(ctx, store.location, _pkcs12_certificates_pem(key, location, data, _password(store.password)))
        return
    if kind == "JKS":
        ders = key_stores.trusted_certificates(key, location, data, TlsSettings.ssl_truststore_password.key.name,
                                               _text(store.password))
        _load_cadata(ctx, Message("{} {}", store.location, location), "".join(ssl.DER_cert_to_PEM_cert(d) for d in ders))
        return
    text = data.decode("ascii", "replace")
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(Message("{} {} is not a PEM certificate file (no -----BEGIN CERTIFICATE-----)",
                                  store.location, location))
    _load_cadata(ctx, Message("{} {}", store.location, location), text)


def _load_cadata(ctx: ssl.SSLContext, what: Setting | Message, pem: str) -> None:
    try:
        ctx.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(Message("Cannot load the certificates of {}: {}", what, e)) from None


def _pkcs12(key: str, path: str, data: bytes, password: bytes | None,
            ) -> tuple[PrivateKeyTypes | None, x509.Certificate | None, list[x509.Certificate]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(data, password)
    except ValueError:
        raise ConfigError(Message("Cannot open {} {} as PKCS12: wrong password ({}) or not a PKCS12 file",
                                  Setting(key), path, Setting(key.rsplit(".", 1)[0] + ".password"))) from None


def _pkcs12_certificates_pem(key: str, path: str, data: bytes, password: bytes | None) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    _, cert, extra = _pkcs12(key, path, data, password)
    certs = ([cert] if cert is not None else []) + list(extra or [])
    if not certs:
        raise ConfigError(Message("{} {} holds no certificates", Setting(key), path))
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


# -- identity (mutual TLS) ----------------------------------------------------------------
def _load_identity(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    store = _keystore(tls)
    location = tls.ssl_keystore_location or None
    chain = tls.ssl_keystore_certificate_chain or None
    key_pem = tls.ssl_keystore_key or None
    chain_setting, key_setting = _setting(TlsSettings.ssl_keystore_certificate_chain), _setting(TlsSettings.ssl_keystore_key)
    if location and (chain or key_pem):
        raise ConfigError(Message("Give either {} or {} + {}, not both", store.location, chain_setting, key_setting))
    if bool(chain) != bool(key_pem):
        raise ConfigError(Message("{} and {} go together (PEM text of the client certificate chain and of its "
                                  "private key)", chain_setting, key_setting))
    key_password = _password(tls.ssl_key_password)
    if chain and key_pem:
        _load_pem_identity(ctx, key_setting.key, chain, key_pem.encode(), key_password)
        return
    if not location:
        return
    key = store.location.key
    data, kind = _read_store(store, location)
    if kind == "PKCS12":
        from cryptography.hazmat.primitives.serialization import Encoding

        private_key, cert, extra = _pkcs12(key, location, data, _password(store.password))
        if private_key is None or cert is None:
            raise ConfigError(Message("{} {} holds no private key with its certificate", store.location, location))
        chain_pem = "".join(c.public_bytes(Encoding.PEM).decode() for c in [cert, *(extra or [])])
        _load_key_object(ctx, key, chain_pem, private_key)
        return
    if kind == "JKS":
        from cryptography.hazmat.primitives.serialization import load_der_private_key

        found = key_stores.identity(key, location, data, _text(store.password), _text(tls.ssl_key_password))
        chain_pem = "".join(ssl.DER_cert_to_PEM_cert(d) for d in found.chain_der)
        try:
            private_key = load_der_private_key(found.private_key_der, None)
        except (ValueError, TypeError) as e:  # cryptography's errors for a key type it cannot use
            raise ConfigError(Message("{} {}: cannot use its private key: {}", store.location, location, e)) from None
        _load_key_object(ctx, key, chain_pem, private_key)
        return
    text = data.decode("ascii", "replace")
    if "PRIVATE KEY-----" not in text or "-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(Message("{} {} must be a PEM file holding the private key and the certificate chain",
                                  store.location, location))
    _load_pem_identity(ctx, key, text, data, key_password)


def _load_pem_identity(ctx: ssl.SSLContext, key: str, chain_pem: str, key_pem: bytes, password: bytes | None) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if b"PRIVATE KEY-----" not in key_pem:
        raise ConfigError(Message("{} must hold a PEM private key (-----BEGIN PRIVATE KEY-----)", Setting(key)))
    try:
        private_key = load_pem_private_key(key_pem[key_pem.find(b"-----BEGIN"):], password)
    except TypeError:
        template = ("The private key of {} is encrypted: set {}" if password is None
                    else "The private key of {} is not encrypted: leave {} unset")
        raise ConfigError(Message(template, Setting(key), _setting(TlsSettings.ssl_key_password))) from None
    except ValueError:
        raise ConfigError(Message("Cannot read the private key of {}: wrong {} or not a PEM key", Setting(key),
                                  _setting(TlsSettings.ssl_key_password))) from None
    _load_key_object(ctx, key, chain_pem, private_key)


def _load_key_object(ctx: ssl.SSLContext, key: str, chain_pem: str, private_key: PrivateKeyTypes) -> None:
    """Hand a key object to OpenSSL through a private, encrypted, immediately deleted file."""
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    if "-----BEGIN CERTIFICATE-----" not in chain_pem:
        raise ConfigError(Message("{}: no certificate (-----BEGIN CERTIFICATE-----) to go with the private key",
                                  Setting(key)))
    one_off = secrets.token_hex(16).encode()
    encrypted = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_off))
    with tempfile.TemporaryDirectory(prefix="sparkkafka-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_file, key_file = Path(tmp, "chain.pem"), Path(tmp, "key.pem")
        cert_file.write_text(chain_pem)
        key_file.write_bytes(encrypted)
        try:
            ctx.load_cert_chain(str(cert_file), str(key_file), password=one_off)
        except ssl.SSLError as e:
            raise ConfigError(Message("{}: the private key does not match the certificate, or the chain is invalid ({})",
                                      Setting(key), e.reason)) from None
