"""A raw SASL probe: SaslHandshake v1 and one SaslAuthenticate v1 over a blocking socket (PLAIN
or OAUTHBEARER, the single-round mechanisms), hand-encoded so that checking the secured fixture
does not depend on the client code under test."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass

from sparkkafka_sink.testing.brokers import _recv_exact, _request

_CLIENT_ID = b"sparkkafka-sasl-probe"


@dataclass(frozen=True)
class SaslProbeResult:
    """What the broker answered: ``handshake_error`` (SaslHandshake), ``mechanisms`` it
    offers, and from SaslAuthenticate (None when the handshake failed) ``error_code`` (0 ok,
    58 SASL_AUTHENTICATION_FAILED), ``error_message``, ``session_lifetime_ms`` (0: no
    re-authentication required) and ``challenge``."""

    handshake_error: int
    mechanisms: tuple[str, ...]
    error_code: int | None = None
    error_message: str | None = None
    session_lifetime_ms: int | None = None
    #: the server's first SaslAuthenticate bytes (OAUTHBEARER: the error JSON of a refused token)
    challenge: str | None = None
    #: with ``hold_s``: whether the connection still answered after the hold
    alive_after_hold: bool | None = None


def _kstr(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def sasl_probe(host: str, port: int, mechanism: str, *, user: str | None = None,
               password: str | None = None, token: str | None = None,
               ssl_context: ssl.SSLContext | None = None, server_hostname: str | None = None,
               timeout: float = 5.0, hold_s: float | None = None) -> SaslProbeResult:
    """Authenticate once with PLAIN (``user``/``password``) or OAUTHBEARER (``token``) and
    return the broker's answers.  ``ssl_context`` for SASL_SSL listeners.  With ``hold_s``,
    a successful authentication is followed, ``hold_s`` seconds later, by an ApiVersions
    request on the same connection: ``alive_after_hold`` says whether it was answered (a
    broker closes a connection whose session expired without re-authentication)."""
    mechanism = mechanism.upper()
    if mechanism == "PLAIN":
        auth = b"\0" + (user or "").encode() + b"\0" + (password or "").encode()
    elif mechanism == "OAUTHBEARER":
        auth = b"n,,\x01auth=Bearer " + (token or "").encode() + b"\x01\x01"
    else:
        raise ValueError(f"sasl_probe does PLAIN and OAUTHBEARER, not {mechanism}")

    def call(sock: socket.socket, api_key: int, version: int, cid: int, body: bytes) -> bytes:
        sock.sendall(_request(api_key, version, cid, _CLIENT_ID, body))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
        (got,) = struct.unpack_from(">i", payload, 0)
        if got != cid:
            raise ConnectionError(f"correlation id mismatch: sent {cid}, got {got}")
        return payload[4:]

    raw = socket.create_connection((host, port), timeout=timeout)
    sock = raw
    try:
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(raw, server_hostname=server_hostname or host)
        sock.settimeout(timeout)
        r = call(sock, 17, 1, 1, _kstr(mechanism))  # SaslHandshake v1
        (herr, n), off = struct.unpack_from(">hi", r, 0), 6
        mechs = []
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", r, off)
            mechs.append(r[off + 2:off + 2 + ln].decode())
            off += 2 + ln
        if herr != 0:
            return SaslProbeResult(herr, tuple(mechs))
        def authenticate(cid: int, data: bytes) -> tuple[int, str | None, bytes, int]:
            r = call(sock, 36, 1, cid, struct.pack(">i", len(data)) + data)  # SaslAuthenticate v1
            (err, mlen), off = struct.unpack_from(">hh", r, 0), 4
            msg = None
            if mlen >= 0:
                msg, off = r[off:off + mlen].decode("utf-8", "replace"), off + mlen
            (blen,) = struct.unpack_from(">i", r, off)
            server_bytes = r[off + 4:off + 4 + max(blen, 0)]
            off += 4 + max(blen, 0)
            (lifetime,) = struct.unpack_from(">q", r, off)
            return err, msg, server_bytes, lifetime

        try:
            err, msg, server_bytes, lifetime = authenticate(2, auth)
            challenge = server_bytes.decode("utf-8", "replace") or None
            if err == 0 and mechanism == "OAUTHBEARER" and server_bytes:
                # RFC 7628: a refused token comes back as an error challenge with error code 0;
                # the client answers %x01 and the server then fails the authentication
                err, msg, _, lifetime = authenticate(3, b"\x01")
        except ConnectionError as e:
            return SaslProbeResult(herr, tuple(mechs), error_code=-1, error_message=str(e))
        alive = None
        if hold_s is not None and err == 0:
            time.sleep(hold_s)
            try:
                call(sock, 18, 0, 4, b"")  # ApiVersions v0
                alive = True
            except (ConnectionError, OSError):
                alive = False
        return SaslProbeResult(herr, tuple(mechs), err, msg, lifetime, challenge, alive)
    finally:
        sock.close()
