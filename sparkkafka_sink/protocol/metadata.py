"""Metadata (key 3): brokers, partition leaders and topic errors that drive routing.

Versions 1-12; flexible from 9.  Topic ids (v10+) are decoded but requests always name topics.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from sparkkafka_sink.protocol.api import ApiKey, check_version
from sparkkafka_sink.protocol.primitives import ZERO_UUID, Reader, Writer

_API = ApiKey.METADATA
_FLEXIBLE = 9
NO_AUTHORIZED_OPERATIONS = -(2**31)  # spec default: "not requested"
_PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id


def _noop() -> None:
    pass


class MetadataBroker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataPartition(NamedTuple):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int = -1
    replica_nodes: list[int] = []
    isr_nodes: list[int] = []
    offline_replicas: list[int] = []


class MetadataTopic(NamedTuple):
    error_code: int
    name: str | None
    partitions: list[MetadataPartition]
    is_internal: bool = False
    topic_id: uuid.UUID = ZERO_UUID
    topic_authorized_operations: int = NO_AUTHORIZED_OPERATIONS


@dataclass
class MetadataResponse:
    API_KEY: ClassVar[ApiKey] = _API

    brokers: list[MetadataBroker] = field(default_factory=list)
    topics: list[MetadataTopic] = field(default_factory=list)
    cluster_id: str | None = None
    controller_id: int = -1
    throttle_time_ms: int = 0
    cluster_authorized_operations: int = NO_AUTHORIZED_OPERATIONS

    @classmethod
    def decode(cls, body, version: int) -> MetadataResponse:
        check_version(_API, version)
        r = Reader(body)
        flex = version >= _FLEXIBLE
        string = r.compact_string if flex else r.string
        nstring = r.compact_nullable_string if flex else r.nullable_string
        alen = r.compact_array_length if flex else r.array_length
        int32s = r.compact_int32_array if flex else r.int32_array
        skip_tags = r.skip_tagged_fields if flex else _noop

        throttle = r.int32() if version >= 3 else 0
        brokers = []
        for _ in range(alen() or 0):
            node_id, host, port = r.int32(), string(), r.int32()
            rack = nstring() if version >= 1 else None
            skip_tags()
            brokers.append(MetadataBroker(node_id, host, port, rack))
        cluster_id = nstring() if version >= 2 else None
        controller_id = r.int32() if version >= 1 else -1
        topics = []
        for _ in range(alen() or 0):
            error_code = r.int16()
            name = nstring() if version >= 12 else string()
            topic_id = r.uuid() if version >= 10 else ZERO_UUID
            is_internal = r.boolean() if version >= 1 else False
            partitions = []
            for _ in range(alen() or 0):
                p_error, index, leader = r.unpack(_PARTITION_HEAD)
                epoch = r.int32() if version >= 7 else -1
                replicas, isr = int32s(), int32s()
                offline = int32s() if version >= 5 else []
                skip_tags()
                partitions.append(MetadataPartition(p_error, index, leader, epoch, replicas, isr, offline))
            ops = r.int32() if version >= 8 else NO_AUTHORIZED_OPERATIONS
            skip_tags()
            topics.append(MetadataTopic(error_code, name, partitions, is_internal, topic_id, ops))
        cluster_ops = r.int32() if 8 <= version <= 10 else NO_AUTHORIZED_OPERATIONS
        skip_tags()
        return cls(brokers, topics, cluster_id, controller_id, throttle, cluster_ops)

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        flex = version >= _FLEXIBLE
        string = w.compact_string if flex else w.string
        nstring = w.compact_nullable_string if flex else w.nullable_string
        alen = w.compact_array_length if flex else w.array_length
        int32s = w.compact_int32_array if flex else w.int32_array
        tags = w.empty_tagged_fields if flex else _noop

        if version >= 3:
            w.int32(self.throttle_time_ms)
        alen(len(self.brokers))
        for b in self.brokers:
            w.int32(b.node_id)
            string(b.host)
            w.int32(b.port)
            if version >= 1:
                nstring(b.rack)
            tags()
        if version >= 2:
            nstring(self.cluster_id)
        if version >= 1:
            w.int32(self.controller_id)
        alen(len(self.topics))
        for t in self.topics:
            w.int16(t.error_code)
            (nstring if version >= 12 else string)(t.name)
            if version >= 10:
                w.uuid(t.topic_id)
            if version >= 1:
                w.boolean(t.is_internal)
            alen(len(t.partitions))
            for p in t.partitions:
                w.raw(_PARTITION_HEAD.pack(p.error_code, p.partition_index, p.leader_id))
                if version >= 7:
                    w.int32(p.leader_epoch)
                int32s(p.replica_nodes)
                int32s(p.isr_nodes)
                if version >= 5:
                    int32s(p.offline_replicas)
                tags()
            if version >= 8:
                w.int32(t.topic_authorized_operations)
            tags()
        if 8 <= version <= 10:
            w.int32(self.cluster_authorized_operations)
        tags()
        return w.parts()


@dataclass
class MetadataRequest:
    """``topics=None`` asks for all topics; ``[]`` for none (brokers and controller only)."""

    API_KEY: ClassVar[ApiKey] = _API
    RESPONSE: ClassVar[type] = MetadataResponse

    topics: list[str] | None = None
    allow_auto_topic_creation: bool = True
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        flex = version >= _FLEXIBLE
        if self.topics is None:
            (w.compact_array_length if flex else w.array_length)(None)
        elif flex:
            w.compact_array_length(len(self.topics))
            for name in self.topics:
                if version >= 10:
                    w.uuid(ZERO_UUID)
                w.compact_string(name)
                w.empty_tagged_fields()
        else:
            w.array_length(len(self.topics))
            for name in self.topics:
                w.string(name)
        if version >= 4:
            w.boolean(self.allow_auto_topic_creation)
        if 8 <= version <= 10:
            w.boolean(self.include_cluster_authorized_operations)
        if version >= 8:
            w.boolean(self.include_topic_authorized_operations)
        if flex:
            w.empty_tagged_fields()
        return w.parts()

    @classmethod
    def decode(cls, body, version: int) -> MetadataRequest:
        check_version(_API, version)
        r = Reader(body)
        flex = version >= _FLEXIBLE
        n = (r.compact_array_length if flex else r.array_length)()
        topics = None
        if n is not None:
            topics = []
            for _ in range(n):
                if version >= 10:
                    r.uuid()
                topics.append(r.compact_string() if flex else r.string())
                if flex:
                    r.skip_tagged_fields()
        auto = r.boolean() if version >= 4 else True
        cluster_ops = r.boolean() if 8 <= version <= 10 else False
        topic_ops = r.boolean() if version >= 8 else False
        if flex:
            r.skip_tagged_fields()
        return cls(topics, auto, cluster_ops, topic_ops)
