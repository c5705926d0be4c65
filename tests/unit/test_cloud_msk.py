"""Amazon MSK's IAM sign-in (cloud/aws.py, cloud/msk.py, the AWS_MSK_IAM client and the
settings that select them): the SigV4 presigning checked against botocore's own
``SigV4QueryAuth`` (AWS's implementation, the one AWS's Python signer uses), the token's and the
payload's shapes as AWS's clients make them, the credentials chain, and Java's settings read as
Java's aws-msk-iam-auth reads them.  The broker's side is tests/security/test_cloud_sign_in.py."""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.parse

import pytest

from sparkkafka_sink.cloud import aws as aws_module
from sparkkafka_sink.cloud.aws import AwsCredentials, AwsLogin, presign
from sparkkafka_sink.cloud.msk import EXPIRES_S, MskTokenProvider, iam_payload, region_in_host
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.network.sasl.aws_msk_iam import AwsMskIamClient
from sparkkafka_sink.network.sasl.settings import sasl_settings

botocore_auth = pytest.importorskip("botocore.auth")
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE/session+token=="
NOW = dt.datetime(2026, 11, 29, 3, 4, 5, tzinfo=dt.timezone.utc)
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
MSK_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"


@pytest.fixture
def env_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)


def botocore_presigned(host: str, region: str, token: str | None) -> dict[str, str]:
    """The query botocore's SigV4QueryAuth signs for GET https://host/?Action=kafka-cluster:Connect
    at NOW."""
    signer = botocore_auth.SigV4QueryAuth(Credentials("AKIDEXAMPLE", SECRET, token), "kafka-cluster", region,
                                          expires=EXPIRES_S)
    request = AWSRequest(method="GET", url=f"https://{host}/", params={"Action": "kafka-cluster:Connect"})
    clock = botocore_auth.get_current_datetime
    botocore_auth.get_current_datetime = lambda *a, **k: NOW.replace(tzinfo=None)
    try:
        signer.add_auth(request)
    finally:
        botocore_auth.get_current_datetime = clock
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.prepare().url).query))


@pytest.mark.parametrize("token", [None, TOKEN])
def test_our_presigning_is_botocores(token):
    host = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
    ours = presign(host, "eu-west-1", "kafka-cluster", AwsCredentials("AKIDEXAMPLE", SECRET, token),
                   {"Action": "kafka-cluster:Connect"}, EXPIRES_S, NOW)
    theirs = botocore_presigned(host, "eu-west-1", token)
    assert ours == theirs
    assert list(ours)[-1] == "X-Amz-Signature"


def test_a_wrong_secret_signs_differently():
    args = ("kafka.us-east-1.amazonaws.com", "us-east-1", "kafka-cluster")
    good = presign(*args, AwsCredentials("AKIDEXAMPLE", SECRET), {"Action": "kafka-cluster:Connect"}, 900, NOW)
    bad = presign(*args, AwsCredentials("AKIDEXAMPLE", SECRET + "x"), {"Action": "kafka-cluster:Connect"}, 900, NOW)
    assert good["X-Amz-Signature"] != bad["X-Amz-Signature"]


def test_the_oauthbearer_token_is_the_presigned_url_aws_signers_make(env_credentials):
    provider = MskTokenProvider("us-east-1", AwsLogin(), clock=lambda: NOW)
    token = provider()
    assert "=" not in token.value and SECRET not in repr(token) and SECRET not in repr(provider)
    url = base64.urlsafe_b64decode(token.value + "=" * (-len(token.value) % 4)).decode()
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "kafka.us-east-1.amazonaws.com", "/")
    query = urllib.parse.parse_qsl(parts.query)
    assert [k for k, _ in query][-2:] == ["X-Amz-Signature", "User-Agent"]  # the agent added after signing
    signed = dict(query[:-1])
    assert signed == botocore_presigned("kafka.us-east-1.amazonaws.com", "us-east-1", None)
    assert token.expires_at_ms == int(NOW.timestamp() + 900) * 1000 and token.issued_at_ms == int(NOW.timestamp()) * 1000


