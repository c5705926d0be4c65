"""``security.protocol``: the four ways a client talks to a listener (Java's SecurityProtocol),
and the SASL mechanisms spoken.

The one place that says which protocols use TLS and which SASL, and the one declaration of
``security.protocol`` and ``sasl.mechanism`` (``config_def``), for the producer's configuration,
``network.ssl_context`` and the SASL settings.  It sits at the bottom, as ``redaction`` does: the
driver checks a config without loading the network layer.
"""

from __future__ import annotations

from typing import Any

from sparkkafka_sink.config_def import ConfigKey, value_of

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM", "GSSAPI")

#: the two keys the producer's configuration and the SASL settings both read
SECURITY_PROTOCOL = ConfigKey[str]("security.protocol", "choice", "PLAINTEXT",
                              "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over TLS)",
                              choices=SECURITY_PROTOCOLS)
SASL_MECHANISM = ConfigKey[str | None]("sasl.mechanism", "choice", None,
                           "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI (Kerberos)",
                           choices=SASL_MECHANISMS,
                           unset="from the other SASL settings (PLAIN with a user name, GSSAPI with Kerberos "
                                 "settings); required otherwise")


def uses_tls(protocol: str | None) -> bool:
    return protocol in TLS_PROTOCOLS


def uses_sasl(protocol: str | None) -> bool:
    return protocol in SASL_PROTOCOLS


def parse_security_protocol(value: Any) -> str:
    """The protocol ``value`` names (any case; None: PLAINTEXT), else ``ConfigError`` naming the key."""
    return value_of(SECURITY_PROTOCOL, value)
