"""Producer: the public facade over the accumulator, the Sender thread and the network.

``send()`` validates the record, waits (up to ``max.block.ms``) for the topic's
metadata, picks the partition, appends to the accumulator and returns a
future at once; the Sender thread does all network I/O.  ``flush()`` and
``close()`` are bounded by their timeouts, and every record either succeeds
or fails with an error within ``delivery.timeout.ms``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import numpy as np

from sparkkafka_sink.errors import (
    InvalidHeaderError,
    InvalidPartitionError,
    InvalidRecordError,
    InvalidRecordTimestampError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    Message,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
    Setting,
    UnknownTopicError,
    again,
)
from sparkkafka_sink.network.client import now_ms
from sparkkafka_sink.network.client import now_ms as _monotonic_ms
from sparkkafka_sink.network.cluster import Cluster
from sparkkafka_sink.producer.accumulator import RecordAccumulator
from sparkkafka_sink.producer.buffer_pool import BufferPool
from sparkkafka_sink.producer.bulk import (
    BulkEntry,
    BulkFuture,
    BulkSendError,
    group_rows,
    oversized,
    refused_before_queueing,
    resolve_partitions,
    sub_calls,
)
from sparkkafka_sink.producer.client_telemetry import ClientTelemetry
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.future import FutureRecordMetadata
from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.producer.idempotence import IdempotenceManager
from sparkkafka_sink.producer.metrics import MetricsObserver, ProducerMetrics
from sparkkafka_sink.producer.network_stack import network_stack
from sparkkafka_sink.producer.partitioner import make_partitioner, murmur2_partition
from sparkkafka_sink.producer.sender import Sender
from sparkkafka_sink.producer.transaction_manager import TransactionManager
from sparkkafka_sink.protocol.error_codes import (
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from sparkkafka_sink.record.arrow import ColumnLike, ExtraHeader, HeadersColumnLike, IntColumnLike, RecordColumns
from sparkkafka_sink.record.batch import BATCH_OVERHEAD, MAX_RECORD_OVERHEAD, estimate_record_size
from sparkkafka_sink.record.compression import from_name, level_setting

__all__ = ["Producer", "RecordValue", "RecordHeaders", "ColumnLike", "IntColumnLike", "HeadersColumnLike"]

log = logging.getLogger(__name__)

#: a record's key or value for ``send()``, or a header's value: bytes-like, or str (sent as UTF-8)
RecordValue: TypeAlias = bytes | bytearray | memoryview | str
#: a record's headers for ``send()``: ``{key: value}``, or ``(key, value)`` pairs (a key may
#: repeat); a null value is None
RecordHeaders: TypeAlias = Mapping[str, RecordValue | None] | Iterable[tuple[str, RecordValue | None]]

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_MAX_TIMESTAMP = 2**63 - 1
_BYTES_LIKE = (bytes, bytearray, memoryview)
_client_ids = iter(range(1, 1 << 62))
_wall_time = time.time
#: Size bound of a record with no headers and a null or short (< 64 bytes: one-byte length
#: varint) key and value; each length of 64..8191 bytes takes one byte more.
_SMALL_RECORD_BOUND = BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + 1 + 1 + 1


def validate_topic(topic: object) -> str:
    if not isinstance(topic, str):
        raise InvalidTopicError(f"Topic must be a str, got {type(topic).__name__}: {topic!r}")
    if topic in (".", "..") or not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(
            f"Invalid topic name {topic!r}: Kafka topic names are 1-249 characters of "
            "ASCII letters, digits, '.', '_' and '-', and not '.' or '..'")
    return topic


def _as_bytes(what: str, data: object) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise SerializationError(
        f"Record {what} must be bytes, bytearray, memoryview, str or None, got {type(data).__name__}")


def _headers(headers: RecordHeaders | None) -> list[tuple[str, bytes | None]] | None:
    if headers is None:
        return None
    items: Iterable = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    try:
        for item in items:
            if isinstance(item, (str, bytes, bytearray, memoryview)):
                raise TypeError  # b"kv" would unpack into two ints
            k, v = item
            if not isinstance(k, str):
                raise InvalidHeaderError(f"Header keys must be str, got {type(k).__name__}: {k!r}")
            out.append((k, _as_bytes(f"header {k!r} value", v)))
    except (TypeError, ValueError) as e:
        if isinstance(e, InvalidRecordError):
            raise
        raise InvalidHeaderError(
            f"Headers must be a list of (str, bytes|None) pairs or a dict, got {headers!r}") from None
    return out


class Producer:
    """A Kafka producer: ``send()`` returns a future; records are batched per partition."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self.config = c = config if isinstance(config, ProducerConfig) and not kwargs else ProducerConfig(config, **kwargs)
        self.client_id = c.client_id if "client.id" in c.explicit else f"{c.client_id}-{next(_client_ids)}"
        network = network_stack(c, self.client_id)  # security first: fails before any thread starts
        self._sasl = network.sasl
        self._metadata, self._client = network.metadata, network.client
        self._closed = False
        self._metrics = ProducerMetrics()
        self._pool = BufferPool(c.buffer_memory, on_wait=self._metrics.record_buffer_wait)
        self._transactions: TransactionManager | None
        self._idempotence: IdempotenceManager | None
        if c.transactional_id is not None:
            self._transactions = TransactionManager(c.transactional_id, c.transaction_timeout_ms)
            self._idempotence = self._transactions
        else:
            self._transactions = None
            self._idempotence = (IdempotenceManager(c.transaction_timeout_ms, required="enable.idempotence" in c.explicit)
                                 if c.enable_idempotence else None)
        self._compression = from_name(c.compression_type)
        self._accumulator = RecordAccumulator(
            batch_size=c.batch_size, compression_type=self._compression, linger_ms=c.linger_ms,
            retry_backoff_ms=c.retry_backoff_ms, retry_backoff_max_ms=c.retry_backoff_max_ms,
            delivery_timeout_ms=c.delivery_timeout_ms, pool=self._pool, idempotence=self._idempotence,
            compression_level=level_setting(self._compression, c),
            availability_timeout_ms=c.partitioner_availability_timeout_ms, bulk_batch_size=c.bulk_batch_size)
        #: one partitioner (and one state) for send() and send_batch()
        self._partitioner = make_partitioner(
            c.partitioner, c.batch_size, c.partitioner_ignore_keys,
            self._accumulator if c.partitioner_adaptive_partitioning_enable else None, c.bulk_batch_size)
        self._keyed_murmur2 = c.partitioner == "murmur2" and not c.partitioner_ignore_keys
        self._max_block_ms = c.max_block_ms
        self._size_limit = min(c.max_request_size, c.buffer_memory)
        #: a bulk call is queued in ranges of at most this many bytes, each reserving its memory
        #: before it holds an open batch (a call larger than buffer.memory still goes through)
        self._bulk_range_bytes = max(c.buffer_memory // 4, c.bulk_batch_size)
        self._valid_topics: set[str] = set()
        self._sender = Sender(
            self._client, self._metadata, self._accumulator, acks=c.acks, retries=c.retries,
            request_timeout_ms=c.request_timeout_ms, delivery_timeout_ms=c.delivery_timeout_ms,
            max_request_size=c.max_request_size, retry_backoff_ms=c.retry_backoff_ms,
            guarantee_order=c.max_in_flight_requests_per_connection == 1,
            idempotence=self._idempotence, metrics=self._metrics, client_id=self.client_id,
            telemetry=ClientTelemetry(self.metrics, self.client_id) if c.enable_metrics_push else None)
        self._sender.start()

    # -- context manager ---------------------------------------------------------------
    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending -----------------------------------------------------------------------
    def send(self, topic: str, value: RecordValue | None = None, key: RecordValue | None = None,
             headers: RecordHeaders | None = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Queue one record; the returned future resolves to its RecordMetadata."""
        if self._closed:
            raise ProducerClosedError("Cannot send: the producer is closed")
        if self._client.fatal_error is not None:
            raise again(self._client.fatal_error)  # authentication, certificate: afresh for this caller
        start = _monotonic_ms()
        if topic not in self._valid_topics:
            self._valid_topics.add(validate_topic(topic))
        # The common case (bytes or None, no headers) stays on a short path: this runs per record.
        if key is not None and type(key) is not bytes:
            key = _as_bytes("key", key)
        if value is not None and type(value) is not bytes:
            value = _as_bytes("value", value)
        if headers is not None:
            headers = _headers(headers) or None
        if timestamp_ms is None:
            timestamp_ms = int(_wall_time() * 1000)
        elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _MAX_TIMESTAMP:
            raise InvalidRecordTimestampError(
                f"Invalid timestamp {timestamp_ms!r} for topic {topic!r}: it must be an int of "
                f"milliseconds since the epoch in [0, {_MAX_TIMESTAMP}], or None")
        if partition is not None and (type(partition) is not int or partition < 0):
            raise InvalidPartitionError(
                f"Invalid partition {partition!r} for topic {topic!r}: must be an int >= 0 or None")
        if headers is None and (key is None or len(key) < 8192) and (value is None or len(value) < 8192):
            size = _SMALL_RECORD_BOUND
            if key is not None:
                n = len(key)
                size += n if n < 64 else n + 1
            if value is not None:
                n = len(value)
                size += n if n < 64 else n + 1
        else:
            size = BATCH_OVERHEAD + estimate_record_size(
                None if key is None else len(key), None if value is None else len(value), headers)
        if size > self._size_limit:
            self._ensure_valid_size(topic, size)
        cluster = self._metadata.cluster
        parts = cluster.partitions.get(topic)
        if parts and (partition is None or partition < len(parts)):
            self._metadata.touch(topic, start)
        else:
            cluster = self._wait_on_metadata(topic, partition, self._max_block_ms)
            parts = cluster.partitions[topic]
        if partition is None:
            if key is not None and self._keyed_murmur2:
                partition = murmur2_partition(key, len(parts))
            else:
                partition = self._partitioner.partition(  # the record's own size, as send_batch counts
                    topic, key, len(parts), cluster.available_partitions(topic), size - BATCH_OVERHEAD)
        if self._transactions is not None:
            self._transactions.check_can_send(topic, partition)
        now = _monotonic_ms()
        fut, full, new_batch = self._accumulator.append(
            topic, partition, timestamp_ms, key, value, headers, size,
            max(self._max_block_ms - (now - start), 0), now)
        if full or new_batch:
            self._sender.wakeup()
        return fut

    def send_batch(self, topic: str, values: ColumnLike | None = None, keys: ColumnLike | None = None,
                   headers: HeadersColumnLike | None = None, partitions: IntColumnLike | int | None = None,
                   timestamps: IntColumnLike | int | None = None,
                   refused: Literal["raise", "return"] = "raise", extra_header: ExtraHeader | None = None) -> BulkFuture:
        """Queue many records at once from Arrow columns (or sequences); one future for all.

        ``values``/``keys``: binary or string columns (nulls allowed: tombstones, null keys);
        ``headers``: ``list<struct<key: string, value: binary>>`` column or per-row pair lists;
        ``partitions``: int column (nulls use the partitioner) or one int; ``timestamps``: int64
        milliseconds or timestamp column, or one int (nulls and None: now); ``extra_header``: one
        more header on every record, after its own, ``(key, value)`` -- the value the same bytes for
        every record, or a column (a null: no such header there).  Records are encoded
        straight from the columns, each record byte-identical to sending it alone, into each
        partition's open batch (filled across calls up to ``batch.size``, as ``send()`` fills
        it) and whole batches beyond.  Blocks up to max.block.ms for metadata and buffer memory.

        Every row is checked before any is queued: a row no request could carry, a partition
        that does not exist, a header without a key.  ``refused="raise"`` (the default): such a
        row raises ``BulkSendError`` naming it, and no row is queued.  ``refused="return"``: the
        refused rows are left out, each with its error, in the future's ``refused``, and the
        others are queued -- however many rows are refused, one call.  Buffer memory that stays
        full for max.block.ms stops the call part-way with ``BulkSendError``, and the rows queued
        before travel on under its ``partial`` future.  Errors about the call as a whole (the
        topic, the columns' types, a closed producer) are raised as they are.
        """
        if self._closed:
            raise ProducerClosedError("Cannot send: the producer is closed")
        if self._client.fatal_error is not None:
            raise again(self._client.fatal_error)  # authentication, certificate: afresh for this caller
        start = now_ms()
        validate_topic(topic)
        cluster = self._wait_on_metadata(topic, None, self._max_block_ms)
        # checked and measured once, for every step
        columns = RecordColumns(keys, values, timestamps, headers, partitions=partitions, extra_header=extra_header)
        if columns.n == 0:
            return BulkFuture(topic, [])
        n, returning = columns.n, refused == "return"
        left_out = columns.refused
        if left_out and not returning:
            raise refused_before_queueing(left_out, n)
        sizes = columns.size_bounds
        too_large = oversized(topic, sizes, self.config.max_request_size)
        if too_large and not returning:
            raise refused_before_queueing(too_large, n)
        parts, no_partition = resolve_partitions(topic, columns.partitions, columns.keys, sizes,
                                                 cluster.partition_count(topic), cluster.available_partitions(topic),
                                                 self._partitioner)
        if no_partition and not returning:
            raise refused_before_queueing(no_partition, n)
        left_out = left_out | too_large | no_partition
        rows = np.arange(n)  # the call's row of each row queued
        if left_out:
            rows = np.delete(rows, left_out.rows)
            columns, sizes, parts = columns.take(rows), sizes[rows], parts[rows]
            if not len(rows):
                return BulkFuture(topic, [], left_out)
        if self._transactions is not None:
            for partition in np.unique(parts).tolist():
                self._transactions.check_can_send(topic, partition)
        queued: list[BulkEntry] = []
        for lo, hi in sub_calls(sizes, self._bulk_range_bytes):
            try:
                entries = self._accumulator.append_rows(
                    topic, group_rows(parts[lo:hi], columns.slice(lo, hi), lo), sizes[lo:hi],
                    max(self._max_block_ms - (now_ms() - start), 0))
                # numbered as the call's rows (those left out leave gaps)
                queued += [(b, first, rows[taken]) for b, first, taken in entries] if left_out else entries
            except KafkaError as exc:
                # the ranges before are queued: they travel on, under ``partial``
                raise BulkSendError(exc, rows[lo:], BulkFuture(topic, queued, left_out) if queued else None,
                                    refused=left_out) from exc
            finally:
                self._sender.wakeup()  # the next range may wait for the memory these batches free
        return BulkFuture(topic, queued, left_out)

    def _ensure_valid_size(self, topic: str, size: int) -> None:
        c = self.config
        for key in ("max.request.size", "buffer.memory"):
            if size > c[key]:
                raise RecordTooLargeError(Message(
                    "The record for topic {!r} is {} bytes when serialized, which is larger than {}, the value of {}",
                    topic, size, c[key], Setting(key)))

    def _wait_on_metadata(self, topic: str, partition: int | None, max_block_ms: float) -> Cluster:
        """The cluster once it knows ``topic`` (and ``partition``), waiting up to max_block_ms."""
        md = self._metadata
        start = now_ms()
        md.add_topic(topic, start)
        cluster = md.cluster
        count = cluster.partition_count(topic)
        if count and (partition is None or partition < count) and topic not in cluster.write_refused:
            return cluster
        refreshed = False
        while True:
            if self._client.fatal_error is not None:
                raise again(self._client.fatal_error)
            code = cluster.topic_errors.get(topic)
            topic_error = error_for_code(code, f"topic {topic!r}") if code else None
            if topic_error is None and topic in cluster.write_refused:
                topic_error = TopicAuthorizationFailedError(
                    f"topic {topic!r}: this principal may describe it but has no WRITE permission")
            if topic_error is not None and not topic_error.retriable:  # e.g. TOPIC_AUTHORIZATION_FAILED
                # refused from what we know; ask again soon (refresh backoff), so a grant is seen
                md.request_update()
                self._sender.wakeup()
                raise topic_error
            if count and partition is not None and partition >= count and refreshed:
                raise InvalidPartitionError(
                    f"Partition {partition} of topic {topic!r} does not exist: the topic has {count} "
                    f"partition(s) [0..{count - 1}]")
            version = md.request_update()
            self._sender.wakeup()
            elapsed = now_ms() - start
            if elapsed >= max_block_ms:
                raise self._metadata_timeout(topic, partition, max_block_ms, code)
            md.await_update(version, (max_block_ms - elapsed) / 1000.0)
            if md.version > version:
                refreshed = True
            cluster = md.cluster
            count = cluster.partition_count(topic)
            if count and (partition is None or partition < count) and topic not in cluster.write_refused:
                return cluster
            if self._closed:
                raise ProducerClosedError("Producer closed while waiting for metadata")

    def _metadata_timeout(self, topic: str, partition: int | None, max_block_ms: float,
                          code: int | None) -> KafkaError:
        what = f"Topic {topic!r}" if partition is None else f"Partition {partition} of topic {topic!r}"
        template, parts = "{} not present in metadata after {:.0f} ms ({})", [what, max_block_ms, Setting("max.block.ms")]
        if isinstance(error_for_code(code) if code else None, UnknownTopicOrPartitionError):
            template += ": the broker says UNKNOWN_TOPIC_OR_PARTITION; create the topic first"
            if not self.config.allow_auto_create_topics:
                template, parts = template + " ({} is false)", [*parts, Setting("allow.auto.create.topics")]
            return UnknownTopicError(Message(template, *parts))
        md = self._metadata
        if md.last_error is not None:
            template, parts = template + "; last error: {}", [*parts, md.last_error]
        elif md.cluster.is_bootstrap:
            addrs = ", ".join(f"{h}:{p}" for h, p in md.bootstrap)
            template, parts = template + "; no metadata could be fetched from {} {}", [
                *parts, Setting("bootstrap.servers"), addrs]
        return KafkaTimeoutError(Message(template, *parts))

    # -- transactions ------------------------------------------------------------------
    def _transaction_manager(self) -> TransactionManager:
        if self._transactions is None:
            raise KafkaError(Message("Transactions need {} in the producer's configuration",
                                     Setting("transactional.id")))
        return self._transactions

    def _block_s(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None else timeout

    def init_transactions(self, timeout: float | None = None, *, resume_lost_answer: bool = False) -> None:
        """Get the producer id and epoch of ``transactional.id`` from its coordinator, fencing
        any older producer with that id (its open transaction is aborted).  Once, first.

        ``resume_lost_answer``: when the request's answer is lost with its connection, rather
        than initialise the id again (a second epoch), take an id its coordinator holds at epoch
        0 and idle as this request's doing -- for a caller that must know whether its
        initialisation was the id's first (``producer_id_and_epoch``), in a protocol where no
        one else leaves an id at epoch 0 (``control_requests.InitProducerId``)."""
        result = self._transaction_manager().initialize(resume_lost_answer)
        self._sender.wakeup()
        result.wait(self._block_s(timeout))

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """The producer id and epoch this producer holds now ((-1, -1) before it has one): after
        ``init_transactions()``, an epoch of 0 says the transactional id was new to its
        coordinator."""
        manager = self._idempotence
        return (manager.producer_id, manager.producer_epoch) if manager is not None else (-1, -1)

    def begin_transaction(self) -> None:
        self._transaction_manager().begin()

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver everything sent in the transaction, then commit it: it becomes visible to
        read_committed consumers, all of it at once.  A failed send makes this raise; abort then."""
        self._end_transaction(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: what it wrote is never visible to read_committed consumers."""
        self._end_transaction(False, timeout)

    def _end_transaction(self, commit: bool, timeout: float | None) -> None:
        tm = self._transaction_manager()
        self.flush(timeout)  # EndTxn only once every batch of the transaction is resolved
        result = tm.end(commit=commit)
        self._sender.wakeup()
        result.wait(self._block_s(timeout))

    def prepare(self, timeout: float | None = None) -> PreparedTransaction:
        """Deliver everything sent in the open transaction and hand it over: another process
        commits or aborts it with ``sparkkafka_sink.complete_transaction(prepared, commit, config)``.
        The producer cannot use the transaction afterwards; close it (closing does not abort)."""
        tm = self._transaction_manager()
        self.flush(timeout)
        return tm.hand_over()

    def transaction_state(self, transactional_id: str, timeout: float | None = None) -> str | None:
        """The coordinator's state of another transactional id (Kafka's names: Empty, Ongoing,
        CompleteCommit, ...), or None when the coordinator does not know it.  A transactional
        producer's transaction manager asks it (DescribeTransactions, between its own requests,
        the coordinator looked up as its own) through the Sender and this producer's connections:
        no second client, no second TLS or SASL handshake."""
        result = self._transaction_manager().describe(transactional_id)
        self._sender.wakeup()
        return result.wait(self._block_s(timeout))

    # -- flush / close -----------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged or failed."""
        self._accumulator.begin_flush()
        try:
            self._sender.wakeup()
            self._accumulator.await_flush_completion(timeout)
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (waiting up to ``timeout`` s), then stop the Sender thread.

        Records not acknowledged by then fail.  ``timeout=None`` waits until every record
        is delivered or expired (bounded by delivery.timeout.ms).
        """
        if self._closed:
            return
        self._closed = True
        self._sender.initiate_close()
        if threading.current_thread() is self._sender:
            log.warning("close() called from a callback on the sender thread: not waiting")
            return
        self._sender.join(timeout)
        if self._sender.is_alive():
            log.warning("producer %s did not finish within %s s: failing what is left", self.client_id, timeout)
            self._sender.force_close()
            self._sender.join()
        self._pool.close()
        if self._sasl is not None:
            self._sasl.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def healthy(self) -> bool:
        """Open, its Sender running, no fatal error (authentication, fencing), nothing pending:
        fit to be handed to another caller (the Spark sink's producer pool)."""
        return (not self._closed and self._sender.is_alive() and self._client.fatal_error is None
                and (self._idempotence is None or self._idempotence.fatal_error is None)
                and not self._accumulator.has_incomplete())

    # -- introspection -----------------------------------------------------------------
    def partitions_for(self, topic: str) -> list[int]:
        validate_topic(topic)
        cluster = self._wait_on_metadata(topic, None, self.config.max_block_ms)
        return sorted(cluster.partitions[topic])

    def __repr__(self) -> str:
        protocol = self.config.security_protocol
        principal = f" as {self._sasl.principal!r}" if self._sasl is not None else ""
        state = "closed" if self._closed else "open"
        return f"<Producer {self.client_id} {protocol}{principal} {state}>"

    def observe(self, observer: MetricsObserver | None) -> None:
        """Report each event -- a request answered, a batch sent or retried, records failed, a
        wait for buffer memory -- to ``observer`` as it happens, beside the counters of
        :meth:`metrics` (``sparkkafka_sink.otel.instruments.ProducerInstruments`` records them
        on OpenTelemetry's meter); None: stop."""
        self._metrics.observer = observer

    def metrics(self) -> dict[str, float]:
        snap = self._metrics.snapshot()
        snap["buffer_available_bytes"] = self._pool.available_memory
        snap["buffer_total_bytes"] = self._pool.total_memory
        return snap

    def __del__(self) -> None:
        try:
            if not self._closed:
                self._sender.force_close()
        except Exception:  # noqa: BLE001 - a producer being collected must not raise
            pass
