"""OAuthBearerToken: a bearer token and its expiry, and what a token provider may return.

A provider is any callable returning a JWT str (expiry from its ``exp`` claim), a
``(token, expires_at)`` pair or an :class:`OAuthBearerToken`; :func:`coerce_token` makes a
token of each.  The token's value never reaches a repr, a log line or an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.oauth.jwt import claim_ms, claims_subject, jwt_claims

#: a (token, expiry) tuple's expiry above this is in milliseconds (aws-msk-iam-sasl-signer
#: returns ms); as seconds it would be past the year 5000
_MS_THRESHOLD = 10**11


class TokenUnavailableError(AuthenticationError):
    """No valid token: the identity provider could not be reached (or answered 5xx/429) for the
    whole retry window, or the current token expired while refreshing kept failing.  Retriable,
    unlike a rejected client secret: the provider may come back."""

    retriable = True


@dataclass(frozen=True, eq=False)
class OAuthBearerToken:
    """A bearer token and what we need to know about it; the repr never shows the value."""

    value: str = field(repr=False)
    expires_at_ms: int
    principal: str | None = None
    issued_at_ms: int | None = None

    def __repr__(self) -> str:
        return (f"OAuthBearerToken(principal={self.principal!r}, expires_at_ms={self.expires_at_ms}, "
                f"issued_at_ms={self.issued_at_ms})")

    __str__ = __repr__


ProviderResult = str | tuple | OAuthBearerToken
TokenProvider = Callable[[], ProviderResult]


def read_jwt(value: str, source: str, opaque: bool = False) -> tuple[dict[str, Any], int | None, int | None]:
    """A token's claims and its ``exp`` and ``iat`` times (ms; None when absent);
    AuthenticationError naming ``source`` when it cannot be read -- but with ``opaque`` a token
    that is no JWT at all has no claims (an identity provider's opaque token)."""
    claims: dict[str, Any] = {}
    try:
        claims = jwt_claims(value)
        return claims, claim_ms(claims, "exp"), claim_ms(claims, "iat")
    except ValueError as e:
        if opaque and not claims:
            return {}, None, None
        raise AuthenticationError(f"{source} returned a token we cannot read: {e}") from None


def token_from_jwt(value: str, source: str) -> OAuthBearerToken:
    """A token whose expiry is its ``exp`` claim; AuthenticationError naming ``source`` if it has
    none (we could not know when to refresh it)."""
    claims, expires_at_ms, issued_at_ms = read_jwt(value, source)
    if expires_at_ms is None:
        raise AuthenticationError(f"{source} returned a JWT without an 'exp' claim: return "
                                  "(token, expires_at_epoch_seconds) instead")
    return OAuthBearerToken(value.strip(), expires_at_ms, claims_subject(claims), issued_at_ms)


def coerce_token(result: Any, source: str) -> OAuthBearerToken:
    """What a provider may return: a JWT str (expiry from ``exp``), a ``(token, expires_at)``
    tuple (epoch seconds; milliseconds above 10**11, as aws-msk-iam-sasl-signer returns), or an
    :class:`OAuthBearerToken`."""
    if isinstance(result, OAuthBearerToken):
        return result
    if isinstance(result, (bytes, bytearray)):
        result = bytes(result).decode("utf-8", errors="replace")
    if isinstance(result, str):
        if not result.strip():
            raise AuthenticationError(f"{source} returned an empty token")
        return token_from_jwt(result, source)
    if isinstance(result, (tuple, list)) and len(result) == 2:
        value, expiry = result
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", errors="replace")
        if not isinstance(value, str) or not value.strip():
            raise AuthenticationError(f"{source} returned a (token, expires_at) pair whose token is "
                                      "not a non-empty str")
        if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
            raise AuthenticationError(f"{source} returned a (token, expires_at) pair whose expiry is "
                                      f"a {type(expiry).__name__}, not epoch seconds")
        expires_at_ms = int(expiry if expiry > _MS_THRESHOLD else expiry * 1000)
        principal = issued_at_ms = None
        try:                                                  # a JWT? then we know more
            claims = jwt_claims(value)
            principal, issued_at_ms = claims_subject(claims), claim_ms(claims, "iat")
        except ValueError:
            pass
        return OAuthBearerToken(value.strip(), expires_at_ms, principal, issued_at_ms)
    raise AuthenticationError(f"{source} returned a {type(result).__name__}; expected a JWT str, a "
                              "(token, expires_at_epoch_seconds) tuple or an OAuthBearerToken")
