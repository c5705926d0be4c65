"""SaslAuthenticator: one SASL exchange on one connection, as Kafka frames it (KIP-152).

SaslHandshake names the mechanism; then SaslAuthenticate requests carry the mechanism's
messages (``network.sasl``) until it is complete.  The same exchange runs again on a live
connection before the broker's session expires (KIP-368 re-authentication): the session
lifetime the broker grants comes back in the last SaslAuthenticate answer.  It only builds
requests and reads answers; ``ConnectionSetup`` sends them.  Failures become
``AuthenticationError`` s naming the mechanism, the user and the broker, never a secret.
"""

from __future__ import annotations

import random

from sparkkafka_sink.errors import AuthenticationError, KafkaError, Message, Setting
from sparkkafka_sink.network.sasl.client import SaslClient
from sparkkafka_sink.network.sasl.settings import SaslSettings

# messages.X, not "from ...messages import X": mypy cannot see a module __getattr__'s names in an import cycle
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.error_codes import (
    ERROR_CLASSES,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from sparkkafka_sink.protocol.schema import ProtocolMessage

#: Kafka's broker (KafkaChannel) accepts at most one re-authentication per second per connection
_MIN_REAUTH_INTERVAL_MS = 1050.0


class SaslAuthenticator:
    def __init__(self, settings: SaslSettings, address: str, *, reauthentication: bool = False, now_ms: float = 0.0):
        self.settings = settings
        self.started_ms = now_ms
        self.address = address
        self.reauthentication = reauthentication
        self.mechanism = settings.mechanism
        self._client: SaslClient | None = None
        #: ms the broker lets this session live (0: for ever), from the last answer
        self.session_lifetime_ms = 0
        self.complete = False

    def _fail(self, reason: str | KafkaError) -> AuthenticationError:
        """``reason``: text, or the error itself, so the keys its message names stay data."""
        what = "re-authentication" if self.reauthentication else "authentication"
        who = repr(self.settings.principal) if self.settings.principal else "the token"
        return AuthenticationError(Message("SASL {} {} of {} with broker {} failed: {}", self.mechanism, what, who,
                                           self.address, reason))

    def handshake_request(self) -> ProtocolMessage:
        return messages.SaslHandshakeRequest(mechanism=self.mechanism)

    def on_handshake(self, response: ProtocolMessage) -> ProtocolMessage:
        """The first SaslAuthenticate request, after the broker accepted the mechanism."""
        error = ERROR_CLASSES.get(response.error_code)
        if error is UnsupportedSaslMechanismError:
            enabled = ", ".join(response.mechanisms or ()) or "none"
            raise self._fail(Message("the listener does not enable {} (it enables: {}); set {} to one of those",
                                     self.mechanism, enabled, Setting("sasl.mechanism")))
        if error is IllegalSaslStateError and self.reauthentication:
            # Kafka refuses a re-authentication less than 1 s after the previous one; a new
            # connection authenticates afresh
            failure = self._fail("the broker refused to renew the session (ILLEGAL_SASL_STATE); reconnecting")
            failure.retriable = True
            raise failure
        if error is IllegalSaslStateError:
            raise self._fail(Message("the listener does not use SASL (ILLEGAL_SASL_STATE); set {} to SSL or "
                                     "PLAINTEXT for it, or use its SASL listener", Setting("security.protocol")))
        if response.error_code:
            raise self._fail(f"SaslHandshake answered with error code {response.error_code}")
        try:
            self._client = client = self.settings.new_client(self.address.rpartition(":")[0].strip("[]"))
            first = client.first_message()
        except KafkaError as e:  # e.g. the token endpoint cannot be reached
            failure = self._fail(e)
            failure.retriable = e.retriable  # an identity provider that is down may come back
            raise failure from None
        return messages.SaslAuthenticateRequest(auth_bytes=first)

    def on_authenticate(self, response: ProtocolMessage) -> ProtocolMessage | None:
        """The next SaslAuthenticate request, or None when the exchange is complete."""
        if response.error_code:
            detail = response.error_message or f"error code {response.error_code}"
            extra = self._client.failure_detail() if self._client is not None else None
            if extra and extra not in detail:
                detail += f" ({extra})"
            if ERROR_CLASSES.get(response.error_code) is SaslAuthenticationFailedError:
                detail += "; check the credentials" if self.mechanism != "OAUTHBEARER" else "; check the token"
            raise self._fail(detail)
        self.session_lifetime_ms = getattr(response, "session_lifetime_ms", 0) or 0
        client = self._client
        if client is None:
            raise self._fail("SaslAuthenticate answered before SaslHandshake")
        try:
            reply = client.evaluate(bytes(response.auth_bytes or b""))
        except AuthenticationError as e:  # e.g. a SCRAM server signature that does not verify
            raise self._fail(e) from None
        if reply is not None:
            return messages.SaslAuthenticateRequest(auth_bytes=reply)
        if not client.complete:
            raise self._fail("the broker ended the exchange before the mechanism was complete")
        self.complete = True
        return None

    def reauthenticate_at(self, authenticated_ms: float) -> float | None:
        """When to re-authenticate: at 85-95 % of the session, as Java does (None: never), but
        not within Kafka's minimum of 1 s after this exchange began (the broker refuses that)."""
        if self.session_lifetime_ms <= 0:
            return None
        planned = authenticated_ms + self.session_lifetime_ms * random.uniform(0.85, 0.95)
        return max(planned, self.started_ms + _MIN_REAUTH_INTERVAL_MS)
