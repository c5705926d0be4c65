"""JWS compact tokens (``header.payload.signature``): their claims, read without verification.

We only read ``exp``/``iat``/``sub`` to schedule refreshes and to name the principal in
messages; the broker is the one who verifies.  Writing is for Kafka's unsecured login only
(an unsigned token).  Errors say what is wrong, never what the token is.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any


def _b64url_decode(part: str) -> bytes:
    standard = part.replace("-", "+").replace("_", "/")
    return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWS compact token, decoded WITHOUT verifying its signature.
    ValueError says what is wrong, never what the token is."""
    if not isinstance(token, str):
        raise ValueError(f"a JWT is a str, not {type(token).__name__}")
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise ValueError(f"not a JWT: expected header.payload.signature (3 parts separated by "
                         f"'.'), found {len(parts)} part(s)")
    try:
        payload = _b64url_decode(parts[1])
    except (binascii.Error, ValueError):
        raise ValueError("not a JWT: the payload is not base64url") from None
    try:
        claims = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not a JWT: the payload is not JSON") from None
    if not isinstance(claims, dict):
        raise ValueError("not a JWT: the payload is not a JSON object")
    return claims


def claim_ms(claims: Mapping[str, Any], name: str) -> int | None:
    """A time claim (``exp``, ``iat``: seconds) in milliseconds; None when absent."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"the JWT claim '{name}' is not a number of seconds")
    return round(value * 1000)


def claims_subject(claims: Mapping[str, Any], name: str = "sub") -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and value.strip() else None


def unsigned_jwt(claims: Mapping[str, Any]) -> str:
    """``{"alg":"none"}`` and ``claims`` with an empty signature, compact as Kafka writes it."""
    header = _b64url_encode(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    payload = _b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}."
