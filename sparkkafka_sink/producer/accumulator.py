"""RecordAccumulator: per-partition queues of batches between send() and the Sender.

``send()`` appends to the last batch of its partition's deque (or opens a new
one, reserving memory from the BufferPool); ``send_batch()`` hands it a range of rows
grouped by partition, which ``append_rows`` encodes into the open batches and new ones
(Java's ``RecordAccumulator.append``: the accumulator makes every batch).  The Sender asks ``ready()`` which
leaders have a sendable batch (full, lingered long enough, flushing, or
closing), ``drain()`` takes at most one sendable batch per partition per request, and
``expired_batches()`` fails batches past ``delivery.timeout.ms``.  Retried
batches go back to the front of their deque so per-partition order holds.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError, ProducerClosedError
from sparkkafka_sink.network.client import now_ms
from sparkkafka_sink.producer.buffer_pool import BufferPool
from sparkkafka_sink.producer.bulk import (
    BulkEntry,
    OpenBatch,
    PartitionedRows,
    PieceKind,
    encode_pieces,
    memory_bound,
    plan_pieces,
)
from sparkkafka_sink.producer.future import FutureRecordMetadata
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.record.batch import BATCH_OVERHEAD, EncodedRecordsBuilder, RecordBatchBuilder

if TYPE_CHECKING:
    from sparkkafka_sink.network.cluster import Cluster
    from sparkkafka_sink.producer.idempotence import IdempotenceManager


@dataclass
class ReadyCheckResult:
    ready_nodes: set[int]
    next_ready_check_delay_ms: float
    unknown_leader_topics: set[str] = field(default_factory=set)


class _PartitionQueue:
    __slots__ = ("lock", "batches")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: deque[ProducerBatch] = deque()


class RecordAccumulator:
    def __init__(self, *, batch_size: int, compression_type: int, linger_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, delivery_timeout_ms: int, pool: BufferPool,
                 idempotence: IdempotenceManager | None = None,
                 compression_level: int | None = None, availability_timeout_ms: int = 0,
                 bulk_batch_size: int | None = None):
        self.batch_size = batch_size
        #: the batches of the bulk path (``append_rows``): ``ProducerConfig.bulk_batch_size``
        self.bulk_batch_size = bulk_batch_size or batch_size
        self.compression_type = compression_type
        #: Kafka's level of the codec (KIP-390; None: its default)
        self.compression_level = compression_level
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.idempotence = idempotence
        self._queues: dict[tuple[str, int], _PartitionQueue] = {}
        self._queues_lock = threading.Lock()
        # insertion-ordered (a dict used as an ordered set): the first entry is the oldest batch
        self._incomplete: dict[ProducerBatch, None] = {}
        self._incomplete_lock = threading.Lock()
        self._flushes_in_progress = 0
        self._appends_in_progress = 0
        self._appends_lock = threading.Lock()
        self._closed = False
        self._drain_index = 0
        self._muted: set[tuple[str, int]] = set()
        #: adaptive partitioning (KIP-794, ``partitioner.load``): when each broker last had a
        #: batch ready and last was drained, and the leaders as ``ready`` last saw them
        self.availability_timeout_ms = availability_timeout_ms
        self._node_ready_ms: dict[int, float] = {}
        self._node_drained_ms: dict[int, float] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        #: (cluster, queues then) for which every queued partition's leader is known (``ready``)
        self._all_led: tuple[Cluster, int] | None = None

    # -- appending ---------------------------------------------------------------------
    def _queue(self, tp: tuple[str, int]) -> _PartitionQueue:
        q = self._queues.get(tp)
        if q is None:
            with self._queues_lock:
                q = self._queues.setdefault(tp, _PartitionQueue())
        return q

    def append(self, topic: str, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]] | None, record_size: int,
               max_block_ms: float, now_ms: float) -> tuple[FutureRecordMetadata, bool, bool]:
        """Append one record; returns (future, batch_is_full, new_batch_created)."""
        q = self._queue((topic, partition))
        with q.lock:
            self._check_open()
            fut = self._try_append(q, timestamp, key, value, headers)
            if fut is not None:
                return fut, len(q.batches) > 1 or q.batches[-1].is_full, False
        size = max(self.batch_size, record_size)
        with self._appends_lock:  # close() waits for appends blocked on memory
            self._appends_in_progress += 1
        try:
            self.pool.allocate(size, max_block_ms)
            with q.lock:
                try:
                    self._check_open()
                except KafkaError:
                    self.pool.deallocate(size)
                    raise
                fut = self._try_append(q, timestamp, key, value, headers)
                if fut is not None:  # another thread opened a batch while we waited for memory
                    self.pool.deallocate(size)
                    return fut, len(q.batches) > 1 or q.batches[-1].is_full, False
                builder = RecordBatchBuilder(self.compression_type, size, compression_level=self.compression_level)
                batch = ProducerBatch(topic, partition, builder, size, now_ms, size)
                fut = batch.try_append(timestamp, key, value, headers)
                assert fut is not None  # a new batch always takes its first record
                q.batches.append(batch)
                with self._incomplete_lock:
                    self._incomplete[batch] = None
                return fut, len(q.batches) > 1 or batch.is_full, True
        finally:
            with self._appends_lock:
                self._appends_in_progress -= 1

    # -- the bulk path: one call's rows, encoded into batches here ---------------------------
    def append_rows(self, topic: str, rows: PartitionedRows, sizes: np.ndarray, max_block_ms: float
                    ) -> list[BulkEntry]:
        """Queue a range of a bulk call (rows grouped by partition; ``sizes``: their records'
        size bounds), as ``append`` queues one record: its memory reserved first, so waiting for
        it holds nothing; then each partition's open batch claimed (the Sender neither drains
        nor expires a claimed batch), the rows cut into pieces -- what the open batch still
        takes, whole batches, a new open batch -- all encoded in one vectorised pass, and queued.
        Returns ``(batch, first record, the call's rows)`` of every piece."""
        bound = memory_bound(sizes, len(rows.group_partitions), self.bulk_batch_size)
        with self._appends_lock:  # close() waits for appends blocked on memory
            self._appends_in_progress += 1
        try:
            self._check_open()
            self.pool.allocate(bound, max_block_ms)
        finally:
            with self._appends_lock:
                self._appends_in_progress -= 1
        used, queued = 0, []
        claimed = self._claim_open(topic, rows.group_partitions)
        try:
            opens = {p: OpenBatch(b.record_count, b.estimated_size, b.encoded_builder.base_timestamp)
                     for p, b in claimed.items()}
            pieces = plan_pieces(rows, opens, self.bulk_batch_size)
            encode_pieces(rows, pieces, self.compression_type, self.compression_level)
            now = now_ms()
            for piece in pieces:
                if piece.kind is PieceKind.SEAL:
                    with self._queue(claimed[piece.partition].tp).lock:
                        claimed[piece.partition].seal()
                    continue
                count = len(piece.rows)
                if piece.kind is PieceKind.EXTEND:
                    batch, size = claimed[piece.partition], len(piece.data)
                    with self._queue(batch.tp).lock:
                        first = batch.append_records(piece.data, count, piece.max_timestamp, size)
                else:
                    if piece.kind is PieceKind.FULL:
                        size = len(piece.data)
                        batch = ProducerBatch.prebuilt(topic, piece.partition, piece.data, count, now, size,
                                                       stamped=False)
                        first = 0
                    else:  # OPEN: a new open batch, extended by later calls until full or lingered
                        size = BATCH_OVERHEAD + len(piece.data)
                        builder = EncodedRecordsBuilder(self.compression_type,
                                                        rows.records.timestamp(piece.slice.start),
                                                        self.compression_level)
                        batch = ProducerBatch(topic, piece.partition, builder, self.bulk_batch_size, now, 0)
                        first = batch.append_records(piece.data, count, piece.max_timestamp, size)
                    self.queue_batch(batch)
                used += size
                queued.append((batch, first, piece.rows))
        finally:
            for batch in claimed.values():
                with self._queue(batch.tp).lock:
                    batch.claimed = False
            if used <= bound:
                self.pool.deallocate(bound - used)  # what the range did not need
            else:
                self.pool.take(used - bound)  # the bound fell short: count what is in use
        return queued

    def _claim_open(self, topic: str, partitions: Iterable[int]) -> dict[int, ProducerBatch]:
        """The open bulk batches of these partitions (the last of each queue, still filling),
        marked claimed for one bulk call to extend."""
        claimed: dict[int, ProducerBatch] = {}
        for partition in partitions:
            q = self._queues.get((topic, partition))
            if q is None:
                continue
            with q.lock:
                batch = q.batches[-1] if q.batches else None
                if (batch is not None and isinstance(batch.builder, EncodedRecordsBuilder) and not batch.is_full
                        and not batch.claimed):
                    batch.claimed = True
                    claimed[partition] = batch
        return claimed

    def queue_batch(self, batch: ProducerBatch) -> None:
        """Queue a batch whose memory is counted already (the bulk path's, sealed or open to be
        extended); the batch before it in its partition is sealed, so order holds."""
        q = self._queue(batch.tp)
        with q.lock:
            self._check_open()
            if q.batches:
                q.batches[-1].seal()
            q.batches.append(batch)
            with self._incomplete_lock:
                self._incomplete[batch] = None

    @staticmethod
    def _try_append(q: _PartitionQueue, timestamp: int, key: bytes | None, value: bytes | None,
                    headers: Sequence[tuple[str, bytes | None]] | None) -> FutureRecordMetadata | None:
        if not q.batches:
            return None
        return q.batches[-1].try_append(timestamp, key, value, headers)

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("Producer is closed: send() is not possible any more")

    # -- the Sender's side -------------------------------------------------------------
    def _short_of_memory(self) -> bool:
        """A caller waits for buffer memory."""
        return self.pool.queued > 0

    def _forced(self, short_of_memory: bool) -> bool:
        """Every batch goes now, full or not: memory is short, or a flush or close waits."""
        return short_of_memory or self._closed or self._flushes_in_progress > 0

    def _sendable(self, q: _PartitionQueue, batch: ProducerBatch, now_ms: float, forced: bool) -> bool:
        """A partition's first batch may go: another is queued behind it or it is full, it has
        lingered ``linger.ms``, it is a retry, or every batch is ``forced`` (call under q.lock)."""
        return (len(q.batches) > 1 or batch.is_full or forced or batch.attempts > 0
                or now_ms - batch.created_ms >= self.linger_ms)

    def ready(self, cluster: Cluster, now_ms: float) -> ReadyCheckResult:
        """The leaders with a sendable batch, when to look again for the others, and the topics
        of queued partitions whose leader is unknown.  Once every broker is ready the walk stops
        -- when every queued partition's leader is known (checked once per metadata and set of
        queues): nothing the rest could add (one broker at 256 partitions: the first sendable
        batch ends it, not a lookup in each of 256 queues on every loop of the Sender)."""
        ready_nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = float("inf")
        forced = self._forced(self._short_of_memory())
        leaders = cluster.leaders
        queues = list(self._queues.items())
        known = self._all_led
        all_led = known is not None and known[0] is cluster and known[1] == len(queues)
        if not all_led and all(tp in leaders for tp, _ in queues):
            self._all_led, all_led = (cluster, len(queues)), True
        every_node = len(cluster.leader_nodes) if all_led else -1
        for tp, q in queues:
            if not q.batches:  # (read without the lock: a batch queued meanwhile wakes us)
                continue
            leader = leaders.get(tp)
            if leader is None:
                unknown.add(tp[0])
                continue
            if leader in ready_nodes or tp in self._muted:
                continue  # (one broker: once a partition made it ready, the rest cost a lookup)
            with q.lock:
                if not q.batches:
                    continue
                batch = q.batches[0]
                sendable = self._sendable(q, batch, now_ms, forced)
            if batch.claimed:
                continue  # (a claimed batch is ready once its bulk call lets go: it wakes us)
            if self._backing_off(batch, now_ms):
                next_delay = min(next_delay, self._backoff(batch) - (now_ms - batch.last_attempt_ms))
                continue
            if sendable:
                ready_nodes.add(leader)
                if len(ready_nodes) == every_node:
                    break  # every broker is ready: the partitions left could not add one
            else:
                next_delay = min(next_delay, self.linger_ms - (now_ms - batch.created_ms))
        self._leaders = leaders
        for node in ready_nodes:
            self._node_ready_ms[node] = now_ms
            self._node_drained_ms.setdefault(node, now_ms)
        return ReadyCheckResult(ready_nodes, max(next_delay, 0.0), unknown)

    # -- what adaptive partitioning weighs (``partitioner.PartitionLoad``) -----------------
    def queue_sizes(self, topic: str, partitions: Sequence[int]) -> list[int]:
        """Batches queued for each partition (read without the locks: a weight, not a count)."""
        queues = self._queues
        return [len(q.batches) if (q := queues.get((topic, p))) is not None else 0 for p in partitions]

    def lagging(self, topic: str, partitions: Sequence[int]) -> set[int]:
        """Partitions whose leader has had batches ready for longer than
        ``availability_timeout_ms`` since it last was drained (Java's node latency check)."""
        timeout = self.availability_timeout_ms
        if timeout <= 0:
            return set()
        out = set()
        for p in partitions:
            node = self._leaders.get((topic, p))
            if node is not None and node in self._node_ready_ms and \
                    self._node_ready_ms[node] - self._node_drained_ms[node] > timeout:
                out.add(p)
        return out

    def _backing_off(self, batch: ProducerBatch, now_ms: float) -> bool:
        """A retried batch still inside its backoff: neither ready nor drained yet."""
        return batch.attempts > 0 and now_ms - batch.last_attempt_ms < self._backoff(batch)

    def _backoff(self, batch: ProducerBatch) -> float:
        """Exponential retry backoff (KIP-580), capped at retry.backoff.max.ms."""
        if batch.attempts <= 0:
            return 0.0
        return min(self.retry_backoff_ms * (2 ** (batch.attempts - 1)), self.retry_backoff_max_ms)

    def drain(self, cluster: Cluster, nodes: Iterable[int], max_request_size: int, now_ms: float
              ) -> dict[int, list[ProducerBatch]]:
        """At most one batch per partition for each ready node, up to max_request_size bytes.

        As in Java's accumulator, a node's request ends at the first batch that no longer fits,
        and the next drain starts there: the partitions after it keep filling their open batches
        for a later request.  Skipping on to whatever small open batches still fit would fill
        the request with batches sealed early (at 256 partitions, a tenth of batch.size each).
        Unlike Java's, a batch that is not sendable itself (``_sendable``: not full, not lingered)
        stays even when its node has a request going, as librdkafka keeps a partition's messages
        for ``linger.ms``: a bulk call's last rows per partition would otherwise ride along with
        the call's full batches, sealed at a fraction of ``batch.size``, before the next call
        could fill them.
        While a caller waits for memory every batch is sendable, as in Java's; the drain then
        takes the oldest first, not a turn of the partitions: under a steady stream the oldest
        are the fullest (1 KiB records at 256 partitions, 256 KiB batches, 32 MiB of memory: a
        tenth of the batches held under 70 records with the turn, under 140 oldest first).
        """
        nodes = set(nodes)
        for node in nodes:
            self._node_drained_ms[node] = now_ms
        result: dict[int, list[ProducerBatch]] = {n: [] for n in nodes}
        sizes: dict[int, int] = {n: 0 for n in nodes}
        short_of_memory = self._short_of_memory()
        start = 0
        order: Iterable[tuple[tuple[str, int], _PartitionQueue]]
        if short_of_memory:
            order = self._oldest_first()
        else:
            items = list(self._queues.items())
            if not items:
                return result
            start = self._drain_index % len(items)
            order = items[start:] + items[:start]
        stopped_at: dict[int, int] = {}  # node -> the position its request filled up at
        idem = self.idempotence
        leaders = cluster.leaders
        forced = self._forced(short_of_memory)
        for step, (tp, q) in enumerate(order):
            if not q.batches:
                continue
            leader = leaders.get(tp)
            if leader not in nodes or leader in stopped_at or tp in self._muted:
                continue
            with q.lock:
                if not q.batches:
                    continue
                batch = q.batches[0]
                if batch.claimed or self._backing_off(batch, now_ms):
                    continue
                if not self._sendable(q, batch, now_ms, forced):
                    continue
                size = batch.estimated_size
                if sizes[leader] + size > max_request_size and result[leader]:
                    stopped_at[leader] = step
                    if len(stopped_at) == len(nodes):
                        break  # every request is full: the partitions left wait for the next drain
                    continue
                if idem is not None and not idem.may_drain(batch):
                    continue
                q.batches.popleft()
                batch.seal()
            if idem is not None:
                idem.assign_and_close(batch)
            else:
                batch.close()
            batch.drained_ms = now_ms
            sizes[leader] += len(batch.wire)
            result[leader].append(batch)
        if not short_of_memory:
            # the next drain starts where the first full request stopped (no partition waits
            # longer than a turn of the others), else one further on
            self._drain_index = start + (min(stopped_at.values()) if stopped_at else 1)
        return result

    def _oldest_first(self) -> Iterator[tuple[tuple[str, int], _PartitionQueue]]:
        """The partitions with a batch queued, the one whose first batch is oldest first: when a
        caller waits for memory, the drain frees it with the oldest batches, which under a steady
        stream are the fullest (see ``drain``).  The incomplete batches are in the order they
        were made, so the partitions come in that order, each at its first queued batch (those
        in flight are passed over); lazily, as the drain stops once its requests are full."""
        with self._incomplete_lock:
            batches = list(self._incomplete)
        queues, seen = self._queues, set()
        for batch in batches:
            tp = batch.tp
            q = queues.get(tp)
            # (read without the lock: drain checks again; a partition once, as the drain takes
            # one batch of each, though its next batch is first once that one is taken)
            if tp not in seen and q is not None and q.batches and q.batches[0] is batch:
                seen.add(tp)
                yield tp, q

    def expired_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Batches still queued (not in flight) whose delivery.timeout.ms has passed."""
        expired = []
        for q in list(self._queues.values()):
            with q.lock:
                while (q.batches and not q.batches[0].claimed
                       and q.batches[0].has_reached_delivery_timeout(self.delivery_timeout_ms, now_ms)):
                    batch = q.batches.popleft()
                    batch.seal()
                    expired.append(batch)
        return expired

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a failed batch back at the front of its deque, in sequence order."""
        batch.reenqueued(now_ms)
        self._to_front(batch)

    def split_and_reenqueue(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        """``batch`` (refused as too large) is replaced by ``pieces``, at the front of its deque
        and in its place among the incomplete batches; they count as not yet tried."""
        with self._incomplete_lock:
            order = list(self._incomplete)
            at = order.index(batch) if batch in self._incomplete else len(order)
            order[at:at + 1] = pieces
            self._incomplete = dict.fromkeys(order)
        for piece in reversed(pieces):
            self._to_front(piece)

    def _to_front(self, batch: ProducerBatch) -> None:
        q = self._queue(batch.tp)
        with q.lock:
            if batch.base_sequence >= 0 and self.idempotence is not None:
                # before every batch numbered after it, and every batch still to be numbered
                # (none yet, or numbered under a producer id or epoch since replaced)
                at = next((i for i, other in enumerate(q.batches)
                           if other.base_sequence < 0 or other.base_sequence > batch.base_sequence
                           or (other.producer_id, other.producer_epoch) != (batch.producer_id, batch.producer_epoch)),
                          len(q.batches))
                q.batches.insert(at, batch)
            else:
                q.batches.appendleft(batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """Give a completed batch's memory back (once, whoever completes it), its bytes with it
        (``ProducerBatch.release``)."""
        with self._incomplete_lock:
            if batch not in self._incomplete:
                return
            del self._incomplete[batch]
        self.pool.deallocate(batch.reserved)
        batch.release()

    def mute(self, tp: tuple[str, int]) -> None:
        self._muted.add(tp)

    def unmute(self, tp: tuple[str, int]) -> None:
        self._muted.discard(tp)

    def has_undrained(self) -> bool:
        return any(q.batches for q in list(self._queues.values()))

    def has_incomplete(self) -> bool:
        with self._incomplete_lock:
            return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._incomplete_lock:
            return list(self._incomplete)

    def oldest_incomplete_created_ms(self) -> float | None:
        """Creation time of the oldest unacknowledged batch, in O(1): batches enter in creation
        order (bar a few ms between concurrent appends), so it is the first one."""
        with self._incomplete_lock:
            for batch in self._incomplete:
                return batch.created_ms
        return None

    # -- flush / close -----------------------------------------------------------------
    def begin_flush(self) -> None:
        self._flushes_in_progress += 1

    def end_flush(self) -> None:
        self._flushes_in_progress -= 1

    def await_flush_completion(self, timeout_s: float | None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for batch in self.incomplete_batches():
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not batch.result.wait(remaining):
                pending = len(self.incomplete_batches())
                raise KafkaTimeoutError(
                    f"flush() timed out after {timeout_s} s with {pending} batch(es) still pending "
                    f"(first: {batch.topic}-{batch.partition}, {batch.record_count} record(s))"
                )

    def close(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def appends_in_progress(self) -> bool:
        return self._appends_in_progress > 0

    def take_undrained(self) -> list[ProducerBatch]:
        """Remove every batch still queued (not sent yet) and return them, oldest first per
        partition: a transaction that can only be aborted fails them at once."""
        taken: list[ProducerBatch] = []
        for q in list(self._queues.values()):
            with q.lock:
                taken.extend(q.batches)
                q.batches.clear()
        return taken

    def abort_incomplete(self, error: BaseException) -> int:
        """Fail every batch not yet acknowledged (forced close); returns records failed."""
        failed = 0
        for q in list(self._queues.values()):
            with q.lock:
                q.batches.clear()
        for batch in self.incomplete_batches():
            if batch.done(-1, -1, error):
                failed += batch.record_count
            self.deallocate(batch)
        return failed


