"""A stand-in for Google's OAuth 2 token endpoint, for a service account of the test's own: a
service-account key file (:meth:`GoogleTokenEndpoint.key_file`) whose ``token_uri`` is this
endpoint, so google-auth's own service-account flow runs unchanged -- it signs a JWT assertion
(RS256) with the key and posts it; the endpoint verifies that signature with the account's
public key and answers an access token.  The access tokens carry an HMAC of the account and
their expiry under ``secret``, which the brokers' Managed Kafka validator (tests/security/java)
checks, as Google's service checks its own access tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sparkkafka_sink.testing.brokers import HOST

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def access_token(secret: str, email: str, expires_s: int) -> str:
    """``ya29.<b64url(email|expiry)>.<hex HMAC-SHA256>``: what the endpoint issues."""
    body = base64.urlsafe_b64encode(f"{email}|{expires_s}".encode()).decode().rstrip("=")
    mac = hmac.new(secret.encode(), f"{email}|{expires_s}".encode(), hashlib.sha256).hexdigest()
    return f"ya29.{body}.{mac}"


class GoogleTokenEndpoint:
    """On 127.0.0.1; ``email``'s key pair made at start.  ``issued``: the access tokens given."""

    def __init__(self, secret: str, email: str = "writer@sparkkafka-test.iam.gserviceaccount.com",
                 lifetime_s: int = 3600):
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.secret, self.email, self.lifetime_s = secret, email, lifetime_s
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.issued: list[str] = []
        self.refused: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{HOST}:{self._server.server_address[1]}/token"

    def key_file(self, path: Path, email: str | None = None) -> Path:
        """A service-account key file (Google's JSON) of ``email`` with this endpoint as its token_uri."""
        from cryptography.hazmat.primitives import serialization

        pem = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode()
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "sparkkafka-test", "private_key_id": "test-key-1",
            "private_key": pem, "client_email": email or self.email, "client_id": "1",
            "token_uri": self.url, "auth_uri": "https://accounts.google.com/o/oauth2/auth"}))
        return path

    def _answer(self, form: dict[str, str]) -> tuple[int, dict]:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        assertion = form.get("assertion", "")
        try:
            header, claims, signature = assertion.split(".")
            self._key.public_key().verify(_b64url_decode(signature), f"{header}.{claims}".encode(),
                                          padding.PKCS1v15(), hashes.SHA256())
            payload = json.loads(_b64url_decode(claims))
        except (ValueError, InvalidSignature):
            self.refused.append("a bad assertion")
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        # google-auth addresses its assertion to Google's token endpoint, whichever token_uri it posts to
        if payload.get("iss") != self.email or payload.get("aud") not in (self.url, GOOGLE_TOKEN_URI) \
                or payload.get("exp", 0) < time.time() or CLOUD_PLATFORM not in str(payload.get("scope", "")).split():
            self.refused.append(f"claims {payload}")
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT claims."}
        expires = int(time.time()) + self.lifetime_s
        token = access_token(self.secret, self.email, expires)
        self.issued.append(token)
        return 200, {"access_token": token, "expires_in": self.lifetime_s, "token_type": "Bearer"}

    def start(self) -> GoogleTokenEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                status, body = endpoint._answer(form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="google-token-endpoint").start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
