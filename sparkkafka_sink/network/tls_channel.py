"""TlsChannel: TLS over memory buffers, so the selector loop drives it like any other bytes.

``ssl.SSLObject`` with two ``MemoryBIO`` s (as Java's ``SSLEngine`` in Kafka's
``SslTransportLayer``): the connection keeps its plain non-blocking socket, its scatter-gather
writes and its read loop, and this object turns plaintext into TLS records and back.  The
handshake advances whenever bytes arrive; nothing ever blocks.  Failures become ``SslError`` s
that say why in words (unknown CA, host name mismatch, expired certificate, a broker that does
not speak TLS).
"""

from __future__ import annotations

import ssl

from sparkkafka_sink.errors import KafkaConnectionError, Message, Setting, SslError

#: plaintext parts smaller than this are joined before encryption (one TLS record, not many)
_COALESCE_BYTES = 16 * 1024
_READ_BYTES = 1 << 17


class TlsChannel:
    def __init__(self, context: ssl.SSLContext, host: str, address: str):
        self.address = address
        self.host = host
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        server_hostname = host if context.check_hostname or _is_name(host) else None
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                     server_hostname=server_hostname)
        self.handshake_done = False
        self.received_any = False

    # -- handshake ------------------------------------------------------------------------
    def do_handshake(self) -> bool:
        """Advance the handshake with what has arrived; True once it is complete."""
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLCertVerificationError as e:
            raise SslError(Message("TLS handshake with {} failed: the broker's certificate did not verify: {}",
                                   self.address, _verify_reason(e, self.host))) from None
        except ssl.SSLError as e:
            raise SslError(self._handshake_failure(e)) from None
        self.handshake_done = True
        return True

    def _handshake_failure(self, e: ssl.SSLError) -> Message:
        reason = (e.reason or str(e)).replace("_", " ").lower()
        if e.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
            return Message("TLS handshake with {} failed: the broker did not answer with TLS ({}); is it a PLAINTEXT "
                           "or SASL_PLAINTEXT listener? Then set {} accordingly", self.address, reason,
                           Setting("security.protocol"))
        if "certificate required" in reason or ("alert" in reason and ("handshake failure" in reason
                                                                        or "bad certificate" in reason)):
            # ssl.client.auth is the broker's setting, not the client's: plain text
            return Message("TLS handshake with {} failed: the broker rejected us ({}); a listener with "
                           "ssl.client.auth=required needs a client certificate: set {} (or {} + {})", self.address,
                           reason, Setting("ssl.keystore.location"), Setting("ssl.keystore.certificate.chain"),
                           Setting("ssl.keystore.key"))
        return Message("TLS handshake with {} failed: {}", self.address, reason)

    def eof_error(self) -> KafkaConnectionError:
        """What a connection closed by the broker in the middle of things means."""
        if not self.handshake_done:
            return TlsHandshakeClosed(Message(
                "TLS handshake with {} failed: the broker closed the connection {}; is it a PLAINTEXT or "
                "SASL_PLAINTEXT listener? Then set {} accordingly", self.address,
                "before answering" if not self.received_any else "during the handshake",
                Setting("security.protocol")))
        return KafkaConnectionError(f"Connection to {self.address} was closed by the broker")


    # -- data -----------------------------------------------------------------------------
    def encrypt(self, parts: list) -> bytes:
        """TLS records for plaintext ``parts`` (small ones joined first)."""
        tls = self._tls
        small: list = []
        small_bytes = 0
        for part in parts:
            n = len(part)
            if n < _COALESCE_BYTES:
                small.append(part)
                small_bytes += n
                if small_bytes >= _COALESCE_BYTES:
                    tls.write(b"".join(small))
                    small, small_bytes = [], 0
                continue
            if small:
                tls.write(b"".join(small))
                small, small_bytes = [], 0
            tls.write(part)
        if small:
            tls.write(b"".join(small))
        return self._outgoing.read()

    def pending_output(self) -> bytes:
        """Handshake messages, alerts and post-handshake replies waiting to be sent."""
        return self._outgoing.read() if self._outgoing.pending else b""

    def feed(self, data: bytes) -> list[bytes]:
        """Give bytes from the socket; returns the plaintext they completed (maybe none)."""
        if data:
            self.received_any = True
            self._incoming.write(data)
        if not self.handshake_done:
            return []
        out = []
        tls = self._tls
        while True:
            try:
                chunk = tls.read(_READ_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                raise KafkaConnectionError(f"Connection to {self.address} was closed by the broker (TLS close_notify)") from None
            except ssl.SSLError as e:  # e.g. TLS 1.3: the broker refuses our certificate after the handshake
                raise SslError(self._handshake_failure(e)) from None
            if not chunk:
                break
            out.append(chunk)
        return out


class TlsHandshakeClosed(KafkaConnectionError):
    """The broker hung up in the middle of the TLS handshake.  A plaintext listener does that
    (it reads our ClientHello as an absurd frame size), but so may a broker shutting down:
    retriable, until it happens several times in a row (see ``network.hang_ups``)."""


def _is_name(host: str) -> bool:
    """SNI carries host names only, never IP addresses."""
    import ipaddress

    try:
        ipaddress.ip_address(host.strip("[]"))
        return False
    except ValueError:
        return True


def _verify_reason(e: ssl.SSLCertVerificationError, host: str) -> str:
    message = getattr(e, "verify_message", None) or str(e)
    kind = _VERIFY_KINDS.get(getattr(e, "verify_code", 0))  # 0: X509_V_OK, no kind
    if kind == "expired":
        return f"certificate has expired ({message})"
    if kind == "unknown CA":
        return Message("unknown CA: {}; give the CA that signed the broker's certificate in {} or {}", message,
                       Setting("ssl.truststore.location"), Setting("ssl.truststore.certificates"))
    if kind == "host name" or "hostname" in message.lower() or "ip address mismatch" in message.lower():
        return Message("host name mismatch: the certificate is not valid for {!r} ({}); {}= (empty) turns host name "
                       "verification off", host, message, Setting("ssl.endpoint.identification.algorithm"))
    return message


#: OpenSSL's X509_V_ERR_* numbers of the failures users meet most
_VERIFY_KINDS = {10: "expired", 2: "unknown CA", 19: "unknown CA", 20: "unknown CA", 21: "unknown CA",
                 62: "host name", 64: "host name"}
