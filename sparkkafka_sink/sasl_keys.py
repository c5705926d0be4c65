"""The ``sasl.*`` keys, declared once (``config_def``): what each accepts, its default (Kafka's)
and meaning.  The SASL settings (``network.sasl.settings``) read them; the producer's
configuration takes them among its own keys, as Java's ``ProducerConfig`` takes ``SaslConfigs``.
At the bottom, beside ``security_protocol``: the driver checks a configuration without loading
the network layer."""

from __future__ import annotations

from collections.abc import Callable

from sparkkafka_sink.cloud.databricks import KEY as SERVICE_CREDENTIAL
from sparkkafka_sink.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    Declared,
    Invalid,
    Settings,
    declarations,
    text,
)
from sparkkafka_sink.oauth.token_source import REFRESH_WINDOW_FACTOR_KEY
from sparkkafka_sink.security_protocol import SASL_MECHANISM


def _callable_or_str(value: object) -> str | Callable[..., object]:
    if isinstance(value, str):
        return value
    if callable(value):
        provider: Callable[..., object] = value
        return provider
    raise Invalid()  # (what the key accepts)


def _ms_key(name: str, default: int, doc: str) -> Declared[int]:
    return Declared(ConfigKey(name, "integer", default, doc, minimum=0, maximum=LONG_MAX, unit="ms"))


#: the credentials as Java writes them (the driver looks for a keytab named in it, a task ships it)
JAAS_CONFIG = text("sasl.jaas.config", "credentials as Java users write them (PlainLoginModule, ScramLoginModule, "
                   "OAuthBearerLoginModule, IAMLoginModule, Krb5LoginModule)")

SASL_KEYS: tuple[ConfigKey, ...] = (
    SASL_MECHANISM,
    JAAS_CONFIG,
    text("sasl.username", "user name for PLAIN/SCRAM (instead of sasl.jaas.config)"),
    text("sasl.password", "password for PLAIN/SCRAM (instead of sasl.jaas.config)"),
    ConfigKey("sasl.oauthbearer.token.provider", "custom", None,
              "OAUTHBEARER: a callable (or 'module:function') returning a token", parser=_callable_or_str,
              accepts="a callable or an importable 'module:function' string",
              as_text=("importable 'module:function' string",
                       "OAUTHBEARER: the 'module:function' of a function returning a token (the standalone Producer "
                       "also takes the callable itself; a Spark option is a string)")),
    text("sasl.oauthbearer.token.endpoint.url", "OAUTHBEARER: OIDC token endpoint (client credentials)"),
    text("sasl.oauthbearer.client.id", "OAUTHBEARER/OIDC client id"),
    text("sasl.oauthbearer.client.secret", "OAUTHBEARER/OIDC client secret"),
    text("sasl.oauthbearer.client.credentials.client.id",
         "OAUTHBEARER/OIDC client id (Kafka 4's name of sasl.oauthbearer.client.id)"),
    text("sasl.oauthbearer.client.credentials.client.secret",
         "OAUTHBEARER/OIDC client secret (Kafka 4's name of sasl.oauthbearer.client.secret)"),
    text("sasl.oauthbearer.scope", "OAUTHBEARER/OIDC scope"),
    text("sasl.oauthbearer.extensions", "OAUTHBEARER SASL extensions: k=v,k2=v2"),
    REFRESH_WINDOW_FACTOR_KEY,
    text("sasl.client.callback.handler.class",
         "Java's class name, honoured where it names what is built in: Amazon MSK's IAMClientCallbackHandler "
         "(AWS_MSK_IAM) or IAMOAuthBearerLoginCallbackHandler (OAUTHBEARER); any other class is refused"),
    text("sasl.login.callback.handler.class",
         "Java's class name, honoured where it names what is built in: Kafka's OAuthBearerLoginCallbackHandler "
         "(with sasl.oauthbearer.token.endpoint.url), Amazon MSK's IAMOAuthBearerLoginCallbackHandler (the MSK "
         "IAM token) or Google's GcpLoginCallbackHandler (the Managed Kafka token); any other class is refused"),
    text("sasl.aws.region",
         "Amazon MSK IAM: the cluster's AWS region (not Java's key; default: the region in the broker host names, "
         "else AWS_REGION, AWS_DEFAULT_REGION or the profile's region)"),
    text(SERVICE_CREDENTIAL,
         "Databricks: the name of a Unity Catalog service credential whose cloud identity signs in, read through "
         "Databricks' Python API: an AWS IAM role signs Amazon MSK's IAM sign-in (AWS_MSK_IAM unless sasl.mechanism "
         "says OAUTHBEARER), a Google service account Managed Kafka's OAUTHBEARER token (not Java's key; the sink's "
         "option databricks.serviceCredential sets it)"),
    text("sasl.kerberos.service.name",
         "GSSAPI (Kerberos): the brokers' service name, their principals being <name>/<host>@REALM (usually kafka; "
         "or serviceName in the Krb5LoginModule line)"),
)

