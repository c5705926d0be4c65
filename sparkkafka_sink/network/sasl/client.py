"""The interface every SASL mechanism implements, so the connection only moves bytes.

A mechanism is sans-I/O: the connection sends :meth:`SaslClient.first_message` in the first
SaslAuthenticate request, then feeds each SaslAuthenticate response's ``auth_bytes`` (error code
0) to :meth:`SaslClient.evaluate` and sends what it returns, until it returns ``None``.  A new
client is made for every (re-)authentication: SCRAM nonces and OAUTHBEARER tokens must be fresh.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class SaslClient(ABC):
    """One authentication exchange, from the client's side.

    ``complete`` turns True once the client has nothing more to check or send: right after
    :meth:`first_message` for PLAIN, after the verified server-final message for SCRAM, after the
    broker's empty success answer for OAUTHBEARER.  Errors are ``AuthenticationError`` naming the
    mechanism and principal, never a secret.
    """

    #: the name sent in SaslHandshake: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"
    mechanism: str
    complete: bool = False

    @abstractmethod
    def first_message(self) -> bytes:
        """The initial response (all supported mechanisms are client-first)."""

    @abstractmethod
    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next message for the broker's ``challenge``, or None when there is nothing to send.

        A complete client answers an empty challenge with None (the broker's last answer carries
        no bytes for PLAIN) and rejects a non-empty one.
        """

    def failure_detail(self) -> str | None:
        """What the broker told us about a failure before the exchange ended, for error messages
        (e.g. OAUTHBEARER's JSON error challenge); None when it told us nothing."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mechanism} complete={self.complete}>"
