"""A Databricks user's settings as Databricks writes them: the MSK IAM classes shaded as its
runtime ships them, errors for a wrong mechanism/class pair that say which setting to change, and
``databricks.serviceCredential`` -- a Unity Catalog service credential read through Databricks'
Python API (here its stand-in, tests/databricks_standin), whose temporary AWS credentials are
renewed before they expire.  No broker: what the signature carries is read from the SASL
message; tests/security/test_cloud_sign_in.py signs in with them to a broker that checks."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from sparkkafka_sink.cloud import databricks as uc
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.network.sasl.settings import sasl_settings

STANDIN = Path(__file__).resolve().parents[1] / "databricks_standin"
MSK_HOST = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
BASE = {"security.protocol": "SASL_SSL", "bootstrap.servers": [(MSK_HOST, 9098)]}
SECRET = "stand-in-secret-never-shown"
#: Databricks' documentation writes AWS's classes shaded inside its runtime
SHADED_MODULE = "shadedmskiam.software.amazon.msk.auth.iam.IAMLoginModule"
SHADED_HANDLER = "shadedmskiam.software.amazon.msk.auth.iam.IAMClientCallbackHandler"


@pytest.fixture
def standin(monkeypatch, tmp_path):
    """Databricks' worker-side API (the stand-in) importable, serving an AWS IAM role 'msk-writer'
    whose credentials live ``lifetime_s`` (3600 s) and a clock the test moves."""
    log = tmp_path / "standin.log"
    settings = {"log": str(log), "credentials": {
        "msk-writer": {"cloud": "aws", "access_key_id": "AKIDSTANDIN", "secret_access_key": SECRET,
                       "lifetime_s": 3600}}}
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps(settings))
    monkeypatch.setenv("SPARKKAFKA_STANDIN_CREDENTIALS", str(path))
    monkeypatch.syspath_prepend(str(STANDIN))
    for name in ("databricks", "databricks.service_credentials"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import databricks.service_credentials as api

    now = [1_800_000_000.0]
    monkeypatch.setattr(api, "clock", lambda: now[0])
    box = types.SimpleNamespace(api=api, now=now, log=log, settings=settings, path=path)
    yield box
    for name in ("databricks", "databricks.service_credentials"):
        sys.modules.pop(name, None)


def signed(settings) -> dict:
    return json.loads(settings.new_client(MSK_HOST).first_message())


def test_a_service_credential_signs_msks_iam_sign_in_with_its_role(standin):
    settings = sasl_settings({**BASE, uc.KEY: "msk-writer"})
    assert settings.mechanism == "AWS_MSK_IAM"  # the default for an AWS IAM role
    assert settings.principal == "the Unity Catalog service credential 'msk-writer'"
    payload = signed(settings)
    assert payload["x-amz-credential"].startswith("AKIDSTANDIN/") and "/eu-west-1/kafka-cluster/" in \
        payload["x-amz-credential"]
    assert payload["x-amz-security-token"].startswith("expires-")
    assert SECRET not in repr(settings) and "provider msk-writer" in standin.log.read_text()


def test_its_temporary_credentials_are_renewed_before_they_expire(standin):
    """Every signature takes the role's current credentials: within botocore's refresh window
    (15 minutes before the expiry) they are renewed, so none is ever signed with expired ones."""
    settings = sasl_settings({**BASE, uc.KEY: "msk-writer"})
    first = signed(settings)["x-amz-security-token"]
    assert signed(settings)["x-amz-security-token"] == first  # an hour left: the same
    expiry = int(first.split("-")[1])
    standin.now[0] = expiry - 14 * 60  # inside the refresh window
    renewed = signed(settings)["x-amz-security-token"]
    assert renewed != first and int(renewed.split("-")[1]) > standin.now[0] + 3000
    standin.now[0] = int(renewed.split("-")[1]) + 5  # past the expiry (a process asleep): renewed first
    late = signed(settings)["x-amz-security-token"]
    assert int(late.split("-")[1]) > standin.now[0], late
    assert standin.log.read_text().count("refresh msk-writer") == 3


def test_oauthbearer_when_the_mechanism_says_so(standin):
    import base64

    settings = sasl_settings({**BASE, uc.KEY: "msk-writer", "sasl.mechanism": "OAUTHBEARER"})
    try:
        token = settings.token_source.current()
        url = base64.urlsafe_b64decode(token.value + "==").decode()
        assert url.startswith("https://kafka.eu-west-1.amazonaws.com/?") and "X-Amz-Security-Token=expires-" in url
    finally:
        settings.close()


def test_the_driver_reads_it_through_dbutils_where_no_worker_api_is(monkeypatch, standin):
    """On the driver, in a notebook's or job's process: ``dbutils.credentials``."""
    api = standin.api
    monkeypatch.setattr(uc, "_worker_api", lambda: None)
    asked = []
    fake = types.SimpleNamespace(credentials=types.SimpleNamespace(
        getServiceCredentialsProvider=lambda name: asked.append(name) or api.getServiceCredentialsProvider(name)))
    monkeypatch.setattr(sys.modules["__main__"], "dbutils", fake, raising=False)
    settings = sasl_settings({**BASE, uc.KEY: "msk-writer"})
    assert signed(settings)["x-amz-credential"].startswith("AKIDSTANDIN/") and asked == ["msk-writer"]


def test_without_databricks_the_error_names_the_option_and_what_it_needs(monkeypatch):
    monkeypatch.setattr(uc, "_worker_api", lambda: None)
    monkeypatch.setattr(uc, "_dbutils", lambda: None)
    with pytest.raises(ConfigError) as info:
        sasl_settings({**BASE, uc.KEY: "msk-writer"})
    text = str(info.value)
    assert "'sasl.databricks.service.credential'" in text and "'msk-writer'" in text
    assert "databricks.service_credentials" in text and "dbutils.credentials" in text, text


def test_a_credential_databricks_refuses_fails_naming_it(standin):
    with pytest.raises(ConfigError, match="Databricks refused the service credential 'nope'.*does not exist"):
        sasl_settings({**BASE, uc.KEY: "nope"})


def test_other_sign_in_settings_beside_it_are_refused_by_name(standin):
    with pytest.raises(ConfigError, match="'sasl.jaas.config' and 'sasl.databricks.service.credential' both say how "
                                          "to sign in.*remove it"):
        sasl_settings({**BASE, uc.KEY: "msk-writer", "sasl.jaas.config": f"{SHADED_MODULE} required;"})
    with pytest.raises(ConfigError, match="is an AWS IAM role, which signs in to Amazon MSK with sasl.mechanism "
                                          "AWS_MSK_IAM .*or OAUTHBEARER, not PLAIN"):
        sasl_settings({**BASE, uc.KEY: "msk-writer", "sasl.mechanism": "PLAIN"})


def test_an_azure_credential_is_refused_saying_what_works(monkeypatch):
    azure = types.SimpleNamespace(get_token=lambda *scopes: None)
    monkeypatch.setattr(uc, "_worker_api", lambda: (lambda name: azure))
    with pytest.raises(ConfigError, match="is an Azure credential.*Azure Event Hubs use its connection string"):
        sasl_settings({**BASE, uc.KEY: "eh-writer"})


# -- Databricks' shaded class names, and errors that say which setting to change ------------------------------
def test_databricks_shaded_msk_classes_are_accepted_as_awss(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    settings = sasl_settings({**BASE, "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f"{SHADED_MODULE} required;",
                              "sasl.client.callback.handler.class": SHADED_HANDLER})
    assert settings.mechanism == "AWS_MSK_IAM" and signed(settings)["x-amz-credential"].startswith("AKIDENV/")
    oauth = sasl_settings({**BASE, "sasl.mechanism": "OAUTHBEARER",
                           "sasl.jaas.config": "kafkashaded.org.apache.kafka.common.security.oauthbearer."
                                               "OAuthBearerLoginModule required;",
                           "sasl.login.callback.handler.class":
                               "shadedmskiam.software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler",
                           "sasl.client.callback.handler.class":
                               "shadedmskiam.software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"})
    oauth.close()
    assert oauth.mechanism == "OAUTHBEARER"


@pytest.mark.parametrize("mechanism,key,cls,says", [
    # the pair of the issue: AWS_MSK_IAM with the OAUTHBEARER form's handler
    ("AWS_MSK_IAM", "sasl.client.callback.handler.class",
     "shadedmskiam.software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler",
     "goes with sasl.mechanism OAUTHBEARER, but sasl.mechanism is AWS_MSK_IAM: set sasl.mechanism to OAUTHBEARER; "
     "or, to keep sasl.mechanism AWS_MSK_IAM, set sasl.client.callback.handler.class to "
     "software.amazon.msk.auth.iam.IAMClientCallbackHandler"),
    ("OAUTHBEARER", "sasl.client.callback.handler.class", SHADED_HANDLER,
     "goes with sasl.mechanism AWS_MSK_IAM, but sasl.mechanism is OAUTHBEARER: set sasl.mechanism to AWS_MSK_IAM"),
    ("AWS_MSK_IAM", "sasl.client.callback.handler.class", "com.acme.KafkaCallbacks",
     "with sasl.mechanism AWS_MSK_IAM, set sasl.client.callback.handler.class to "
     "software.amazon.msk.auth.iam.IAMClientCallbackHandler (built in), or remove it"),
    ("OAUTHBEARER", "sasl.client.callback.handler.class",
     "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler",
     "that class goes in sasl.login.callback.handler.class, not in sasl.client.callback.handler.class"),
])
def test_a_wrong_mechanism_and_class_pair_says_which_setting_to_change(monkeypatch, mechanism, key, cls, says):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    with pytest.raises(ConfigError) as info:
        sasl_settings({**BASE, "sasl.mechanism": mechanism, key: cls,
                       "sasl.login.callback.handler.class":
                           "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
                           if mechanism == "OAUTHBEARER" else None})
    text = str(info.value)
    assert says in text, text
    assert "use sasl.mechanism PLAIN, SCRAM" not in text  # the old advice, which contradicted itself


# -- the sink's option --------------------------------------------------------------------------------------
def test_the_sinks_option_as_databricks_writes_it(standin):
    pytest.importorskip("pyspark")
    from sparkkafka_sink.spark.options import parse_options
    from sparkkafka_sink.spark.sink_errors import SinkValidationError

    options = {"kafka.bootstrap.servers": f"{MSK_HOST}:9098", "topic": "orders",
               "databricks.serviceCredential": "msk-writer"}
    parsed = parse_options(options)
    config = parsed.producer_config
    assert config[uc.KEY] == "msk-writer" and config["security.protocol"] == "SASL_SSL"
    with pytest.raises(SinkValidationError) as info:
        parse_options({**options, "databricks.serviceCredential": "nope"})
    assert "'databricks.serviceCredential': Databricks refused the service credential 'nope'" in str(info.value)
    with pytest.raises(SinkValidationError, match="'kafka.sasl.client.callback.handler.class' and "
                                                  "'databricks.serviceCredential' both say how to sign in"):
        parse_options({**options, "kafka.sasl.client.callback.handler.class": SHADED_HANDLER})
    with pytest.raises(SinkValidationError, match="option 'databricks.serviceCredential.scope' is not used here"):
        parse_options({**options, "databricks.serviceCredential.scope": "https://www.googleapis.com/auth/cloud"})
