"""sasl_settings(): every rule, with the message text, and secrets kept out of str()/repr()."""

from __future__ import annotations

import base64
import json

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.network.sasl.oauthbearer import OAuthBearerClient
from sparkkafka_sink.network.sasl.plain import PlainClient
from sparkkafka_sink.network.sasl.scram import ScramClient
from sparkkafka_sink.network.sasl.settings import SaslSettings, sasl_settings

SECRET = "hunter2-S3CRET"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SASL_SSL = {"security.protocol": "SASL_SSL"}


def error_of(config) -> str:
    with pytest.raises(ConfigError) as e:
        sasl_settings(config)
    message = str(e.value)
    assert SECRET not in message and SECRET not in repr(e.value)
    return message


def assert_no_secret(settings: SaslSettings):
    for text in (repr(settings), str(settings), f"{settings}", repr([settings])):
        assert SECRET not in text


# -- protocols -------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", [None, "PLAINTEXT", "SSL", "ssl", " plaintext "])
def test_no_sasl_without_a_sasl_protocol(protocol):
    assert sasl_settings({"security.protocol": protocol, "sasl.mechanism": None, "sasl.jaas.config": ""}) is None


def test_sasl_keys_with_a_non_sasl_protocol_are_an_error():
    message = error_of({"security.protocol": "SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                        "sasl.password": SECRET})
    assert message == ("Configuration 'sasl.mechanism', 'sasl.username', 'sasl.password' only applies "
                       "with security.protocol SASL_SSL or SASL_PLAINTEXT, but security.protocol is "
                       "SSL: set security.protocol to SASL_SSL, or remove them")
    message = error_of({"sasl.jaas.config": f'{PLAIN_MODULE} required password="{SECRET}";'})
    assert "'sasl.jaas.config' only applies" in message and "security.protocol is PLAINTEXT" in message
    assert "SASL_PLAINTEXT or SASL_SSL, or remove it" in message


def test_defaults_filled_in_by_the_config_layer_do_not_count_as_given():
    class FilledConfig(dict):
        explicit = frozenset({"security.protocol"})

    config = FilledConfig({"security.protocol": "PLAINTEXT", "sasl.login.refresh.window.factor": 0.8,
                           "sasl.mechanism": None})
    assert sasl_settings(config) is None
    config.explicit = frozenset({"security.protocol", "sasl.login.refresh.window.factor"})
    assert "'sasl.login.refresh.window.factor' only applies" in error_of(config)


def test_unknown_protocol():
    assert error_of({"security.protocol": "SASL"}) == (
        "Invalid value 'SASL' for configuration 'security.protocol': expected one of PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL")


# -- mechanisms ------------------------------------------------------------------------------
def test_unknown_mechanism_lists_the_supported_ones():
    assert error_of({**SASL_SSL, "sasl.mechanism": "CRAM-MD5"}) == (
        "Invalid value 'CRAM-MD5' for configuration 'sasl.mechanism': expected one of PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM, GSSAPI")


KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


def test_gssapi_as_javas_settings_write_it():
    from security_fixtures import GSSAPI_MISSING

    pytest.importorskip("gssapi", reason=GSSAPI_MISSING)
    keytab = f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="/etc/app.keytab" principal="app@EX.COM";'
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
                              "sasl.jaas.config": keytab})
    assert settings.mechanism == "GSSAPI" and settings.kerberos_service == "kafka"
    assert settings.kerberos.keytab == "/etc/app.keytab" and settings.principal == "app@EX.COM"
    # Java's default mechanism, given Kerberos settings; the service name in the JAAS line
    settings = sasl_settings({**SASL_SSL, "sasl.jaas.config": f'{KRB5_MODULE} required useTicketCache=true '
                                                              'serviceName="kafka";'})
    assert settings.mechanism == "GSSAPI" and settings.kerberos.keytab is None
    assert "needs 'sasl.kerberos.service.name'" in error_of({**SASL_SSL, "sasl.mechanism": "GSSAPI"})
    assert "needs keyTab and principal" in error_of(
        {**SASL_SSL, "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
         "sasl.jaas.config": f"{KRB5_MODULE} required useKeyTab=true;"})
    assert "nothing here can prompt for a password" in error_of(
        {**SASL_SSL, "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
         "sasl.jaas.config": f"{KRB5_MODULE} required;"})
    assert "applies to sasl.mechanism GSSAPI" in error_of(
        {**SASL_SSL, "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": SECRET,
         "sasl.kerberos.service.name": "kafka"})


