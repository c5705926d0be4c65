"""Token providers for OAUTHBEARER: each a callable returning a token (see ``bearer_token``).

* :class:`ClientCredentialsTokenProvider` -- the OAuth client-credentials grant against an
  OIDC token endpoint, as Kafka's HttpAccessTokenRetriever does it;
* :class:`FileTokenProvider` -- a JWT kept in a file by someone else (Kafka's ``file:`` endpoint);
* :class:`UnsecuredTokenProvider` -- Kafka's unsecured login (``unsecuredLoginStringClaim_sub``):
  an unsigned JWT, only accepted by brokers using the unsecured validator (tests, demos);
* any user callable, named by ``"module:function"`` (:func:`load_token_provider`) so it works
  from Spark's string options -- e.g. a wrapper around aws-msk-iam-sasl-signer for MSK IAM.

Client secrets never reach a log line, a repr or an error.
"""

from __future__ import annotations

import base64
import http.client
import importlib
import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import IO, Any

from sparkkafka_sink.errors import AuthenticationError, ConfigError, Message, Setting
from sparkkafka_sink.oauth.bearer_token import (
    OAuthBearerToken,
    TokenProvider,
    TokenUnavailableError,
    read_jwt,
    token_from_jwt,
)
from sparkkafka_sink.oauth.jwt import claims_subject, unsigned_jwt

log = logging.getLogger(__name__)

PROVIDER_KEY = "sasl.oauthbearer.token.provider"
_PROVIDER = Setting(PROVIDER_KEY)
_MAX_BODY = 64 * 1024
_MAX_SHOWN = 300


# -- user callables ------------------------------------------------------------------------
def load_token_provider(spec: Any) -> TokenProvider:
    """A callable as is, or ``"package.module:function"`` (``attr.attr`` allowed after the
    colon) imported -- Spark options are strings, and executors import it themselves."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(Message("Invalid configuration {!r}: expected a callable or a 'module:function' string, "
                                  "got {}", _PROVIDER, type(spec).__name__))
    module_name, sep, attr_path = spec.strip().partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(Message("Invalid configuration {!r}: {!r} is not 'module:function' (e.g. "
                                  "'my_package.tokens:get_token')", _PROVIDER, spec))
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:  # the ConfigError says why
        raise ConfigError(Message("Invalid configuration {!r}: cannot import module '{}' ({}: {})", _PROVIDER,
                                  module_name, type(e).__name__, e)) from e
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(Message("Invalid configuration {!r}: module '{}' has no attribute '{}'", _PROVIDER,
                                      module_name, attr_path)) from None
    if not callable(obj):
        raise ConfigError(Message("Invalid configuration {!r}: '{}' is a {}, not a callable", _PROVIDER, spec,
                                  type(obj).__name__))
    return obj


# -- the client-credentials grant -----------------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would follow a redirect with our Authorization header, to any host: refuse."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> urllib.request.Request | None:
        return None


def _timed(connection_class: type, read_timeout_s: float) -> Any:
    """``connection_class`` whose socket waits ``read_timeout_s`` for each read once connected
    (urllib's ``timeout`` bounds the connection and, for TLS, its handshake)."""

    class Timed(connection_class):
        def connect(self) -> None:
            super().connect()
            self.sock.settimeout(read_timeout_s)

    return Timed


class _TimedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, read_timeout_s: float):
        super().__init__()
        self._connection = _timed(http.client.HTTPConnection, read_timeout_s)

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _TimedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, read_timeout_s: float, context: ssl.SSLContext):
        super().__init__(context=context)
        self._tls_context = context
        self._connection = _timed(http.client.HTTPSConnection, read_timeout_s)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=self._tls_context)


class _Retriable(Exception):
    """One attempt failed in a way a later attempt may not (connection, 5xx, 429, 408)."""


