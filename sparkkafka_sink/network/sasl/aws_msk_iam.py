"""SASL ``AWS_MSK_IAM``, as Amazon MSK and AWS's Java ``IAMLoginModule`` speak it: the client
sends one JSON message of SigV4-signed parameters for the broker host it dialled
(``cloud.msk.iam_payload``); the broker answers a JSON object with its ``version`` and
``request-id`` on success, or fails the SaslAuthenticate request.

And the readers of Java's MSK settings: the JAAS line's ``aws*`` options (:func:`aws_login`, for
``IAMLoginModule`` and for the OAUTHBEARER form's ``OAuthBearerLoginModule``), and the region."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from sparkkafka_sink.bootstrap import BOOTSTRAP_SERVERS
from sparkkafka_sink.cloud.aws import DEFAULT_ROLE_SESSION_NAME, AwsCredentials, AwsLogin, region_from_environment
from sparkkafka_sink.cloud.msk import MskIamSigner, region_in_host
from sparkkafka_sink.errors import AuthenticationError, ConfigError, Message, Setting
from sparkkafka_sink.network.sasl.client import SaslClient
from sparkkafka_sink.network.sasl.jaas import JaasConfig
from sparkkafka_sink.network.sasl.reading import AWS_REGION, JAAS, MECHANISM, text

log = logging.getLogger(__name__)

#: Java's IAMLoginModule options (and the OAuthBearerLoginModule's under AWS's handler) read here
AWS_JAAS_OPTIONS = ("awsProfileName", "awsRoleArn", "awsRoleSessionName", "awsRoleExternalId", "awsStsRegion",
                    "awsRoleAccessKeyId", "awsRoleSecretAccessKey", "awsRoleSessionToken")
#: its options that change nothing here: debug logging of the caller, retries of the STS call
AWS_JAAS_NOTED = ("awsDebugCreds", "awsMaxRetries", "awsMaxBackOffTimeMs", "awsAddDefaultProviders")


class AwsMskIamClient(SaslClient):
    """One ``AWS_MSK_IAM`` exchange; ``payload()`` signs the message when it is sent."""

    mechanism = "AWS_MSK_IAM"

    def __init__(self, payload: Callable[[], bytes]):
        self._payload = payload
        self._sent = False
        #: the broker's request id, for support cases with AWS
        self.request_id: str | None = None

    def first_message(self) -> bytes:
        self._sent = True
        return self._payload()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise AuthenticationError("AWS_MSK_IAM: the broker answered before the client spoke")
        if self.complete:
            if challenge:
                raise AuthenticationError("AWS_MSK_IAM: the broker sent more after the exchange was complete")
            return None
        try:
            answer = json.loads(challenge.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise AuthenticationError("AWS_MSK_IAM: the broker's answer is not JSON") from None
        if not isinstance(answer, dict) or "version" not in answer:
            raise AuthenticationError("AWS_MSK_IAM: the broker's answer has no 'version'")
        request_id = answer.get("request-id")
        self.request_id = str(request_id) if request_id is not None else None
        self.complete = True
        return None


def aws_login(options: Mapping[str, str], module: str) -> AwsLogin:
    """The credentials Java's MSK options name (``awsRoleArn``...), and warnings for the rest."""
    role_keys = [options.get(k) for k in ("awsRoleAccessKeyId", "awsRoleSecretAccessKey")]
    if any(role_keys) and not all(role_keys):
        raise ConfigError(Message("Invalid configuration {!r}: {} options awsRoleAccessKeyId and "
                                  "awsRoleSecretAccessKey go together", Setting(JAAS), module))
    if (any(role_keys) or options.get("awsRoleExternalId") or options.get("awsStsRegion")) \
            and not options.get("awsRoleArn"):
        raise ConfigError(Message("Invalid configuration {!r}: {} options of the assumed role need awsRoleArn",
                                  Setting(JAAS), module))
    noted = sorted(k for k in options if k in AWS_JAAS_NOTED)
    if noted:
        log.info("%s: %s options %s change nothing here (AWS's Java client's logging and STS retries)", JAAS, module,
                 ", ".join(noted))
    base = None
    if all(role_keys):
        base = AwsCredentials(options["awsRoleAccessKeyId"], options["awsRoleSecretAccessKey"],
                              options.get("awsRoleSessionToken") or None)
    return AwsLogin(profile=options.get("awsProfileName") or None, role_arn=options.get("awsRoleArn") or None,
                    role_session_name=options.get("awsRoleSessionName") or DEFAULT_ROLE_SESSION_NAME,
                    role_external_id=options.get("awsRoleExternalId") or None,
                    sts_region=options.get("awsStsRegion") or None, role_base=base)


def msk_region(config: Mapping[str, Any], hosts: list[str]) -> str | None:
    """``sasl.aws.region``, else the region every bootstrap host names, else the environment's."""
    given = text(config, AWS_REGION)
    if given is not None:
        return given
    named = {region_in_host(h) for h in hosts} - {None}
    if len(named) == 1:
        return named.pop()
    return region_from_environment()


def bootstrap_hosts(config: Mapping[str, Any]) -> list[str]:
    servers = config.get(BOOTSTRAP_SERVERS.name) or []  # as given (text) or parsed (host, port pairs)
    if isinstance(servers, str):
        return [s.strip().rpartition(":")[0].strip("[]") for s in servers.split(",") if s.strip()]
    return [h for h, _ in servers]


def msk_signer(config: Mapping[str, Any], jaas: JaasConfig | None, login: AwsLogin | None = None) -> MskIamSigner:
    """``AWS_MSK_IAM``'s signer from Java's settings (``IAMLoginModule`` and its options), or with
    the credentials of ``login`` (a Databricks service credential's)."""
    if login is None:
        options = dict(jaas.options) if jaas is not None else {}
        unknown = sorted(k for k in options if k not in AWS_JAAS_OPTIONS and k not in AWS_JAAS_NOTED)
        if unknown:
            log.warning("%s: ignoring unknown IAMLoginModule options %s", JAAS, ", ".join(unknown))
        login = aws_login(options, "IAMLoginModule")
    fallback = msk_region(config, [])
    if fallback is None and not all(region_in_host(h) for h in bootstrap_hosts(config)):
        raise ConfigError(Message("{} AWS_MSK_IAM needs the cluster's AWS region: no region in the broker host "
                                  "names, none in {!r}, and none in the environment (AWS_REGION, AWS_DEFAULT_REGION, "
                                  "the profile's region)", Setting(MECHANISM), Setting(AWS_REGION)))
    return MskIamSigner(login, text(config, AWS_REGION), fallback)
