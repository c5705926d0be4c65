"""Version negotiation and the broker error-code table."""

from __future__ import annotations

import pytest

from sparkkafka_sink import errors as base
from sparkkafka_sink.errors import BrokerResponseError, UnsupportedVersionError
from sparkkafka_sink.protocol import SUPPORTED_VERSIONS, ApiKey, check_version, is_flexible, negotiate
from sparkkafka_sink.protocol import error_codes as perr
from sparkkafka_sink.protocol.api import TRANSACTIONS_V1_MAX, first_flexible_version


def test_api_key_values():
    assert [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.FIND_COORDINATOR,
            ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS, ApiKey.INIT_PRODUCER_ID,
            ApiKey.SASL_AUTHENTICATE] == [0, 1, 2, 3, 10, 17, 18, 19, 22, 36]


def test_supported_and_flexible_versions():
    used = (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.INIT_PRODUCER_ID)
    assert {k: SUPPORTED_VERSIONS[k] for k in used} == {
        ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (1, 12), ApiKey.PRODUCE: (3, 12),
        ApiKey.INIT_PRODUCER_ID: (3, 5)}
    assert {k: first_flexible_version(k) for k in used} == {
        ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 9, ApiKey.PRODUCE: 9, ApiKey.INIT_PRODUCER_ID: 2}
    # declared for security and transactions (the client versions)
    assert {k: SUPPORTED_VERSIONS[k] for k in set(SUPPORTED_VERSIONS) - set(used)} == {
        ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3), ApiKey.END_TXN: (0, 5), ApiKey.LIST_TRANSACTIONS: (0, 2),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        # the exactly-once decisions topic: created and read back (Fetch stops before topic ids)
        ApiKey.CREATE_TOPICS: (2, 7), ApiKey.LIST_OFFSETS: (1, 9), ApiKey.FETCH: (4, 12),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        # the client's metrics, pushed to the brokers that ask for them (KIP-714)
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0), ApiKey.PUSH_TELEMETRY: (0, 0)}
    assert not is_flexible(ApiKey.PRODUCE, 8) and is_flexible(ApiKey.PRODUCE, 9)
    assert not is_flexible(ApiKey.SASL_HANDSHAKE, 1)
    with pytest.raises(UnsupportedVersionError):
        is_flexible(999, 0)
    # Produce v12 and EndTxn v5 mean transactions v2: a v1 transaction stops below them
    assert negotiate(ApiKey.PRODUCE, 3, 13) == 12 and negotiate(ApiKey.PRODUCE, 3, 13, 11) == 11
    assert negotiate(ApiKey.END_TXN, 0, 5, TRANSACTIONS_V1_MAX[ApiKey.END_TXN]) == 4


@pytest.mark.parametrize("api_key, broker, expected", [
    (ApiKey.PRODUCE, (0, 11), 11), (ApiKey.PRODUCE, (0, 9), 9), (ApiKey.PRODUCE, (3, 13), 12),
    (ApiKey.METADATA, (0, 12), 12), (ApiKey.METADATA, (0, 13), 12), (ApiKey.METADATA, (1, 1), 1),
    (ApiKey.INIT_PRODUCER_ID, (0, 4), 4), (ApiKey.API_VERSIONS, (0, 4), 3),
])
def test_negotiate_picks_highest_common(api_key, broker, expected):
    assert negotiate(api_key, *broker) == expected


def test_negotiate_without_overlap_names_api_and_ranges():
    with pytest.raises(UnsupportedVersionError) as info:
        negotiate(ApiKey.INIT_PRODUCER_ID, 0, 2)
    assert "INIT_PRODUCER_ID" in str(info.value) and "v3-v5" in str(info.value) and "v0-v2" in str(info.value)
    with pytest.raises(UnsupportedVersionError):
        negotiate(ApiKey.PRODUCE, 13, 14)
    with pytest.raises(UnsupportedVersionError):
        negotiate(ApiKey.FETCH, 13, 17)
    with pytest.raises(UnsupportedVersionError):
        negotiate(ApiKey.OFFSET_COMMIT, 0, 9)


def test_check_version():
    check_version(ApiKey.PRODUCE, 3)
    with pytest.raises(UnsupportedVersionError):
        check_version(ApiKey.PRODUCE, 13)


# --- errors ---------------------------------------------------------------------------------

def test_table_covers_codes_and_has_unique_names():
    assert set(perr.ERROR_CLASSES) == {-1} | set(range(1, 134))
    names = [c.__name__ for c in perr.ERROR_CLASSES.values()]
    assert len(names) == len(set(names))
    for code, cls in perr.ERROR_CLASSES.items():
        assert issubclass(cls, BrokerResponseError) and cls.code == code and cls.description
        assert getattr(perr, cls.__name__) is cls


