"""Google Cloud Managed Service for Apache Kafka: the OAUTHBEARER token Google's Java login
callback handler (``com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler``) makes.

The token is JWT-shaped, three base64url parts: the header ``{"typ": "JWT", "alg":
"GOOG_OAUTH2_TOKEN"}``, the claims ``exp`` (the access token's expiry), ``iat``, ``scope``
("kafka") and ``sub`` (the service account's e-mail), and the Google access token itself --
unsigned: the service checks the access token.  The credentials are the application default
ones (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's, the metadata server's on GCE/GKE/Dataproc),
through google-auth (the ``[gcp]`` extra), scoped to cloud-platform and refreshed as they expire.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkkafka_sink.errors import AuthenticationError, ConfigError
from sparkkafka_sink.oauth.bearer_token import OAuthBearerToken

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_HEADER = {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
_EXTRA = "pip install 'sparkkafka-sink[gcp]'"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _default_credentials() -> Any:
    try:
        import google.auth
    except ImportError:
        raise ConfigError(f"Google's sign-in reads the application default credentials with google-auth: {_EXTRA}") \
            from None
    try:
        credentials, _ = google.auth.default(scopes=[SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as e:
        raise AuthenticationError(f"Google: no application default credentials: {e}") from None
    return credentials


def _refresh(credentials: Any) -> None:
    from google.auth.transport.requests import Request

    credentials.refresh(Request())


def managed_kafka_token(access_token: str, subject: str, expires_at_s: int, now_s: int) -> str:
    """The token Google's Java handler makes of an access token."""
    claims = {"exp": expires_at_s, "iat": now_s, "scope": "kafka", "sub": subject}
    return ".".join([_b64(json.dumps(_HEADER, separators=(",", ":")).encode()),
                     _b64(json.dumps(claims, separators=(",", ":")).encode()), _b64(access_token.encode())])


class GoogleTokenProvider:
    """OAUTHBEARER's token provider for Google's Managed Kafka; ``credentials``: a factory of
    google-auth credentials (default: the application default ones)."""

    description = "the Google Managed Kafka token of the application default credentials"

    def __init__(self, credentials: Callable[[], Any] = _default_credentials, clock: Callable[[], float] = time.time):
        self._factory = credentials
        self._credentials: Any = None
        self._clock = clock
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "GoogleTokenProvider()"

    @property
    def principal(self) -> str | None:
        return getattr(self._credentials, "service_account_email", None)

    def __call__(self) -> OAuthBearerToken:
        with self._lock:
            if self._credentials is None:
                self._credentials = self._factory()
            credentials = self._credentials
            try:
                _refresh(credentials)
            except Exception as e:  # noqa: BLE001 - google-auth's RefreshError, a transport error
                raise AuthenticationError(f"Google: the access token could not be refreshed: {type(e).__name__}: "
                                          f"{e}") from None
        subject = getattr(credentials, "service_account_email", None)
        if not subject or subject == "default":
            raise AuthenticationError(
                f"Google: the credentials ({type(credentials).__name__}) name no service account, which Managed "
                "Kafka's token needs: use a service account (a key file, workload identity, or the VM's)")
        expiry = credentials.expiry
        expires_s = int(expiry.replace(tzinfo=dt.timezone.utc).timestamp()) if expiry else int(self._clock()) + 3600
        now_s = int(self._clock())
        value = managed_kafka_token(credentials.token, subject, expires_s, now_s)
        return OAuthBearerToken(value, expires_s * 1000, subject, now_s * 1000)
