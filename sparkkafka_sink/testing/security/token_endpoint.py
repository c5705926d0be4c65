"""A local OAuth 2 client-credentials token endpoint issuing unsecured JWTs (``{"alg":"none"}``),
the tokens Kafka's default OAUTHBEARER validator (``OAuthBearerUnsecuredValidatorCallbackHandler``)
accepts: the OIDC path of our client is tested without an identity provider."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sparkkafka_sink.testing.brokers import HOST
from sparkkafka_sink.testing.security.pki import TestPki

OAUTH_CLIENT_ID = "sparkkafka-client"
OAUTH_CLIENT_SECRET = "sparkkafka-client-secret"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsecured_jwt(sub: str, lifetime_s: float = 3600.0, scope: str | Sequence[str] | None = "kafka",
                  *, now: float | None = None, extra_claims: dict | None = None) -> str:
    """An unsecured JWS (``{"alg":"none"}``, empty signature: ``header.payload.``) with claims
    ``sub``, ``iat``, ``exp = iat + lifetime_s`` and ``scope`` (omitted when None), the form
    Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts.  ``iat``/``exp`` are
    whole seconds (NumericDate)."""
    now = time.time() if now is None else now
    claims = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s)}
    if scope is not None:
        claims["scope"] = scope if isinstance(scope, str) else list(scope)
    claims.update(extra_claims or {})
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}."


class TokenEndpoint:
    """An OAuth 2 client-credentials token endpoint on 127.0.0.1 (``http.server``, one thread
    per request) issuing :func:`unsecured_jwt` tokens.

    ``POST <url>`` with ``grant_type=client_credentials`` and the client's id and secret in HTTP
    Basic auth (or ``client_id``/``client_secret`` form fields) answers
    ``{"access_token", "token_type": "bearer", "expires_in", "scope"}``; the token's ``sub`` is
    the client id, its lifetime ``lifetime_s`` and its scope the requested one (else
    ``default_scope``).  Wrong credentials get 401 ``{"error": "invalid_client"}``, another
    grant type 400 ``{"error": "unsupported_grant_type"}``.

    Mutable between requests: ``lifetime_s``, ``delay_s`` (sleep before answering),
    ``fail_next(n, status=503)``.  Observable: ``calls`` (token requests answered, failures
    included), ``tokens`` (issued tokens), ``requests`` (dicts: path, headers, form, status).
    ``pki`` serves HTTPS with ``pki.broker`` (the URL then starts with ``https://``).
    """

    def __init__(self, client_id: str = OAUTH_CLIENT_ID, client_secret: str = OAUTH_CLIENT_SECRET,
                 *, lifetime_s: float = 3600.0, default_scope: str = "kafka", path: str = "/token",
                 pki: TestPki | None = None):
        self.client_id = client_id
        self.client_secret = client_secret
        self.lifetime_s = lifetime_s
        self.default_scope = default_scope
        self.path = path
        self.delay_s = 0.0
        self.pki = pki
        self.calls = 0
        self.tokens: list[str] = []
        self.requests: list[dict] = []
        self._fail: list[int] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("TokenEndpoint not started")
        scheme = "https" if self.pki else "http"
        return f"{scheme}://{HOST}:{self._server.server_address[1]}{self.path}"

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """Answer the next ``n`` token requests with HTTP ``status`` (an OAuth error body)."""
        with self._lock:
            self._fail.extend([status] * n)

    def reset(self) -> None:
        """Forget counts, tokens and pending failures; restore ``delay_s`` to 0."""
        with self._lock:
            self.calls = 0
            self.tokens.clear()
            self.requests.clear()
            self._fail.clear()
            self.delay_s = 0.0

    def start(self) -> TokenEndpoint:
        if self._server is not None:
            return self
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self._send(405, {"error": "invalid_request", "error_description": "use POST"})

            def do_POST(self) -> None:
                endpoint._handle(self)

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer((HOST, 0), Handler)
        server.daemon_threads = True
        if self.pki is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.pki.broker.chain_path), str(self.pki.broker.key_path))
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="token-endpoint", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> TokenEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle(self, h: Any) -> None:  # the Handler class start() makes
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length).decode("utf-8", "replace") if length else ""
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        record = {"path": h.path, "headers": dict(h.headers.items()), "form": form, "status": None}
        with self._lock:
            self.calls += 1
            self.requests.append(record)
            fail = self._fail.pop(0) if self._fail else None
            delay = self.delay_s
        if delay:
            time.sleep(delay)

        def send(status: int, body: dict, headers: dict | None = None) -> None:
            record["status"] = status
            h._send(status, body, headers)

        if h.path.split("?")[0] != self.path:
            return send(404, {"error": "invalid_request", "error_description": f"no endpoint {h.path}"})
        if fail is not None:
            return send(fail, {"error": "temporarily_unavailable",
                               "error_description": f"told to fail (HTTP {fail})"})
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = h.headers.get("Authorization", "")
        if auth[:6].lower() == "basic ":
            try:
                user, _, pw = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
                client_id, secret = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(pw)
            except (ValueError, UnicodeDecodeError):
                client_id = secret = None
        if client_id != self.client_id or secret != self.client_secret:
            return send(401, {"error": "invalid_client",
                              "error_description": "client authentication failed"},
                        {"WWW-Authenticate": 'Basic realm="sparkkafka-test"'})
        if form.get("grant_type") != "client_credentials":
            return send(400, {"error": "unsupported_grant_type",
                              "error_description": f"grant_type {form.get('grant_type')!r}"})
        scope = form.get("scope") or self.default_scope
        lifetime = self.lifetime_s
        token = unsecured_jwt(client_id, lifetime, scope)
        with self._lock:
            self.tokens.append(token)
        send(200, {"access_token": token, "token_type": "bearer", "expires_in": int(lifetime),
                   "scope": scope})
