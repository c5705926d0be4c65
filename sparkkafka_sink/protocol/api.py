"""API keys, the declared APIs with the versions we speak, and version negotiation.

The table ``DECLARED`` names each API's message specs (Apache Kafka's own, vendored in
``specs/``) and our version range; flexible versions come from the specs.  The network layer
picks a version per broker from its ApiVersions answer without knowing individual messages.
"""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

from sparkkafka_sink.errors import UnsupportedVersionError

if TYPE_CHECKING:
    from sparkkafka_sink.protocol.schema import MessageSchema


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
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72


class ApiDeclaration(NamedTuple):
    """An API we speak: its messages' specs (``specs/<spec>Request.json`` and ``...Response``)
    and the versions we implement (a sub-range of what the spec allows)."""

    spec: str
    min_version: int
    max_version: int


#: Every API this package declares, the one table of versions we speak.  Produce stops at 12
#: (v12 is v11 that adds a transaction's partitions implicitly -- transactions v2, used only
#: then -- and v13 names topics by id); EndTxn v5 bumps the epoch (transactions v2, likewise
#: capped at v4 otherwise: ``TRANSACTIONS_V1_MAX``); InitProducerId starts at 3
#: because v0-2 are broken on tansu; Metadata stops at 12 (v13 adds a top-level error code).
#: The security and transaction APIs are declared for the code that will use them.
#: Keyed by ``ApiKey``, typed by ``int``: the wire's api keys (plain ints) look it up.
DECLARED: dict[int, ApiDeclaration] = {
    ApiKey.PRODUCE: ApiDeclaration("Produce", 3, 12),
    ApiKey.METADATA: ApiDeclaration("Metadata", 1, 12),
    ApiKey.API_VERSIONS: ApiDeclaration("ApiVersions", 0, 3),
    ApiKey.INIT_PRODUCER_ID: ApiDeclaration("InitProducerId", 3, 5),
    ApiKey.SASL_HANDSHAKE: ApiDeclaration("SaslHandshake", 0, 1),
    ApiKey.SASL_AUTHENTICATE: ApiDeclaration("SaslAuthenticate", 0, 2),
    ApiKey.FIND_COORDINATOR: ApiDeclaration("FindCoordinator", 0, 6),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiDeclaration("AddPartitionsToTxn", 0, 3),
    ApiKey.END_TXN: ApiDeclaration("EndTxn", 0, 5),
    ApiKey.DESCRIBE_PRODUCERS: ApiDeclaration("DescribeProducers", 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiDeclaration("DescribeTransactions", 0, 0),
    ApiKey.LIST_TRANSACTIONS: ApiDeclaration("ListTransactions", 0, 2),
    # the exactly-once decisions topic (``exactly_once.decision_log``): created, and read back
    ApiKey.CREATE_TOPICS: ApiDeclaration("CreateTopics", 2, 7),
    ApiKey.LIST_OFFSETS: ApiDeclaration("ListOffsets", 1, 9),
    ApiKey.FETCH: ApiDeclaration("Fetch", 4, 12),
    # ... and its settings checked (compacted, nothing deleted by age)
    ApiKey.DESCRIBE_CONFIGS: ApiDeclaration("DescribeConfigs", 1, 4),
    # the client's metrics, pushed to the brokers that ask for them (KIP-714)
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: ApiDeclaration("GetTelemetrySubscriptions", 0, 0),
    ApiKey.PUSH_TELEMETRY: ApiDeclaration("PushTelemetry", 0, 0),
}

#: the highest version of an API a transaction of transactions v1 may use (KIP-890 part 2:
#: above these the broker adds partitions on Produce and bumps the epoch at EndTxn)
TRANSACTIONS_V1_MAX: dict[int, int] = {ApiKey.PRODUCE: 11, ApiKey.END_TXN: 4}


def transactions_max_version(api_key: int, transaction_v2: bool) -> int | None:
    """The highest version of ``api_key`` a transaction may use: transactions v1 stay below the
    versions that mean v2 (None: no cap)."""
    return None if transaction_v2 else TRANSACTIONS_V1_MAX.get(api_key)


#: the finalized feature whose level 2 turns transactions v2 on across the cluster
TRANSACTION_VERSION_FEATURE = "transaction.version"

#: ``(min, max)`` we speak of each declared API
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {k: (d.min_version, d.max_version) for k, d in DECLARED.items()}


def request_schema(api_key: int) -> MessageSchema:
    """The declared request schema of ``api_key`` (``UnsupportedVersionError`` if undeclared)."""
    from sparkkafka_sink.protocol.schema import load

    try:
        return load(DECLARED[api_key].spec + "Request")
    except KeyError:
        raise UnsupportedVersionError(f"{_name(api_key)} is not declared by this client") from None


def first_flexible_version(api_key: int) -> int | None:
    """From the declaration; None for an API that never became flexible."""
    flexible = request_schema(api_key).flexible
    return None if flexible is None else flexible.lo


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    """True when ``version`` of ``api_key`` uses the flexible (KIP-482) encoding (asked for
    every request and response header: remembered)."""
    return request_schema(api_key).is_flexible(version)


def check_version(api_key: int, version: int) -> None:
    """Raise ``UnsupportedVersionError`` unless we implement ``version`` of ``api_key``."""
    lo, hi = SUPPORTED_VERSIONS.get(api_key, (0, -1))
    if not lo <= version <= hi:
        raise UnsupportedVersionError(
            f"{_name(api_key)} v{version} is not implemented (we speak v{lo}-v{hi})"
        )


def negotiate(api_key: int, broker_min: int, broker_max: int, max_version: int | None = None) -> int:
    """Highest version both we and the broker support (and at most ``max_version``)."""
    if api_key not in SUPPORTED_VERSIONS:
        raise UnsupportedVersionError(f"{_name(api_key)} is not implemented by this client")
    lo, hi = SUPPORTED_VERSIONS[api_key]
    if max_version is not None:
        hi = min(hi, max_version)
    best = min(hi, broker_max)
    if best < max(lo, broker_min):
        raise UnsupportedVersionError(
            f"{_name(api_key)}: client supports v{lo}-v{hi}, "
            f"broker supports v{broker_min}-v{broker_max}; no common version"
        )
    return best
