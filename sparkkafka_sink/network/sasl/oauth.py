"""OAuth bearer tokens for OAUTHBEARER: where they come from and how they stay fresh.

Sources (each a callable returning a token):

* :class:`ClientCredentialsTokenProvider` -- the OAuth client-credentials grant against an
  OIDC token endpoint, as Kafka's HttpAccessTokenRetriever does it;
* :class:`FileTokenProvider` -- a JWT kept in a file by someone else (Kafka's ``file:`` endpoint);
* :class:`UnsecuredTokenProvider` -- Kafka's unsecured login (``unsecuredLoginStringClaim_sub``):
  an unsigned JWT, only accepted by brokers using the unsecured validator (tests, demos);
* any user callable, named by ``"module:function"`` (:func:`load_token_provider`) so it works
  from Spark's string options -- e.g. a wrapper around aws-msk-iam-sasl-signer for MSK IAM.

:class:`TokenSource` fetches the first token synchronously and then refreshes it on a daemon
thread once ``refresh_window_factor`` of its lifetime has passed, so the network thread only
ever reads a ready token.  Tokens and client secrets never reach a log line, a repr or an error.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import logging
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Callable, Mapping, Union

from sparkkafka_sink.errors import AuthenticationError, ConfigError

log = logging.getLogger(__name__)

PROVIDER_KEY = "sasl.oauthbearer.token.provider"
#: a (token, expiry) tuple's expiry above this is in milliseconds (aws-msk-iam-sasl-signer
#: returns ms); as seconds it would be past the year 5000
_MS_THRESHOLD = 10**11
_MAX_BODY = 64 * 1024
_MAX_SHOWN = 300


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


ProviderResult = Union[str, tuple, OAuthBearerToken]
TokenProvider = Callable[[], ProviderResult]


# -- JWT ---------------------------------------------------------------------------------
def _b64url_decode(part: str) -> bytes:
    standard = part.replace("-", "+").replace("_", "/")
    return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWS compact token, decoded WITHOUT verifying its signature: we only read
    ``exp``/``iat``/``sub`` for scheduling and messages; the broker is the one who verifies.
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


def _claim_ms(claims: Mapping[str, Any], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"the JWT claim '{name}' is not a number of seconds")
    return round(value * 1000)


def _claims_subject(claims: Mapping[str, Any], name: str = "sub") -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and value.strip() else None


def token_from_jwt(value: str, source: str) -> OAuthBearerToken:
    """A token whose expiry is its ``exp`` claim; AuthenticationError naming ``source`` if it has
    none (we could not know when to refresh it)."""
    try:
        claims = jwt_claims(value)
        expires_at_ms = _claim_ms(claims, "exp")
        issued_at_ms = _claim_ms(claims, "iat")
    except ValueError as e:
        raise AuthenticationError(f"{source} returned a token we cannot read: {e}") from None
    if expires_at_ms is None:
        raise AuthenticationError(f"{source} returned a JWT without an 'exp' claim: return "
                                  "(token, expires_at_epoch_seconds) instead")
    return OAuthBearerToken(value.strip(), expires_at_ms, _claims_subject(claims), issued_at_ms)


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
            principal, issued_at_ms = _claims_subject(claims), _claim_ms(claims, "iat")
        except ValueError:
            pass
        return OAuthBearerToken(value.strip(), expires_at_ms, principal, issued_at_ms)
    raise AuthenticationError(f"{source} returned a {type(result).__name__}; expected a JWT str, a "
                              "(token, expires_at_epoch_seconds) tuple or an OAuthBearerToken")


# -- user callables ------------------------------------------------------------------------
def _callable_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{name}" if module else name


def load_token_provider(spec: Any) -> TokenProvider:
    """A callable as is, or ``"package.module:function"`` (``attr.attr`` allowed after the
    colon) imported -- Spark options are strings, and executors import it themselves."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"Invalid configuration '{PROVIDER_KEY}': expected a callable or a "
                          f"'module:function' string, got {type(spec).__name__}")
    module_name, sep, attr_path = spec.strip().partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(f"Invalid configuration '{PROVIDER_KEY}': {spec!r} is not "
                          "'module:function' (e.g. 'my_package.tokens:get_token')")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:                                    # noqa: BLE001 - say why
        raise ConfigError(f"Invalid configuration '{PROVIDER_KEY}': cannot import module "
                          f"'{module_name}' ({type(e).__name__}: {e})") from e
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"Invalid configuration '{PROVIDER_KEY}': module '{module_name}' has "
                              f"no attribute '{attr_path}'") from None
    if not callable(obj):
        raise ConfigError(f"Invalid configuration '{PROVIDER_KEY}': '{spec}' is a "
                          f"{type(obj).__name__}, not a callable")
    return obj


