"""The ``ssl.*`` keys, declared once (``config_def``): what each accepts, its default (Java's)
and meaning.  The TLS context (``network.ssl_context``) reads them as :class:`TlsSettings`; the
producer's configuration takes them among its own keys, as Java's ``ProducerConfig`` takes
``SslConfigs``.  At the bottom, beside ``sasl_keys``: the network layer reads them without the
producer's configuration."""

from __future__ import annotations

from sparkkafka_sink.config_def import Declared, Settings, declarations, text

__all__ = ["TLS_KEYS", "TlsSettings"]


def _optional_text(name: str, doc: str, unset: str = "") -> Declared[str | None]:
    return Declared(text(name, doc, unset=unset))


class TlsSettings(Settings):
    """The ``ssl.*`` settings, read as typed attributes: ``TlsSettings.read(config)``."""

    ssl_truststore_location = _optional_text("ssl.truststore.location",
                                             "CA certificates to trust: a PEM, PKCS12 or JKS file",
                                             unset="the system's CAs")
    ssl_truststore_type = _optional_text("ssl.truststore.type",
                                         "PEM, PKCS12 or JKS (JKS and PKCS12 accept either, as in Java)",
                                         unset="from the file's content")
    ssl_truststore_password = _optional_text(
        "ssl.truststore.password",
        "password of a PKCS12 or JKS truststore (a JKS one is read without it unchecked, as Java does)")
    ssl_truststore_certificates = _optional_text("ssl.truststore.certificates",
                                                 "CA certificates as PEM text (instead of a file)")
    ssl_keystore_location = _optional_text("ssl.keystore.location",
                                           "mutual TLS: client key and certificate, a PEM, PKCS12 or JKS file")
    ssl_keystore_type = _optional_text("ssl.keystore.type",
                                       "PEM, PKCS12 or JKS (JKS and PKCS12 accept either, as in Java)",
                                       unset="from the file's content")
    ssl_keystore_password = _optional_text("ssl.keystore.password", "password of a PKCS12 or JKS keystore")
    ssl_keystore_certificate_chain = _optional_text("ssl.keystore.certificate.chain",
                                                    "mutual TLS: client certificate chain as PEM text")
    ssl_keystore_key = _optional_text("ssl.keystore.key", "mutual TLS: client private key as PEM text")
    ssl_key_password = _optional_text("ssl.key.password",
                                      "password of an encrypted PEM private key, or of a JKS keystore's key",
                                      unset="ssl.keystore.password")
    ssl_endpoint_identification_algorithm = Declared(text(
        "ssl.endpoint.identification.algorithm",
        "'https' verifies the broker's host name against its certificate; '' turns that off", "https"))
    ssl_enabled_protocols = Declared(text("ssl.enabled.protocols", "TLS versions allowed", "TLSv1.2,TLSv1.3"))
    ssl_protocol = Declared(text("ssl.protocol", "highest TLS version offered (TLSv1.3, TLSv1.2)", "TLSv1.3"))
    ssl_cipher_suites = _optional_text("ssl.cipher.suites", "TLS 1.2 cipher suites (Java/IANA or OpenSSL names)",
                                       unset="OpenSSL's")

#: the TLS keys, in the order the reference lists them
TLS_KEYS = declarations(TlsSettings)
