"""Test material for TLS and SASL: the secured listeners of
:class:`~sparkkafka_sink.testing.apache_kafka.ApacheKafka` and what a test needs around them,
one module per job:

* ``pki``: :class:`TestPki`, a throw-away test CA and the certificates the TLS tests need (a good
  broker certificate for ``127.0.0.1``/``localhost``, one for another host name only, an expired
  one, one from an unknown CA, a client certificate for mutual TLS) as PEM files, PKCS#12 stores
  and a JKS truststore; :class:`CertKey`, one certificate with its key and files.
* ``token_endpoint``: :class:`TokenEndpoint`, an OAuth 2 client-credentials endpoint on
  127.0.0.1 issuing :func:`unsecured_jwt` tokens, which Kafka's default OAUTHBEARER validator
  accepts.
* ``broker_security``: :class:`BrokerSecurity`, the broker's side: the extra :data:`LISTENERS`
  and their ``server.properties`` keys, the SASL users, the authorizer.
* ``client_config``: :func:`librdkafka_config`, confluent-kafka settings for a listener (the
  independent reader).
* ``sasl_probe``: :func:`sasl_probe`, one hand-encoded SASL exchange (checks the fixture without
  the client under test).
* ``__main__``: ``python -m sparkkafka_sink.testing.security`` runs a secured node by hand.

Use::

    pki = TestPki(tmp_dir)
    cluster = ApacheKafka(nodes=1, security=BrokerSecurity(pki)).start()
    cluster.bootstrap("SASL_SSL")        # "127.0.0.1:<port>"
    librdkafka_config(cluster, "SASL_SSL", "SCRAM-SHA-512")
"""

from sparkkafka_sink.testing.brokers import HOST  # noqa: F401 (the address every listener binds)
from sparkkafka_sink.testing.security.broker_security import (
    LISTENERS,
    SASL_MECHANISMS,
    SCRAM_MECHANISMS,
    WRONG_PASSWORD,
    BrokerSecurity,
    Listener,
)
from sparkkafka_sink.testing.security.client_config import librdkafka_config
from sparkkafka_sink.testing.security.pki import CertKey, TestPki
from sparkkafka_sink.testing.security.sasl_probe import SaslProbeResult, sasl_probe
from sparkkafka_sink.testing.security.token_endpoint import (
    OAUTH_CLIENT_ID,
    OAUTH_CLIENT_SECRET,
    TokenEndpoint,
    unsecured_jwt,
)

__all__ = [
    "TestPki", "CertKey", "TokenEndpoint", "unsecured_jwt", "BrokerSecurity", "Listener",
    "LISTENERS", "SASL_MECHANISMS", "SCRAM_MECHANISMS", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET",
    "WRONG_PASSWORD", "librdkafka_config", "sasl_probe", "SaslProbeResult",
]
