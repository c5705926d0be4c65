"""The Schema Registry client's settings: confluent-kafka-python's ``SchemaRegistryClient`` keys,
validated once.

The sink hands over its ``schema.registry.*`` options with the prefix stripped, so users write
the names they know from confluent-kafka (``url``, ``basic.auth.user.info``, ``bearer.auth.*``,
``ssl.*``, ``max.retries``, ...).  Everything is checked when the client is built -- a typo or a
missing file fails the driver's planning, not the first request.  Values may be strings (Spark
options are).  Secrets (the basic-auth password, the bearer token, the OAuth client secret, the
key password) are kept in private attributes and leave only as request headers or to unlock the
key: no repr, message or log line shows them.
"""

from __future__ import annotations

import base64
import os
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkkafka_sink.config_def import ConfigDef, ConfigKey, Declared, Settings, declarations, optional_text
from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.oauth.bearer_token import OAuthBearerToken
from sparkkafka_sink.oauth.token_providers import ClientCredentialsTokenProvider
from sparkkafka_sink.oauth.token_source import refresh_at

BASIC_AUTH_SOURCES = ("USER_INFO", "URL")
BEARER_AUTH_SOURCES = ("STATIC_TOKEN", "OAUTHBEARER")

#: one request's bound when none is set (confluent-kafka waits forever; a driver must not)
DEFAULT_TIMEOUT_MS = 30_000
#: as the Java and Python clients of Confluent
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRIES_WAIT_MS = 1_000
DEFAULT_RETRIES_MAX_WAIT_MS = 20_000


def _count_key(name: str, default: int, doc: str, unit: str = "") -> Declared[int]:
    return Declared(ConfigKey(name, "integer", default, doc, minimum=0, unit=unit))


class RegistryConfig(Settings):
    """The client's settings, declared once (``config_def``) with confluent-kafka's names, parsed,
    checked and documented from here, and read as typed attributes (``config.basic_auth_user_info``)."""

    url: Declared[str | None] = Declared(optional_text(
        "url", "the registry's URL; several, comma-separated, are tried in turn when one cannot be reached",
        unset="required"))
    basic_auth_credentials_source: Declared[str] = Declared(ConfigKey(
        "basic.auth.credentials.source", "choice", "USER_INFO",
        "USER_INFO (basic.auth.user.info) or URL (user:password@ in url)", choices=BASIC_AUTH_SOURCES))
    basic_auth_user_info: Declared[str | None] = Declared(optional_text(
        "basic.auth.user.info", "user:password for HTTP basic authentication"))
    bearer_auth_credentials_source: Declared[str | None] = Declared(ConfigKey(
        "bearer.auth.credentials.source", "choice", None,
        "STATIC_TOKEN (bearer.auth.token) or OAUTHBEARER (a client-credentials token)", choices=BEARER_AUTH_SOURCES))
    bearer_auth_token: Declared[str | None] = Declared(optional_text(
        "bearer.auth.token", "the bearer token, with bearer.auth.credentials.source=STATIC_TOKEN"))
    bearer_auth_issuer_endpoint_url: Declared[str | None] = Declared(optional_text(
        "bearer.auth.issuer.endpoint.url", "the OAuth token endpoint, with OAUTHBEARER"))
    bearer_auth_client_id: Declared[str | None] = Declared(optional_text(
        "bearer.auth.client.id", "the OAuth client id, with OAUTHBEARER"))
    bearer_auth_client_secret: Declared[str | None] = Declared(optional_text(
        "bearer.auth.client.secret", "the OAuth client secret, with OAUTHBEARER"))
    bearer_auth_scope: Declared[str | None] = Declared(optional_text(
        "bearer.auth.scope", "the OAuth scope asked for, with OAUTHBEARER (optional)"))
    bearer_auth_logical_cluster: Declared[str | None] = Declared(optional_text(
        "bearer.auth.logical.cluster", "Confluent Cloud: the registry's logical cluster (header target-sr-cluster)"))
    bearer_auth_identity_pool_id: Declared[str | None] = Declared(optional_text(
        "bearer.auth.identity.pool.id", "Confluent Cloud: the identity pool (header Confluent-Identity-Pool-Id)"))
    ssl_ca_location: Declared[str | None] = Declared(optional_text(
        "ssl.ca.location", "CA certificate file (PEM) or directory that verifies an https registry",
        unset="the system's CAs"))
    ssl_certificate_location: Declared[str | None] = Declared(optional_text(
        "ssl.certificate.location", "client certificate (PEM) for mutual TLS; may hold the key too"))
    ssl_key_location: Declared[str | None] = Declared(optional_text(
        "ssl.key.location", "the client certificate's private key (PEM)"))
    ssl_key_password: Declared[str | None] = Declared(optional_text(
        "ssl.key.password", "the password of an encrypted private key"))
    timeout: Declared[float | None] = Declared(ConfigKey(
        "timeout", "number", None, "seconds one request may take (confluent-kafka's name; or timeout.ms)",
        above=0, unit="seconds", unset="unset (timeout.ms applies)"))
    timeout_ms: Declared[int | None] = Declared(ConfigKey(
        "timeout.ms", "integer", None,
        "milliseconds one request may take (connecting, then waiting for the answer)", minimum=1, unit="ms",
        unset=str(DEFAULT_TIMEOUT_MS)))
    max_retries = _count_key("max.retries", DEFAULT_MAX_RETRIES,
                             "retries of a request answered 408/429/5xx or not answered at all")
    retries_wait_ms = _count_key("retries.wait.ms", DEFAULT_RETRIES_WAIT_MS,
                                 "the first retry's wait; it doubles with each retry", "ms")
    retries_max_wait_ms = _count_key("retries.max.wait.ms", DEFAULT_RETRIES_MAX_WAIT_MS,
                                     "the longest wait between two retries", "ms")

