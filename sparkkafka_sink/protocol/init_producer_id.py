"""InitProducerId (key 22), versions 3-5: gets the producer id and epoch for idempotence.

v0-2 exist but are broken on tansu, so v3 is our minimum; every supported version is flexible.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from sparkkafka_sink.protocol.api import ApiKey, check_version
from sparkkafka_sink.protocol.primitives import Reader, Writer

_API = ApiKey.INIT_PRODUCER_ID
_FLEXIBLE = 2
_REQUEST_TAIL = struct.Struct(">iqh")   # transaction_timeout_ms, producer_id, producer_epoch
_RESPONSE = struct.Struct(">ihqh")      # throttle_time_ms, error_code, producer_id, producer_epoch


@dataclass
class InitProducerIdResponse:
    API_KEY: ClassVar[ApiKey] = _API

    throttle_time_ms: int = 0
    error_code: int = 0
    producer_id: int = -1
    producer_epoch: int = -1

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        w.raw(_RESPONSE.pack(self.throttle_time_ms, self.error_code, self.producer_id,
                             self.producer_epoch))
        if version >= _FLEXIBLE:
            w.empty_tagged_fields()
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> InitProducerIdResponse:
        check_version(_API, version)
        r = Reader(body)
        response = cls(*r.unpack(_RESPONSE))
        if version >= _FLEXIBLE:
            r.skip_tagged_fields()
        return response


@dataclass
class InitProducerIdRequest:
    """Non-transactional idempotent producers send ``transactional_id=None`` and pid/epoch -1
    (or the current pid/epoch to bump the epoch after an error, KIP-360)."""

    API_KEY: ClassVar[ApiKey] = _API
    RESPONSE: ClassVar[type] = InitProducerIdResponse

    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        if version >= _FLEXIBLE:
            w.compact_nullable_string(self.transactional_id)
        else:
            w.nullable_string(self.transactional_id)
        if version >= 3:
            w.raw(_REQUEST_TAIL.pack(self.transaction_timeout_ms, self.producer_id,
                                     self.producer_epoch))
        else:
            w.int32(self.transaction_timeout_ms)
        if version >= _FLEXIBLE:
            w.empty_tagged_fields()
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> InitProducerIdRequest:
        check_version(_API, version)
        r = Reader(body)
        flex = version >= _FLEXIBLE
        txn = r.compact_nullable_string() if flex else r.nullable_string()
        if version >= 3:
            request = cls(txn, *r.unpack(_REQUEST_TAIL))
        else:
            request = cls(txn, r.int32())
        if flex:
            r.skip_tagged_fields()
        return request
