"""HangUpDiagnosis: a listener that wants another ``security.protocol``, told apart from bad luck.

A listener rarely says that the client's ``security.protocol`` is wrong: a plaintext one hangs up
in our TLS handshake (it reads the ClientHello as an absurd frame size), a SASL one hangs up at
the first request after ApiVersions, a TLS one answers our plaintext ApiVersions with a TLS record
or not at all.  A broker shutting down hangs up too, so one hang-up only earns its error a hint;
``HANG_UPS_FATAL`` in a row from one broker make it fatal.
"""

from __future__ import annotations

from sparkkafka_sink.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    Message,
    Setting,
    SslError,
)
from sparkkafka_sink.network.connection import BrokerConnection, ConnectionState
from sparkkafka_sink.network.tls_channel import TlsHandshakeClosed

#: consecutive hang-ups of one broker (in the TLS handshake, or at the first request after set-up)
#: that make it a listener wanting another security.protocol, not bad luck
HANG_UPS_FATAL = 3
_PROTOCOL = Setting("security.protocol")


class HangUpDiagnosis:
    """One client's hang-ups per broker, and what they say about the listener."""

    def __init__(self, sasl: bool):
        #: with SASL a hang-up after set-up is not a listener wanting SASL
        self._sasl = sasl
        self._tls: dict[int, int] = {}
        self._after_setup: dict[int, int] = {}

    def check_plaintext_answer(self, conn: BrokerConnection, data: bytes) -> None:
        """A TLS record (alert or handshake) where a plaintext ApiVersions answer was due."""
        if (conn.tls is None and conn.state is ConnectionState.CHECKING_API_VERSIONS
                and data[:1] in (b"\x15", b"\x16") and data[1:2] == b"\x03"):
            raise SslError(Message("Broker {} answered with TLS: this listener wants TLS; set {}=SSL (or SASL_SSL)",
                                   conn.address, _PROTOCOL))

    def answered(self, conn: BrokerConnection, count: int) -> None:
        """``count`` answers arrived: on a READY connection they prove the listener speaks with us."""
        if conn.state is ConnectionState.READY and count:
            conn.responses_after_ready += count
            self._after_setup.pop(conn.node_id, None)

    def set_up(self, node_id: int) -> None:
        """A connection to ``node_id`` is READY: its TLS handshakes do get through."""
        self._tls.pop(node_id, None)

    def tls_hang_up(self, node_id: int, error: KafkaError | None) -> KafkaError | None:
        """``error``, or a non-retriable ``SslError`` when it is the ``HANG_UPS_FATAL``-th hang-up
        in a row in the TLS handshake."""
        if isinstance(error, TlsHandshakeClosed):
            hang_ups = self._tls[node_id] = self._tls.get(node_id, 0) + 1
            if hang_ups >= HANG_UPS_FATAL:
                return SslError(Message("{} (it hung up {} times in a row)", error, hang_ups))
        return error

    def explain(self, conn: BrokerConnection, error: KafkaError,
                was_ready: bool) -> tuple[KafkaError, bool]:
        """``error`` with a hint at the security.protocol the listener may want, and whether it
        has become fatal (the ``HANG_UPS_FATAL``-th hang-up in a row right after set-up)."""
        if (was_ready and not self._sasl and conn.responses_after_ready == 0
                and isinstance(error, KafkaConnectionError) and not isinstance(error, KafkaTimeoutError)):
            hang_ups = self._after_setup[conn.node_id] = self._after_setup.get(conn.node_id, 0) + 1
            hint = Message("{} right after the connection was set up: if this listener wants SASL, set "
                           "{}=SASL_PLAINTEXT or SASL_SSL and {}", error, _PROTOCOL, Setting("sasl.mechanism"))
            if hang_ups >= HANG_UPS_FATAL:
                return AuthenticationError(Message("{} (it hung up {} times in a row)", hint, hang_ups)), True
            return KafkaConnectionError(hint), False
        if (conn.state is ConnectionState.CHECKING_API_VERSIONS and conn.tls is None
                and isinstance(error, KafkaConnectionError) and not isinstance(error, SslError)):
            return KafkaConnectionError(Message("{} before answering ApiVersions: if this listener wants TLS, set "
                                                "{}=SSL or SASL_SSL", error, _PROTOCOL)), False
        return error, False

