"""Kafka's error-code table as exception classes, each carrying what a client should do.

One ``BrokerResponseError`` subclass per code, generated from the table below (names, codes,
retriability and descriptions as in Apache Kafka's ``Errors.java`` and protocol guide), so the
producer can ``raise error_for_code(code)`` and callers can catch precise types.  The classes
carry the decisions the producer, the network layer and the sink take -- ``retriable``,
``invalid_metadata`` (refresh leaders before retrying), ``producer_state_lost`` (get a new
producer id or epoch), ``already_written``, ``resend_cannot_help``, ``too_large``,
``splits_batch``, ``condemns_record``, ``coordinator_moved``, ``producer_fenced`` -- so no other
module compares error names or numbers.
"""

from __future__ import annotations

from sparkkafka_sink import errors as _base
from sparkkafka_sink.errors import BrokerResponseError

# (code, NAME, retriable, description)
_TABLE: tuple[tuple[int, str, bool, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False, "The server experienced an unexpected error when processing the request."),
    (1, "OFFSET_OUT_OF_RANGE", False, "The requested offset is not within the range of offsets maintained by the server."),
    (2, "CORRUPT_MESSAGE", True, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, "The requested fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", True, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (6, "NOT_LEADER_OR_FOLLOWER", True, "This broker is not the leader (or not a replica) of the topic-partition."),
    (7, "REQUEST_TIMED_OUT", True, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, "The replica is not available for the requested topic-partition."),
    (10, "MESSAGE_TOO_LARGE", False, "The request included a message larger than the max message size the server will accept."),
    (11, "STALE_CONTROLLER_EPOCH", False, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", True, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, "The coordinator is loading and hence can't process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False, "The request attempted to perform an operation on an invalid topic."),
    (18, "RECORD_LIST_TOO_LARGE", False, "The request included message batch larger than the configured segment size on the server."),
    (19, "NOT_ENOUGH_REPLICAS", True, "Messages are rejected since there are fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", False, "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", False, "Specified group generation id is not valid."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, "The group member's supported protocols are incompatible with those of existing members."),
    (24, "INVALID_GROUP_ID", False, "The group id is invalid."),
    (25, "UNKNOWN_MEMBER_ID", False, "The coordinator is not aware of this member."),
    (26, "INVALID_SESSION_TIMEOUT", False, "The session timeout is not within the range allowed by the broker."),
    (27, "REBALANCE_IN_PROGRESS", False, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", False, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, "Number of partitions is below 1."),
    (38, "INVALID_REPLICATION_FACTOR", False, "Replication factor is below 1 or larger than the number of available brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", False, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", True, "This is not the correct controller for this cluster."),
    (42, "INVALID_REQUEST", False, "The request is malformed or was sent to an incompatible broker; see the broker logs."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, "The message format version on the broker does not support the request."),
    (44, "POLICY_VIOLATION", False, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", False, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", False, "The producer attempted a transactional operation in an invalid state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, "The transaction timeout is larger than the maximum value allowed by the broker (transaction.max.timeout.ms)."),
    (51, "CONCURRENT_TRANSACTIONS", True, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, "The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, "The broker did not attempt to execute this operation."),
    (56, "KAFKA_STORAGE_ERROR", True, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", False, "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL Authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False, "The broker could not locate the producer metadata associated with the producer id."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, "Specified Principal is not valid Owner/Renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, "The fetch session epoch is invalid."),
    (72, "LISTENER_NOT_FOUND", True, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (73, "TOPIC_DELETION_DISABLED", False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", True, "The leader epoch in the request is newer than the epoch on the broker."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, "The requesting client does not support the compression type of given partition."),
    (77, "STALE_BROKER_EPOCH", False, "Broker epoch has changed."),
    (78, "OFFSET_NOT_AVAILABLE", True, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (79, "MEMBER_ID_REQUIRED", False, "The group member needs to have a valid member id before actually entering a consumer group."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, "The group has reached its maximum size."),
    (82, "FENCED_INSTANCE_ID", False, "Another consumer with the same group.instance.id has registered with a different member.id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", True, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (87, "INVALID_RECORD", False, "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False, "There is a newer producer with the same transactionalId which fences the current one."),
    (91, "RESOURCE_NOT_FOUND", False, "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, "Requested credential would not meet criteria for acceptability."),
    (94, "INCONSISTENT_VOTER_SET", False, "Either the sender or recipient of a voter-only request is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", False, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", False, "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, "Request principal deserialization failed during forwarding."),
    (98, "SNAPSHOT_NOT_FOUND", False, "Requested snapshot was not found."),
    (99, "POSITION_OUT_OF_RANGE", False, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (100, "UNKNOWN_TOPIC_ID", True, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", False, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", False, "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", False, "The new ISR contains at least one ineligible replica."),
    (108, "NEW_LEADER_ELECTED", False, "The AlterPartition request successfully updated the partition state but the leader has changed."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, "The requested offset is moved to tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", False, "The member epoch is fenced by the group coordinator."),
    (111, "UNRELEASED_INSTANCE_ID", False, "The instance ID is still used by another member in the consumer group."),
    (112, "UNSUPPORTED_ASSIGNOR", False, "The assignor or its version range is not supported by the consumer group."),
    (113, "STALE_MEMBER_EPOCH", False, "The member epoch is stale."),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, "The request was sent to an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, "This endpoint type is not supported yet."),
    (116, "UNKNOWN_CONTROLLER_ID", False, "This controller ID is not known."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (118, "TELEMETRY_TOO_LARGE", False, "Client sent a push telemetry request larger than the maximum size the broker will accept."),
    (119, "INVALID_REGISTRATION", False, "The controller has considered the broker registration to be invalid."),
    (120, "TRANSACTION_ABORTABLE", False, "The server encountered an error with the transaction; the client can abort the transaction to continue using this transactional ID."),
    (121, "INVALID_RECORD_STATE", False, "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (122, "SHARE_SESSION_NOT_FOUND", True, "The share session was not found."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, "The share session epoch is invalid."),
    (124, "FENCED_STATE_EPOCH", False, "The share coordinator rejected the request because the share-group state epoch did not match."),
    (125, "INVALID_VOTER_KEY", False, "The voter key doesn't match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", False, "The voter is already part of the set of voters."),
    (127, "VOTER_NOT_FOUND", False, "The voter is not part of the set of voters."),
    (128, "INVALID_REGULAR_EXPRESSION", False, "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", False, "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (130, "STREAMS_INVALID_TOPOLOGY", False, "The supplied topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False, "The supplied topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", False, "The supplied topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", True, "The limit of share sessions has been reached."),
)

#: Codes after which the client's view of leaders is probably stale (Java's
#: ``InvalidMetadataException`` family): refresh metadata before retrying.
_INVALID_METADATA = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
    "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "KAFKA_STORAGE_ERROR", "LISTENER_NOT_FOUND",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "PREFERRED_LEADER_NOT_AVAILABLE",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE", "UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID",
})
#: The broker no longer accepts our producer id/epoch or sequence: an idempotent producer gets
#: a new id (KIP-360) and resends, in order.  (OUT_OF_ORDER_SEQUENCE_NUMBER only when the batch
#: is the oldest outstanding one; otherwise an earlier batch failed and is resent first.)
_PRODUCER_STATE_LOST = frozenset({"UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH",
                                  "OUT_OF_ORDER_SEQUENCE_NUMBER"})
#: Resending the same bytes would get the same verdict (Kafka marks CORRUPT_MESSAGE retriable
#: because a Fetch may read a corrupt copy; a Produce retry sends the same batch).
_RESEND_CANNOT_HELP = frozenset({"CORRUPT_MESSAGE"})
#: The broker already has the batch: a resend of one it wrote.
_ALREADY_WRITTEN = frozenset({"DUPLICATE_SEQUENCE_NUMBER"})
#: Too large for the broker: a batch of several records is split (a single record fails).
_TOO_LARGE = frozenset({"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"})
#: Refused for some of its records (too large, or INVALID_RECORD: a null key on a compacted
#: topic, ...): a batch of several records is sent again in halves, down to the records at fault.
_SPLITS_BATCH = _TOO_LARGE | {"INVALID_RECORD"}
#: The record itself can never be written as it is (not the moment: a retry cannot cure it):
#: under errors.tolerance=all the Spark sink dead-letters it.
_CONDEMNS_RECORD = _SPLITS_BATCH | {"CORRUPT_MESSAGE", "INVALID_TIMESTAMP", "TOPIC_AUTHORIZATION_FAILED",
                                    "INVALID_TOPIC_EXCEPTION"}
#: The coordinator asked is not (or no longer) the one for the key: look it up again.
_COORDINATOR_MOVED = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"})
#: A transactional producer was fenced: a newer producer (a higher epoch) owns its id.
_PRODUCER_FENCED = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})

# Base-class names in sparkkafka_sink.errors that a generated class must not shadow; those
# broker classes get "Broker" in their name and also inherit the client-side class, so
# ``except ProducerFencedError`` catches the broker's PRODUCER_FENCED too.
_ALSO_INHERIT = {
    "PRODUCER_FENCED": _base.ProducerFencedError,
    "UNSUPPORTED_VERSION": _base.UnsupportedVersionError,
}


def _class_name(name: str) -> str:
    camel = "".join(word.capitalize() for word in name.split("_"))
    if not camel.endswith("Error"):
        camel += "Error"
    if hasattr(_base, camel):  # e.g. InvalidRecordError, ProducerFencedError
        camel = camel[: -len("Error")] + "BrokerError"
    return camel


ERROR_CLASSES: dict[int, type[BrokerResponseError]] = {}
ERROR_NAMES: dict[str, type[BrokerResponseError]] = {}


def _build() -> None:
    module = globals()
    for code, name, retriable, description in _TABLE:
        bases: tuple[type[BaseException], ...] = (BrokerResponseError,)
        if name in _ALSO_INHERIT:
            bases += (_ALSO_INHERIT[name],)
        cls = type(_class_name(name), bases, {
            "code": code, "name": name, "retriable": retriable, "description": description,
            "invalid_metadata": name in _INVALID_METADATA,
            "producer_state_lost": name in _PRODUCER_STATE_LOST,
            "resend_cannot_help": name in _RESEND_CANNOT_HELP,
            "already_written": name in _ALREADY_WRITTEN,
            "too_large": name in _TOO_LARGE,
            "splits_batch": name in _SPLITS_BATCH,
            "condemns_record": name in _CONDEMNS_RECORD,
            "coordinator_moved": name in _COORDINATOR_MOVED,
            "producer_fenced": name in _PRODUCER_FENCED,
            "__doc__": f"{name} ({code}): {description}", "__module__": __name__,
        })
        ERROR_CLASSES[code] = cls
        ERROR_NAMES[name] = cls
        module[cls.__name__] = cls


_build()


class UnknownBrokerCodeError(BrokerResponseError):
    """A code missing from our table (a newer broker); the instance carries the number."""

    name = "UNKNOWN_CODE"
    description = "The broker returned an error code this client does not know."

    def __init__(self, code: int, message: str | None = None):
        self.code = code
        super().__init__(message)


def error_for_code(code: int, message: str | None = None) -> BrokerResponseError | None:
    """An exception instance for ``code`` (``None`` for 0 = NONE)."""
    return None if code == 0 else broker_error(code, message)


def broker_error(code: int, message: str | None = None) -> BrokerResponseError:
    """The exception instance for a non-zero ``code`` (one we do not know included), for a
    caller that has already seen the code is not NONE."""
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return UnknownBrokerCodeError(code, message)
    return cls(message)


def error_name(code: int) -> str:
    """Protocol name of ``code`` (``NONE`` for 0), for logs."""
    if code == 0:
        return "NONE"
    cls = ERROR_CLASSES.get(code)
    return cls.name if cls is not None else f"UNKNOWN_CODE_{code}"


# Static names for the classes the other layers use, so linters and readers can find them.
UnknownServerError = ERROR_CLASSES[-1]
CorruptMessageError = ERROR_CLASSES[2]
UnknownTopicOrPartitionError = ERROR_CLASSES[3]
LeaderNotAvailableError = ERROR_CLASSES[5]
NotLeaderOrFollowerError = ERROR_CLASSES[6]
RequestTimedOutError = ERROR_CLASSES[7]
MessageTooLargeError = ERROR_CLASSES[10]
NetworkExceptionError = ERROR_CLASSES[13]
InvalidTopicExceptionError = ERROR_CLASSES[17]
RecordListTooLargeError = ERROR_CLASSES[18]
NotEnoughReplicasError = ERROR_CLASSES[19]
NotEnoughReplicasAfterAppendError = ERROR_CLASSES[20]
InvalidRequiredAcksError = ERROR_CLASSES[21]
TopicAuthorizationFailedError = ERROR_CLASSES[29]
UnsupportedSaslMechanismError = ERROR_CLASSES[33]
IllegalSaslStateError = ERROR_CLASSES[34]
ClusterAuthorizationFailedError = ERROR_CLASSES[31]
InvalidTimestampError = ERROR_CLASSES[32]
UnsupportedVersionBrokerError = ERROR_CLASSES[35]
TopicAlreadyExistsError = ERROR_CLASSES[36]
OutOfOrderSequenceNumberError = ERROR_CLASSES[45]
DuplicateSequenceNumberError = ERROR_CLASSES[46]
InvalidProducerEpochError = ERROR_CLASSES[47]
InvalidTxnStateError = ERROR_CLASSES[48]
InvalidTransactionTimeoutError = ERROR_CLASSES[50]
TransactionalIdAuthorizationFailedError = ERROR_CLASSES[53]
KafkaStorageError = ERROR_CLASSES[56]
SaslAuthenticationFailedError = ERROR_CLASSES[58]
UnknownProducerIdError = ERROR_CLASSES[59]
FencedLeaderEpochError = ERROR_CLASSES[74]
UnknownLeaderEpochError = ERROR_CLASSES[75]
UnsupportedCompressionTypeError = ERROR_CLASSES[76]
InvalidRecordBrokerError = ERROR_CLASSES[87]
ThrottlingQuotaExceededError = ERROR_CLASSES[89]
ProducerFencedBrokerError = ERROR_CLASSES[90]
TransactionalIdNotFoundError = ERROR_CLASSES[105]
UnknownSubscriptionIdError = ERROR_CLASSES[117]
TelemetryTooLargeError = ERROR_CLASSES[118]
TransactionAbortableError = ERROR_CLASSES[120]
