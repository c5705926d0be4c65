"""ConnectionSetup: the requests a new connection sends before it carries the producer's.

First ApiVersions (versions are negotiated per broker; the answer also carries the cluster's
finalized features), then, when the listener wants SASL, SaslHandshake and SaslAuthenticate
(KIP-152; ``SaslAuthenticator`` builds and reads them).  A live connection authenticates again
before the broker's session expires (KIP-368).  The client owns the connections: it gives this
its ``send``, and is told to ``close`` a connection whose set-up failed or that it is ``ready``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sparkkafka_sink.errors import AuthenticationError, KafkaError, Message, Setting, UnsupportedVersionError
from sparkkafka_sink.network.authenticator import SaslAuthenticator
from sparkkafka_sink.network.connection import BrokerConnection, ConnectionState
from sparkkafka_sink.network.in_flight import ClientResponse

# messages.X, not "from ...messages import X": mypy cannot see a module __getattr__'s names in an import cycle
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import SUPPORTED_VERSIONS, ApiKey
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol
from sparkkafka_sink.protocol.error_codes import broker_error
from sparkkafka_sink.protocol.schema import ProtocolMessage

if TYPE_CHECKING:
    from sparkkafka_sink.network.sasl.settings import SaslSettings

log = logging.getLogger(__name__)


class ConnectionSetup:
    def __init__(self, sasl: SaslSettings | None, software_version: str, *, send: Callable[..., Any],
                 close: Callable[[BrokerConnection, KafkaError, float], None],
                 ready: Callable[[BrokerConnection, float], None]):
        #: ``network.sasl.settings.SaslSettings`` when the listener wants SASL
        self.sasl = sasl
        self.software_version = software_version
        self._send = send
        self._close = close
        self._ready = ready
        self._api_versions_version: dict[int, int] = {}
        self._features_epoch = -1
        #: the cluster's finalized features (name -> max level) from the newest ApiVersions answer
        self.finalized_features: dict[str, int] = {}
        #: SASL sessions renewed on live connections (KIP-368)
        self.reauthentications = 0

    # -- ApiVersions ---------------------------------------------------------------------
    def send_api_versions(self, conn: BrokerConnection, now: float) -> None:
        """The first request of a connection, once TCP (and TLS) are up."""
        version = self._api_versions_version.get(conn.node_id, SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1])
        request = messages.ApiVersionsRequest(client_software_name="sparkkafka-sink",
                                              client_software_version=self.software_version)
        self._send(conn.node_id, request, lambda resp: self._handle_api_versions(conn, resp), now,
                   version=version)

    def _handle_api_versions(self, conn: BrokerConnection, resp: ClientResponse) -> None:
        if resp.response is None or conn.sock is None:
            return  # the close path already accounted for it
        body = resp.response
        now = resp.received_ms
        retry = BrokerProtocol.api_versions_retry(body, resp.request.api_version)
        if retry is not None:
            self._api_versions_version[conn.node_id] = retry
            self.send_api_versions(conn, now)
            return
        if body.error_code:
            self._close(conn, broker_error(body.error_code, f"ApiVersions from {conn.address}"), now)
            return
        conn.set_api_versions({k.api_key: (k.min_version, k.max_version) for k in body.api_keys}, now)
        epoch = getattr(body, "finalized_features_epoch", -1)
        if epoch is not None and epoch >= 0 and epoch >= self._features_epoch:
            self._features_epoch = epoch
            self.finalized_features = {f.name: f.max_version_level for f in body.finalized_features or ()}
        if self.sasl is not None:
            self.authenticate(conn, now)
        else:
            self._ready(conn, now)

    # -- SASL (KIP-152), renewed before the session expires (KIP-368) -------------------------
    def authenticate(self, conn: BrokerConnection, now: float) -> None:
        """Start a SASL exchange: on a new connection, or on a READY one whose session is due."""
        assert self.sasl is not None, "only a client with SASL settings authenticates"
        reauth = conn.state is ConnectionState.READY
        auth = SaslAuthenticator(self.sasl, conn.address, reauthentication=reauth, now_ms=now)
        conn.mark_authenticating(auth, now)
        if reauth:
            log.debug("re-authenticating to %s before its SASL session expires", conn.address)
        if conn.api_versions.get(ApiKey.SASL_HANDSHAKE, (0, 0))[1] < 1:
            self._close(conn, AuthenticationError(Message(
                "Broker {} cannot authenticate with SASL over Kafka requests (SaslHandshake v1, Kafka 1.0 or "
                "newer): is {} right for this listener?", conn.address, Setting("security.protocol"))), now)
            return
        self._send_sasl(conn, auth, auth.handshake_request(), self._handle_sasl_handshake, now)

    @staticmethod
    def reauthentication_due(conn: BrokerConnection, now: float) -> bool:
        return (conn.state is ConnectionState.READY and conn.reauthenticate_at_ms is not None
                and now >= conn.reauthenticate_at_ms)

    @staticmethod
    def time_to_reauthentication(connections: Iterable[BrokerConnection], now: float) -> float:
        due = [c.reauthenticate_at_ms for c in connections
               if c.reauthenticate_at_ms is not None and c.state is ConnectionState.READY]
        return max(min(due) - now, 0.0) if due else float("inf")

    def _send_sasl(self, conn: BrokerConnection, auth: SaslAuthenticator, request: ProtocolMessage,
                   handler: Callable, now: float) -> None:
        try:
            self._send(conn.node_id, request, lambda resp: handler(conn, auth, resp), now)
        except UnsupportedVersionError as e:
            self._close(conn, AuthenticationError(Message("SASL with broker {}: {}", conn.address, e)), now)

    @staticmethod
    def _sasl_answer(conn: BrokerConnection, auth: SaslAuthenticator, resp: ClientResponse) -> ProtocolMessage | None:
        """The answer for ``auth``, while its connection stands (None: none, or too late)."""
        return resp.response if conn.sock is not None and conn.authenticator is auth else None

    def _handle_sasl_handshake(self, conn: BrokerConnection, auth: SaslAuthenticator, resp: ClientResponse) -> None:
        answer = self._sasl_answer(conn, auth, resp)
        if answer is None:
            return
        try:
            request = auth.on_handshake(answer)
        except AuthenticationError as e:
            self._close(conn, e, resp.received_ms)
            return
        self._send_sasl(conn, auth, request, self._handle_sasl_authenticate, resp.received_ms)

    def _handle_sasl_authenticate(self, conn: BrokerConnection, auth: SaslAuthenticator,
                                  resp: ClientResponse) -> None:
        answer = self._sasl_answer(conn, auth, resp)
        if answer is None:
            return
        now = resp.received_ms
        try:
            request = auth.on_authenticate(answer)
        except AuthenticationError as e:
            self._close(conn, e, now)
            return
        if request is not None:
            self._send_sasl(conn, auth, request, self._handle_sasl_authenticate, now)
            return
        conn.authenticator = None
        conn.reauthenticate_at_ms = auth.reauthenticate_at(now)
        if conn.state is ConnectionState.REAUTHENTICATING:
            self.reauthentications += 1
            conn.mark_ready(now)
        else:
            self._ready(conn, now)
