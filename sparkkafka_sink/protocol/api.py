"""API keys, the versions we speak, and version negotiation.

Versions follow Apache Kafka's message specs (clients/src/main/resources/common/message).
Keeping the table here lets the network layer pick a version per broker from its
ApiVersions answer without knowing anything about individual messages.
"""

from __future__ import annotations

from enum import IntEnum

from sparkkafka_sink.errors import UnsupportedVersionError


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37


#: ``(min, max)`` of each API this package implements.  Produce stops at 11 (v12 changes
#: transaction semantics, v13 uses topic ids); InitProducerId starts at 3 because v0-2 are
#: broken on tansu; Metadata stops at 12 (v13 adds a top-level error code).
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.INIT_PRODUCER_ID: (3, 5),
}

#: First flexible version (compact strings, tagged fields, request header v2) per API;
#: ``None`` for APIs that never became flexible.
FLEXIBLE_FROM: dict[ApiKey, int | None] = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 6,
    ApiKey.METADATA: 9,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 6,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.SYNC_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.SASL_HANDSHAKE: None,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.DELETE_TOPICS: 4,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.CREATE_PARTITIONS: 2,
}


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def is_flexible(api_key: int, version: int) -> bool:
    """True when ``version`` of ``api_key`` uses the flexible (KIP-482) encoding."""
    try:
        first = FLEXIBLE_FROM[api_key]
    except KeyError:
        raise UnsupportedVersionError(f"unknown flexible versions for {_name(api_key)}") from None
    return first is not None and version >= first


def check_version(api_key: int, version: int) -> None:
    """Raise ``UnsupportedVersionError`` unless we implement ``version`` of ``api_key``."""
    lo, hi = SUPPORTED_VERSIONS.get(api_key, (0, -1))
    if not lo <= version <= hi:
        raise UnsupportedVersionError(
            f"{_name(api_key)} v{version} is not implemented (we speak v{lo}-v{hi})"
        )


def negotiate(api_key: int, broker_min: int, broker_max: int) -> int:
    """Highest version both we and the broker support."""
    if api_key not in SUPPORTED_VERSIONS:
        raise UnsupportedVersionError(f"{_name(api_key)} is not implemented by this client")
    lo, hi = SUPPORTED_VERSIONS[api_key]
    best = min(hi, broker_max)
    if best < max(lo, broker_min):
        raise UnsupportedVersionError(
            f"{_name(api_key)}: client supports v{lo}-v{hi}, "
            f"broker supports v{broker_min}-v{broker_max}; no common version"
        )
    return best