def test_the_aws_msk_iam_payload_is_what_javas_client_sends(env_credentials, monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    host = "b-2.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
    payload = json.loads(iam_payload(host, "eu-west-1", AwsLogin(), NOW))
    assert set(payload) == {"version", "host", "user-agent", "action", "x-amz-algorithm", "x-amz-credential",
                            "x-amz-date", "x-amz-expires", "x-amz-signedheaders", "x-amz-signature",
                            "x-amz-security-token"}
    assert payload["version"] == "2020_10_22" and payload["host"] == host
    assert payload["action"] == "kafka-cluster:Connect"
    signed = botocore_presigned(host, "eu-west-1", TOKEN)
    assert {k.lower(): v for k, v in signed.items()} == {k: v for k, v in payload.items()
                                                          if k not in ("version", "host", "user-agent")}


def test_the_client_takes_the_brokers_json_answer(env_credentials):
    client = AwsMskIamClient(lambda: b'{"version":"2020_10_22"}')
    assert client.first_message() == b'{"version":"2020_10_22"}'
    assert client.evaluate(b'{"version":"2020_10_22","request-id":"r-1"}') is None
    assert client.complete and client.request_id == "r-1"
    with pytest.raises(Exception, match="not JSON"):
        fresh = AwsMskIamClient(lambda: b"{}")
        fresh.first_message()
        fresh.evaluate(b"\x00oops")


@pytest.mark.parametrize("host,region", [
    ("b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com", "us-east-1"),
    ("boot-abc.c1.kafka-serverless.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
    ("b-3.x.y.c4.kafka.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
    ("localhost", None), ("127.0.0.1", None),
])
def test_the_region_in_a_host_name(host, region):
    assert region_in_host(host) == region


# -- Java's settings ----------------------------------------------------------------------------------
MSK_BOOTSTRAP = [("b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com", 9098)]


def test_javas_aws_msk_iam_settings_as_they_are(env_credentials):
    settings = sasl_settings({"security.protocol": "SASL_SSL", "bootstrap.servers": MSK_BOOTSTRAP,
                              "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": f"{IAM_MODULE} required;",
                              "sasl.client.callback.handler.class": MSK_CLIENT_HANDLER})
    assert settings.mechanism == "AWS_MSK_IAM" and settings.principal == "the default AWS credentials"
    settings.prepare()
    client = settings.new_client("b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com")
    payload = json.loads(client.first_message())
    assert payload["host"] == "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com"
    assert "/eu-west-1/kafka-cluster/aws4_request" in payload["x-amz-credential"]
    assert SECRET not in repr(settings) and SECRET not in repr(client)


def test_javas_oauthbearer_msk_settings_as_they_are(env_credentials, monkeypatch):
    settings = sasl_settings({"security.protocol": "SASL_SSL", "bootstrap.servers": MSK_BOOTSTRAP,
                              "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{OAUTH_MODULE} required;",
                              "sasl.login.callback.handler.class": MSK_OAUTH_HANDLER,
                              "sasl.client.callback.handler.class": MSK_OAUTH_HANDLER})
    try:
        token = settings.token_source.current()
        url = base64.urlsafe_b64decode(token.value + "==").decode()
        assert url.startswith("https://kafka.eu-west-1.amazonaws.com/?")
    finally:
        settings.close()


def test_the_region_must_be_found(env_credentials):
    base = {"security.protocol": "SASL_SSL", "bootstrap.servers": [("localhost", 9098)]}
    with pytest.raises(ConfigError, match="needs the cluster's AWS region.*sasl.aws.region"):
        sasl_settings({**base, "sasl.mechanism": "AWS_MSK_IAM"})
    with pytest.raises(ConfigError, match="needs the cluster's AWS region.*sasl.aws.region"):
        sasl_settings({**base, "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": MSK_OAUTH_HANDLER})
    settings = sasl_settings({**base, "sasl.mechanism": "AWS_MSK_IAM", "sasl.aws.region": "sa-east-1"})
    assert "/sa-east-1/kafka-cluster/" in json.loads(settings.new_client("localhost").first_message())["x-amz-credential"]
    with pytest.raises(ConfigError, match="applies to Amazon MSK's IAM sign-in"):
        sasl_settings({**base, "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                       "sasl.aws.region": "sa-east-1"})


def test_a_java_class_other_than_aws_or_kafkas_is_refused_by_name(env_credentials):
    base = {"security.protocol": "SASL_SSL", "bootstrap.servers": MSK_BOOTSTRAP}
    with pytest.raises(ConfigError, match="'sasl.login.callback.handler.class'.*com.acme.Tokens.*runs no Java"):
        sasl_settings({**base, "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": "com.acme.Tokens"})
    with pytest.raises(ConfigError, match="'sasl.client.callback.handler.class'.*IAMClientCallbackHandler"):
        sasl_settings({**base, "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                       "sasl.client.callback.handler.class": MSK_CLIENT_HANDLER})


def test_the_role_options_need_the_role(env_credentials):
    with pytest.raises(ConfigError, match="need awsRoleArn"):
        sasl_settings({"security.protocol": "SASL_SSL", "bootstrap.servers": MSK_BOOTSTRAP,
                       "sasl.mechanism": "AWS_MSK_IAM",
                       "sasl.jaas.config": f'{IAM_MODULE} required awsStsRegion="us-west-2";'})
    settings = sasl_settings({"security.protocol": "SASL_SSL", "bootstrap.servers": MSK_BOOTSTRAP,
                              "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config":
                              f'{IAM_MODULE} required awsRoleArn="arn:aws:iam::123456789012:role/msk" '
                              'awsRoleSessionName="producer" awsStsRegion="us-west-2";'})
    assert settings.principal == "role arn:aws:iam::123456789012:role/msk"


# -- the credentials chain ----------------------------------------------------------------------------
def test_credentials_from_a_named_profile(env_credentials, monkeypatch, tmp_path):
    shared = tmp_path / "credentials"
    shared.write_text(f"[analytics]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    credentials = AwsLogin(profile="analytics").credentials()
    assert credentials.access_key_id == "AKIDPROFILE" and SECRET not in repr(credentials)


def test_without_botocore_only_the_environment_is_read(env_credentials, monkeypatch):
    monkeypatch.setattr(aws_module, "_botocore", lambda: None)
    assert AwsLogin().credentials().access_key_id == "AKIDEXAMPLE"
    with pytest.raises(ConfigError, match=r"sparkkafka-sink\[aws\]"):
        AwsLogin(profile="analytics").credentials()
    with pytest.raises(ConfigError, match=r"sparkkafka-sink\[aws\]"):
        AwsLogin(role_arn="arn:aws:iam::1:role/r").credentials()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(ConfigError, match=r"no AWS credentials in the environment.*sparkkafka-sink\[aws\]"):
        AwsLogin().credentials()


def test_a_long_write_gets_a_new_token_before_the_old_one_expires(env_credentials):
    """The token lives 900 s: with Kafka's defaults (window 0.8, buffer 300 s, minimum 60 s) the
    refresher signs the next at 600 s, and that one is signed anew, not the old one repeated."""
    from sparkkafka_sink.oauth.token_source import refresh_at

    clock = [NOW]
    provider = MskTokenProvider("eu-west-1", AwsLogin(), clock=lambda: clock[0])
    first = provider()
    issued_s = first.issued_at_ms / 1000
    due = refresh_at(first, issued_s, 0.8, min_period_s=60, buffer_s=300)
    assert due == issued_s + 600 and due < first.expires_at_ms / 1000
    clock[0] = NOW + dt.timedelta(seconds=600)
    second = provider()
    assert second.value != first.value and second.expires_at_ms == first.expires_at_ms + 600_000
