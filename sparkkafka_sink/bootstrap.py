"""``bootstrap.servers``: the brokers a client asks first, declared once (``config_def``).  The
producer's configuration takes it among its keys; Amazon MSK's IAM sign-in
(``network.sasl.aws_msk_iam``) reads the cluster's region from its host names.  At the bottom,
beside ``security_protocol``."""

from __future__ import annotations

from sparkkafka_sink.config_def import ConfigKey, Invalid
from sparkkafka_sink.errors import Message

__all__ = ["BOOTSTRAP_SERVERS"]


def _bootstrap(value: object) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' (or a list of such) -> [(host, port), ...]."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise Invalid(_BOOTSTRAP)
    out = []
    for item in items:
        item = str(item).strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise Invalid(_BOOTSTRAP, Message("{!r} is not host:port with a port in [1, 65535]", item))
        out.append((host, int(port)))
    if not out:
        raise Invalid(_BOOTSTRAP, "it names no host:port")
    return out


_BOOTSTRAP = "a comma-separated list of host:port"


BOOTSTRAP_SERVERS = ConfigKey[list[tuple[str, int]]](
    "bootstrap.servers", "custom", None, "host:port list used to discover the cluster", parser=_bootstrap,
    accepts=_BOOTSTRAP, unset="required")
