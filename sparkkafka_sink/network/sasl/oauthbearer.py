"""SASL OAUTHBEARER (RFC 7628), as Kafka's OAuthBearerSaslClient speaks it.

The client sends its bearer token (and optional extensions such as Confluent Cloud's
``logicalCluster``) in one message.  The broker answers an empty challenge on success; on a bad
token it answers a JSON error challenge (``{"status":"invalid_token"}``), the client must reply
``0x01`` and the broker then fails the SaslAuthenticate request -- we keep the JSON so the final
error can say why.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping

from sparkkafka_sink.errors import AuthenticationError, ConfigError, Message, Setting
from sparkkafka_sink.network.sasl.client import SaslClient

log = logging.getLogger(__name__)

SEPARATOR = "\x01"
#: the key of the token itself in the client's key/value pairs: no extension may use it
AUTH_KEY = "auth"
# OAuthBearerClientInitialResponse's patterns (RFC 7628 3.1)
EXTENSION_KEY = re.compile(r"[A-Za-z]+")
EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
# RFC 6750 b64token, the token part of Kafka's AUTH_PATTERN
_B64TOKEN = re.compile(r"[-_~+/.a-zA-Z0-9]+=*")
_MAX_DETAIL = 500


#: where extensions come from unless the caller says: the setting, quoted
_EXTENSIONS = Message("{!r}", Setting("sasl.oauthbearer.extensions"))


def validate_extensions(extensions: Mapping[str, str], where: str = _EXTENSIONS) -> None:
    """Kafka's OAuthBearerClientInitialResponse.validateExtensions, as a ConfigError naming
    ``where`` (quoted already; a :class:`Message` naming the setting).  Messages name the
    extension, never its value (it may be sensitive)."""
    for name, value in extensions.items():
        if name == AUTH_KEY:
            raise ConfigError(Message("Invalid configuration {}: the extension name '{}' is reserved for the token",
                                      where, AUTH_KEY))
        if not isinstance(name, str) or not EXTENSION_KEY.fullmatch(name):
            raise ConfigError(Message("Invalid configuration {}: extension name {!r} is invalid (letters A-Z and "
                                      "a-z only)", where, name))
        if not isinstance(value, str) or not EXTENSION_VALUE.fullmatch(value):
            raise ConfigError(Message("Invalid configuration {}: the value of extension '{}' is invalid (printable "
                                      "ASCII, space, tab, CR or LF; not empty)", where, name))


def initial_response(token_value: str, extensions: Mapping[str, str] | None = None) -> bytes:
    """``n,,\\x01auth=Bearer <token>[\\x01<key>=<value>]*\\x01\\x01`` (RFC 7628 3.1, no authzid)."""
    if not _B64TOKEN.fullmatch(token_value):
        raise AuthenticationError("OAUTHBEARER: the token is not a valid bearer token (RFC 6750 "
                                  "b64token: letters, digits, -._~+/ and trailing '=')")
    extensions = dict(extensions or {})
    validate_extensions(extensions)
    pairs = [f"{AUTH_KEY}=Bearer {token_value}"] + [f"{k}={v}" for k, v in extensions.items()]
    return ("n,," + SEPARATOR + SEPARATOR.join(pairs) + SEPARATOR + SEPARATOR).encode("utf-8")


class OAuthBearerClient(SaslClient):
    """One OAUTHBEARER exchange for one token (``principal`` is only for messages)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token_value: str, extensions: Mapping[str, str] | None = None, *,
                 principal: str | None = None):
        self._token_value = token_value
        self.extensions = dict(extensions or {})
        validate_extensions(self.extensions)
        self.principal = principal
        self._sent = False
        self._failed = False
        #: the broker's error challenge, decoded (a dict when it is JSON), once it sent one
        self.error: dict | str | None = None
        self._error_text: str | None = None
        self.complete = False

    def first_message(self) -> bytes:
        if self._sent:
            raise AuthenticationError("OAUTHBEARER: the first message was already sent; use a new "
                                      "client")
        message = initial_response(self._token_value, self.extensions)
        self._sent = True
        return message

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise self._failure("a challenge arrived before the token was sent")
        if self.complete:
            if challenge:
                raise self._failure("unexpected challenge after the exchange completed")
            return None
        if self._failed:
            # the broker must fail the request after our 0x01; it sent another challenge instead
            raise self._failure("the broker kept the exchange going after rejecting the token")
        if not challenge:
            self.complete = True
            log.debug("OAUTHBEARER: authenticated as %r", self.principal)
            return None
        self._failed = True
        text = bytes(challenge).decode("utf-8", errors="replace")
        self._error_text = text[:_MAX_DETAIL]
        try:
            self.error = json.loads(text)
        except ValueError:
            self.error = self._error_text
        log.debug("OAUTHBEARER: the broker rejected the token of %r: %s; answering 0x01",
                  self.principal, self._error_text)
        return SEPARATOR.encode()

    def failure_detail(self) -> str | None:
        """The broker's error challenge, e.g. ``{"status":"invalid_token"}`` (it holds no secret:
        status, scope and openid-configuration per RFC 7628 3.2.2)."""
        return self._error_text

    def _failure(self, what: str) -> AuthenticationError:
        detail = f" (broker said {self._error_text})" if self._error_text else ""
        return AuthenticationError(f"OAUTHBEARER authentication of {self.principal!r} failed: "
                                   f"{what}{detail}")
