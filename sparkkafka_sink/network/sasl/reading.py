"""Reading the ``sasl.*`` keys: the key names every mechanism's reader shares, and the checks of a
value's presence and type, each error naming its key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from sparkkafka_sink.cloud.databricks import KEY as SERVICE_CREDENTIAL
from sparkkafka_sink.errors import ConfigError, Message, Setting

MECHANISM = "sasl.mechanism"
JAAS = "sasl.jaas.config"
USERNAME = "sasl.username"
PASSWORD = "sasl.password"
AWS_REGION = "sasl.aws.region"
SERVICE_NAME = "sasl.kerberos.service.name"
__all__ = ["MECHANISM", "JAAS", "USERNAME", "PASSWORD", "AWS_REGION", "SERVICE_CREDENTIAL", "SERVICE_NAME", "given",
           "text", "keys_part"]


def given(value: Any) -> TypeGuard[Any]:  # narrows away None
    """Set, and not blank."""
    return value is not None and not (isinstance(value, str) and value.strip() == "")


def text(config: Mapping[str, Any], key: str, *, strip: bool = True) -> str | None:
    """``key``'s string (stripped unless ``strip`` is False), None when unset or blank."""
    value = config.get(key)
    if not given(value):
        return None
    if not isinstance(value, str):
        raise ConfigError(Message("Invalid configuration {!r}: expected a string, got {}", Setting(key),
                                  type(value).__name__))
    return value.strip() if strip else value


def keys_part(keys: list[str]) -> Message:
    """``'a', 'b'``: the keys as one message part, each a :class:`Setting`."""
    return Message(", ".join("{!r}" for _ in keys), *map(Setting, keys))