#: every setting the client reads, by its name
REGISTRY_KEYS = ConfigDef(declarations(RegistryConfig))
#: confluent-kafka keys this client does not implement, and why that matters
UNSUPPORTED_KEYS: dict[str, str] = {
    "proxy": "an HTTP proxy setting is not supported; the standard environment variables "
             "(https_proxy, no_proxy) are honoured",
    "cache.capacity": "the client caches only ids and registrations, which never change",
    "cache.latest.ttl.sec": "the latest version is always asked afresh",
    "bearer.auth.issuer.endpoint.query": "Azure IMDS tokens (OAUTHBEARER_AZURE_IMDS) are not supported",
    "bearer.auth.custom.provider.function": "custom bearer providers (CUSTOM) are not supported",
    "bearer.auth.custom.provider.config": "custom bearer providers (CUSTOM) are not supported",
}
#: refresh an OAuth token after this share of its lifetime (as confluent-kafka)
_TOKEN_REFRESH_FACTOR = 0.8

AuthKind = Literal["none", "basic", "static-token", "oauthbearer"]


@dataclass(frozen=True)
class Endpoint:
    """One registry URL as requests go to it (no user info: that becomes a header) and the
    Basic credentials it carried, if any."""

    url: str
    user: str | None = None
    _basic_header: str | None = field(default=None, repr=False)