def _safe_url(url: str) -> str:
    """The URL without user info, query or fragment (they may carry credentials)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class ClientCredentialsTokenProvider:
    """POST ``grant_type=client_credentials[&scope=...]`` to the token endpoint with HTTP Basic
    client authentication, as Kafka's HttpAccessTokenRetriever.

    The Basic credentials are ``base64(urlencode(id):urlencode(secret))`` (RFC 6749 2.3.1; Kafka
    does this with ``sasl.oauthbearer.header.urlencode=true`` and sends them raw by default --
    identical for ids and secrets made of letters, digits and ``-._~``).  Connection errors and
    5xx/429/408 are retried with exponential backoff from ``retry_backoff_ms`` for at most
    ``retry_backoff_max_ms`` in total (Kafka's Retry); other answers fail at once with the
    status and the body's ``error``/``error_description``.  https endpoints are verified with
    ``ssl_context`` (default: the system's trust store).
    """

    def __init__(self, endpoint_url: str, client_id: str, client_secret: str, scope: str | None = None,
                 timeout_s: float = 10.0, *, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10_000,
                 ssl_context: ssl.SSLContext | None = None, urlencode_credentials: bool = True,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 connect_timeout_s: float | None = None, read_timeout_s: float | None = None,
                 sub_claim_name: str = "sub", scope_claim_name: str = "scope"):
        scheme = urllib.parse.urlsplit(endpoint_url).scheme.lower()
        if scheme not in ("http", "https") or not urllib.parse.urlsplit(endpoint_url).hostname:
            raise ConfigError(Message("Invalid configuration {!r}: {!r} is not an http(s) URL",
                                      Setting("sasl.oauthbearer.token.endpoint.url"), _safe_url(endpoint_url)))
        client_id = (client_id or "").strip()
        client_secret = (client_secret or "").strip()            # Kafka trims both
        if not client_id:
            raise ConfigError(Message("Invalid configuration {!r}: it is empty", Setting("sasl.oauthbearer.client.id")))
        if not client_secret:
            raise ConfigError(Message("Invalid configuration {!r}: it is empty",
                                      Setting("sasl.oauthbearer.client.secret")))
        if not 0 <= retry_backoff_ms <= retry_backoff_max_ms:
            raise ValueError("need 0 <= retry_backoff_ms <= retry_backoff_max_ms")
        self.endpoint_url = endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope.strip() if scope and scope.strip() else None
        #: sasl.login.connect.timeout.ms and sasl.login.read.timeout.ms (each ``timeout_s`` unset)
        self.connect_timeout_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        self.read_timeout_s = timeout_s if read_timeout_s is None else read_timeout_s
        #: sasl.oauthbearer.sub.claim.name / scope.claim.name: the token claims read back
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._sleep = sleep
        self.description = f"token endpoint {_safe_url(endpoint_url)} (client {client_id!r})"
        if scheme == "http":
            log.warning("The OAuth client secret of %r is sent to %s without TLS", client_id,
                        _safe_url(endpoint_url))
        self._opener = urllib.request.build_opener(
            _NoRedirect, _TimedHTTPHandler(self.read_timeout_s),
            _TimedHTTPSHandler(self.read_timeout_s, context=ssl_context or ssl.create_default_context()))
        quote = urllib.parse.quote_plus if urlencode_credentials else (lambda s: s)
        basic = base64.b64encode(f"{quote(client_id)}:{quote(client_secret)}".encode()).decode()
        self._authorization = f"Basic {basic}"
        body = "grant_type=client_credentials"
        if self.scope:
            body += "&scope=" + urllib.parse.quote_plus(self.scope)
        self._body = body.encode("ascii")

    def __repr__(self) -> str:
        return f"ClientCredentialsTokenProvider({self.description})"

    @property
    def principal(self) -> str:
        """Who we are before a token says (its ``sub`` claim usually names the client)."""
        return self.client_id

    def __call__(self) -> OAuthBearerToken:
        started = self._clock()
        deadline = started + self.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._attempt()
            except _Retriable as e:
                now = self._clock()
                wait = min(self.retry_backoff_ms / 1000 * 2 ** (attempt - 1), deadline - now)
                if wait <= 0:
                    raise TokenUnavailableError(
                        f"could not get an OAuth token from {self.description} after {attempt} "
                        f"attempt(s) in {now - started:.1f} s: {e}") from None
                log.warning("Attempt %d to get an OAuth token from %s failed (%s); retrying in %d ms",
                            attempt, self.description, e, wait * 1000)
                self._sleep(wait)

    def _attempt(self) -> OAuthBearerToken:
        request = urllib.request.Request(self.endpoint_url, data=self._body, method="POST", headers={
            "Authorization": self._authorization,
            "Accept": "application/json",
            "Cache-Control": "no-cache",
            "Content-Type": "application/x-www-form-urlencoded",
        })
        fetched_at = self._clock()
        try:
            with self._opener.open(request, timeout=self.connect_timeout_s) as response:
                status, body = response.status, response.read(_MAX_BODY)
        except urllib.error.HTTPError as e:
            status = e.code
            try:
                body = e.read(_MAX_BODY)
            except Exception:  # noqa: BLE001 - body is optional
                body = b""
            finally:
                e.close()
            if 300 <= status < 400:
                raise AuthenticationError(
                    f"{self.description} answered HTTP {status} (a redirect to "
                    f"{_safe_url(e.headers.get('Location', '?'))}); set the token endpoint URL to "
                    "the final address: credentials are not sent to a redirect") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise AuthenticationError(f"{self.description}: the TLS certificate did not verify "
                                          f"({reason.verify_message})") from None
            raise _Retriable(f"cannot connect: {reason}") from None
        except (OSError, HTTPException) as e:                  # timeouts, resets mid-response
            raise _Retriable(f"{type(e).__name__}: {e}") from None
        if 200 <= status < 300:
            return self._parse(body, fetched_at)
        detail = self._error_detail(body)
        if status >= 500 and status not in (501, 505) or status in (408, 429):
            raise _Retriable(f"HTTP {status} {detail}".rstrip())
        raise AuthenticationError(f"{self.description} rejected the request: HTTP {status} {detail}".rstrip())

    def _error_detail(self, body: bytes) -> str:
        """RFC 6749 5.2's error/error_description (or Okta's errorCode/errorSummary), else the
        start of the body -- with the secret masked, should an endpoint echo the request."""
        text = body.decode("utf-8", errors="replace").strip()
        if not text:
            return ""
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and ("error" in doc or "errorCode" in doc):
            code_key, text_key = ("error", "error_description") if "error" in doc else ("errorCode", "errorSummary")
            text = str(doc.get(code_key)) + (f": {doc[text_key]}" if doc.get(text_key) else "")
        text = text[:_MAX_SHOWN]
        for secret in (self._client_secret, urllib.parse.quote_plus(self._client_secret)):
            text = text.replace(secret, "***")
        return f"({text})"

    def _parse(self, body: bytes, fetched_at: float) -> OAuthBearerToken:
        try:
            doc = json.loads(body)
        except ValueError:
            raise AuthenticationError(f"{self.description} answered with a body that is not JSON") from None
        token = doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token.strip():
            fields = ", ".join(sorted(doc)) if isinstance(doc, dict) else type(doc).__name__
            raise AuthenticationError(f"{self.description} answered without an access_token "
                                      f"(fields: {fields})")
        token = token.strip()
        claims, expires_at_ms, issued_at_ms = read_jwt(token, self.description, opaque=True)  # opaque: expires_in
        expires_in = doc.get("expires_in")
        if isinstance(expires_in, str):
            try:
                expires_in = float(expires_in)
            except ValueError:
                expires_in = None
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
            expires_at_ms = int((fetched_at + expires_in) * 1000)
        if expires_at_ms is None:
            raise AuthenticationError(f"{self.description} answered without expires_in and the token "
                                      "has no 'exp' claim: we cannot know when to refresh it")
        scope = claims.get(self.scope_claim_name)
        if scope is not None and not (isinstance(scope, str) or
                                      isinstance(scope, list) and all(isinstance(s, str) for s in scope)):
            raise AuthenticationError(Message(
                "{} returned a token whose '{}' claim ({}) is neither a string nor a list of strings",
                self.description, self.scope_claim_name, Setting("sasl.oauthbearer.scope.claim.name")))
        if claims and self.sub_claim_name != "sub" and claims_subject(claims, self.sub_claim_name) is None:
            raise AuthenticationError(Message(
                "{} returned a token without the '{}' claim ({}) naming its principal", self.description,
                self.sub_claim_name, Setting("sasl.oauthbearer.sub.claim.name")))
        return OAuthBearerToken(token, expires_at_ms,
                                claims_subject(claims, self.sub_claim_name) or self.client_id, issued_at_ms)


# -- a token file ----------------------------------------------------------------------------
class FileTokenProvider:
    """A JWT read from a file on each call (Kafka's ``file:`` token endpoint URL): another
    process keeps the file fresh."""

    def __init__(self, path: str):
        self.path = path
        self.description = f"token file {path}"

    def __call__(self) -> OAuthBearerToken:
        try:
            with open(self.path, encoding="utf-8") as f:
                value = f.read().strip()
        except OSError as e:
            raise TokenUnavailableError(f"cannot read the {self.description}: {e.strerror}") from None
        if not value:
            raise TokenUnavailableError(f"the {self.description} is empty")
        return token_from_jwt(value, self.description)


# -- Kafka's unsecured login ---------------------------------------------------------------
_UNSECURED = "unsecuredLogin"
_STRING_CLAIM = _UNSECURED + "StringClaim_"
_NUMBER_CLAIM = _UNSECURED + "NumberClaim_"
_LIST_CLAIM = _UNSECURED + "ListClaim_"
UNSECURED_EXTENSION_PREFIX = _UNSECURED + "Extension_"
_UNSECURED_SETTINGS = {_UNSECURED + "PrincipalClaimName", _UNSECURED + "LifetimeSeconds",
                       _UNSECURED + "ScopeClaimName"}


def is_unsecured_claim_option(name: str) -> bool:
    return name.startswith((_STRING_CLAIM, _NUMBER_CLAIM, _LIST_CLAIM)) or name in _UNSECURED_SETTINGS


class UnsecuredTokenProvider:
    """An unsigned JWT (``{"alg":"none"}``) built from the JAAS options, as Kafka's
    OAuthBearerUnsecuredLoginCallbackHandler: ``unsecuredLoginStringClaim_<name>="v"``,
    ``unsecuredLoginNumberClaim_<name>="1"``, ``unsecuredLoginListClaim_<name>="|a|b"`` (the
    first character is the delimiter), ``unsecuredLoginLifetimeSeconds`` (default 3600) and
    ``unsecuredLoginPrincipalClaimName`` (default ``sub``).  ``iat``/``exp`` are computed."""

    def __init__(self, options: Mapping[str, str], clock: Callable[[], float] = time.time,
                 where: str = "sasl.jaas.config"):
        def bad(what: str) -> ConfigError:
            return ConfigError(Message("Invalid configuration {!r}: {}", Setting(where), what))

        self._clock = clock
        lifetime = options.get(_UNSECURED + "LifetimeSeconds", "3600")
        try:
            self.lifetime_s = int(str(lifetime).strip())
        except ValueError:
            raise bad(f"option '{_UNSECURED}LifetimeSeconds' is not an integer") from None
        if self.lifetime_s <= 0:
            raise bad(f"option '{_UNSECURED}LifetimeSeconds' must be positive")
        self.principal_claim = (options.get(_UNSECURED + "PrincipalClaimName") or "sub").strip()
        self._claims: dict[str, Any] = {}
        for name, value in options.items():
            for prefix in (_STRING_CLAIM, _NUMBER_CLAIM, _LIST_CLAIM):
                if name.startswith(prefix) and len(name) > len(prefix):
                    claim = name[len(prefix):]
                    if claim in ("iat", "exp"):
                        raise bad(f"option '{name}': the '{claim}' claim cannot be set, it is computed")
                    if prefix is _NUMBER_CLAIM:
                        try:
                            self._claims[claim] = float(value)
                        except ValueError:
                            raise bad(f"option '{name}' is not a number") from None
                    elif prefix is _LIST_CLAIM:
                        self._claims[claim] = value[1:].split(value[0]) if len(value) > 1 else []
                    else:
                        self._claims[claim] = value
        subject = self._claims.get(self.principal_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise bad(f"the unsecured login needs the principal claim: option "
                      f"'{_STRING_CLAIM}{self.principal_claim}' (a non-empty string)")
        self.principal = subject
        self.description = f"unsecured login token for {subject!r}"

    def __call__(self) -> OAuthBearerToken:
        now = round(self._clock(), 3)
        expires = round(now + self.lifetime_s, 3)
        # Kafka writes seconds with a fraction ("exp", "iat" first, then the options' claims)
        claims = {"exp": expires, "iat": now, **self._claims}
        return OAuthBearerToken(unsigned_jwt(claims), round(expires * 1000), self.principal,
                                round(now * 1000))
