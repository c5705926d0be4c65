"""SASL settings: ``security.protocol`` and the ``sasl.*`` keys, checked, as a :class:`SaslSettings`.

:func:`sasl_settings` checks everything up front, so a typo fails when the producer is made, not
on the first connection.  The connection asks the settings for a fresh ``SaslClient``
(``sasl/client.py``) per (re-)authentication and moves its bytes.

Supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (a token endpoint, a token
provider, Kafka's unsecured login, or Amazon MSK's IAM token), AWS_MSK_IAM and GSSAPI
(Kerberos, through python-gssapi), each as Java's settings write it (``sasl.jaas.config``, the
callback handler classes of AWS's jar, ``sasl.kerberos.service.name``).
"""

from __future__ import annotations

import logging
import types
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink import security_protocol as protocols
from sparkkafka_sink.cloud.aws import AwsLogin
from sparkkafka_sink.cloud.databricks import ServiceCredential
from sparkkafka_sink.cloud.google import GoogleTokenProvider
from sparkkafka_sink.cloud.msk import MskIamSigner, MskTokenProvider
from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.network.sasl.aws_msk_iam import (
    AWS_JAAS_NOTED,
    AWS_JAAS_OPTIONS,
    AwsMskIamClient,
    aws_login,
    bootstrap_hosts,
    msk_region,
    msk_signer,
)
from sparkkafka_sink.network.sasl.client import SaslClient
from sparkkafka_sink.network.sasl.gssapi import GssapiClient, KerberosLogin, kerberos_settings
from sparkkafka_sink.network.sasl.jaas import JaasConfig, parse_jaas
from sparkkafka_sink.network.sasl.oauthbearer import OAuthBearerClient, validate_extensions
from sparkkafka_sink.network.sasl.plain import PlainClient
from sparkkafka_sink.network.sasl.reading import (
    AWS_REGION,
    JAAS,
    MECHANISM,
    PASSWORD,
    SERVICE_CREDENTIAL,
    SERVICE_NAME,
    USERNAME,
)
from sparkkafka_sink.network.sasl.reading import given as _given
from sparkkafka_sink.network.sasl.reading import keys_part as _keys
from sparkkafka_sink.network.sasl.reading import text as _text
from sparkkafka_sink.network.sasl.scram import SCRAM_HASHES, ScramClient
from sparkkafka_sink.oauth.token_providers import (
    UNSECURED_EXTENSION_PREFIX,
    ClientCredentialsTokenProvider,
    FileTokenProvider,
    UnsecuredTokenProvider,
    is_unsecured_claim_option,
    load_token_provider,
)
from sparkkafka_sink.oauth.token_source import REFRESH_WINDOW_FACTOR_KEY, TokenSource
from sparkkafka_sink.sasl_keys import LOGIN_KEYS, SASL, LoginSettings

log = logging.getLogger(__name__)

TOKEN_PROVIDER = "sasl.oauthbearer.token.provider"
TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
CLIENT_ID = "sasl.oauthbearer.client.id"
CLIENT_SECRET = "sasl.oauthbearer.client.secret"
SCOPE = "sasl.oauthbearer.scope"
EXTENSIONS = "sasl.oauthbearer.extensions"
REFRESH_WINDOW_FACTOR = REFRESH_WINDOW_FACTOR_KEY.name
CLIENT_HANDLER = "sasl.client.callback.handler.class"
LOGIN_HANDLER = "sasl.login.callback.handler.class"
#: Kafka 4's names of the client id and secret (KIP-1139)
CC_CLIENT_ID = "sasl.oauthbearer.client.credentials.client.id"
CC_CLIENT_SECRET = "sasl.oauthbearer.client.credentials.client.secret"
#: the keys read here, in the order errors list them (``keys``: each one's declaration)
SASL_KEYS = tuple(SASL)
_OAUTH_KEYS = (TOKEN_PROVIDER, TOKEN_ENDPOINT, CLIENT_ID, CLIENT_SECRET, CC_CLIENT_ID, CC_CLIENT_SECRET, SCOPE,
               EXTENSIONS, *(k.name for k in LOGIN_KEYS if k.name.startswith("sasl.oauthbearer.")))

