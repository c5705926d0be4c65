"""Amazon MSK's IAM sign-in, in its two forms.

* OAUTHBEARER: the token is the base64url (no padding) of a SigV4-presigned URL
  ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-...`` valid for
  900 s, with a ``User-Agent`` parameter added after signing -- what AWS's signer libraries
  make.  It is no JWT: its expiry is the signing time plus 900 s.
* ``AWS_MSK_IAM``: one JSON message of the same signed parameters, lower-cased, for the broker
  host the client dialled (``version`` 2020_10_22); the broker answers JSON with its
  ``request-id``.

The region: the one given (``sasl.aws.region``), else the one the host names (MSK's host names
carry it: for ``AWS_MSK_IAM`` each broker's own, for the OAUTHBEARER token the one region the
bootstrap hosts name), else the environment's (``AWS_REGION``...).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections.abc import Callable

from sparkkafka_sink.cloud.aws import AwsLogin, presign, query_string
from sparkkafka_sink.errors import AuthenticationError, Message, Setting
from sparkkafka_sink.oauth.bearer_token import OAuthBearerToken
from sparkkafka_sink.version import __version__

SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
EXPIRES_S = 900
PAYLOAD_VERSION = "2020_10_22"
USER_AGENT = f"sparkkafka-sink/{__version__}"
#: an AWS region as a label of a host name: us-east-1, eu-west-3, us-gov-west-1, cn-north-1...
_REGION_LABEL = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")


def region_in_host(host: str) -> str | None:
    """The region a host name carries (``b-1.c.xyz.c2.kafka.eu-west-1.amazonaws.com``), or None."""
    for label in host.lower().split("."):
        if _REGION_LABEL.fullmatch(label):
            return label
    return None


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class MskTokenProvider:
    """OAUTHBEARER's token provider for MSK IAM (Java's ``IAMOAuthBearerLoginCallbackHandler``):
    each call signs a new token with the current credentials."""

    def __init__(self, region: str, login: AwsLogin, clock: Callable[[], dt.datetime] = _utcnow):
        self.region = region
        self.login = login
        self._clock = clock

    @property
    def description(self) -> str:
        return f"the MSK IAM token of {self.login.description} (region {self.region})"

    @property
    def principal(self) -> str:
        return self.login.description

    def __repr__(self) -> str:
        return f"MskTokenProvider(region={self.region!r}, {self.login.description})"

    def __call__(self) -> OAuthBearerToken:
        now = self._clock().replace(microsecond=0)
        host = f"kafka.{self.region}.amazonaws.com"
        params = presign(host, self.region, SERVICE, self.login.credentials(), {"Action": ACTION}, EXPIRES_S, now)
        url = f"https://{host}/?{query_string(params)}&{query_string({'User-Agent': USER_AGENT})}"
        value = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
        issued_ms = int(now.timestamp()) * 1000
        return OAuthBearerToken(value, issued_ms + EXPIRES_S * 1000, self.principal, issued_ms)


def iam_payload(host: str, region: str, login: AwsLogin, now: dt.datetime | None = None) -> bytes:
    """The ``AWS_MSK_IAM`` client message for a connection to ``host``."""
    now = (now or _utcnow()).replace(microsecond=0)
    params = presign(host, region, SERVICE, login.credentials(), {"Action": ACTION}, EXPIRES_S, now)
    message = {"version": PAYLOAD_VERSION, "host": host, "user-agent": USER_AGENT,
               **{k.lower(): v for k, v in params.items()}}
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


class MskIamSigner:
    """``AWS_MSK_IAM``'s message for each broker host: signed for the region ``region`` names
    (given), else the host's, else ``fallback`` (the environment's)."""

    def __init__(self, login: AwsLogin, region: str | None, fallback: str | None):
        self.login, self.region, self.fallback = login, region, fallback

    def payload(self, host: str) -> bytes:
        region = self.region or region_in_host(host) or self.fallback
        if region is None:
            raise AuthenticationError(Message("AWS_MSK_IAM: no AWS region for broker host {!r}: it names none, and "
                                              "none is given ({}) or in the environment (AWS_REGION)", host,
                                              Setting("sasl.aws.region")))
        return iam_payload(host, region, self.login)