@pytest.mark.parametrize("name, code, retriable", [
    ("MessageTooLargeError", 10, False), ("CorruptMessageError", 2, True),
    ("NotLeaderOrFollowerError", 6, True), ("UnknownTopicOrPartitionError", 3, True),
    ("TopicAuthorizationFailedError", 29, False), ("InvalidRequiredAcksError", 21, False),
    ("DuplicateSequenceNumberError", 46, False), ("OutOfOrderSequenceNumberError", 45, False),
    ("UnknownProducerIdError", 59, False), ("InvalidProducerEpochError", 47, False),
    ("RecordListTooLargeError", 18, False), ("InvalidRecordBrokerError", 87, False),
    ("NotEnoughReplicasError", 19, True), ("NotEnoughReplicasAfterAppendError", 20, True),
    ("RequestTimedOutError", 7, True), ("NetworkExceptionError", 13, True),
    ("LeaderNotAvailableError", 5, True), ("UnsupportedVersionBrokerError", 35, False),
    ("ProducerFencedBrokerError", 90, False), ("InvalidTopicExceptionError", 17, False),
    ("KafkaStorageError", 56, True), ("UnknownServerError", -1, False),
    ("TransactionAbortableError", 120, False), ("ThrottlingQuotaExceededError", 89, True),
])
def test_named_classes(name, code, retriable):
    cls = getattr(perr, name)
    assert (cls.code, cls.retriable) == (code, retriable)
    assert perr.error_for_code(code).retriable is retriable


def test_broker_classes_do_not_shadow_client_errors():
    assert perr.InvalidRecordBrokerError is not base.InvalidRecordError
    assert issubclass(perr.ProducerFencedBrokerError, base.ProducerFencedError)
    assert issubclass(perr.UnsupportedVersionBrokerError, base.UnsupportedVersionError)


def test_error_for_code():
    err = perr.error_for_code(10, "batch of 2 MB")
    assert isinstance(err, perr.MessageTooLargeError)
    assert str(err) == ("[Error 10] MESSAGE_TOO_LARGE: The request included a message larger than "
                        "the max message size the server will accept. (batch of 2 MB)")
    assert perr.error_for_code(0) is None
    unknown = perr.error_for_code(4242)
    assert isinstance(unknown, BrokerResponseError) and unknown.code == 4242
    assert not unknown.retriable
    assert perr.error_name(6) == "NOT_LEADER_OR_FOLLOWER" and perr.error_name(0) == "NONE"


def test_metadata_refresh_codes():
    for code in (3, 5, 6, 13, 56, 74, 75):
        assert perr.error_for_code(code).invalid_metadata
    for code in (2, 10, 19, 45, 46, 47):
        assert not perr.error_for_code(code).invalid_metadata
    assert all(c.retriable for c in perr.ERROR_CLASSES.values() if c.invalid_metadata)


def test_what_each_error_tells_the_producer_to_do():
    """The decisions live on the classes: no other module compares error numbers."""
    lost = {c.name for c in perr.ERROR_CLASSES.values() if c.producer_state_lost}
    assert lost == {"UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH", "OUT_OF_ORDER_SEQUENCE_NUMBER"}
    assert [c.name for c in perr.ERROR_CLASSES.values() if c.already_written] == ["DUPLICATE_SEQUENCE_NUMBER"]
    assert [c.name for c in perr.ERROR_CLASSES.values() if c.resend_cannot_help] == ["CORRUPT_MESSAGE"]
    too_large = {"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"}
    assert {c.name for c in perr.ERROR_CLASSES.values() if c.too_large} == too_large
    assert {c.name for c in perr.ERROR_CLASSES.values() if c.splits_batch} == too_large | {"INVALID_RECORD"}
    assert {c.name for c in perr.ERROR_CLASSES.values() if c.condemns_record} == too_large | {
        "INVALID_RECORD", "CORRUPT_MESSAGE", "INVALID_TIMESTAMP", "TOPIC_AUTHORIZATION_FAILED",
        "INVALID_TOPIC_EXCEPTION"}
    moved = {c.name for c in perr.ERROR_CLASSES.values() if c.coordinator_moved}
    assert moved == {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"}
    assert all(perr.ERROR_NAMES[n].retriable for n in moved)
    assert {c.name for c in perr.ERROR_CLASSES.values() if c.producer_fenced} == {"PRODUCER_FENCED",
                                                                                  "INVALID_PRODUCER_EPOCH"}


def test_no_error_names_outside_the_protocol_layer():
    """Above protocol/, behaviour follows the error classes' properties, never a list of names."""
    import ast
    from pathlib import Path

    import sparkkafka_sink

    root = Path(sparkkafka_sink.__file__).parent
    names = set(perr.ERROR_NAMES)
    offenders = []
    for path in root.rglob("*.py"):
        if path.parent.name == "protocol" or "testing" in path.parts or path == root / "errors.py":
            continue  # the table, the base class it fills in, and the test brokers
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                offenders.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    assert not offenders, "\n".join(offenders)


def test_no_bare_error_numbers_outside_the_error_table():
    """Modules above the protocol's error table decide by error class, never by number."""
    import re
    from pathlib import Path

    import sparkkafka_sink

    root = Path(sparkkafka_sink.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "error_codes.py" and path.parent.name == "protocol":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(error_code|\bcode)\s*(==|!=|in)\s*[(\[{]?-?\d", line):
                offenders.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
