"""Java key stores for Python's TLS: which format a store file is, from its bytes, and what a JKS
store holds.

Java's ``keystore.type.compat`` (on since JDK 9) lets type JKS and type PKCS12 each open both
formats, so the format comes from the file: JKS starts with the magic 0xFEEDFEED, JCEKS with
0xCECECECE, PKCS12 is DER (a SEQUENCE with a long-form length), PEM is text.  JKS is read by
``jks_file`` (the standard library: no extra package).  Passwords follow Java: the store password checks
the store's integrity (a truststore read without one skips that check, as
``KeyStore.load(stream, null)`` does) and the key password opens the private key.  Messages name
the option and the file, never a password.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.network import jks_file

JKS_MAGIC = jks_file.MAGIC
JCEKS_MAGIC = b"\xce\xce\xce\xce"


def file_format(data: bytes) -> str | None:
    """'JKS', 'JCEKS', 'PKCS12' or 'PEM' from a store file's bytes; None when it is none of them."""
    if data[:4] == JKS_MAGIC:
        return "JKS"
    if data[:4] == JCEKS_MAGIC:
        return "JCEKS"
    # a PKCS12 PFX is a DER SEQUENCE far longer than 127 bytes: 0x30, then a long-form length
    # (0x81-0x84) or BER's indefinite one (0x80)
    if len(data) > 1 and data[0] == 0x30 and 0x80 <= data[1] <= 0x84:
        return "PKCS12"
    if b"-----BEGIN " in data:
        return "PEM"
    return None


def to_pkcs12_hint(path: str) -> str:
    """The one-off ``keytool`` command that turns a Java store into PKCS12."""
    return (f"keytool -importkeystore -srckeystore {path} -destkeystore {path}.p12 "
            "-deststoretype PKCS12")


@dataclass(frozen=True)
class Identity:
    """A keystore's private key (PKCS#8 DER) and its certificate chain (DER, leaf first)."""

    private_key_der: bytes
    chain_der: list[bytes]


def _load(location_key: str, path: str, data: bytes, password_key: str, password: str | None) -> jks_file.JksStore:
    try:
        return jks_file.load(data, password)
    except jks_file.JksIntegrityError:
        raise ConfigError(Message("{} {}: wrong {} (the JKS store's integrity check fails with it)",
                                  Setting(location_key), path, Setting(password_key))) from None
    except jks_file.JksError as e:  # a cut or corrupt file
        raise ConfigError(Message("{} {} is not a readable JKS store: {}", Setting(location_key), path, e)) from None


def trusted_certificates(location_key: str, path: str, data: bytes, password_key: str,
                         password: str | None) -> list[bytes]:
    """The certificates a JKS truststore makes trusted (DER): its trusted-certificate entries
    and, as Java's trust manager does, the leaf of each key entry.  Without a password the
    certificates are read without the integrity check, as Java reads them."""
    store = _load(location_key, path, data, password_key, password)
    certs = [der for _, der in sorted(store.certificates.items())]
    certs += [entry.chain[0] for _, entry in sorted(store.private_keys.items()) if entry.chain]
    if not certs:
        raise ConfigError(Message("{} {} holds no certificates", Setting(location_key), path))
    return certs


def identity(location_key: str, path: str, data: bytes, store_password: str | None,
             key_password: str | None) -> Identity:
    """The one private key of a JKS keystore and its chain.  ``key_password`` None means
    ``ssl.key.password`` is unset: the key opens with the store password, as in Java."""
    if store_password is None:
        raise ConfigError(Message("{} {} is a JKS keystore: set {} (Java needs it too; {} defaults to it)",
                                  Setting(location_key), path, Setting("ssl.keystore.password"),
                                  Setting("ssl.key.password")))
    store = _load(location_key, path, data, "ssl.keystore.password", store_password)
    aliases = sorted(store.private_keys)
    if not aliases:
        held = f" (only trusted certificates: {', '.join(sorted(store.certificates))})" if store.certificates else ""
        raise ConfigError(Message("{} {} holds no private key{}: mutual TLS needs the client's key with its "
                                  "certificate chain (a truststore goes in {})", Setting(location_key), path, held,
                                  Setting("ssl.truststore.location")))
    if len(aliases) > 1:
        raise ConfigError(Message("{} {} holds {} private keys ({}): a TLS client presents one, so keep only the "
                                  "client's (keytool -delete -alias ...)", Setting(location_key), path, len(aliases),
                                  ", ".join(aliases)))
    entry = store.private_keys[aliases[0]]
    try:
        private_key_der = entry.recover(key_password if key_password is not None else store_password)
    except jks_file.JksKeyError:
        hint = (Message("wrong {}", Setting("ssl.key.password")) if key_password is not None else
                Message("it does not open with {}: set {}, the key's own password", Setting("ssl.keystore.password"),
                        Setting("ssl.key.password")))
        raise ConfigError(Message("{} {}: cannot decrypt the private key {!r}: {}", Setting(location_key), path,
                                  aliases[0], hint)) from None
    except jks_file.JksError as e:  # another protection algorithm (JCEKS keys in a JKS file), a cut key
        raise ConfigError(Message("{} {}: cannot read the private key {!r}: {}", Setting(location_key), path,
                                  aliases[0], e)) from None
    if not entry.chain:
        raise ConfigError(Message("{} {}: the private key {!r} has no certificate chain", Setting(location_key), path,
                                  aliases[0]))
    return Identity(private_key_der, list(entry.chain))
