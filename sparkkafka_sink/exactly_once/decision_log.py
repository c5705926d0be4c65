"""The decisions topic: where a write's decision is recorded once, and read back by whoever
ends the write.

A compacted topic (``pyprod-kafka-decisions`` by default), created by the first exactly-once
write that finds it missing.  Each prefix's records go to one partition -- murmur2 of the prefix
modulo :data:`SLOTS`, whatever the topic's partition count, so a prefix's partition never moves
when the topic grows (a topic of fewer than ``SLOTS`` partitions is refused) -- and reading a
write's decision reads one partition.  Before a write starts, :meth:`DecisionLog.check` makes
sure the topic keeps decisions (compacted, nothing deleted by age) and that the principal may
read and write it: what ending a crashed write will need, asked while nothing depends on it.

**Recording** (:class:`DecisionRecorder`): the driver initialises the write's decision id --
which closes the write -- and, once it knows its winners, writes the decision in a transaction
under that id.  The transaction is the compare-and-set: whoever ends the write other than its
driver first initialises the same id (:func:`fence`), which aborts a decision not yet committed
and leaves the driver's later attempt fenced; a decision committed before waits for nothing.
So after a fence, what the partition holds is final: a committed decision record of the write,
or none.

**Reading** (:meth:`DecisionLog.decision_of`, :meth:`DecisionLog.latest_of_query`) goes back
from the end of the partition in growing windows, with ``read_uncommitted``: a decision
record counts once the commit marker of its producer follows it, so another write's decision
left open (its driver died between its record and its commit) delays no one.  A batch write's
record is deleted (a tombstone) once all its transactions are committed: the topic keeps only
decisions that someone may still need, and a streaming query's latest one.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sparkkafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, ProducerFencedError
from sparkkafka_sink.exactly_once.decision import Decision, DecisionFormatError
from sparkkafka_sink.exactly_once.ids import DEFAULT_DECISION_TOPIC, WriteId
from sparkkafka_sink.network.client import now_ms
from sparkkafka_sink.producer.admin import BlockingAdmin
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.producer.partitioner import murmur2_partition
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.error_codes import (
    ClusterAuthorizationFailedError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    broker_error,
)
from sparkkafka_sink.protocol.schema import ProtocolMessage
from sparkkafka_sink.record.batch import decode_batches

__all__ = ["DEFAULT_TOPIC", "SLOTS", "DecisionTopicError", "DecisionLog", "DecisionRecorder", "fence", "partition_of"]

log = logging.getLogger(__name__)

DEFAULT_TOPIC = DEFAULT_DECISION_TOPIC
#: partitions of the topic when the sink creates it (each prefix uses one)
PARTITIONS = 16
#: the partitions a prefix's decisions are spread over (murmur2 modulo this), whatever the
#: topic's count: a prefix's partition never moves when the topic grows
SLOTS = 16
#: its settings when the sink creates it: compacted, its head rolled and cleaned often (a
#: reader goes back from the end), room for the decision of a write of many thousand tasks
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1",
                 "max.message.bytes": "8388608"}
#: the decision's transaction lasts a request or two: its coordinator aborts it after this when
#: its driver died in between
DECISION_TIMEOUT_MS = 60_000
_CONTROL_KEY = struct.Struct(">hh")
#: DescribeConfigs' resource type of a topic
_TOPIC_RESOURCE = 2
_COMMIT_MARKER = 1
_FIRST_WINDOW = 64
_FETCH_BYTES = 1 << 20


class DecisionTopicError(KafkaError):
    """The decisions topic cannot be created or read: the message names it and what to do."""


def partition_of(prefix: str) -> int:
    """The partition of the decisions topic holding ``prefix``'s decisions (the same however
    many partitions the topic has: it has at least ``SLOTS``)."""
    return murmur2_partition(prefix.encode(), SLOTS)


class DecisionRecorder:
    """The driver's producer under the write's decision id: :meth:`close` initialises it,
    :meth:`record` commits the decision in one transaction."""

    def __init__(self, config: Mapping[str, Any], write: WriteId, topic: str, partitions: int):
        self.write, self.topic = write, topic
        self.partition = partition_of(write.prefix)
        self._producer = Producer(ProducerConfig(config).updated({
            "transactional.id": write.decision_id, "transaction.timeout.ms": DECISION_TIMEOUT_MS,
            "compression.type": "zstd", "linger.ms": 0, "client.id": f"pyprod-kafka-decision-{write.run}"}))

    def close(self, timeout_s: float) -> bool:
        """Initialise the decision id (the write is closed from then on: no task attempt begins);
        True when this was its first initialisation -- no one ended the write before.  An
        initialisation whose answer was lost with its connection is not made again but read
        back (an idle id at epoch 0 is this close's: every ender leaves the id past epoch 0,
        :func:`fence`), so a cut connection does not make the driver's own close look like
        another process's."""
        self._producer.init_transactions(timeout_s, resume_lost_answer=True)
        _, epoch = self._producer.producer_id_and_epoch
        return epoch == 0

    def record(self, decision: Decision, timeout_s: float) -> bool:
        """Commit ``decision`` under the write's decision id: True once recorded, False when
        someone ended the write first (its decision id initialised again: nothing is decided,
        and nothing can be any more).  Any other failure leaves it unknown whether the decision
        was recorded: it raises, and whoever ends the write learns it after fencing."""
        try:
            self._producer.begin_transaction()
            self._producer.send(self.topic, decision.to_bytes(), key=decision.write.decision_key.encode(),
                                partition=self.partition)
            self._producer.commit_transaction(timeout_s)
        except KafkaError as e:
            if _fenced(e):
                return False
            raise
        return True

    def forget(self, timeout_s: float) -> None:
        """A batch write all of whose transactions are committed: its record goes (a tombstone,
        in a second transaction under the decision id -- a reader then finds no decision, and
        nothing open)."""
        self._producer.begin_transaction()
        self._producer.send(self.topic, None, key=self.write.decision_key.encode(), partition=self.partition)
        self._producer.commit_transaction(timeout_s)

    def close_producer(self) -> None:
        self._producer.close(2.0)