# -- the client-credentials grant -----------------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would follow a redirect with our Authorization header, to any host: refuse."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        return None


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
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep):
        scheme = urllib.parse.urlsplit(endpoint_url).scheme.lower()
        if scheme not in ("http", "https") or not urllib.parse.urlsplit(endpoint_url).hostname:
            raise ConfigError("Invalid configuration 'sasl.oauthbearer.token.endpoint.url': "
                              f"{_safe_url(endpoint_url)!r} is not an http(s) URL")
        client_id = (client_id or "").strip()
        client_secret = (client_secret or "").strip()            # Kafka trims both
        if not client_id:
            raise ConfigError("Invalid configuration 'sasl.oauthbearer.client.id': it is empty")
        if not client_secret:
            raise ConfigError("Invalid configuration 'sasl.oauthbearer.client.secret': it is empty")
        if not 0 <= retry_backoff_ms <= retry_backoff_max_ms:
            raise ValueError("need 0 <= retry_backoff_ms <= retry_backoff_max_ms")
        self.endpoint_url = endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope.strip() if scope and scope.strip() else None
        self.timeout_s = timeout_s
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._clock = clock
        self._sleep = sleep
        self.description = f"token endpoint {_safe_url(endpoint_url)} (client {client_id!r})"
        if scheme == "http":
            log.warning("The OAuth client secret of %r is sent to %s without TLS", client_id,
                        _safe_url(endpoint_url))
        self._opener = urllib.request.build_opener(
            _NoRedirect, urllib.request.HTTPSHandler(context=ssl_context or ssl.create_default_context()))
        quote = urllib.parse.quote_plus if urlencode_credentials else (lambda s: s)
        basic = base64.b64encode(f"{quote(client_id)}:{quote(client_secret)}".encode("utf-8")).decode()
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
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status, body = response.status, response.read(_MAX_BODY)
        except urllib.error.HTTPError as e:
            status = e.code
            try:
                body = e.read(_MAX_BODY)
            except Exception:                                  # noqa: BLE001 - body is optional
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
            keys = ", ".join(sorted(doc)) if isinstance(doc, dict) else type(doc).__name__
            raise AuthenticationError(f"{self.description} answered without an access_token "
                                      f"(fields: {keys})")
        token = token.strip()
        try:
            claims: Mapping[str, Any] = jwt_claims(token)
        except ValueError:
            claims = {}                                        # opaque token: needs expires_in
        expires_in = doc.get("expires_in")
        if isinstance(expires_in, str):
            try:
                expires_in = float(expires_in)
            except ValueError:
                expires_in = None
        try:
            issued_at_ms = _claim_ms(claims, "iat")
            if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
                expires_at_ms = int((fetched_at + expires_in) * 1000)
            else:
                expires_at_ms = _claim_ms(claims, "exp")
        except ValueError as e:
            raise AuthenticationError(f"{self.description} returned a token we cannot read: {e}") from None
        if expires_at_ms is None:
            raise AuthenticationError(f"{self.description} answered without expires_in and the token "
                                      "has no 'exp' claim: we cannot know when to refresh it")
        return OAuthBearerToken(token, expires_at_ms, _claims_subject(claims) or self.client_id,
                                issued_at_ms)


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
            return ConfigError(f"Invalid configuration '{where}': {what}")

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
        header = _b64url_encode(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
        payload = _b64url_encode(json.dumps(claims, separators=(",", ":")).encode())
        return OAuthBearerToken(f"{header}.{payload}.", round(expires * 1000), self.principal,
                                round(now * 1000))


# -- refreshing ---------------------------------------------------------------------------
#: never refresh sooner than this after a fetch (Kafka's sasl.login.refresh.min.period.seconds),
#: unless the token lives less than twice as long: an IdP that hands back a cached,
#: half-used token must not be asked again every instant
MIN_REFRESH_PERIOD_S = 60.0
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 10.0
_MAX_WAIT_S = 30.0   # re-read the wall clock at least this often (suspend, clock steps)


def refresh_at(token: OAuthBearerToken, fetched_at_s: float, refresh_window_factor: float,
               jitter: float = 0.0) -> float:
    """When to refresh (epoch seconds): ``refresh_window_factor`` (+ ``jitter``) of the token's
    lifetime, counted from its ``iat`` when that is not in our future, else from the fetch."""
    expires_s = token.expires_at_ms / 1000
    start_s = fetched_at_s
    if token.issued_at_ms is not None and token.issued_at_ms / 1000 <= fetched_at_s:
        start_s = token.issued_at_ms / 1000
    pct = refresh_window_factor + jitter
    if pct > 1.0:
        pct = refresh_window_factor
    due = start_s + (expires_s - start_s) * pct
    floor = fetched_at_s + min(MIN_REFRESH_PERIOD_S, max(0.0, expires_s - fetched_at_s) / 2)
    return max(due, floor)


class TokenSource:
    """The current token of one provider, refreshed in the background.

    ``current()`` fetches the first token synchronously (errors propagate: bad credentials fail
    the caller), then returns the latest token at once; a daemon thread refetches it at
    :func:`refresh_at` and, when that fails, retries with backoff (0.1 s doubling to 10 s,
    sooner while the old token still has little time) -- the old token is served meanwhile.
    Once it has expired ``current()`` raises :class:`TokenUnavailableError` with the last error.
    """

    def __init__(self, provider: TokenProvider, refresh_window_factor: float = 0.8,
                 clock: Callable[[], float] = time.time, *, jitter: float = 0.05,
                 description: str | None = None):
        if not 0.5 <= refresh_window_factor <= 1.0:
            raise ConfigError(f"Invalid value {refresh_window_factor!r} for configuration "
                              "'sasl.login.refresh.window.factor': expected a number in [0.5, 1.0]")
        self._provider = provider
        self.refresh_window_factor = refresh_window_factor
        self.jitter = jitter
        self._clock = clock
        self.description = description or getattr(provider, "description", None) or \
            f"token provider {_callable_name(provider)}"
        self._cond = threading.Condition()
        self._fetch_lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._fetched_at = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._refresh_requested = False
        #: the latest failed fetch (cleared by a success), for messages
        self.last_error: BaseException | None = None
        self.fetches = 0            # successful provider calls (the first one included)
        self.refreshes = 0          # successful background refreshes
        self.refresh_failures = 0

    def __repr__(self) -> str:
        return f"TokenSource({self.description}, principal={self.principal!r})"

    @property
    def principal(self) -> str | None:
        token = self._token
        return token.principal if token is not None else getattr(self._provider, "principal", None)

    @property
    def token_expires_at_ms(self) -> int | None:
        token = self._token
        return token.expires_at_ms if token is not None else None

    def current(self) -> OAuthBearerToken:
        """A token that has not expired; the first call blocks on the provider."""
        token = self._token
        if token is None:
            with self._fetch_lock:                             # one first fetch for all callers
                if self._closed:
                    raise AuthenticationError(f"the OAUTHBEARER {self.description} is closed")
                if self._token is None:
                    fetched_at = self._clock()
                    token = self._fetch()
                    with self._cond:
                        self._token, self._fetched_at = token, fetched_at
                        self._start_refresher()
                token = self._token
            assert token is not None
        if self._clock() * 1000 >= token.expires_at_ms:
            error = self.last_error
            raise TokenUnavailableError(
                f"the OAUTHBEARER token of {token.principal!r} from {self.description} expired and "
                f"no new one could be fetched" + (f": {error}" if error else " yet"))
        return token

    def refresh_now(self) -> None:
        """Ask the refresher to fetch a new token now (e.g. the broker called ours invalid)."""
        with self._cond:
            self._refresh_requested = True
            self._cond.notify_all()

    def wait_for_refreshes(self, count: int, timeout: float) -> bool:
        """Block until ``refreshes >= count`` or ``timeout`` seconds pass (tests, diagnostics)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.refreshes >= count or self._closed, timeout) \
                and self.refreshes >= count

    def close(self) -> None:
        """Stop the refresher (it may be inside a provider call: it exits when that returns)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    # -- internals ---------------------------------------------------------------------
    def _fetch(self) -> OAuthBearerToken:
        try:
            token = coerce_token(self._provider(), self.description)
        except AuthenticationError as e:
            self.last_error = e
            raise
        except Exception as e:                                 # noqa: BLE001 - a user callable
            self.last_error = e
            raise TokenUnavailableError(f"the {self.description} failed: {type(e).__name__}: {e}") from e
        if token.expires_at_ms <= self._clock() * 1000:
            self.last_error = AuthenticationError(f"the {self.description} returned an expired token")
            raise AuthenticationError(
                f"the {self.description} returned a token that expired at {token.expires_at_ms} ms "
                "since the epoch (check this host's clock)")
        self.fetches += 1
        self.last_error = None
        return token

    def _start_refresher(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sasl-token-refresh", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        retry_at = 0.0
        while True:
            with self._cond:
                assert self._token is not None
                if failures:
                    due = retry_at
                else:
                    due = refresh_at(self._token, self._fetched_at, self.refresh_window_factor,
                                     random.uniform(0, self.jitter))
                    log.info("OAUTHBEARER token of %r expires at %.3f; refreshing at %.3f",
                             self._token.principal, self._token.expires_at_ms / 1000, due)
                while not self._closed and not self._refresh_requested and self._clock() < due:
                    self._cond.wait(timeout=min(max(due - self._clock(), 0.001), _MAX_WAIT_S))
                if self._closed:
                    return
                self._refresh_requested = False
            fetched_at = self._clock()
            try:
                with self._fetch_lock:
                    token = self._fetch()
            except Exception as e:                             # noqa: BLE001 - retried below
                failures += 1
                delay = self._retry_delay(failures)
                retry_at = self._clock() + delay
                with self._cond:
                    self.refresh_failures += 1
                log.warning("Refreshing the OAUTHBEARER token from %s failed (%s); retry %d in %.1f s",
                            self.description, e, failures, delay)
                continue
            with self._cond:
                self._token, self._fetched_at = token, fetched_at
                self.refreshes += 1
                failures = 0
                self._cond.notify_all()

    def _retry_delay(self, failures: int) -> float:
        delay = RETRY_BACKOFF_S * 2 ** min(failures - 1, 20)
        token = self._token
        remaining = token.expires_at_ms / 1000 - self._clock() if token is not None else 0.0
        cap = RETRY_BACKOFF_MAX_S if remaining <= 0 else \
            min(RETRY_BACKOFF_MAX_S, max(RETRY_BACKOFF_S, remaining / 2))
        return min(delay, cap)