class LoginSettings(Settings):
    """The token endpoint's and the token refresher's settings (each with Kafka's default), read
    as typed attributes: ``LoginSettings.read(config)``."""

    sasl_login_connect_timeout_ms: Declared[int | None] = Declared(ConfigKey(
        "sasl.login.connect.timeout.ms", "integer", None, "connect timeout of a token endpoint request",
        minimum=0, maximum=INT_MAX, unit="ms", unset="10000"))
    sasl_login_read_timeout_ms: Declared[int | None] = Declared(ConfigKey(
        "sasl.login.read.timeout.ms", "integer", None, "read timeout of a token endpoint request",
        minimum=0, maximum=INT_MAX, unit="ms", unset="10000"))
    sasl_login_retry_backoff_ms = _ms_key("sasl.login.retry.backoff.ms", 100,
                                          "first wait before retrying a token request")
    sasl_login_retry_backoff_max_ms = _ms_key("sasl.login.retry.backoff.max.ms", 10000,
                                              "time allowed for retrying a token request (its backoff doubles up "
                                              "to this)")
    sasl_login_refresh_window_jitter: Declared[float] = Declared(ConfigKey(
        "sasl.login.refresh.window.jitter", "number", 0.05,
        "random extra fraction of the lifetime added to the refresh time", minimum=0.0, maximum=0.25))
    sasl_login_refresh_min_period_seconds: Declared[int] = Declared(ConfigKey(
        "sasl.login.refresh.min.period.seconds", "integer", 60,
        "refresh a token no sooner than this after the previous fetch", minimum=0, maximum=900, unit="seconds"))
    sasl_login_refresh_buffer_seconds: Declared[int] = Declared(ConfigKey(
        "sasl.login.refresh.buffer.seconds", "integer", 300,
        "refresh a token at least this long before it expires", minimum=0, maximum=3600, unit="seconds"))
    sasl_oauthbearer_header_urlencode: Declared[bool] = Declared(ConfigKey(
        "sasl.oauthbearer.header.urlencode", "boolean", False,
        "URL-encode the client id and secret in the token request's Basic header (RFC 6749)"))
    sasl_oauthbearer_sub_claim_name: Declared[str] = Declared(ConfigKey(
        "sasl.oauthbearer.sub.claim.name", "string", "sub", "the token claim naming the principal", blank="value"))
    sasl_oauthbearer_scope_claim_name: Declared[str] = Declared(ConfigKey(
        "sasl.oauthbearer.scope.claim.name", "string", "scope",
        "the token claim holding its scope (a string or a list of strings, checked)", blank="value"))


#: the token endpoint's and the token refresher's settings
LOGIN_KEYS = declarations(LoginSettings)

#: every ``sasl.*`` key read (errors list them in this order)
SASL = ConfigDef(SASL_KEYS + LOGIN_KEYS)
