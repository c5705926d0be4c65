"""AWS credentials and Signature Version 4 presigning, as Amazon MSK's IAM sign-in needs them.

The signature is computed here with the standard library (hmac, hashlib): it is a few lines of
the public SigV4 specification, and it spares the producer a dependency on every executor.  The
credentials come from the standard AWS chain -- environment, shared profile (``AWS_PROFILE``),
web identity (EKS, ``AWS_WEB_IDENTITY_TOKEN_FILE``), container (ECS) and instance metadata (EC2,
EMR, Databricks instance profiles), and an assumed role -- through botocore (the ``[aws]`` extra),
which keeps refreshing the temporary ones.  Without botocore only the environment's keys are read.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import AuthenticationError, ConfigError

ALGORITHM = "AWS4-HMAC-SHA256"
#: Java's aws-msk-iam-auth and AWS's Python signer name an assumed role's session so
DEFAULT_ROLE_SESSION_NAME = "MSKSASLDefaultSession"
#: renew an assumed role's credentials this long before they expire
_ROLE_RENEW_BEFORE_S = 300.0
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_EXTRA = "pip install 'sparkkafka-sink[aws]'"


@dataclass(frozen=True, repr=False)
class AwsCredentials:
    """An access key pair and, for temporary credentials, their session token; the repr shows
    the access key id only (AWS's own logs do too), never the secret or the token."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"AwsCredentials(access_key_id={self.access_key_id!r}, temporary={self.session_token is not None})"

    __str__ = __repr__


def _quote(value: str) -> str:
    """URI-encode as SigV4 wants: everything but RFC 3986's unreserved characters."""
    return urllib.parse.quote(value, safe="-_.~")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def presign(host: str, region: str, service: str, credentials: AwsCredentials, query: dict[str, str],
            expires_s: int, now: dt.datetime) -> dict[str, str]:
    """The query of a presigned ``GET https://host/`` (SigV4, the one signed header ``host``, an
    empty payload): ``query`` with the ``X-Amz-*`` parameters, in canonical order, and
    ``X-Amz-Signature`` last."""
    stamp = now.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    params = dict(query)
    params.update({"X-Amz-Algorithm": ALGORITHM, "X-Amz-Credential": f"{credentials.access_key_id}/{scope}",
                   "X-Amz-Date": stamp, "X-Amz-Expires": str(expires_s), "X-Amz-SignedHeaders": "host"})
    if credentials.session_token:
        params["X-Amz-Security-Token"] = credentials.session_token
    ordered = dict(sorted(params.items()))
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in ordered.items())
    canonical_request = "\n".join(["GET", "/", canonical_query, f"host:{host}", "", "host", _EMPTY_SHA256])
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()])
    key = _hmac(("AWS4" + credentials.secret_access_key).encode("utf-8"), stamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    ordered["X-Amz-Signature"] = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return ordered


def query_string(params: dict[str, str]) -> str:
    return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in params.items())


# -- the credentials chain ----------------------------------------------------------------------
def _botocore() -> Any:
    try:
        import botocore.session
    except ImportError:
        return None
    return botocore.session


