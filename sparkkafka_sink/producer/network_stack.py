"""The network stack of a producer configuration: security, metadata and the NetworkClient.

One place turns a validated ``ProducerConfig`` into connections, so the producer and the
driver's ``BlockingAdmin`` reach the cluster the same way (TLS, SASL, timeouts, backoffs).
Security comes first: a bad truststore or missing credentials fail here, before any thread
starts, and the first OAUTHBEARER token is fetched here, not on the I/O thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkkafka_sink.network.client import NetworkClient
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.network.sasl.settings import sasl_settings
from sparkkafka_sink.network.ssl_context import build_ssl_context
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.version import __version__

if TYPE_CHECKING:
    from sparkkafka_sink.network.sasl.settings import SaslSettings


@dataclass
class NetworkStack:
    metadata: Metadata
    client: NetworkClient
    #: the SASL settings (their token refresher, for OAUTHBEARER), or None
    sasl: SaslSettings | None

    def close(self) -> None:
        self.client.close()
        self.close_security()

    def close_security(self) -> None:
        if self.sasl is not None:
            self.sasl.close()


def check_security(config: ProducerConfig, tls_files: bool = True) -> None:
    """``ConfigError`` unless the security settings would serve a connection: SASL in full, and
    the TLS stores (``tls_files``: when they can be read here) -- without connecting."""
    sasl = sasl_settings(config)
    if sasl is not None:
        sasl.close()
    if tls_files:
        build_ssl_context(config)


def network_stack(config: ProducerConfig, client_id: str, *, max_in_flight: int | None = None,
                  allow_auto_topic_creation: bool | None = None) -> NetworkStack:
    """Metadata and a NetworkClient for ``config``; ``max_in_flight`` and
    ``allow_auto_topic_creation`` default to the configuration's."""
    c = config
    ssl_context = build_ssl_context(c)
    sasl = sasl_settings(c)
    if sasl is not None:
        sasl.prepare()
    metadata = Metadata(c.bootstrap_servers, max_age_ms=c.metadata_max_age_ms,
                        refresh_backoff_ms=c.retry_backoff_ms, max_idle_ms=c.metadata_max_idle_ms)
    client = NetworkClient(
        metadata, client_id=client_id, request_timeout_ms=c.request_timeout_ms,
        max_in_flight=c.max_in_flight_requests_per_connection if max_in_flight is None else max_in_flight,
        reconnect_backoff_ms=c.reconnect_backoff_ms, reconnect_backoff_max_ms=c.reconnect_backoff_max_ms,
        connection_setup_timeout_ms=c.socket_connection_setup_timeout_ms,
        connection_setup_timeout_max_ms=c.socket_connection_setup_timeout_max_ms,
        connections_max_idle_ms=c.connections_max_idle_ms, send_buffer_bytes=c.send_buffer_bytes,
        receive_buffer_bytes=c.receive_buffer_bytes,
        allow_auto_topic_creation=(c.allow_auto_create_topics if allow_auto_topic_creation is None
                                   else allow_auto_topic_creation),
        software_version=__version__, ssl_context=ssl_context, sasl=sasl)
    return NetworkStack(metadata, client, sasl)
