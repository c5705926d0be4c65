"""The independent reader's side of a secured node: confluent-kafka (librdkafka) settings for a
listener, so what our producer wrote is checked by a client that shares none of its code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sparkkafka_sink.testing.security.broker_security import LISTENERS, SASL_MECHANISMS, BrokerSecurity
from sparkkafka_sink.testing.security.token_endpoint import TokenEndpoint

if TYPE_CHECKING:
    from sparkkafka_sink.testing.apache_kafka import ApacheKafka


def librdkafka_config(cluster: ApacheKafka, listener: str, mechanism: str | None = None, *,
                      user: str | None = None, password: str | None = None,
                      client_cert: bool | None = None, verify_hostname: bool = True,
                      ca: str | Path | None = None,
                      token_endpoint: TokenEndpoint | None = None,
                      oauth_principal: str | None = None, **extra: object) -> dict[str, object]:
    """confluent-kafka settings to reach ``cluster`` (an :class:`ApacheKafka` with
    ``security``) on ``listener``.

    TLS listeners trust the test CA (or ``ca``, a PEM path) and verify the host name unless
    ``verify_hostname=False``; ``client_cert`` (default: True on ``MTLS``) adds the client
    certificate.  SASL listeners need ``mechanism``: PLAIN/SCRAM log in as ``user`` (default
    the security's default user) with its password (or ``password``); OAUTHBEARER fetches tokens
    from ``token_endpoint`` (``sasl.oauthbearer.method=oidc``) when given, else uses
    librdkafka's built-in unsecured JWT with principal ``oauth_principal`` (default "alice").
    ``extra`` settings are added last (they override): pass dotted names through a dict,
    ``librdkafka_config(c, "SSL", **{"client.id": "x"})``.
    """
    security: BrokerSecurity | None = cluster.security
    if security is None:
        raise ValueError("the cluster has no security (ApacheKafka(..., security=BrokerSecurity(...)))")
    if listener not in LISTENERS and listener != "PLAINTEXT":
        raise ValueError(f"unknown listener {listener!r}")
    spec = LISTENERS.get(listener)
    protocol = spec.protocol if spec else "PLAINTEXT"
    conf: dict[str, object] = {"bootstrap.servers": cluster.bootstrap(listener),
                               "security.protocol": protocol.lower()}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(ca or security.pki.ca_cert_path)
        conf["ssl.endpoint.identification.algorithm"] = "https" if verify_hostname else "none"
        if client_cert is None:
            client_cert = bool(spec and spec.client_auth)
        if client_cert:
            conf["ssl.certificate.location"] = str(security.pki.client.chain_path)
            conf["ssl.key.location"] = str(security.pki.client.key_path)
    if protocol.startswith("SASL"):
        if mechanism is None:
            raise ValueError(f"listener {listener} needs a SASL mechanism ({', '.join(SASL_MECHANISMS)})")
        mechanism = mechanism.upper()
        conf["sasl.mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            if token_endpoint is not None:
                conf.update({"sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": token_endpoint.client_id,
                             "sasl.oauthbearer.client.secret": token_endpoint.client_secret,
                             "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
                             "sasl.oauthbearer.scope": token_endpoint.default_scope})
            else:
                conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
                conf["sasl.oauthbearer.config"] = f"principal={oauth_principal or 'alice'} scope=kafka"
        else:
            name = user or security.default_user
            if password is None:
                password = security.credentials(mechanism, name)[1]
            conf["sasl.username"] = name
            conf["sasl.password"] = password
    elif mechanism is not None:
        raise ValueError(f"listener {listener} ({protocol}) has no SASL")
    conf.update(extra)
    return conf
