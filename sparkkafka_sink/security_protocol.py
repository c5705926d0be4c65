"""``security.protocol``: the four ways a client talks to a listener (Java's SecurityProtocol).

The one place that says which of them use TLS and which SASL, for the producer's config check,
``network.ssl_context`` and the SASL settings.  It sits at the bottom, as ``redaction`` does: the driver checks a config without loading the network layer (only ``errors``, below it).
"""

from __future__ import annotations

from typing import Any

from sparkkafka_sink.errors import ConfigError, Message, Setting

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


def uses_tls(protocol: str | None) -> bool:
    return protocol in TLS_PROTOCOLS


def uses_sasl(protocol: str | None) -> bool:
    return protocol in SASL_PROTOCOLS


def parse_security_protocol(key: str, value: Any) -> str:
    """The protocol ``value`` names (any case; None: PLAINTEXT), else ``ConfigError`` naming ``key``:
    the one check of the setting, for the producer's configuration and the SASL settings alike."""
    if value is None:
        return "PLAINTEXT"
    protocol = value.strip().upper() if isinstance(value, str) else None
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(Message("Invalid value {!r} for configuration {!r}: expected one of {}", value, Setting(key),
                                  ", ".join(SECURITY_PROTOCOLS)))
    return protocol
