"""Produce (key 0), versions 3-11: the hot path.

Encoding keeps every record batch as its own buffer (never copied); decoding reads each
partition's fixed-width fields with one precompiled struct.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from sparkkafka_sink.protocol.api import ApiKey, check_version
from sparkkafka_sink.protocol.primitives import Reader, Writer

_API = ApiKey.PRODUCE
_FLEXIBLE = 9

# index, error_code, base_offset, log_append_time_ms[, log_start_offset]
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_LEADER = struct.Struct(">ii")
_ACKS_TIMEOUT = struct.Struct(">hi")
_CURRENT_LEADER_TAG = 0  # in each partition response, v10+
_NODE_ENDPOINTS_TAG = 0  # at the top level, v10+


class LeaderIdAndEpoch(NamedTuple):
    leader_id: int = -1
    leader_epoch: int = -1


class NodeEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionProduceResponse(NamedTuple):
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] = []  # (batch_index, message)
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch | None = None  # v10+, sent with NOT_LEADER_OR_FOLLOWER


class TopicProduceResponse(NamedTuple):
    name: str
    partition_responses: list[PartitionProduceResponse]


@dataclass
class ProduceResponse:
    API_KEY: ClassVar[ApiKey] = _API

    responses: list[TopicProduceResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
    node_endpoints: list[NodeEndpoint] = field(default_factory=list)  # v10+

    def partitions(self):
        """Yield ``(topic, PartitionProduceResponse)`` for every partition in the response."""
        for topic in self.responses:
            for p in topic.partition_responses:
                yield topic.name, p

    @classmethod
    def decode(cls, body, version: int) -> ProduceResponse:
        check_version(_API, version)
        r = Reader(body)
        if version >= _FLEXIBLE:
            return cls._decode_flexible(r, version)
        fixed = _PARTITION_V5 if version >= 5 else _PARTITION_V3
        responses = []
        for _ in range(r.array_length() or 0):
            name = r.string()
            partitions = []
            for _ in range(r.array_length(fixed.size) or 0):
                values = r.unpack(fixed)
                if version >= 8:
                    record_errors = [(r.int32(), r.nullable_string()) for _ in range(r.array_length(6) or 0)]
                    partitions.append(PartitionProduceResponse(*values, record_errors, r.nullable_string()))
                else:
                    partitions.append(PartitionProduceResponse(*values))
            responses.append(TopicProduceResponse(name, partitions))
        return cls(responses, r.int32())

    @classmethod
    def _decode_flexible(cls, r: Reader, version: int) -> ProduceResponse:
        responses = []
        for _ in range(r.compact_array_length() or 0):
            name = r.compact_string()
            partitions = []
            for _ in range(r.compact_array_length(_PARTITION_V5.size) or 0):
                values = r.unpack(_PARTITION_V5)
                record_errors = []
                for _ in range(r.compact_array_length(6) or 0):
                    record_errors.append((r.int32(), r.compact_nullable_string()))
                    r.skip_tagged_fields()
                error_message = r.compact_nullable_string()
                leader = None
                if version >= 10:
                    raw = r.tagged_fields().get(_CURRENT_LEADER_TAG)
                    if raw is not None:
                        sub = Reader(raw)
                        leader = LeaderIdAndEpoch(*sub.unpack(_LEADER))
                        sub.skip_tagged_fields()
                else:
                    r.skip_tagged_fields()
                partitions.append(
                    PartitionProduceResponse(*values, record_errors, error_message, leader))
            r.skip_tagged_fields()
            responses.append(TopicProduceResponse(name, partitions))
        throttle = r.int32()
        endpoints = []
        if version >= 10:
            raw = r.tagged_fields().get(_NODE_ENDPOINTS_TAG)
            if raw is not None:
                endpoints = _decode_node_endpoints(Reader(raw))
        else:
            r.skip_tagged_fields()
        return cls(responses, throttle, endpoints)

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        flex = version >= _FLEXIBLE
        alen = w.compact_array_length if flex else w.array_length
        nstring = w.compact_nullable_string if flex else w.nullable_string
        alen(len(self.responses))
        for topic in self.responses:
            (w.compact_string if flex else w.string)(topic.name)
            alen(len(topic.partition_responses))
            for p in topic.partition_responses:
                if version >= 5:
                    w.raw(_PARTITION_V5.pack(*p[:5]))
                else:
                    w.raw(_PARTITION_V3.pack(*p[:4]))
                if version >= 8:
                    alen(len(p.record_errors))
                    for batch_index, message in p.record_errors:
                        w.int32(batch_index)
                        nstring(message)
                        if flex:
                            w.empty_tagged_fields()
                    nstring(p.error_message)
                if flex:
                    tags = {}
                    if version >= 10 and p.current_leader is not None:
                        tags[_CURRENT_LEADER_TAG] = _LEADER.pack(*p.current_leader) + b"\x00"
                    w.tagged_fields(tags)
            if flex:
                w.empty_tagged_fields()
        w.int32(self.throttle_time_ms)
        if flex:
            tags = {}
            if version >= 10 and self.node_endpoints:
                tags[_NODE_ENDPOINTS_TAG] = _encode_node_endpoints(self.node_endpoints)
            w.tagged_fields(tags)
        return w.parts()


def _decode_node_endpoints(r: Reader) -> list[NodeEndpoint]:
    endpoints = []
    for _ in range(r.compact_array_length() or 0):
        endpoint = NodeEndpoint(r.int32(), r.compact_string(), r.int32(), r.compact_nullable_string())
        r.skip_tagged_fields()
        endpoints.append(endpoint)
    return endpoints


def _encode_node_endpoints(endpoints: list[NodeEndpoint]) -> bytes:
    w = Writer()
    w.compact_array_length(len(endpoints))
    for e in endpoints:
        w.int32(e.node_id)
        w.compact_string(e.host)
        w.int32(e.port)
        w.compact_nullable_string(e.rack)
        w.empty_tagged_fields()
    return w.getvalue()


@dataclass
class ProduceRequest:
    """``topic_data``: ``[(topic, [(partition, record_batch_bytes), ...]), ...]``.

    The record batches are emitted by reference in ``encode``'s buffer list, never copied.
    """

    API_KEY: ClassVar[ApiKey] = _API
    RESPONSE: ClassVar[type] = ProduceResponse

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[tuple[str, list[tuple[int, object]]]]

    @property
    def expects_response(self) -> bool:
        """Apache Kafka sends no response to acks=0 (tansu and noida-db do)."""
        return self.acks != 0

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        if version >= _FLEXIBLE:
            w.compact_nullable_string(self.transactional_id)
            w.raw(_ACKS_TIMEOUT.pack(self.acks, self.timeout_ms))
            w.compact_array_length(len(self.topic_data))
            for topic, partitions in self.topic_data:
                w.compact_string(topic)
                w.compact_array_length(len(partitions))
                for index, records in partitions:
                    w.int32(index)
                    w.compact_nullable_bytes(records, external=True)
                    w.empty_tagged_fields()
                w.empty_tagged_fields()
            w.empty_tagged_fields()
        else:
            w.nullable_string(self.transactional_id)
            w.raw(_ACKS_TIMEOUT.pack(self.acks, self.timeout_ms))
            w.array_length(len(self.topic_data))
            for topic, partitions in self.topic_data:
                w.string(topic)
                w.array_length(len(partitions))
                for index, records in partitions:
                    w.int32(index)
                    w.nullable_bytes(records, external=True)
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> ProduceRequest:
        """Records come back as memoryview slices of ``body`` (fake brokers, tests)."""
        check_version(_API, version)
        r = Reader(body)
        flex = version >= _FLEXIBLE
        string = r.compact_string if flex else r.string
        alen = r.compact_array_length if flex else r.array_length
        nbytes = r.compact_nullable_bytes if flex else r.nullable_bytes
        txn = r.compact_nullable_string() if flex else r.nullable_string()
        acks, timeout_ms = r.unpack(_ACKS_TIMEOUT)
        topic_data = []
        for _ in range(alen() or 0):
            name = string()
            partitions = []
            for _ in range(alen() or 0):
                partitions.append((r.int32(), nbytes()))
                if flex:
                    r.skip_tagged_fields()
            if flex:
                r.skip_tagged_fields()
            topic_data.append((name, partitions))
        if flex:
            r.skip_tagged_fields()
        return cls(txn, acks, timeout_ms, topic_data)

