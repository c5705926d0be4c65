"""Signing in where managed clusters are, against Apache Kafka made to verify what each service
verifies (the ``cloud_kafka`` fixture; its Java checks in tests/security/java), each as Java's
settings write it; what lands is read back by confluent-kafka on the PLAINTEXT listener:

* Amazon MSK's IAM sign-in in both of its forms -- ``AWS_MSK_IAM`` and OAUTHBEARER with AWS's
  login callback handler -- with the test's keys coming through the AWS credentials chain
  (environment, shared profile); AWS's own Java client signs in to the same listener.  A wrong
  secret key fails the producer where it is made, naming authentication, never the secret.
* Google Managed Kafka's token (Google's ``GcpLoginCallbackHandler`` named), made from a
  service-account key file through google-auth, whose token endpoint is a local stand-in.
* Azure Event Hubs' connection string over PLAIN (``$ConnectionString``).
* Databricks: its MSK settings with AWS's classes shaded as its runtime ships them, and Unity
  Catalog service credentials (an AWS IAM role's temporary credentials, a Google service account)
  read through Databricks' Python API -- a stand-in of it (tests/databricks_standin)."""

from __future__ import annotations

import os
import uuid

import pytest
from kafka_helpers import consume_all, signed_in_round_trip
from service_credentials import aws_role, standin_file, use_standin

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.security]

IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MSK_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
#: Java's MSK settings, as AWS's README writes them (https://github.com/aws/aws-msk-iam-auth)
JAVA_AWS_MSK_IAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
                    "sasl.jaas.config": f"{IAM_MODULE} required;",
                    "sasl.client.callback.handler.class": MSK_CLIENT_HANDLER}
JAVA_OAUTHBEARER = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                    "sasl.jaas.config": f"{OAUTH_MODULE} required;",
                    "sasl.login.callback.handler.class": MSK_OAUTH_HANDLER,
                    "sasl.client.callback.handler.class": MSK_OAUTH_HANDLER}


@pytest.fixture
def aws_keys(cloud_kafka, monkeypatch, tmp_path):
    """The test's key pair in the environment, as the AWS credentials chain reads it first; no
    shared files or instance metadata to fall back on; the region as AWS's SDKs read it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", cloud_kafka.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", cloud_kafka.secret_access_key)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", cloud_kafka.region)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return cloud_kafka


def write_and_read_back(cloud, settings: dict, count: int = 200) -> None:
    write_and_read_back_on(cloud, "MSK", settings, count)


def write_and_read_back_on(cloud, listener: str, settings: dict, count: int = 200) -> None:
    signed_in_round_trip({"bootstrap.servers": cloud.bootstrap(listener), "ssl.truststore.location": cloud.ca,
                          **settings}, cloud.cluster.bootstrap(), listener.lower(), count)


@pytest.mark.parametrize("form", ["AWS_MSK_IAM", "OAUTHBEARER"])
def test_javas_msk_iam_settings_sign_in_as_they_are(aws_keys, form):
    write_and_read_back(aws_keys, JAVA_AWS_MSK_IAM if form == "AWS_MSK_IAM" else JAVA_OAUTHBEARER)


def test_a_named_profile_and_the_region_option(aws_keys, monkeypatch, tmp_path):
    """``awsProfileName`` in the JAAS line reads the shared credentials file (botocore); the
    region given as ``sasl.aws.region`` with none in the environment."""
    shared = tmp_path / "credentials"
    shared.write_text(f"[analytics]\naws_access_key_id = {aws_keys.access_key_id}\n"
                      f"aws_secret_access_key = {aws_keys.secret_access_key}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_REGION")
    write_and_read_back(aws_keys, {**JAVA_AWS_MSK_IAM, "sasl.jaas.config": f'{IAM_MODULE} required awsProfileName="analytics";',
                                   "sasl.aws.region": aws_keys.region})


@pytest.mark.parametrize("form", ["AWS_MSK_IAM", "OAUTHBEARER"])
def test_a_wrong_secret_key_fails_naming_authentication(aws_keys, monkeypatch, form):
    wrong = "not-" + aws_keys.secret_access_key
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    settings = JAVA_AWS_MSK_IAM if form == "AWS_MSK_IAM" else JAVA_OAUTHBEARER
    with pytest.raises(AuthenticationError) as info:
        write_and_read_back(aws_keys, settings, count=1)
    message = str(info.value)
    assert "authentication" in message and form in message, message
    assert wrong not in message and aws_keys.secret_access_key not in message


@pytest.mark.parametrize("form", ["AWS_MSK_IAM", "OAUTHBEARER"])
def test_the_broker_takes_what_aws_own_java_client_signs(aws_keys, java_msk_client, tmp_path, form):
    """The check of the verifier: Java's KafkaProducer with AWS's aws-msk-iam-auth signs in with
    the same settings and keys, so what the broker verifies is what MSK's own clients send."""
    topic = f"msk-java-{uuid.uuid4().hex[:10]}"
    create_topics(aws_keys.cluster.bootstrap(), {topic: 1}, timeout=30)
    settings = {"bootstrap.servers": aws_keys.bootstrap("MSK"), "ssl.truststore.type": "PEM",
                "ssl.truststore.location": aws_keys.ca,
                **(JAVA_AWS_MSK_IAM if form == "AWS_MSK_IAM" else JAVA_OAUTHBEARER)}
    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    done = java_msk_client(properties, topic, 20, dict(os.environ))
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-2000:] + aws_keys.refusals()
    assert len(consume_all(aws_keys.cluster.bootstrap(), topic, expected_count=20, timeout=30)) == 20