class _OAuthTokens:
    """The current client-credentials token, fetched on first use and again after 80% of its
    lifetime (or at once after the registry refused it); blocking, as the client is."""

    def __init__(self, provider: ClientCredentialsTokenProvider, clock: Callable[[], float] = time.time):
        self.provider = provider
        self._clock = clock
        self._lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0

    def value(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._refresh_at:
                token = self.provider()          # AuthenticationError: the caller says which setting
                self._token = token
                self._refresh_at = refresh_at(token, now, _TOKEN_REFRESH_FACTOR)
            return self._token.value

    def forget(self) -> None:
        with self._lock:
            self._token = None


class RegistrySettings:
    """Parsed settings: the endpoints, TLS, timeouts and retries, and how to authenticate."""

    def __init__(self, config: Mapping[str, Any]):
        _reject_unknown(config)
        # a blank value is no value (a Spark option left empty)
        given = RegistryConfig(REGISTRY_KEYS.parse_all({k: v for k, v in config.items()
                                                        if not (isinstance(v, str) and not v.strip())}))
        if given.timeout is not None and given.timeout_ms is not None:
            raise ConfigError(Message("Give {} (seconds, confluent-kafka's name) or {}, not both", Setting("timeout"),
                                      Setting("timeout.ms")))
        self.timeout_s = given.timeout or (given.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
        self.max_retries = given.max_retries
        self.retries_wait_ms = given.retries_wait_ms
        self.retries_max_wait_ms = given.retries_max_wait_ms
        if self.retries_max_wait_ms < self.retries_wait_ms:
            raise ConfigError(Message("Invalid configuration: {} ({}) is below {} ({})", Setting("retries.max.wait.ms"),
                                      self.retries_max_wait_ms, Setting("retries.wait.ms"), self.retries_wait_ms))
        self._secrets: list[str] = []
        self.endpoints = self._endpoints(given)
        self.ssl_context = self._ssl_context(given)
        self._bearer_header: str | None = None
        self._tokens: _OAuthTokens | None = None
        self.auth_kind: AuthKind = "none"
        self.user: str | None = None
        self.extra_headers: dict[str, str] = {}
        self._auth(given)

    # -- what requests need ---------------------------------------------------------------
    def authorization(self, endpoint: Endpoint) -> str | None:
        """The Authorization header for ``endpoint`` (may fetch an OAuth token: raises
        :class:`~sparkkafka_sink.errors.AuthenticationError` when that fails)."""
        if self._tokens is not None:
            return f"Bearer {self._tokens.value()}"
        return self._bearer_header or endpoint._basic_header

    def forget_token(self) -> None:
        """The registry refused our OAuth token: the next request fetches a new one."""
        if self._tokens is not None:
            self._tokens.forget()

    def scrub(self, text: str) -> str:
        """``text`` with every secret we hold masked (a registry may echo a request)."""
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    @property
    def auth_description(self) -> str:
        """Who we are, for messages: never a secret."""
        if self.auth_kind == "basic":
            return f"HTTP basic authentication as {self.user!r}"
        if self.auth_kind == "static-token":
            return Message("a static bearer token ({})", Setting("bearer.auth.token"))
        if self.auth_kind == "oauthbearer":
            assert self._tokens is not None
            return f"an OAuth bearer token from {self._tokens.provider.description}"
        return "no authentication"

    @property
    def auth_settings(self) -> Message:
        """The settings to check when the registry refuses our credentials."""
        if self.auth_kind == "basic":
            return (Message("{} (user:password)", Setting("basic.auth.user.info")) if self._basic_source == "USER_INFO"
                    else Message("the user:password@ part of {}", Setting("url")))
        if self.auth_kind == "static-token":
            return Message("{} (expired or revoked?) and {}", Setting("bearer.auth.token"),
                           Setting("bearer.auth.logical.cluster"))
        if self.auth_kind == "oauthbearer":
            return listed_settings(("bearer.auth.client.id", "bearer.auth.client.secret", "bearer.auth.scope",
                            "bearer.auth.logical.cluster"), last=" and ")
        return Message("{} (user:password) or {}: the registry wants credentials and none are set",
                       Setting("basic.auth.user.info"), Setting("bearer.auth.credentials.source"))

    def __repr__(self) -> str:
        urls = ", ".join(e.url for e in self.endpoints)
        return f"RegistrySettings(url={urls!r}, auth={self.auth_description!r}, timeout_s={self.timeout_s})"

    # -- parsing ----------------------------------------------------------------------------
    def _endpoints(self, config: RegistryConfig) -> tuple[Endpoint, ...]:
        raw = config.url
        if raw is None:
            raise ConfigError(Message("Missing configuration {!r}: the Schema Registry's URL, e.g. "
                                      "http://registry:8081 (several may be given, comma-separated)", Setting("url")))
        endpoints = []
        for part in raw.split(","):
            part = part.strip().rstrip("/")
            if not part:
                continue
            parts = urllib.parse.urlsplit(part)
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query:
                raise ConfigError(Message("Invalid configuration {!r}: {!r} is not an http:// or https:// URL "
                                          "without a query", Setting("url"), strip_credentials(part)))
            host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
            if parts.port:
                host = f"{host}:{parts.port}"
            url = urllib.parse.urlunsplit((parts.scheme.lower(), host, parts.path, "", ""))
            user = header = None
            if parts.username is not None:
                user = urllib.parse.unquote(parts.username)
                password = urllib.parse.unquote(parts.password or "")
                header = _basic_header(user, password)
                self._secrets += [password, parts.password or ""]
            endpoints.append(Endpoint(url, user, header))
        if not endpoints:
            raise ConfigError(Message("Invalid configuration {!r}: it names no URL", Setting("url")))
        return tuple(endpoints)

    def _ssl_context(self, config: RegistryConfig) -> ssl.SSLContext | None:
        ca = config.ssl_ca_location
        cert = config.ssl_certificate_location
        key = config.ssl_key_location
        key_password = config.ssl_key_password
        if key_password:
            self._secrets.append(key_password)
        given = [k for k, v in (("ssl.ca.location", ca), ("ssl.certificate.location", cert),
                                ("ssl.key.location", key), ("ssl.key.password", key_password)) if v]
        if not any(e.url.startswith("https:") for e in self.endpoints):
            if given:
                raise ConfigError(Message("{} given but no {} is https://: TLS settings need an https registry URL",
                                          listed_settings(given), Setting("url")))
            return None
        if (key or key_password) and not cert:
            raise ConfigError(Message("{} and {} need {} (the client certificate the key belongs to)",
                                      Setting("ssl.key.location"), Setting("ssl.key.password"),
                                      Setting("ssl.certificate.location")))
        return tls_context(ca, cert, key, key_password)

    def _auth(self, config: RegistryConfig) -> None:
        self._basic_source = config.basic_auth_credentials_source
        user_info = config.basic_auth_user_info
        in_url = [e for e in self.endpoints if e.user is not None]
        bearer_source = config.bearer_auth_credentials_source
        source_key = RegistryConfig.bearer_auth_credentials_source.key
        bearer_keys = [k.name for k in declarations(RegistryConfig) if k.name.startswith("bearer.auth.")
                       and k is not source_key and config.setting(k) is not None]
        if bearer_source is None:
            if bearer_keys:
                raise ConfigError(Message("{} given but {} is not: set it to one of {}", listed_settings(bearer_keys),
                                          Setting("bearer.auth.credentials.source"), ", ".join(BEARER_AUTH_SOURCES)))
        elif user_info or in_url:
            raise ConfigError(Message("Both basic and bearer authentication are configured ({} or user info in {}, "
                                      "and {}): keep one", Setting("basic.auth.user.info"), Setting("url"),
                                      Setting("bearer.auth.credentials.source")))
        if bearer_source is not None:
            self._bearer(config, bearer_source)
            return
        if self._basic_source == "URL":
            if user_info:
                raise ConfigError(Message("{} given but {}=URL takes the credentials from {} (user:password@host): "
                                          "drop one", Setting("basic.auth.user.info"),
                                          Setting("basic.auth.credentials.source"), Setting("url")))
            if not in_url:
                raise ConfigError(Message("{}=URL but no {} carries credentials: write them as "
                                          "https://user:password@host", Setting("basic.auth.credentials.source"),
                                          Setting("url")))
            self.auth_kind, self.user = "basic", in_url[0].user
            return
        if user_info:
            if in_url:
                raise ConfigError(Message("{} given and {} carries credentials too: remove the user:password@ part "
                                          "of {}, or {}", Setting("basic.auth.user.info"), Setting("url"),
                                          Setting("url"), Setting("basic.auth.user.info")))
            user, sep, password = user_info.partition(":")
            if not sep or not user:
                raise ConfigError(Message("Invalid configuration {!r}: expected user:password",
                                          Setting("basic.auth.user.info")))
            self._secrets.append(password)
            header = _basic_header(user, password)
            self.endpoints = tuple(Endpoint(e.url, user, header) for e in self.endpoints)
            self.auth_kind, self.user = "basic", user
        elif in_url:                                  # confluent-kafka reads them from the URL too
            self.auth_kind, self.user = "basic", in_url[0].user

    def _bearer(self, config: RegistryConfig, source: str) -> None:
        cluster = config.bearer_auth_logical_cluster
        pool = config.bearer_auth_identity_pool_id
        if cluster:
            self.extra_headers["target-sr-cluster"] = cluster
        if pool:
            self.extra_headers["Confluent-Identity-Pool-Id"] = pool
        oauth = {key.name: config.setting(key) for key in (
            RegistryConfig.bearer_auth_issuer_endpoint_url.key, RegistryConfig.bearer_auth_client_id.key,
            RegistryConfig.bearer_auth_client_secret.key, RegistryConfig.bearer_auth_scope.key)}
        if source == "STATIC_TOKEN":
            stray = [k for k, v in oauth.items() if v is not None]
            if stray:
                raise ConfigError(Message("{} given but {}=STATIC_TOKEN (they belong to OAUTHBEARER)", listed_settings(stray),
                                          Setting("bearer.auth.credentials.source")))
            token = config.bearer_auth_token
            if not token:
                raise ConfigError(Message("{}=STATIC_TOKEN needs {}", Setting("bearer.auth.credentials.source"),
                                          Setting("bearer.auth.token")))
            self._secrets.append(token)
            self._bearer_header = f"Bearer {token}"
            self.auth_kind = "static-token"
            return
        if config.bearer_auth_token is not None:
            raise ConfigError(Message("{} given but {}=OAUTHBEARER (it fetches its own tokens): drop one",
                                      Setting("bearer.auth.token"), Setting("bearer.auth.credentials.source")))
        missing = [k for k, v in list(oauth.items())[:3] if not v]
        if missing:
            raise ConfigError(Message("{}=OAUTHBEARER needs {}", Setting("bearer.auth.credentials.source"),
                                      listed_settings(missing)))
        endpoint_url = config.bearer_auth_issuer_endpoint_url or ""
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(Message("Invalid configuration {!r}: {!r} is not an http(s) URL",
                                      Setting("bearer.auth.issuer.endpoint.url"), strip_credentials(endpoint_url)))
        secret = config.bearer_auth_client_secret or ""
        self._secrets.append(secret)
        provider = ClientCredentialsTokenProvider(
            endpoint_url, config.bearer_auth_client_id or "", secret,
            config.bearer_auth_scope, timeout_s=self.timeout_s,
            retry_backoff_ms=self.retries_wait_ms, retry_backoff_max_ms=max(self.retries_max_wait_ms, 1))
        self._tokens = _OAuthTokens(provider)
        self.auth_kind = "oauthbearer"
        self.user = provider.client_id


# -- TLS ------------------------------------------------------------------------------------
def tls_context(ca: str | None, cert: str | None, key: str | None, key_password: str | None) -> ssl.SSLContext:
    """A fresh client context: TLS 1.2+, the registry's certificate and host name verified
    against ``ca`` (a PEM file or a directory; the system's trust store without it), and our
    certificate and key for mutual TLS.  Errors name the setting and the file, never the password."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)             # CERT_REQUIRED, check_hostname
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca:
        try:
            if os.path.isdir(ca):
                ctx.load_verify_locations(capath=ca)
            else:
                ctx.load_verify_locations(cafile=ca)
        except OSError as e:
            raise ConfigError(Message("Cannot load {} {!r}: {}", Setting("ssl.ca.location"), ca,
                                      _file_error(e))) from None
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if cert:
        def no_password() -> str:
            raise ConfigError(Message("The private key of {} is encrypted: set {}",
                                      Setting("ssl.key.location" if key else "ssl.certificate.location"),
                                      Setting("ssl.key.password")))

        try:
            ctx.load_cert_chain(cert, key, password=key_password or no_password)
        except ssl.SSLError as e:
            if getattr(e, "reason", None) == "KEY_VALUES_MISMATCH":
                raise ConfigError(Message("{} {!r} is not the key of {} {!r}", Setting("ssl.key.location"), key,
                                          Setting("ssl.certificate.location"), cert)) from None
            raise ConfigError(_cannot_load(cert, key, " with ", ": not PEM, or the key's password ({}) is wrong",
                                           Setting("ssl.key.password"))) from None
        except OSError as e:
            raise ConfigError(_cannot_load(cert, key, " / ", ": {}", _file_error(e))) from None
    return ctx


def _cannot_load(cert: str, key: str | None, joint: str, why: str, *parts: object) -> Message:
    """"Cannot load" the client certificate (and its key, when a file of its own), then ``why``."""
    template, named = "Cannot load {} {!r}", [Setting("ssl.certificate.location"), cert]
    if key:
        template += joint + "{} {!r}"
        named += [Setting("ssl.key.location"), key]
    return Message(template + why, *named, *parts)


def listed_settings(keys: Iterable[str], last: str = ", ") -> Message:
    """``keys`` as settings, comma-separated (``last`` before the last one)."""
    keys = list(keys)
    template = ", ".join(["{}"] * len(keys[:-1])) + (last if len(keys) > 1 else "") + ("{}" if keys else "")
    return Message(template, *map(Setting, keys))


def _file_error(e: OSError) -> str:
    if isinstance(e, ssl.SSLError):
        return f"not a PEM certificate file ({e.reason or e})"
    return e.strerror or str(e)


# -- values ---------------------------------------------------------------------------------
def strip_credentials(url: str) -> str:
    """``url`` without its user info (and so without a password), for messages."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _basic_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _reject_unknown(config: Mapping[str, Any]) -> None:
    for key in config:
        if key in REGISTRY_KEYS:
            continue
        if key in UNSUPPORTED_KEYS:
            raise ConfigError(Message("Configuration '{}' of confluent-kafka's SchemaRegistryClient is not "
                                      "supported: {}", Setting(key), UNSUPPORTED_KEYS[key]))
        near = REGISTRY_KEYS.close_to(key, n=3)
        hint = f" Did you mean {' or '.join(['{!r}'] * len(near))}?" if near else ""
        raise ConfigError(Message("Unknown Schema Registry configuration '{}'." + hint + " Every key: the "
                                  "configuration reference.", Setting(str(key)), *map(Setting, near)))
