"""SASL PLAIN (RFC 4616): one message, user name and password in clear (use it over TLS)."""

from __future__ import annotations

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.network.sasl.client import SaslClient


class PlainClient(SaslClient):
    """``authzid NUL authcid NUL passwd`` with an empty authzid, as Kafka's clients send it
    (the broker would reject an authzid different from the user name anyway)."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str):
        if "\0" in username or "\0" in password:
            # the config layer rejects these; a NUL would shift the fields the broker reads
            raise ValueError("PLAIN user names and passwords cannot contain NUL characters")
        self.username = username
        self._password = password
        self._sent = False
        self.complete = False

    def first_message(self) -> bytes:
        if self._sent:
            raise AuthenticationError("PLAIN: the first message was already sent; use a new client")
        self._sent = True
        self.complete = True
        return b"\0" + self.username.encode("utf-8") + b"\0" + self._password.encode("utf-8")

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise AuthenticationError("PLAIN: a challenge arrived before the first message was sent")
        if challenge:
            raise AuthenticationError(
                f"PLAIN authentication of user {self.username!r}: unexpected {len(challenge)}-byte "
                "challenge after the credentials were sent")
        return None