# -- Google Managed Kafka ------------------------------------------------------------------------------
GCP_HANDLER = "com.google.cloud.hosted.kafka.auth.GcpLoginCallbackHandler"
#: Google's documented client settings for Managed Kafka (Java)
JAVA_GCP = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": GCP_HANDLER,
            "sasl.jaas.config": f"{OAUTH_MODULE} required;"}


@pytest.fixture
def google_credentials(cloud_kafka, monkeypatch, tmp_path):
    """Application default credentials: a service-account key file whose token_uri is the stand-in."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(cloud_kafka.google.key_file(tmp_path / "sa.json")))
    return cloud_kafka


def test_googles_managed_kafka_token_from_application_default_credentials(google_credentials):
    cloud = google_credentials
    before = len(cloud.google.issued)
    write_and_read_back_on(cloud, "GCP", JAVA_GCP)
    assert len(cloud.google.issued) > before  # google-auth's service-account flow got its token here


def test_a_service_account_google_does_not_know_fails_naming_google(google_credentials, monkeypatch, tmp_path):
    cloud = google_credentials
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                       str(cloud.google.key_file(tmp_path / "other.json", email="nobody@elsewhere.iam.gserviceaccount.com")))
    with pytest.raises(AuthenticationError) as info:
        write_and_read_back_on(cloud, "GCP", JAVA_GCP, count=1)
    assert "Google" in str(info.value) and "invalid_grant" in str(info.value), str(info.value)


# -- Azure Event Hubs --------------------------------------------------------------------------------------
def test_an_event_hubs_connection_string_over_plain(cloud_kafka):
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{plain} required username="$ConnectionString" '
                                    f'password="{cloud_kafka.connection_string}";'}
    write_and_read_back_on(cloud_kafka, "AZURE", settings)
    wrong = {**settings, "sasl.jaas.config": f'{plain} required username="$ConnectionString" '
                                             f'password="{cloud_kafka.connection_string}x";'}
    with pytest.raises(AuthenticationError) as info:
        write_and_read_back_on(cloud_kafka, "AZURE", wrong, count=1)
    assert "PLAIN authentication" in str(info.value) and "SharedAccessKey" not in str(info.value)


# -- Databricks: its shaded class names, and Unity Catalog service credentials ------------------------------
#: Databricks' Kafka documentation writes AWS's classes shaded inside its runtime
DATABRICKS_AWS_MSK_IAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
                          "sasl.jaas.config": "shadedmskiam.software.amazon.msk.auth.iam.IAMLoginModule required;",
                          "sasl.client.callback.handler.class":
                              "shadedmskiam.software.amazon.msk.auth.iam.IAMClientCallbackHandler"}


def test_databricks_msk_settings_with_shaded_classes_sign_in(aws_keys):
    write_and_read_back(aws_keys, DATABRICKS_AWS_MSK_IAM)


@pytest.mark.parametrize("mechanism", ["AWS_MSK_IAM", "OAUTHBEARER"])
def test_a_service_credentials_role_signs_in_to_msk(cloud_kafka, monkeypatch, tmp_path, mechanism):
    """``sasl.databricks.service.credential`` (the sink's ``databricks.serviceCredential``): the
    role's temporary credentials, from Databricks' API (its stand-in), signed for the broker that
    checks them as MSK does -- a session token past its expiry included."""
    path, log = standin_file(tmp_path, {"msk-writer": aws_role(cloud_kafka)})
    use_standin(monkeypatch, path)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)  # nothing else to sign with
    monkeypatch.setenv("AWS_REGION", cloud_kafka.region)
    settings = {"security.protocol": "SASL_SSL", "sasl.databricks.service.credential": "msk-writer",
                **({"sasl.mechanism": mechanism} if mechanism == "OAUTHBEARER" else {})}
    write_and_read_back(cloud_kafka, settings)
    assert "provider msk-writer" in log.read_text() and "refresh msk-writer" in log.read_text()


def test_the_broker_refuses_a_session_token_past_its_expiry(cloud_kafka, monkeypatch, tmp_path):
    """The check behind the test above: credentials that had expired are refused by the broker, so
    a sink that signed with stale ones would fail there (here the stand-in's clock is an hour back,
    so the credentials it issues are expired when they arrive: botocore renews them, and they are
    still expired)."""
    path, _ = standin_file(tmp_path, {"msk-writer": aws_role(cloud_kafka, lifetime_s=60)})
    use_standin(monkeypatch, path)
    import time

    import databricks.service_credentials as api

    monkeypatch.setattr(api, "clock", lambda: time.time() - 3600)
    monkeypatch.setenv("AWS_REGION", cloud_kafka.region)
    before = cloud_kafka.refusals()
    with pytest.raises(AuthenticationError):
        write_and_read_back(cloud_kafka, {"security.protocol": "SASL_SSL", "max.block.ms": 5000,
                                          "sasl.databricks.service.credential": "msk-writer"}, count=1)
    assert "the session token expired" in cloud_kafka.refusals()[len(before):]


def test_a_service_credentials_google_account_signs_in_to_managed_kafka(cloud_kafka, monkeypatch, tmp_path):
    key_file = cloud_kafka.google.key_file(tmp_path / "sa.json")
    path, log = standin_file(tmp_path, {"gcp-writer": {"cloud": "google", "key_file": str(key_file)}})
    use_standin(monkeypatch, path)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    before = len(cloud_kafka.google.issued)
    write_and_read_back_on(cloud_kafka, "GCP", {"security.protocol": "SASL_SSL",
                                                "sasl.databricks.service.credential": "gcp-writer"})
    assert len(cloud_kafka.google.issued) > before and "provider gcp-writer" in log.read_text()