def fence(admin: TransactionAdmin, write: WriteId, deadline: float) -> None:
    """End ``write`` for its driver: its decision id initialised again, so a decision not yet
    committed is aborted and can never be; once this returns, the decisions topic holds the
    write's final decision, or none.  An id this initialises first (epoch 0: the driver never
    closed the write) is initialised once more: epoch 0 and idle is what the driver's own close
    reads back as its own when its answer was lost (:meth:`DecisionRecorder.close`)."""
    _, epoch = admin.fence(write.decision_id, deadline)
    if epoch == 0:
        admin.fence(write.decision_id, deadline)


class DecisionLog:
    """The decisions topic of one cluster, asked through ``admin`` (a ``BlockingAdmin``)."""

    def __init__(self, admin: BlockingAdmin, topic: str = DEFAULT_TOPIC):
        self.admin, self.topic = admin, topic

    # -- the topic -----------------------------------------------------------------------------
    def partitions(self, deadline: float, create: bool = False) -> int:
        """The topic's partition count (0: it does not exist); created first when missing and
        ``create`` (its replication the brokers' count up to 3, its settings :data:`TOPIC_CONFIGS`).
        A topic of fewer than :data:`SLOTS` partitions is refused."""
        while True:
            self.admin.metadata.add_topic(self.topic, now_ms())
            self.admin.brokers(deadline, fresh=True)
            cluster = self.admin.metadata.cluster
            count = cluster.partition_count(self.topic)
            if count and count < SLOTS:
                raise DecisionTopicError(
                    f"the exactly-once decisions topic {self.topic!r} has {count} partitions: it needs at least {SLOTS} "
                    f"(each prefix's decisions go to murmur2 of the prefix modulo {SLOTS}, so that no prefix's moves "
                    f"when the topic grows): create it with {PARTITIONS} partitions, or name another with the option "
                    "decisionTopic (decisions kept in this one stay here: let its streaming queries end first)")
            if count and len(cluster.available_partitions(self.topic)) == count:
                return count
            missing = isinstance(_error(cluster.topic_errors.get(self.topic)), UnknownTopicOrPartitionError)
            if missing and not create:
                return 0
            if missing:
                self._create(len(cluster.brokers), deadline)
            self.admin.backoff(None, deadline)

    def _create(self, brokers: int, deadline: float) -> None:
        schema = messages.schema_of("CreateTopicsRequest")
        topic_cls, config_cls = (schema.structs[n].cls for n in ("CreatableTopic", "CreatableTopicConfig"))
        replicas = max(1, min(3, brokers))
        configs = {**TOPIC_CONFIGS, "min.insync.replicas": str(min(2, replicas))}
        request = schema.cls(topics=[topic_cls(name=self.topic, num_partitions=PARTITIONS, replication_factor=replicas,
                                               assignments=[], configs=[config_cls(name=k, value=v)
                                                                        for k, v in configs.items()])],
                             timeout_ms=30_000, validate_only=False)
        def controller(fresh: bool) -> int | None:
            if fresh:
                self.admin.brokers(deadline, fresh=True)
            found = self.admin.metadata.cluster.controller_id
            return found if found in self.admin.metadata.cluster.brokers else None

        answer = self._asked(controller, request, deadline)
        (created,) = answer.topics
        error = _error(created.error_code, getattr(created, "error_message", None))
        if error is None or isinstance(error, TopicAlreadyExistsError):
            log.info("created the decisions topic %r (%d partitions, replication %d)", self.topic, PARTITIONS, replicas)
            return
        if isinstance(error, TopicAuthorizationFailedError | ClusterAuthorizationFailedError):
            topic_configs = ", ".join(f"{k}={v}" for k, v in configs.items())
            raise DecisionTopicError(
                f"the exactly-once decisions topic {self.topic!r} does not exist and this principal may not create "
                f"it ({error.name}): have it created ({PARTITIONS} partitions, replication 3, {topic_configs}), or "
                "grant CREATE on it") from None
        if not error.retriable:
            raise DecisionTopicError(f"could not create the exactly-once decisions topic {self.topic!r}: {error}")

    def check(self, deadline: float) -> None:
        """What ending a crashed write will need of the topic, asked before a write starts: the
        principal may READ and WRITE it (Metadata's authorized operations), and it keeps its
        decisions -- compacted, nothing deleted by age (DescribeConfigs; a principal that may not
        describe its settings only gets a warning).  A ``DecisionTopicError`` says what to change."""
        request = messages.metadata_request([self.topic], allow_auto_topic_creation=False)
        answer = self.admin.call(None, request, deadline)
        found = next((t for t in answer.topics if t.name == self.topic), None)
        refused = messages.operations_refused(getattr(found, "topic_authorized_operations", None), ("READ", "WRITE"))
        if refused:
            raise DecisionTopicError(
                f"the principal may not {' or '.join(refused)} the exactly-once decisions topic {self.topic!r}: grant "
                f"{' and '.join(refused)} on it (the driver records each write's decision there, and whoever ends a "
                "crashed write -- the keeper, the next write, the command -- reads it back)")
        schema = messages.schema_of("DescribeConfigsRequest")
        resource_cls = schema.structs["DescribeConfigsResource"].cls
        request = schema.cls(resources=[resource_cls(resource_type=_TOPIC_RESOURCE, resource_name=self.topic,
                                                     configuration_keys=["cleanup.policy", "retention.ms"])],
                             include_synonyms=False, include_documentation=False)
        (result,) = self.admin.call(None, request, deadline).results
        error = _error(result.error_code, result.error_message)
        if error is not None:
            log.warning("could not check the settings of the exactly-once decisions topic %r (%s): it must stay "
                        "compacted, with nothing deleted by age", self.topic, error)
            return
        settings = {c.name: c.value for c in result.configs}
        policy = {p.strip() for p in (settings.get("cleanup.policy") or "").split(",")}
        if "compact" not in policy or ("delete" in policy and settings.get("retention.ms") not in ("-1", None)):
            raise DecisionTopicError(
                f"the exactly-once decisions topic {self.topic!r} has cleanup.policy={settings.get('cleanup.policy')}"
                f"{', retention.ms=' + str(settings.get('retention.ms')) if 'delete' in policy else ''}: a streaming "
                "query's last decision would be deleted by age, and a micro-batch replayed after that written twice; "
                "set cleanup.policy=compact on it (kafka-configs --alter --add-config cleanup.policy=compact)")

    # -- reading ---------------------------------------------------------------------------------
    def decision_of(self, write: WriteId, deadline: float) -> Decision | None:
        """The committed decision of ``write``, or None (never decided, or forgotten once it was
        wholly committed).  Final only once the write was fenced (:func:`fence`)."""
        def wanted(key: bytes | None, value: bytes | None) -> bool | Decision:
            if key != write.decision_key.encode():
                return False
            if value is None:
                return True  # a tombstone: the write was completed, nothing of it is left
            decision = _decision(value)
            return decision if decision is not None and decision.write == write else False
        return self._newest(write.prefix, wanted, deadline)

    def latest_of_query(self, prefix: str, deadline: float) -> Decision | None:
        """The newest committed decision of the streaming query whose prefix is ``prefix``."""
        def wanted(key: bytes | None, value: bytes | None) -> bool | Decision:
            if key != prefix.encode() or value is None:
                return False
            decision = _decision(value)
            return decision if decision is not None and decision.write.streaming else False
        return self._newest(prefix, wanted, deadline)

    def _newest(self, prefix: str, wanted: Callable[[bytes | None, bytes | None], bool | Decision],
                deadline: float) -> Decision | None:
        """Back from the partition's end: the newest committed record ``wanted`` picks (a
        Decision; True stops with None)."""
        if not self.partitions(deadline):
            return None
        partition = partition_of(prefix)
        start, end = self._offsets(partition, deadline)
        markers: dict[int, list[tuple[int, bool]]] = {}  # producer id -> (offset, committed) of its markers
        window, hi = _FIRST_WINDOW, end
        while hi > start:
            lo = max(start, hi - window)
            records = []
            for batch in self._read(partition, lo, hi, deadline):
                if batch.is_control:
                    for r in batch.records:
                        if r.key is not None and len(r.key) >= 4:
                            markers.setdefault(batch.producer_id, []).append(
                                (batch.base_offset, _CONTROL_KEY.unpack_from(r.key)[1] == _COMMIT_MARKER))
                    continue
                for r in batch.records:
                    offset = batch.base_offset + r.offset_delta
                    if lo <= offset < hi:
                        records.append((offset, batch, r))
            for offset, batch, r in sorted(records, key=lambda x: -x[0]):
                if batch.is_transactional and not _committed(markers.get(batch.producer_id, ()), offset):
                    continue
                verdict = wanted(r.key, r.value)
                if verdict is True:
                    return None
                if verdict:
                    assert isinstance(verdict, Decision)
                    return verdict
            hi, window = lo, window * 4
        return None

    def _leader(self, partition: int, deadline: float, fresh: bool = False) -> int:
        while True:
            if fresh:
                self.admin.brokers(deadline, fresh=True)
            leader = self.admin.metadata.cluster.leader_for(self.topic, partition)
            if leader is not None:
                return leader
            fresh = True
            self.admin.backoff(None, deadline)

    def _offsets(self, partition: int, deadline: float) -> tuple[int, int]:
        """(log start, high watermark) of ``partition``."""
        schema = messages.schema_of("ListOffsetsRequest")
        topic_cls, part_cls = (schema.structs[n].cls for n in ("ListOffsetsTopic", "ListOffsetsPartition"))
        found = []
        for timestamp in (-2, -1):  # earliest, latest
            fresh = False
            while True:
                request = schema.cls(replica_id=-1, isolation_level=0, topics=[topic_cls(name=self.topic, partitions=[
                    part_cls(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])],
                    timeout_ms=30_000)
                answer = self._call(partition, request, deadline, fresh)
                (p,) = answer.topics[0].partitions
                error = _error(p.error_code)
                if error is None:
                    found.append(p.offset)
                    break
                fresh = self._retry(error, deadline)
        return found[0], found[1]

    def _read(self, partition: int, lo: int, hi: int, deadline: float) -> list[Any]:
        """Every batch holding offsets in ``[lo, hi)`` (and markers up to the end, which a
        later window brought), read_uncommitted."""
        schema = messages.schema_of("FetchRequest")
        topic_cls, part_cls = (schema.structs[n].cls for n in ("FetchTopic", "FetchPartition"))
        batches, offset, fresh = [], lo, False
        while offset < hi:
            request = schema.cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_FETCH_BYTES, isolation_level=0,
                                 session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                                 topics=[topic_cls(topic=self.topic, partitions=[part_cls(
                                     partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                     log_start_offset=-1, partition_max_bytes=_FETCH_BYTES)])])
            answer = self._call(partition, request, deadline, fresh)
            (p,) = answer.responses[0].partitions
            error = _error(p.error_code)
            if error is not None:
                fresh = self._retry(error, deadline)
                continue
            got = decode_batches(_whole_batches(bytes(p.records or b"")))
            if not got:
                break  # nothing from here (the end moved back: a truncation): read what there is
            batches.extend(got)
            offset = max(offset, got[-1].base_offset + got[-1].last_offset_delta + 1)
        return batches

    def _call(self, partition: int, request: ProtocolMessage, deadline: float, fresh: bool) -> ProtocolMessage:
        return self._asked(lambda again: self._leader(partition, deadline, fresh or again), request, deadline)

    def _asked(self, node: Callable[[bool], int | None], request: ProtocolMessage, deadline: float) -> ProtocolMessage:
        """``request``'s answer from ``node(fresh)``, asked again (fresh metadata naming the node
        there is now) while the connection to it drops before the answer, within ``deadline``."""
        fresh = False
        while True:
            try:
                return self.admin.call(node(fresh), request, deadline)
            except KafkaConnectionError as e:
                self.admin.backoff(e, deadline)
                fresh = True

    def _retry(self, error: KafkaError, deadline: float) -> bool:
        """A refused read: retried after a backoff (with fresh metadata), or raised."""
        if not (getattr(error, "retriable", False) or getattr(error, "invalid_metadata", False)):
            raise DecisionTopicError(f"could not read the exactly-once decisions topic {self.topic!r}: {error}")
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(f"reading the decisions topic {self.topic!r}: {error}")
        self.admin.backoff(error, deadline)
        return True


def _committed(markers: Iterable[tuple[int, bool]], offset: int) -> bool:
    """The first marker of a record's producer after it says commit (none yet: still open)."""
    after = [(at, committed) for at, committed in markers if at > offset]
    return bool(after) and min(after)[1]


def _fenced(error: BaseException | None) -> bool:
    """The error (or one it was raised from) says a newer producer holds the id."""
    while error is not None:
        if isinstance(error, ProducerFencedError) or getattr(error, "producer_fenced", False):
            return True
        error = error.__cause__ or error.__context__
    return False


def _decision(value: bytes) -> Decision | None:
    try:
        return Decision.from_bytes(value)
    except DecisionFormatError as e:
        log.warning("skipping a record of the decisions topic: %s", e)
        return None


def _error(code: int | None, message: str | None = None) -> KafkaError | None:
    return broker_error(code, message or "") if code else None


def _whole_batches(data: bytes) -> bytes:
    """``data`` up to its last whole record batch (a fetch may end inside one)."""
    pos = 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if pos + 12 + length > len(data):
            break
        pos += 12 + length
    return data[:pos]
