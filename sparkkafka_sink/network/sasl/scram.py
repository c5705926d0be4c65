"""SASL SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ScramSaslClient speaks it.

The password never crosses the wire: the client proves it knows it, and the broker proves it
knows the stored keys (the ``v=`` server signature), which we verify -- a broker that cannot
is an impostor.  No channel binding (gs2 header ``n,,``), no authzid, and passwords are UTF-8
without SASLprep, like Kafka (ScramFormatter.normalize).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Callable

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.network.sasl.client import SaslClient

log = logging.getLogger(__name__)

#: mechanism -> hashlib name; Kafka's ScramMechanism enum
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's ScramMechanism.minIterations: a broker asking for fewer is refused (a downgrade attack
#: would make the proof cheap to brute-force)
MIN_ITERATIONS = 4096
#: gs2 header without channel binding or authzid; ``c=`` carries its base64 ("biws")
GS2_HEADER = "n,,"

# ScramMessages' grammar: PRINTABLE is %x21-7E except ","; VALUE is %x01-7F except ","
_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_EXTENSIONS = r"(?:,[A-Za-z]+=[\x01-\x2b\x2d-\x7f]+)*"
_SERVER_FIRST = re.compile(
    r"(?P<reserved>m=[^,]*,)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>" + _B64
    + r"),i=(?P<iterations>[0-9]+)" + _EXTENSIONS)
_SERVER_FINAL = re.compile(
    r"(?:e=(?P<error>[\x01-\x2b\x2d-\x3c\x3e-\x7f]+)|v=(?P<signature>" + _B64 + r"))" + _EXTENSIONS)
_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")


def sasl_name(username: str) -> str:
    """RFC 5802 saslname: ``=`` becomes ``=3D`` and ``,`` becomes ``=2C`` (``=`` first)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def new_nonce() -> str:
    """A client nonce of 192 random bits; base64url has no ``,`` so it is a valid SCRAM nonce."""
    return secrets.token_urlsafe(24)


class ScramClient(SaslClient):
    """One SCRAM exchange: client-first, client-final with proof, then the server-final check.

    ``token_auth`` adds the ``tokenauth=true`` extension Kafka uses for delegation tokens (user
    name = token id, password = token HMAC).  ``nonce`` is injectable for test vectors.
    """

    def __init__(self, mechanism: str, username: str, password: str, *, token_auth: bool = False,
                 nonce: str | Callable[[], str] | None = None):
        if mechanism not in SCRAM_HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r} (expected one of "
                             f"{', '.join(SCRAM_HASHES)})")
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self.username = username
        self._password = password
        self.token_auth = token_auth
        nonce = nonce() if callable(nonce) else (nonce if nonce is not None else new_nonce())
        if not _NONCE.fullmatch(nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self._client_nonce = nonce
        self._client_first_bare: str | None = None
        self._expected_server_signature: bytes | None = None
        self.complete = False

    # -- messages ----------------------------------------------------------------------
    def first_message(self) -> bytes:
        if self._client_first_bare is not None:
            raise AuthenticationError(f"{self.mechanism}: the first message was already sent; "
                                      "use a new client")
        bare = f"n={sasl_name(self.username)},r={self._client_nonce}"
        if self.token_auth:
            bare += ",tokenauth=true"
        self._client_first_bare = bare
        return (GS2_HEADER + bare).encode("utf-8")

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._client_first_bare is None:
            raise self._error("a challenge arrived before the client-first message was sent")
        if self.complete:
            if challenge:
                raise self._error("unexpected challenge after the exchange completed")
            return None
        if self._expected_server_signature is None:
            return self._client_final(challenge)
        self._check_server_final(challenge)
        return None

    def _client_final(self, server_first: bytes) -> bytes:
        text = self._decode(server_first, "server-first")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise self._error("malformed server-first message (expected r=<nonce>,s=<salt>,i=<n>)")
        if match["reserved"]:
            # RFC 5802 5.1: an unknown mandatory extension must fail the exchange
            raise self._error("the broker requires a mandatory SCRAM extension (m=) we do not know")
        nonce = match["nonce"]
        if not nonce.startswith(self._client_nonce):
            raise self._error("invalid server nonce: it does not start with the client nonce")
        iterations = int(match["iterations"])
        if iterations < MIN_ITERATIONS:
            raise self._error(f"the broker asked for {iterations} iterations, less than the minimum "
                              f"{MIN_ITERATIONS} for {self.mechanism}")
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except (binascii.Error, ValueError):
            raise self._error("malformed salt in the server-first message") from None

        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode("utf-8"), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(GS2_HEADER.encode()).decode()},r={nonce}"
        # RFC 5802 AuthMessage: the server-first message exactly as received
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        self._expected_server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: bytes) -> None:
        text = self._decode(server_final, "server-final")
        match = _SERVER_FINAL.fullmatch(text)
        if match is None:
            raise self._error("malformed server-final message (expected v=<signature> or e=<error>)")
        if match["error"] is not None:
            raise self._error(f"the broker answered error {match['error']!r}")
        signature = base64.b64decode(match["signature"])
        assert self._expected_server_signature is not None
        if not hmac.compare_digest(signature, self._expected_server_signature):
            raise self._error("the broker could not prove it knows the password (its server "
                              "signature does not match): it is not the broker holding these "
                              "credentials")
        self.complete = True
        log.debug("%s: server signature verified for user %r", self.mechanism, self.username)

    # -- helpers -----------------------------------------------------------------------
    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def _decode(self, data: bytes, what: str) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise self._error(f"the {what} message is not UTF-8") from None

    def _error(self, what: str) -> AuthenticationError:
        return AuthenticationError(f"{self.mechanism} authentication of user {self.username!r} "
                                   f"failed: {what}")