#: login module (simple class name) each mechanism's JAAS entry must use
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    "AWS_MSK_IAM": "software.amazon.msk.auth.iam.IAMLoginModule",
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",
}
#: the callback handler classes of Java's settings that name what is built in here (lower case)
_KAFKA_LOGIN_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.oauthbearerlogincallbackhandler",
                         "org.apache.kafka.common.security.oauthbearer.secured.oauthbearerlogincallbackhandler",
                         "org.apache.kafka.common.security.oauthbearer.oauthbearervalidatorcallbackhandler")
_MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.iamoauthbearerlogincallbackhandler"
_MSK_CLIENT_HANDLER = "software.amazon.msk.auth.iam.iamclientcallbackhandler"
_GCP_LOGIN_HANDLER = "com.google.cloud.hosted.kafka.auth.gcplogincallbackhandler"
#: Kafka's own client callback handler, which Java uses when the key is unset: the same as unset here
_KAFKA_CLIENT_HANDLER = "org.apache.kafka.common.security.authenticator.saslclientcallbackhandler"
#: each built-in class (as Java's settings spell it), by the key it goes in and the mechanisms it goes with
_BUILT_IN_HANDLERS: dict[str, dict[str, tuple[str, ...]]] = {
    "software.amazon.msk.auth.iam.IAMClientCallbackHandler": {CLIENT_HANDLER: ("AWS_MSK_IAM",)},
    "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler": {CLIENT_HANDLER: ("OAUTHBEARER",),
                                                                        LOGIN_HANDLER: ("OAUTHBEARER",)},
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler": {LOGIN_HANDLER: ("OAUTHBEARER",)},
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler":
        {LOGIN_HANDLER: ("OAUTHBEARER",)},
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler":
        {LOGIN_HANDLER: ("OAUTHBEARER",)},
    "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler": {LOGIN_HANDLER: ("OAUTHBEARER",)},
    "org.apache.kafka.common.security.authenticator.SaslClientCallbackHandler":
        {CLIENT_HANDLER: ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM", "GSSAPI")},
}
_TOKEN_PROVIDER_HINT = Message("set {}=OAUTHBEARER and {} to a 'module:function' that returns a token",
                               Setting(MECHANISM), Setting(TOKEN_PROVIDER))
_OAUTH_JAAS_OPTIONS = {"clientId": CLIENT_ID, "clientSecret": CLIENT_SECRET, "scope": SCOPE}
_JAAS_EXTENSION_PREFIX = "extension_"


@dataclass(frozen=True, eq=False, repr=False)
class SaslSettings:
    """How this producer authenticates; secrets stay out of repr() and str()."""

    mechanism: str
    security_protocol: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: SCRAM with a delegation token (``tokenauth=true``)
    token_auth: bool = False
    token_source: TokenSource | None = None
    extensions: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    #: AWS_MSK_IAM: signs the message for each broker host
    msk_signer: MskIamSigner | None = None
    #: GSSAPI: the brokers' service name and the client's Kerberos login
    kerberos_service: str | None = None
    kerberos: KerberosLogin | None = None

    def __repr__(self) -> str:
        return f"SaslSettings(mechanism={self.mechanism!r}, principal={self.principal!r})"

    __str__ = __repr__

    @property
    def principal(self) -> str | None:
        """The user name, or the token's subject (before the first token: what the source knows,
        e.g. the OAuth client id), for messages."""
        if self.token_source is not None:
            return self.token_source.principal
        if self.kerberos is not None:
            return self.kerberos.principal or self.kerberos.description
        if self.msk_signer is not None:
            return self.msk_signer.login.description
        return self.username

    @property
    def uses_tls(self) -> bool:
        return protocols.uses_tls(self.security_protocol)

    def new_client(self, host: str) -> SaslClient:
        """A client for one (re-)authentication with the broker at ``host`` (the name dialled).
        For OAUTHBEARER it takes the current token: the first call blocks on the token provider
        (see :meth:`prepare`)."""
        if self.msk_signer is not None:
            signer = self.msk_signer
            return AwsMskIamClient(lambda: signer.payload(host))
        if self.kerberos is not None:
            assert self.kerberos_service is not None
            return GssapiClient(self.kerberos_service, host, self.kerberos)
        if self.mechanism == "PLAIN":
            assert self.username is not None and self.password is not None
            return PlainClient(self.username, self.password)
        if self.mechanism in SCRAM_HASHES:
            assert self.username is not None and self.password is not None
            return ScramClient(self.mechanism, self.username, self.password, token_auth=self.token_auth)
        assert self.token_source is not None
        token = self.token_source.current()
        return OAuthBearerClient(token.value, self.extensions, principal=token.principal)

    def prepare(self) -> None:
        """Fetch the first OAUTHBEARER token (or load AWS_MSK_IAM's credentials) now, so that a
        wrong client secret or missing credentials fail where the producer is made, not inside
        the network thread; a no-op for the other mechanisms."""
        if self.token_source is not None:
            self.token_source.current()
        if self.msk_signer is not None:
            self.msk_signer.login.credentials()
        if self.kerberos is not None:
            self.kerberos.credentials()

    def close(self) -> None:
        """Stop the token refresher, if any."""
        if self.token_source is not None:
            self.token_source.close()


def _joined(parts: list[Message]) -> Message:
    return Message(", ".join("{}" for _ in parts), *parts)


def sasl_settings(config: Mapping[str, Any]) -> SaslSettings | None:
    """Validate ``security.protocol`` and the ``sasl.*`` keys; None without SASL.

    Values are raw (str, or None for unset; a callable for the token provider; a number for the
    refresh window factor).  When ``config`` has an ``explicit`` set of the keys the user gave
    (``ProducerConfig``), only those count for the security.protocol check.  Every error is a ConfigError naming the keys (and JAAS options)
    concerned and never showing a password, secret or token.
    """
    protocol = protocols.parse_security_protocol(config.get(protocols.SECURITY_PROTOCOL.name))
    # a config that knows which keys the user set (ProducerConfig.explicit) fills in defaults
    # (sasl.login.refresh.window.factor=0.8) that must not count as given
    explicit = getattr(config, "explicit", None)
    given = [k for k in SASL_KEYS if _given(config.get(k)) and (explicit is None or k in explicit)]
    given += sorted(k for k in config if isinstance(k, str) and k.startswith("sasl.") and k not in SASL_KEYS
                    and _given(config.get(k)) and (explicit is None or k in explicit))
    if not protocols.uses_sasl(protocol):
        if given:
            security = Setting("security.protocol")
            raise ConfigError(Message(
                "Configuration {} only applies with {} SASL_SSL or SASL_PLAINTEXT, but {} is {}: set {} to {}, "
                "or remove {}", _keys(given), security, security, protocol, security,
                "SASL_SSL" if protocols.uses_tls(protocol) else "SASL_PLAINTEXT or SASL_SSL",
                "them" if len(given) > 1 else "it"))
        return None
    if SERVICE_CREDENTIAL in given:
        return _service_credential(config, protocol, given)

    jaas_text = _text(config, JAAS, strip=False)
    jaas = parse_jaas(jaas_text) if jaas_text is not None else None
    mechanism = _mechanism(config, jaas, protocol)
    if jaas is not None and jaas.module_name != _LOGIN_MODULES[mechanism].rsplit(".", 1)[-1]:
        raise ConfigError(Message("Invalid configuration {!r}: the login module '{}' does not go with {} {}; use {}",
                                  Setting(JAAS), jaas.login_module, Setting(MECHANISM), mechanism,
                                  _LOGIN_MODULES[mechanism]))
    _refresh_window_factor(config)  # checked whatever the mechanism
    _handler(config, CLIENT_HANDLER, mechanism)  # one of AWS's classes, or refused
    login_handler = _handler(config, LOGIN_HANDLER, mechanism)
    if AWS_REGION in given and mechanism != "AWS_MSK_IAM" and login_handler != _MSK_OAUTH_HANDLER:
        raise ConfigError(Message("Configuration {!r} applies to Amazon MSK's IAM sign-in: {} AWS_MSK_IAM, or "
                                  "OAUTHBEARER with {}={}", Setting(AWS_REGION), Setting(MECHANISM),
                                  Setting(LOGIN_HANDLER), "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"))
    if mechanism == "OAUTHBEARER":
        return _oauthbearer(config, jaas, protocol, login_handler)
    oauth_given = [k for k in _OAUTH_KEYS if k in given]
    if oauth_given:
        raise ConfigError(Message("Configuration {} only applies to {} OAUTHBEARER, not {}", _keys(oauth_given),
                                  Setting(MECHANISM), mechanism))
    if mechanism in ("AWS_MSK_IAM", "GSSAPI"):
        password_keys = [k for k in (USERNAME, PASSWORD) if _given(config.get(k))]
        if password_keys:
            raise ConfigError(Message("Configuration {} applies to PLAIN and SCRAM, not {} {}", _keys(password_keys),
                                      Setting(MECHANISM), mechanism))
        if mechanism == "AWS_MSK_IAM":
            return SaslSettings(mechanism, protocol, msk_signer=msk_signer(config, jaas))
        service, kerberos = kerberos_settings(config, jaas)
        return SaslSettings(mechanism, protocol, kerberos_service=service, kerberos=kerberos)
    if SERVICE_NAME in given:
        raise ConfigError(Message("Configuration {!r} applies to {} GSSAPI (Kerberos), not {}", Setting(SERVICE_NAME),
                                  Setting(MECHANISM), mechanism))
    return _password_settings(config, jaas, protocol, mechanism)


def _built_in_class(value: str) -> str | None:
    """The built-in class ``value`` names (Java's spelling), also as a shaded copy: Databricks writes
    AWS's classes ``shadedmskiam.software.amazon.msk.auth.iam...`` and Kafka's ``kafkashaded.org.apache...``."""
    lowered = value.lower()
    for name in _BUILT_IN_HANDLERS:
        if lowered == name.lower() or lowered.endswith("." + name.lower()):
            return name
    return None


def _service_credential(config: Mapping[str, Any], protocol: str, given: list[str]) -> SaslSettings:
    """Sign in as a Databricks Unity Catalog service credential: its AWS IAM role for Amazon MSK
    (AWS_MSK_IAM, or OAUTHBEARER's MSK token), its Google service account for Managed Kafka."""
    others = [k for k in given if k not in (SERVICE_CREDENTIAL, MECHANISM, AWS_REGION, *(k.name for k in LOGIN_KEYS))]
    if others:
        raise ConfigError(Message("Configuration {} and {!r} both say how to sign in: the service credential signs "
                                  "in by itself, so remove {}", _keys(others), Setting(SERVICE_CREDENTIAL),
                                  "them" if len(others) > 1 else "it"))
    credential = ServiceCredential(str(_text(config, SERVICE_CREDENTIAL)))
    cloud = credential.cloud()
    raw = config.get(MECHANISM)
    if cloud == "aws":
        mechanism = SASL.parse(MECHANISM, raw) if _given(raw) else "AWS_MSK_IAM"
        login = AwsLogin(session=credential.provider, source=credential.description)
        if mechanism == "AWS_MSK_IAM":
            return SaslSettings(mechanism, protocol, msk_signer=msk_signer(config, None, login))
        if mechanism == "OAUTHBEARER":
            region = msk_region(config, bootstrap_hosts(config))
            if region is None:
                raise ConfigError(Message("Amazon MSK's IAM token ({}) needs the cluster's AWS region: set {!r}, or "
                                          "AWS_REGION in the environment (the bootstrap host names none)",
                                          Setting(SERVICE_CREDENTIAL), Setting(AWS_REGION)))
            return _token_settings(LoginSettings.read(config), config, protocol, MskTokenProvider(region, login))
        raise ConfigError(Message("{} {!r} is an AWS IAM role, which signs in to Amazon MSK with {} AWS_MSK_IAM "
                                  "(the default) or OAUTHBEARER, not {}", Setting(SERVICE_CREDENTIAL), credential.name,
                                  Setting(MECHANISM), mechanism))
    if cloud == "google":
        if _given(raw) and SASL.parse(MECHANISM, raw) != "OAUTHBEARER":
            raise ConfigError(Message("{} {!r} is a Google service account, which signs in to Managed Kafka with {} "
                                      "OAUTHBEARER, not {}", Setting(SERVICE_CREDENTIAL), credential.name,
                                      Setting(MECHANISM), SASL.parse(MECHANISM, raw)))
        if AWS_REGION in given:
            raise ConfigError(Message("Configuration {!r} applies to Amazon MSK, not to the Google service account "
                                      "{!r}", Setting(AWS_REGION), credential.name))
        return _token_settings(LoginSettings.read(config), config, protocol,
                               GoogleTokenProvider(credentials=credential.provider))
    what = "an Azure credential" if cloud == "azure" else f"a {type(credential.provider()).__name__}"
    raise ConfigError(Message("{} {!r} is {}: the sink signs in with AWS IAM roles (Amazon MSK) and Google service "
                              "accounts (Managed Kafka); for Azure Event Hubs use its connection string (PLAIN)",
                              Setting(SERVICE_CREDENTIAL), credential.name, what))


def _token_settings(login: LoginSettings, config: Mapping[str, Any], protocol: str, provider: Any,
                    description: str | None = None,
                    extensions: Mapping[str, str] | None = None) -> SaslSettings:
    """OAUTHBEARER with ``provider``'s tokens, refreshed as the login keys say."""
    source = TokenSource(provider, _refresh_window_factor(config),
                         description=description if description is not None else getattr(provider, "description", None),
                         jitter=login.sasl_login_refresh_window_jitter,
                         min_refresh_period_s=login.sasl_login_refresh_min_period_seconds,
                         refresh_buffer_s=login.sasl_login_refresh_buffer_seconds)
    return SaslSettings("OAUTHBEARER", protocol, token_source=source,
                        extensions=types.MappingProxyType(dict(extensions or {})))


def _handler(config: Mapping[str, Any], key: str, mechanism: str) -> str | None:
    """Java's callback handler class ``key``, as its canonical name in lower case, when it names
    what is built in here for ``mechanism`` (None: unset, or Kafka's default client handler); a
    ConfigError that says which setting to change for any other class (this producer runs no Java)."""
    raw = _text(config, key)
    if raw is None:
        return None
    found = _built_in_class(raw)
    if found is not None and mechanism in _BUILT_IN_HANDLERS[found].get(key, ()):
        return None if found.lower() == _KAFKA_CLIENT_HANDLER else found.lower()
    here = [name for name, uses in _BUILT_IN_HANDLERS.items()
            if mechanism in uses.get(key, ()) and name.lower() != _KAFKA_CLIENT_HANDLER]
    keep = (Message("or, to keep {} {}, set {} to {}", Setting(MECHANISM), mechanism, Setting(key), " or ".join(here))
            if here else Message("or, to keep {} {}, remove {}", Setting(MECHANISM), mechanism, Setting(key)))
    if found is not None and key in _BUILT_IN_HANDLERS[found]:
        wanted = _BUILT_IN_HANDLERS[found][key]
        raise ConfigError(Message("Configuration {!r} '{}' goes with {} {}, but {} is {}: set {} to {}; {}",
                                  Setting(key), raw, Setting(MECHANISM), " or ".join(wanted), Setting(MECHANISM),
                                  mechanism, Setting(MECHANISM), wanted[0], keep))
    if found is not None:
        right = " or ".join(_BUILT_IN_HANDLERS[found])
        raise ConfigError(Message("Configuration {!r} '{}': that class goes in {}, not in {}: move it there",
                                  Setting(key), raw, right, Setting(key)))
    if key == LOGIN_HANDLER and mechanism == "OAUTHBEARER":
        instead = Message("{} (the client-credentials grant, built in), {} naming a Python 'module:function', or "
                          "Amazon MSK's software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler or Google's "
                          "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler (both built in)",
                          Setting(TOKEN_ENDPOINT), Setting(TOKEN_PROVIDER))
    elif here:
        instead = Message("with {} {}, set {} to {} (built in), or remove it", Setting(MECHANISM), mechanism,
                          Setting(key), " or ".join(here))
    else:
        instead = Message("with {} {}, remove {}: the sign-in is built in and needs no handler", Setting(MECHANISM),
                          mechanism, Setting(key))
    raise ConfigError(Message("Configuration {!r} of the Java producer is not supported here with {} {}: '{}' is a "
                              "Java class, and this producer runs no Java; {}", Setting(key), Setting(MECHANISM),
                              mechanism, raw, instead))


def _mechanism(config: Mapping[str, Any], jaas: JaasConfig | None, protocol: str) -> str:
    raw = config.get(MECHANISM)
    if not _given(raw):
        if _given(config.get(USERNAME)) or _given(config.get(PASSWORD)) or \
                (jaas is not None and jaas.module_name == "PlainLoginModule"):
            return "PLAIN"
        if (jaas is not None and jaas.module_name == "Krb5LoginModule") or _given(config.get(SERVICE_NAME)):
            return "GSSAPI"  # Java's default, given Kerberos settings
        hint: str = ""
        if jaas is not None and jaas.module_name == "ScramLoginModule":
            hint = Message(" ({} uses ScramLoginModule: SCRAM-SHA-256 or SCRAM-SHA-512, as the user was created)",
                           Setting(JAAS))
        elif (jaas is not None and jaas.module_name == "OAuthBearerLoginModule") or \
                any(_given(config.get(k)) for k in _OAUTH_KEYS):
            hint = " (OAUTHBEARER, given the OAuth settings)"
        raise ConfigError(Message(
            "Missing configuration {!r} ({} is {}): set it to one of {}{} (Java's default, GSSAPI, needs Kerberos "
            "settings: {} and a Krb5LoginModule {})", Setting(MECHANISM), Setting("security.protocol"), protocol,
            ", ".join(protocols.SASL_MECHANISMS), hint, Setting(SERVICE_NAME), Setting(JAAS)))
    return SASL.parse(MECHANISM, raw)


def _refresh_window_factor(config: Mapping[str, Any]) -> float:
    raw = config.get(REFRESH_WINDOW_FACTOR)
    return SASL.parse(REFRESH_WINDOW_FACTOR, raw if _given(raw) else None)


def _password_settings(config: Mapping[str, Any], jaas: JaasConfig | None, protocol: str,
                       mechanism: str) -> SaslSettings:
    username, password = _text(config, USERNAME), _text(config, PASSWORD, strip=False)
    token_auth = False
    if jaas is not None:
        if username is not None or password is not None:
            both = [k for k, v in ((USERNAME, username), (PASSWORD, password)) if v is not None]
            raise ConfigError(Message("Configuration {} and {!r} both give credentials: use one or the other",
                                      _keys(both), Setting(JAAS)))
        for option in ("username", "password"):
            if not jaas.options.get(option):
                raise ConfigError(Message("Invalid configuration {!r}: {} needs a non-empty '{}' option for {}",
                                          Setting(JAAS), jaas.module_name, option, mechanism))
        username, password = jaas.options["username"], jaas.options["password"]
        tokenauth = jaas.options.get("tokenauth")
        if tokenauth is not None and tokenauth.lower() not in ("true", "false"):
            raise ConfigError(Message("Invalid configuration {!r}: option 'tokenauth' must be true or false",
                                      Setting(JAAS)))
        token_auth = (tokenauth or "").lower() == "true"
        if token_auth and mechanism == "PLAIN":
            raise ConfigError(Message("Invalid configuration {!r}: option 'tokenauth' (delegation tokens) needs "
                                      "SCRAM-SHA-256 or SCRAM-SHA-512, not PLAIN", Setting(JAAS)))
        unknown = sorted(set(jaas.options) - {"username", "password", "tokenauth"})
        if unknown:
            log.warning("%s: ignoring unknown %s options %s", JAAS, jaas.module_name, ", ".join(unknown))
    else:
        for key, value in ((USERNAME, username), (PASSWORD, password)):
            if value is None:
                raise ConfigError(Message("Missing configuration {!r}: {} needs {!r} and {!r} (or {!r})", Setting(key),
                                          mechanism, Setting(USERNAME), Setting(PASSWORD), Setting(JAAS)))
    assert username is not None and password is not None
    if mechanism == "PLAIN" and ("\0" in username or "\0" in password):
        raise ConfigError(Message("Invalid credentials for {} PLAIN: the user name or password contains a NUL "
                                  "character, which PLAIN cannot carry", Setting(MECHANISM)))
    return SaslSettings(mechanism, protocol, username=username, password=password, token_auth=token_auth)


def _oauthbearer(config: Mapping[str, Any], jaas: JaasConfig | None, protocol: str,
                 login_handler: str | None = None) -> SaslSettings:
    password_keys = [k for k in (USERNAME, PASSWORD) if _given(config.get(k))]
    if password_keys:
        raise ConfigError(Message("Configuration {} applies to PLAIN and SCRAM, not {} OAUTHBEARER",
                                  _keys(password_keys), Setting(MECHANISM)))
    options = dict(jaas.options) if jaas is not None else {}
    msk, google = login_handler == _MSK_OAUTH_HANDLER, login_handler == _GCP_LOGIN_HANDLER

    # client id, secret and scope: a key or its JAAS option, not both
    oauth: dict[str, str | None] = {}
    for option, key in _OAUTH_JAAS_OPTIONS.items():
        from_key = _text(config, key, strip=key != CLIENT_SECRET)
        kafka4 = {CLIENT_ID: CC_CLIENT_ID, CLIENT_SECRET: CC_CLIENT_SECRET}.get(key)
        from_kafka4 = _text(config, kafka4, strip=False) if kafka4 else None
        if from_key is not None and from_kafka4 is not None:
            raise ConfigError(Message("Configuration {!r} and {!r} give the same setting: use one", Setting(key),
                                      Setting(kafka4 or key)))
        if from_key is None:
            from_key = from_kafka4
        from_jaas = options.get(option)
        if from_key is not None and from_jaas is not None:
            given_key = kafka4 if kafka4 is not None and from_kafka4 is not None else key
            raise ConfigError(Message("Configuration {!r} and option '{}' of {!r} give the same setting: use one",
                                      Setting(given_key), option, Setting(JAAS)))
        oauth[key] = from_key if from_key is not None else from_jaas

    extensions = _extensions(config, options)
    unsecured = {k: v for k, v in options.items() if is_unsecured_claim_option(k)}
    aws_options = {k: v for k, v in options.items() if k in AWS_JAAS_OPTIONS or k in AWS_JAAS_NOTED} if msk else {}
    unknown = sorted(k for k in options if k not in _OAUTH_JAAS_OPTIONS and k not in unsecured and k not in aws_options
                     and not k.startswith((_JAAS_EXTENSION_PREFIX, UNSECURED_EXTENSION_PREFIX)))
    if unknown:
        log.warning("%s: ignoring unknown OAuthBearerLoginModule options %s", JAAS, ", ".join(unknown))

    provider_spec = config.get(TOKEN_PROVIDER)
    endpoint = _text(config, TOKEN_ENDPOINT)
    sources: list[Message] = []
    if _given(provider_spec):
        sources.append(_keys([TOKEN_PROVIDER]))
    if endpoint is not None:
        sources.append(_keys([TOKEN_ENDPOINT]))
    if unsecured:
        sources.append(Message("the unsecured login options of {!r} ({})", Setting(JAAS),
                               ", ".join(sorted(unsecured))))
    if msk:
        sources.append(Message("{!r} (Amazon MSK's IAM token)", Setting(LOGIN_HANDLER)))
    if google:
        sources.append(Message("{!r} (Google's Managed Kafka token)", Setting(LOGIN_HANDLER)))
    if not sources:
        raise ConfigError(Message(
            "{} OAUTHBEARER needs a token source: {!r} (a callable or 'module:function'), {!r} with a client id "
            "and secret, or Kafka's unsecured login (option unsecuredLoginStringClaim_sub in {!r}, for test "
            "brokers)", Setting(MECHANISM), Setting(TOKEN_PROVIDER), Setting(TOKEN_ENDPOINT), Setting(JAAS)))
    if len(sources) > 1:
        raise ConfigError(Message("{} OAUTHBEARER has several token sources: {}; give exactly one",
                                  Setting(MECHANISM), _joined(sources)))
    credentials_given = [k for k in (CLIENT_ID, CLIENT_SECRET, SCOPE) if oauth[k] is not None]

    login = LoginSettings.read(config)
    if msk:
        if credentials_given:
            raise ConfigError(Message("Configuration {} (or the matching {!r} options) does not apply to Amazon "
                                      "MSK's IAM token, signed with AWS credentials", _keys(credentials_given),
                                      Setting(JAAS)))
        region = msk_region(config, bootstrap_hosts(config))
        if region is None:
            raise ConfigError(Message("Amazon MSK's IAM token ({}) needs the cluster's AWS region: set {!r}, or "
                                      "AWS_REGION in the environment (the bootstrap host names none)",
                                      Setting(LOGIN_HANDLER), Setting(AWS_REGION)))
        provider: Any = MskTokenProvider(region, aws_login(aws_options, "OAuthBearerLoginModule"))
        description = provider.description
    elif google:
        if credentials_given:
            raise ConfigError(Message("Configuration {} (or the matching {!r} options) does not apply to Google's "
                                      "Managed Kafka token, made from the application default credentials",
                                      _keys(credentials_given), Setting(JAAS)))
        provider = GoogleTokenProvider()
        description = provider.description
    elif endpoint is not None:
        provider = _endpoint_provider(endpoint, oauth, credentials_given, login)
        description = provider.description
    else:
        if credentials_given:
            raise ConfigError(Message("Configuration {} (or the matching {!r} options) needs {!r}",
                                      _keys(credentials_given), Setting(JAAS), Setting(TOKEN_ENDPOINT)))
        if unsecured:
            provider = UnsecuredTokenProvider(unsecured)
            description = provider.description
        else:
            provider = load_token_provider(provider_spec)
            description = f"token provider {provider_spec.strip()}" if isinstance(provider_spec, str) \
                else None
    return _token_settings(login, config, protocol, provider, description, extensions)


def _endpoint_provider(endpoint: str, oauth: Mapping[str, str | None], credentials_given: list[str],
                       login: LoginSettings) -> FileTokenProvider | ClientCredentialsTokenProvider:
    scheme = urllib.parse.urlsplit(endpoint).scheme.lower()
    if scheme == "file":
        if credentials_given:
            raise ConfigError(Message("Configuration {} does not apply to a file: {!r} (the token is read from the "
                                      "file)", _keys(credentials_given), Setting(TOKEN_ENDPOINT)))
        return FileTokenProvider(urllib.request.url2pathname(urllib.parse.urlsplit(endpoint).path))
    if scheme not in ("http", "https"):
        raise ConfigError(Message("Invalid configuration {!r}: expected an https://, http:// or file: URL",
                                  Setting(TOKEN_ENDPOINT)))
    def seconds(ms: int | None) -> float | None:
        return None if ms is None else ms / 1000

    return ClientCredentialsTokenProvider(
        endpoint, _client_credential(oauth, CLIENT_ID, "clientId"),
        _client_credential(oauth, CLIENT_SECRET, "clientSecret"), oauth[SCOPE],
        connect_timeout_s=seconds(login.sasl_login_connect_timeout_ms),
        read_timeout_s=seconds(login.sasl_login_read_timeout_ms),
        retry_backoff_ms=login.sasl_login_retry_backoff_ms,
        retry_backoff_max_ms=max(login.sasl_login_retry_backoff_max_ms, login.sasl_login_retry_backoff_ms),
        urlencode_credentials=login.sasl_oauthbearer_header_urlencode,
        sub_claim_name=login.sasl_oauthbearer_sub_claim_name,
        scope_claim_name=login.sasl_oauthbearer_scope_claim_name)


def _client_credential(oauth: Mapping[str, str | None], key: str, option: str) -> str:
    value = oauth[key]
    if not value or not value.strip():
        raise ConfigError(Message("Missing configuration {!r} (or option '{}' in {!r}): {!r} needs a client id and "
                                  "secret", Setting(key), option, Setting(JAAS), Setting(TOKEN_ENDPOINT)))
    return value


def _extensions(config: Mapping[str, Any], options: Mapping[str, str]) -> dict[str, str]:
    """``sasl.oauthbearer.extensions`` ("k=v,k2=v2") plus the JAAS ``extension_<name>`` and
    ``unsecuredLoginExtension_<name>`` options; a name given twice is an error."""
    found: dict[str, tuple[str, Message]] = {}                # name -> (value, where)

    def add(name: str, value: str, where: Message) -> None:
        if name in found:
            raise ConfigError(Message("SASL extension '{}' is given twice (in {} and {})", name, found[name][1],
                                      where))
        found[name] = (value, where)
        validate_extensions({name: value}, where)

    raw = _text(config, EXTENSIONS, strip=False)
    if raw is not None:
        for i, item in enumerate(raw.split(",")):
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(Message("Invalid configuration {!r}: item {} is not name=value (expected "
                                          "'name=value,name2=value2')", Setting(EXTENSIONS), i + 1))
            add(name.strip(), value.strip(), _keys([EXTENSIONS]))
    for option, value in options.items():
        for prefix in (_JAAS_EXTENSION_PREFIX, UNSECURED_EXTENSION_PREFIX):
            if option.startswith(prefix):
                add(option[len(prefix):], value, Message("{!r} (option '{}')", Setting(JAAS), option))
    return {name: value for name, (value, _) in found.items()}