def test_missing_mechanism_defaults_to_plain_only_with_credentials():
    settings = sasl_settings({**SASL_SSL, "sasl.username": "alice", "sasl.password": SECRET})
    assert settings.mechanism == "PLAIN" and settings.uses_tls
    settings = sasl_settings({**SASL_SSL, "sasl.jaas.config":
                              f'{PLAIN_MODULE} required username="alice" password="{SECRET}";'})
    assert settings.mechanism == "PLAIN"
    message = error_of({"security.protocol": "SASL_PLAINTEXT"})
    assert message == ("Missing configuration 'sasl.mechanism' (security.protocol is SASL_PLAINTEXT): "
                       "set it to one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM, GSSAPI "
                       "(Java's default, GSSAPI, needs Kerberos settings: sasl.kerberos.service.name and a "
                       "Krb5LoginModule sasl.jaas.config)")
    message = error_of({**SASL_SSL, "sasl.jaas.config": f'{SCRAM_MODULE} required username="a" password="{SECRET}";'})
    assert "uses ScramLoginModule: SCRAM-SHA-256 or SCRAM-SHA-512" in message
    assert "(OAUTHBEARER, given the OAuth settings)" in error_of(
        {**SASL_SSL, "sasl.oauthbearer.token.provider": "m:f"})


def test_mechanism_is_case_insensitive():
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "scram-sha-512", "sasl.username": "a",
                              "sasl.password": SECRET})
    assert settings.mechanism == "SCRAM-SHA-512"


# -- PLAIN and SCRAM credentials ---------------------------------------------------------------
def test_plain_from_username_and_password():
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                              "sasl.password": SECRET})
    assert repr(settings) == "SaslSettings(mechanism='PLAIN', principal='alice')"
    assert_no_secret(settings)
    client = settings.new_client("localhost")
    assert isinstance(client, PlainClient)
    assert client.first_message() == b"\0alice\0" + SECRET.encode()
    assert settings.new_client("localhost") is not client
    settings.close()


def test_scram_from_jaas_with_token_auth():
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config":
                              f'{SCRAM_MODULE} required username="tok" password="{SECRET}" tokenauth="TRUE";'})
    assert settings.principal == "tok" and settings.token_auth
    assert_no_secret(settings)
    client = settings.new_client("localhost")
    assert isinstance(client, ScramClient) and client.mechanism == "SCRAM-SHA-256"
    assert client.first_message().endswith(b",tokenauth=true")


def test_shaded_login_module_names_are_accepted():
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "PLAIN", "sasl.jaas.config":
                              f'kafkashaded.{PLAIN_MODULE} required username="a" password="{SECRET}";'})
    assert settings.username == "a"


def test_login_module_must_match_the_mechanism():
    message = error_of({**SASL_SSL, "sasl.mechanism": "PLAIN", "sasl.jaas.config":
                        f'{SCRAM_MODULE} required username="alice" password="{SECRET}";'})
    assert message == (f"Invalid configuration 'sasl.jaas.config': the login module '{SCRAM_MODULE}' does "
                       f"not go with sasl.mechanism PLAIN; use {PLAIN_MODULE}")
    message = error_of({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
                        f'{PLAIN_MODULE} required username="alice" password="{SECRET}";'})
    assert f"use {OAUTH_MODULE}" in message


@pytest.mark.parametrize("config,message", [
    ({"sasl.mechanism": "PLAIN", "sasl.username": "alice"},
     "Missing configuration 'sasl.password': PLAIN needs 'sasl.username' and 'sasl.password' "
     "(or 'sasl.jaas.config')"),
    ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.password": SECRET},
     "Missing configuration 'sasl.username': SCRAM-SHA-256 needs 'sasl.username' and 'sasl.password' "
     "(or 'sasl.jaas.config')"),
    ({"sasl.mechanism": "PLAIN"},
     "Missing configuration 'sasl.username': PLAIN needs 'sasl.username' and 'sasl.password' "
     "(or 'sasl.jaas.config')"),
    ({"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": f'{SCRAM_MODULE} required username="alice";'},
     "Invalid configuration 'sasl.jaas.config': ScramLoginModule needs a non-empty 'password' option "
     "for SCRAM-SHA-512"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN_MODULE} required password="{SECRET}";'},
     "Invalid configuration 'sasl.jaas.config': PlainLoginModule needs a non-empty 'username' option for PLAIN"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": SECRET,
      "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="{SECRET}";'},
     "Configuration 'sasl.username', 'sasl.password' and 'sasl.jaas.config' both give credentials: "
     "use one or the other"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "al\0ice", "sasl.password": SECRET},
     "Invalid credentials for sasl.mechanism PLAIN: the user name or password contains a NUL character, "
     "which PLAIN cannot carry"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      f'{PLAIN_MODULE} required username="a" password="{SECRET}" tokenauth="true";'},
     "Invalid configuration 'sasl.jaas.config': option 'tokenauth' (delegation tokens) needs "
     "SCRAM-SHA-256 or SCRAM-SHA-512, not PLAIN"),
    ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config":
      f'{SCRAM_MODULE} required username="a" password="{SECRET}" tokenauth="yes";'},
     "Invalid configuration 'sasl.jaas.config': option 'tokenauth' must be true or false"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": SECRET,
      "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.extensions": "a=b"},
     "Configuration 'sasl.oauthbearer.client.id', 'sasl.oauthbearer.extensions' only applies to "
     "sasl.mechanism OAUTHBEARER, not PLAIN"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": SECRET,
      "sasl.login.refresh.window.factor": "0.2"},
     "Invalid value '0.2' for configuration 'sasl.login.refresh.window.factor': expected a number from 0.5 to 1"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": 5, "sasl.password": SECRET},
     "Invalid configuration 'sasl.username': expected a string, got int"),
])
def test_password_mechanism_errors(config, message):
    assert error_of({**SASL_SSL, **config}) == message