@dataclass(frozen=True)
class AwsLogin:
    """Where the credentials come from: Java's ``IAMLoginModule`` options (``awsProfileName``,
    ``awsRoleArn``, ``awsRoleSessionName``, ``awsRoleExternalId``, ``awsStsRegion`` and the
    base keys of the role, ``awsRoleAccessKeyId``, ``awsRoleSecretAccessKey``,
    ``awsRoleSessionToken``), or none of them: the default chain.  ``credentials()`` is safe to
    call from any thread; an assumed role's are kept until shortly before they expire."""

    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str = DEFAULT_ROLE_SESSION_NAME
    role_external_id: str | None = None
    sts_region: str | None = None
    role_base: AwsCredentials | None = None
    #: a session that keeps its own credentials fresh (botocore's or boto3's: a Databricks service
    #: credential's), asked for them at each signature; ``source`` names it in messages
    session: Callable[[], Any] | None = field(default=None, compare=False)
    source: str | None = None
    #: for tests: the clock of the assumed role's expiry
    clock: Callable[[], float] = field(default=time.time, compare=False)
    _state: dict = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def description(self) -> str:
        """What the messages call these credentials (no secret)."""
        if self.source:
            return self.source
        if self.role_arn:
            return f"role {self.role_arn}"
        if self.profile:
            return f"AWS profile {self.profile!r}"
        return "the default AWS credentials"

    def credentials(self) -> AwsCredentials:
        with self._lock:
            if self.session is not None:
                return self._frozen(self.session())
            if self.role_arn:
                return self._assumed_role()
            return self._chain(self.profile)

    def _chain(self, profile: str | None) -> AwsCredentials:
        session_module = _botocore()
        if session_module is None:
            if profile:
                raise ConfigError(f"the AWS profile {profile!r} is read by botocore: {_EXTRA}")
            return _from_environment()
        session = self._state.get(("session", profile))
        if session is None:
            session = self._state[("session", profile)] = session_module.Session(profile=profile)
        return self._frozen(session)

    def _frozen(self, session: Any) -> AwsCredentials:
        """The session's current credentials (refreshable ones renew themselves when near expiry)."""
        try:
            found = session.get_credentials()
            frozen = found.get_frozen_credentials() if found is not None else None
        except Exception as e:  # noqa: BLE001 - botocore's own errors: a profile not found, an endpoint down
            raise AuthenticationError(f"AWS credentials ({self.description}) could not be loaded: "
                                      f"{type(e).__name__}: {e}") from None
        if frozen is None or not frozen.access_key or not frozen.secret_key:
            if self.session is not None:
                raise AuthenticationError(f"{self.description} gave no AWS credentials")
            raise AuthenticationError(f"no AWS credentials found for {self.description}: none in the environment "
                                      "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), the shared files, web identity, "
                                      "the container or the instance metadata")
        return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)

    def _assumed_role(self) -> AwsCredentials:
        held = self._state.get("role")
        if held is not None and held[1] - _ROLE_RENEW_BEFORE_S > self.clock():
            return held[0]
        session_module = _botocore()
        if session_module is None:
            raise ConfigError(f"assuming the role {self.role_arn} (awsRoleArn) needs botocore: {_EXTRA}")
        base = self.role_base or self._chain(self.profile)
        session = session_module.Session()
        client = session.create_client(
            "sts", region_name=self.sts_region or "us-east-1", aws_access_key_id=base.access_key_id,
            aws_secret_access_key=base.secret_access_key, aws_session_token=base.session_token)
        ask: dict[str, Any] = {"RoleArn": self.role_arn, "RoleSessionName": self.role_session_name}
        if self.role_external_id:
            ask["ExternalId"] = self.role_external_id
        try:
            answer = client.assume_role(**ask)["Credentials"]
        except Exception as e:  # noqa: BLE001 - botocore's ClientError (AccessDenied), an endpoint not answering
            raise AuthenticationError(f"assuming the role {self.role_arn} failed: {type(e).__name__}: {e}") from None
        credentials = AwsCredentials(answer["AccessKeyId"], answer["SecretAccessKey"], answer.get("SessionToken"))
        expiry = answer.get("Expiration")
        expires = expiry.timestamp() if isinstance(expiry, dt.datetime) else self.clock() + 900
        self._state["role"] = (credentials, expires)
        return credentials


def _from_environment() -> AwsCredentials:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise ConfigError("no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and "
                          f"the rest of the AWS credentials chain (profiles, roles, instance metadata) needs botocore: "
                          f"{_EXTRA}")
    return AwsCredentials(key, secret, os.environ.get("AWS_SESSION_TOKEN") or None)


def region_from_environment() -> str | None:
    """``AWS_REGION``, ``AWS_DEFAULT_REGION``, or the profile's region (botocore), as AWS's SDKs
    look for it; None when nothing names one."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name].strip()
    session_module = _botocore()
    if session_module is not None:
        try:
            return session_module.Session().get_config_variable("region") or None
        except Exception:  # a broken config file: no region from it  # noqa: BLE001
            return None
    return None
