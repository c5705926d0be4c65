"""ApiVersions (key 18): the first request on every connection, to pick versions per broker."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol.api import ApiKey, check_version
from sparkkafka_sink.protocol.primitives import Reader, Writer

_API = ApiKey.API_VERSIONS
_UNSUPPORTED_VERSION = 35
_RANGE = struct.Struct(">hhh")


class ApiVersionRange(NamedTuple):
    api_key: int
    min_version: int
    max_version: int


@dataclass
class ApiVersionsResponse:
    """``tagged_fields`` keeps the top-level tagged fields (supported/finalized features) raw."""

    API_KEY: ClassVar[ApiKey] = _API

    error_code: int = 0
    api_keys: list[ApiVersionRange] = field(default_factory=list)
    throttle_time_ms: int = 0
    tagged_fields: dict[int, bytes] = field(default_factory=dict)

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        for entry in self.api_keys:
            if entry.api_key == api_key:
                return entry.min_version, entry.max_version
        return None

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        w.int16(self.error_code)
        if version >= 3:
            w.compact_array_length(len(self.api_keys))
            for k in self.api_keys:
                w.raw(_RANGE.pack(*k))
                w.empty_tagged_fields()
        else:
            w.array_length(len(self.api_keys))
            for k in self.api_keys:
                w.raw(_RANGE.pack(*k))
        if version >= 1:
            w.int32(self.throttle_time_ms)
        if version >= 3:
            w.tagged_fields(self.tagged_fields)
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> ApiVersionsResponse:
        """Decode at ``version``; a broker that does not speak that version answers with a v0
        body carrying UNSUPPORTED_VERSION (KIP-511), which is accepted too."""
        check_version(_API, version)
        try:
            return cls._decode(Reader(body), version)
        except ProtocolError:
            if version == 0:
                raise
            try:
                fallback = cls._decode(Reader(body), 0)
            except ProtocolError:
                fallback = None
            if fallback is None or fallback.error_code != _UNSUPPORTED_VERSION:
                raise
            return fallback

    @classmethod
    def _decode(cls, r: Reader, version: int) -> ApiVersionsResponse:
        error_code = r.int16()
        keys = []
        if version >= 3:
            n = r.compact_array_length(7) or 0
            for _ in range(n):
                keys.append(ApiVersionRange(*r.unpack(_RANGE)))
                r.skip_tagged_fields()
        else:
            n = r.array_length(6) or 0
            keys = [ApiVersionRange(*r.unpack(_RANGE)) for _ in range(n)]
        throttle = r.int32() if version >= 1 else 0
        tags = {k: bytes(v) for k, v in r.tagged_fields().items()} if version >= 3 else {}
        return cls(error_code, keys, throttle, tags)


@dataclass
class ApiVersionsRequest:
    API_KEY: ClassVar[ApiKey] = _API
    RESPONSE: ClassVar[type] = ApiVersionsResponse

    client_software_name: str = "sparkkafka-sink"
    client_software_version: str = "0.1.0"

    def encode(self, version: int) -> list:
        check_version(_API, version)
        if version < 3:
            return []
        w = Writer()
        w.compact_string(self.client_software_name)
        w.compact_string(self.client_software_version)
        w.empty_tagged_fields()
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> ApiVersionsRequest:
        check_version(_API, version)
        if version < 3:
            return cls()
        r = Reader(body)
        name, ver = r.compact_string(), r.compact_string()
        r.skip_tagged_fields()
        return cls(name, ver)