# -- OAUTHBEARER -------------------------------------------------------------------------------
def test_oauthbearer_needs_exactly_one_token_source():
    message = error_of({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER"})
    assert message.startswith("sasl.mechanism OAUTHBEARER needs a token source: "
                              "'sasl.oauthbearer.token.provider' (a callable or 'module:function'), "
                              "'sasl.oauthbearer.token.endpoint.url' with a client id and secret, or")
    message = error_of({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER",
                        "sasl.oauthbearer.token.provider": "m:f",
                        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
                        "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": SECRET,
                        "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="a";'})
    assert message == ("sasl.mechanism OAUTHBEARER has several token sources: "
                       "'sasl.oauthbearer.token.provider', 'sasl.oauthbearer.token.endpoint.url', the "
                       "unsecured login options of 'sasl.jaas.config' (unsecuredLoginStringClaim_sub); "
                       "give exactly one")


def test_oauthbearer_client_credentials_from_keys_or_jaas():
    for config in (
        {"sasl.oauthbearer.client.id": "my-client", "sasl.oauthbearer.client.secret": SECRET,
         "sasl.oauthbearer.scope": "kafka"},
        {"sasl.jaas.config": f'{OAUTH_MODULE} required clientId="my-client" clientSecret="{SECRET}" '
                             'scope="kafka" extension_logicalCluster="lkc-1";'},
    ):
        settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER",
                                  "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
                                  **config})
        assert settings.principal == "my-client"              # until the first token says better
        assert repr(settings) == "SaslSettings(mechanism='OAUTHBEARER', principal='my-client')"
        assert_no_secret(settings)
        assert SECRET not in repr(settings.token_source)
        provider = settings.token_source._provider
        assert provider.scope == "kafka" and SECRET not in repr(provider)
        settings.close()


@pytest.mark.parametrize("config,message", [
    ({"sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.oauthbearer.client.secret": SECRET},
     "Missing configuration 'sasl.oauthbearer.client.id' (or option 'clientId' in 'sasl.jaas.config'): "
     "'sasl.oauthbearer.token.endpoint.url' needs a client id and secret"),
    ({"sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.oauthbearer.client.id": "c"},
     "Missing configuration 'sasl.oauthbearer.client.secret' (or option 'clientSecret' in "
     "'sasl.jaas.config'): 'sasl.oauthbearer.token.endpoint.url' needs a client id and secret"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token", "sasl.oauthbearer.client.id": "c",
      "sasl.oauthbearer.client.secret": SECRET},
     "Invalid configuration 'sasl.oauthbearer.token.endpoint.url': expected an https://, http:// or file: URL"),
    ({"sasl.oauthbearer.token.provider": "m:f", "sasl.oauthbearer.client.id": "c",
      "sasl.oauthbearer.client.secret": SECRET},
     "Configuration 'sasl.oauthbearer.client.id', 'sasl.oauthbearer.client.secret' (or the matching "
     "'sasl.jaas.config' options) needs 'sasl.oauthbearer.token.endpoint.url'"),
    ({"sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.oauthbearer.client.id": "c",
      "sasl.oauthbearer.client.secret": SECRET,
      "sasl.jaas.config": f'{OAUTH_MODULE} required clientSecret="{SECRET}";'},
     "Configuration 'sasl.oauthbearer.client.secret' and option 'clientSecret' of 'sasl.jaas.config' "
     "give the same setting: use one"),
    ({"sasl.oauthbearer.token.provider": "m:f", "sasl.username": "a", "sasl.password": SECRET},
     "Configuration 'sasl.username', 'sasl.password' applies to PLAIN and SCRAM, not sasl.mechanism OAUTHBEARER"),
    ({"sasl.oauthbearer.token.provider": "no_such_module_xyz:f"},
     "Invalid configuration 'sasl.oauthbearer.token.provider': cannot import module 'no_such_module_xyz' "
     "(ModuleNotFoundError: No module named 'no_such_module_xyz')"),
    ({"sasl.oauthbearer.token.provider": "json:loads", "sasl.oauthbearer.extensions": "a=1,b"},
     "Invalid configuration 'sasl.oauthbearer.extensions': item 2 is not name=value "
     "(expected 'name=value,name2=value2')"),
    ({"sasl.oauthbearer.token.provider": "json:loads", "sasl.oauthbearer.extensions": f"auth={SECRET}"},
     "Invalid configuration 'sasl.oauthbearer.extensions': the extension name 'auth' is reserved for the token"),
    ({"sasl.oauthbearer.token.provider": "json:loads", "sasl.oauthbearer.extensions": "x_y=1"},
     "Invalid configuration 'sasl.oauthbearer.extensions': extension name 'x_y' is invalid (letters A-Z "
     "and a-z only)"),
    ({"sasl.oauthbearer.token.provider": "json:loads", "sasl.oauthbearer.extensions": "a=1",
      "sasl.jaas.config": f'{OAUTH_MODULE} required extension_a="{SECRET}";'},
     "SASL extension 'a' is given twice (in 'sasl.oauthbearer.extensions' and 'sasl.jaas.config' "
     "(option 'extension_a'))"),
    ({"sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="a" '
                          f'unsecuredLoginExtension_b="{SECRET}\x01";'},
     "Invalid configuration 'sasl.jaas.config' (option 'unsecuredLoginExtension_b'): the value of "
     "extension 'b' is invalid (printable ASCII, space, tab, CR or LF; not empty)"),
    ({"sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_iss="{SECRET}";'},
     "Invalid configuration 'sasl.jaas.config': the unsecured login needs the principal claim: option "
     "'unsecuredLoginStringClaim_sub' (a non-empty string)"),
    ({"sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="a" '
                          'unsecuredLoginLifetimeSeconds="soon";'},
     "Invalid configuration 'sasl.jaas.config': option 'unsecuredLoginLifetimeSeconds' is not an integer"),
    ({"sasl.oauthbearer.token.provider": "json:loads", "sasl.login.refresh.window.factor": "1.5"},
     "Invalid value '1.5' for configuration 'sasl.login.refresh.window.factor': expected a number from 0.5 to 1"),
])
def test_oauthbearer_errors(config, message):
    assert error_of({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER", **config}) == message


def test_oauthbearer_extensions_from_key_and_jaas_reach_the_client():
    settings = sasl_settings({
        **SASL_SSL, "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        "sasl.login.refresh.window.factor": 0.9,
        "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="alice" '
                            'unsecuredLoginLifetimeSeconds="60" extension_identityPoolId="pool-1";'})
    try:
        assert dict(settings.extensions) == {"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}
        assert settings.token_source.refresh_window_factor == 0.9
        settings.prepare()
        client = settings.new_client("localhost")
        assert isinstance(client, OAuthBearerClient) and client.principal == "alice"
        message = client.first_message()
        assert message.startswith(b"n,,\x01auth=Bearer ")
        assert message.endswith(b"\x01logicalCluster=lkc-1\x01identityPoolId=pool-1\x01\x01")
        token = message.split(b"auth=Bearer ", 1)[1].split(b"\x01", 1)[0].decode()
        header, payload, signature = token.split(".")
        assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"} and signature == ""
        claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
        assert claims["sub"] == "alice" and round(claims["exp"] - claims["iat"]) == 60
        assert settings.principal == "alice"
    finally:
        settings.close()


def test_oauthbearer_provider_callable_and_file_endpoint(tmp_path):
    def provider():
        return ("opaque-token", 4102444800)                   # 2100-01-01

    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER",
                              "sasl.oauthbearer.token.provider": provider})
    try:
        assert settings.new_client("localhost").first_message() == b"n,,\x01auth=Bearer opaque-token\x01\x01"
        assert "opaque-token" not in repr(settings)
    finally:
        settings.close()

    claims = base64.urlsafe_b64encode(json.dumps({"sub": "filed", "exp": 4102444800}).encode()).decode().rstrip("=")
    (tmp_path / "token.jwt").write_text(f"eyJhbGciOiJub25lIn0.{claims}.\n")
    settings = sasl_settings({**SASL_SSL, "sasl.mechanism": "OAUTHBEARER",
                              "sasl.oauthbearer.token.endpoint.url": (tmp_path / "token.jwt").as_uri()})
    try:
        settings.prepare()
        assert settings.principal == "filed"
    finally:
        settings.close()


def test_gssapi_without_python_gssapi_names_the_extra_and_the_packages(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gssapi", None)  # an import of it fails, as where it is not installed
    message = error_of({**SASL_SSL, "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
                        "sasl.jaas.config": f"{KRB5_MODULE} required useTicketCache=true;"})
    assert "sparkkafka-sink[gssapi]" in message and "libkrb5-dev" in message and "krb5-devel" in message, message
