"""Produce (key 0): the hot path, written by hand for speed.

The declaration (``specs/ProduceRequest.json``, ``ProduceResponse.json``) and the generic codec
remain the reference: tests check that these functions produce and read exactly the same bytes
at every version we speak.  Encoding keeps every record batch as its own buffer (never copied);
decoding reads each partition's fixed-width fields with one precompiled struct and builds the
declared ``ProduceResponse`` classes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from sparkkafka_sink.protocol.api import ApiKey, check_version, first_flexible_version
from sparkkafka_sink.protocol.primitives import Payload, Reader, Writer
from sparkkafka_sink.protocol.schema import ProtocolMessage

_API = ApiKey.PRODUCE
_PARTITION_V3 = struct.Struct(">ihqq")    # index, error_code, base_offset, log_append_time_ms
_PARTITION_V5 = struct.Struct(">ihqqq")   # ... log_start_offset
_LEADER = struct.Struct(">ii")
_ACKS_TIMEOUT = struct.Struct(">hi")


def _flexible_from() -> int:
    version = first_flexible_version(_API)
    if version is None:
        raise AssertionError("ProduceRequest.json declares no flexible versions")  # v9+ since Kafka 2.4
    return version


@dataclass
class ProduceRequest:
    """``topic_data``: ``[(topic, [(partition, record_batch_bytes), ...]), ...]``: the shape the
    Sender builds, encoded without copying a batch."""

    API_KEY: ClassVar[ApiKey] = _API

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: Sequence[tuple[str, Sequence[tuple[int, Payload]]]]

    @property
    def expects_response(self) -> bool:
        """Apache Kafka sends no response to acks=0 (tansu and noida-db do)."""
        return self.acks != 0

    def encode(self, version: int) -> list:
        check_version(_API, version)
        w = Writer()
        flex = version >= _flexible_from()
        string, alen = (w.compact_string, w.compact_array_length) if flex else (w.string, w.array_length)
        nbytes = w.compact_nullable_bytes if flex else w.nullable_bytes
        (w.compact_nullable_string if flex else w.nullable_string)(self.transactional_id)
        w.raw(_ACKS_TIMEOUT.pack(self.acks, self.timeout_ms))
        alen(len(self.topic_data))
        for topic, partitions in self.topic_data:
            string(topic)
            alen(len(partitions))
            for index, records in partitions:
                w.int32(index)
                nbytes(records, external=True)
                if flex:
                    w.empty_tagged_fields()
            if flex:
                w.empty_tagged_fields()
        if flex:
            w.empty_tagged_fields()
        return w.parts()

    def as_message(self) -> ProtocolMessage:
        """The same request as an instance of the declared class (generic codec, tests)."""
        from sparkkafka_sink.protocol.messages import schema_of

        s = schema_of("ProduceRequest")
        topic_cls = s.structs["TopicProduceData"].cls
        partition_cls = s.structs["PartitionProduceData"].cls
        return s.cls(transactional_id=self.transactional_id, acks=self.acks, timeout_ms=self.timeout_ms,
                     topic_data=[topic_cls(name=t, partition_data=[partition_cls(index=i, records=r)
                                                                   for i, r in parts])
                                 for t, parts in self.topic_data])


def decode_produce_response(body: bytes | bytearray | memoryview, version: int) -> ProtocolMessage:
    """The declared ``ProduceResponse`` from ``body``, read field by field in one pass."""
    from sparkkafka_sink.protocol.messages import schema_of

    check_version(_API, version)
    s = schema_of("ProduceResponse")
    st = s.structs
    topic_cls, partition_cls = st["TopicProduceResponse"].cls, st["PartitionProduceResponse"].cls
    error_cls, leader_cls = st["BatchIndexAndErrorMessage"].cls, st["LeaderIdAndEpoch"].cls
    r = Reader(body)
    flex = version >= _flexible_from()
    alen = r.compact_array_length if flex else r.array_length
    nstring = r.compact_nullable_string if flex else r.nullable_string
    fixed = _PARTITION_V5 if version >= 5 else _PARTITION_V3
    responses = []
    for _ in range(alen() or 0):
        name = r.compact_string() if flex else r.string()
        partitions = []
        for _ in range(alen(fixed.size) or 0):
            values = r.unpack(fixed)
            p = partition_cls(*values)
            if version >= 8:
                errors = []
                for _ in range(alen(6) or 0):
                    errors.append(error_cls(r.int32(), nstring()))
                    if flex:
                        r.skip_tagged_fields()
                p.record_errors = errors
                p.error_message = nstring()
            if flex:
                for tag, raw in r.tagged_fields().items():
                    if tag == 0 and version >= 10:  # CurrentLeader
                        sub = Reader(raw)
                        p.current_leader = leader_cls(*sub.unpack(_LEADER))
                        sub.skip_tagged_fields()
                        p._tags = {0}
                    else:
                        p._unknown_tags = {**(p._unknown_tags or {}), tag: bytes(raw)}
            partitions.append(p)
        if flex:
            r.skip_tagged_fields()
        responses.append(topic_cls(name=name, partition_responses=partitions))
    response = s.cls(responses=responses, throttle_time_ms=r.int32())
    if flex:  # top-level tagged fields (NodeEndpoints, v10+) are rare: the generic reader does them
        from sparkkafka_sink.protocol import codec

        for tag, raw in r.tagged_fields().items():
            field = next((f for f in s.fields if f.tag == tag and f.tagged_in(version)), None)
            if field is None:
                response._unknown_tags = {**(response._unknown_tags or {}), tag: bytes(raw)}
                continue
            setattr(response, field.name, codec.read_tagged_value(field, raw, version))
            response._tags = (response._tags or set()) | {tag}
    if r.remaining:
        from sparkkafka_sink.errors import ProtocolError

        raise ProtocolError(f"ProduceResponse v{version}: {r.remaining} unexpected trailing bytes")
    return response
