"""SASL ``AWS_MSK_IAM``, as Amazon MSK and AWS's Java ``IAMLoginModule`` speak it: the client
sends one JSON message of SigV4-signed parameters for the broker host it dialled
(``cloud.msk.iam_payload``); the broker answers a JSON object with its ``version`` and
``request-id`` on success, or fails the SaslAuthenticate request."""

from __future__ import annotations

import json
from collections.abc import Callable

from sparkkafka_sink.errors import AuthenticationError
from sparkkafka_sink.network.sasl.client import SaslClient


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
