"""The bulk path: many records from Arrow columns, no Python object per record.

Partitions are computed for whole columns (vectorised murmur2 for keys, sticky chunks for null
keys), rows are grouped per partition with one stable argsort and one ``take`` per column, and
every partition's rows are encoded by ``record.arrow`` in one vectorised pass.  As in the Java
accumulator, a partition's last batch stays open: the next call's rows for that partition extend
it (``plan_pieces``: ``EXTEND``) until ``batch.size`` or ``linger.ms`` ends it, so many calls of
a few rows per partition (256 partitions, say) still make full batches.  The result is a
:class:`BulkFuture` over the batches the call's rows went to: one future per batch, not per row,
that still tells which original rows a failure concerns.
"""

from __future__ import annotations

import enum
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sparkkafka_sink.errors import (
    InvalidPartitionError,
    KafkaError,
    KafkaTimeoutError,
    Message,
    RecordTooLargeError,
    Setting,
    again,
)
from sparkkafka_sink.producer.future import ProduceRequestResult
from sparkkafka_sink.producer.offset_ranges import merge_range
from sparkkafka_sink.producer.partitioner import Partitioner
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.record.arrow import ArrowRecords, RecordColumns, Slice
from sparkkafka_sink.record.batch import BATCH_OVERHEAD
from sparkkafka_sink.record.refusals import Refused

#: one piece of a bulk call, queued: records ``first..first + len(rows)`` of ``batch`` are the
#: call's ``rows`` (a batch filled by several calls holds other records too)
BulkEntry = tuple[ProducerBatch, int, np.ndarray]


class BulkResult:
    """What a bulk send achieved: counts and offsets per partition."""

    def __init__(self, topic: str, batches: list[BulkEntry]):
        self.topic = topic
        per: dict[int, list[int]] = {}
        for batch, first, rows in batches:
            for count, first_offset, last_offset in batch.result.landed(len(rows), first):
                merge_range(per, batch.partition, count, first_offset, last_offset)
        self.record_count = sum(v[0] for v in per.values())
        #: partition -> (records, first offset, last offset); offsets -1 when unknown (acks=0)
        self.partitions = {p: (n, first, last) for p, (n, first, last) in sorted(per.items())}

    def __repr__(self) -> str:
        return f"BulkResult(topic={self.topic!r}, records={self.record_count}, partitions={self.partitions})"


class BulkFuture:
    """One future for a whole ``send_batch`` call, resolved batch by batch.  Its records are
    ``(batch, first, rows)``: records ``first..first+len(rows)`` of ``batch`` are the call's
    ``rows`` (a batch filled by several calls holds other records too).  ``refused``: the rows
    the call took out before queueing (``send_batch(..., refused="return")``), never sent."""

    def __init__(self, topic: str, batches: list[BulkEntry], refused: Refused | None = None):
        self.topic = topic
        self._batches = batches
        self.refused = refused if refused is not None else Refused()
        self.record_count = sum(len(rows) for _, _, rows in batches)
        #: what landed and what failed, once every batch completed (``_settle``: read once, as a
        #: call at 256 partitions has hundreds of batches)
        self._settled: tuple[BulkResult, list[tuple[BaseException, int, np.ndarray]]] | None = None

    def done(self) -> bool:
        return all(b.result.is_done() for b, _, _ in self._batches)

    def _settle(self) -> tuple[BulkResult, list[tuple[BaseException, int, np.ndarray]]]:
        """(what landed, what failed) of a future whose batches all completed, kept."""
        if self._settled is None:
            self._settled = (BulkResult(self.topic, self._batches), self._errors())
        return self._settled

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch, _, _ in self._batches:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not batch.result.wait(remaining):
                return False
        return True

    def errors(self) -> list[tuple[BaseException, int, np.ndarray]]:
        """(error, partition, original row indices) for every failed batch (or piece of one the
        broker made us split)."""
        return self._settled[1] if self._settled is not None else self._errors()

    def _errors(self) -> list[tuple[BaseException, int, np.ndarray]]:
        return [(error, b.partition, rows[start:start + n]) for b, first, rows in self._batches if b.result.is_done()
                for error, start, n in b.result.failed_pieces(len(rows), first)]

    def failed_count(self) -> int:
        return sum(len(rows) for _, _, rows in self.errors())

    def landed(self) -> BulkResult:
        """What was written so far: counts and offsets of the records that succeeded (the
        failed ones are in ``errors()``)."""
        if self._settled is not None:
            return self._settled[0]
        return BulkResult(self.topic, [entry for entry in self._batches if entry[0].result.is_done()])

    def get(self, timeout: float | None = None) -> BulkResult:
        """Wait for every batch; raise the first error (annotated with how many rows failed)."""
        if not self.wait(timeout):
            raise KafkaTimeoutError(
                f"{self.topic}: bulk send of {self.record_count} record(s) not acknowledged within {timeout} s")
        result, errors = self._settle()
        if errors:
            shared, partition, rows = errors[0]
            err = again(shared)  # the batch's error, shared by every call with rows in it: the note is this call's
            if sys.version_info >= (3, 11):
                err.add_note(f"{self.failed_count()} of {self.record_count} record(s) of this bulk send failed; "
                             f"first failed batch: {self.topic}-{partition}, rows {int(rows.min())}..{int(rows.max())}")
            raise err
        return result

    def add_callback(self, fn: Callable[[BulkResult | None, BaseException | None], object]) -> None:
        """``fn(result, error)`` once every batch completed (on the Sender thread)."""
        remaining = [len(self._batches)]
        lock = threading.Lock()  # (a batch done already calls back on this thread, the others on the Sender's)

        def one_done(_: ProduceRequestResult) -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                result, errs = self._settle()
                fn(None, errs[0][0]) if errs else fn(result, None)

        if not self._batches:
            fn(BulkResult(self.topic, []), None)
        for batch, _, _ in self._batches:
            batch.result.add_callback(one_done)


class BulkSendError(KafkaError):
    """``send_batch`` did not queue every row of its call.

    ``error`` is the producer's own error, saying why (a row no request could carry, a partition
    that does not exist, a header without a key, ``buffer.memory`` that did not free up within
    ``max.block.ms``...); ``row`` the row it is about when it is about one (a check refused it
    before any row was queued; None when it is about the call, such as memory), and
    ``partition`` the partition it names, if any.  ``rows_not_sent`` are the call's rows that
    were not queued (ascending), ``partial`` the future of those queued before the error (None:
    none were): they travel on, and must be waited for like any others."""

    def __init__(self, error: KafkaError, rows_not_sent: np.ndarray, partial: BulkFuture | None = None,
                 row: int | None = None, partition: int | None = None, refused: Refused | None = None):
        self.error = error
        self.rows_not_sent = rows_not_sent
        self.partial = partial
        self.row = row
        self.partition = partition
        #: the rows taken out before queueing (``refused="return"``): not sent either
        self.refused = refused if refused is not None else Refused()
        self.retriable = error.retriable
        first = self.first_row_not_sent
        sent = (f"rows 0..{first - 1} were queued and travel on (BulkSendError.partial)" if partial is not None
                else "no row of this call was queued")
        super().__init__(f"{error} [send_batch: {len(rows_not_sent)} row(s) not sent, from row {first}; {sent}]")
        self.__cause__ = error

    @property
    def first_row_not_sent(self) -> int:
        return int(self.rows_not_sent[0]) if len(self.rows_not_sent) else -1


class PieceKind(enum.Enum):
    EXTEND = "extend"  # bare records appended to the partition's open batch
    SEAL = "seal"      # the open batch is full: the next row does not fit (no rows)
    FULL = "full"      # a whole batch, sealed: ready to send
    OPEN = "open"      # bare records starting the partition's new open batch


@dataclass(frozen=True)
class OpenBatch:
    """What planning needs of a partition's open batch: its records, bytes, base timestamp."""

    record_count: int
    size: int
    base_timestamp: int


@dataclass(slots=True)
class Piece:
    """One step of queueing a call's rows for one partition (see ``PieceKind``)."""

    kind: PieceKind
    partition: int
    slice: Slice
    rows: np.ndarray  # the call's row indices it holds, in order
    data: memoryview | bytes = b""  # a framed batch (FULL) or bare records (EXTEND, OPEN); none to SEAL
    max_timestamp: int = -1


@dataclass
class PartitionedRows:
    """A range of a call's rows grouped by partition (the call's order kept within each),
    measured and ready to encode."""

    records: ArrowRecords
    order: np.ndarray | None   # grouped position -> row of the call (None: already grouped)
    group_starts: np.ndarray
    group_partitions: list[int]
    first_row: int = 0         # the range's first row in the call

    def rows(self, start: int, stop: int) -> np.ndarray:
        """The call's rows at grouped positions ``start..stop``."""
        return np.arange(start + self.first_row, stop + self.first_row) if self.order is None else self.order[start:stop]


def sub_calls(sizes: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Row ranges whose size bounds add up to at most ``limit`` (one row at least): a call is
    queued range by range, each with the memory it needs reserved before any open batch is
    held (a call larger than buffer.memory still goes, as the Sender frees memory)."""
    cum = np.cumsum(sizes)
    out, lo, base = [], 0, 0
    n = len(sizes)
    while lo < n:
        hi = max(int(np.searchsorted(cum, base + limit, side="right")), lo + 1)
        out.append((lo, hi))
        base = int(cum[hi - 1])
        lo = hi
    return out


def memory_bound(sizes: np.ndarray, groups: int, batch_size: int) -> int:
    """Bytes a range of rows may take once queued, an upper bound: the records' size bounds
    wherever they land (``RecordColumns.size_bounds``), and for every batch they could
    start a header and a codec's framing (greedy packing: at most two batches per
    ``batch.size`` of records, plus one per partition)."""
    total = int(sizes.sum())
    batches = 2 * (total // max(batch_size - BATCH_OVERHEAD, 1)) + 3 * groups + 1
    return total + total // 64 + batches * (BATCH_OVERHEAD + 64)


def group_rows(parts: np.ndarray, columns: RecordColumns, first_row: int = 0) -> PartitionedRows:
    """Group a range of a call's measured rows (its rows ``first_row..``) by partition."""
    order, group_starts = group_by_partition(parts)
    group_partitions = (parts[group_starts] if order is None else parts[order[group_starts]]).tolist()
    return PartitionedRows(ArrowRecords(columns if order is None else columns.take(order), group_starts),
                           None if order is None else order + first_row, group_starts, group_partitions, first_row)


def oversized(topic: str, sizes: np.ndarray, max_request_size: int) -> Refused:
    """The rows no request could carry (sizes: the records' bounds,
    ``RecordColumns.size_bounds``, as ``send()`` counts them)."""
    too_big = np.flatnonzero(sizes + BATCH_OVERHEAD > max_request_size)
    return Refused.of([(row, RecordTooLargeError(Message(
        "Row {} for topic {!r} is {} bytes when serialized, which is larger than {}, the value of {} ({} row(s) "
        "too large)", row, topic, int(sizes[row]) + BATCH_OVERHEAD, max_request_size, Setting("max.request.size"),
        len(too_big))), None) for row in too_big.tolist()])


def plan_pieces(rows: PartitionedRows, opens: dict[int, OpenBatch], batch_size: int) -> list[Piece]:
    """Cut each partition's rows into pieces: first what its open batch still takes (EXTEND,
    or SEAL when not even the next row fits), then whole batches (FULL), and the rest starts a
    new open batch (OPEN).  Greedy like ``RecordBatchBuilder.try_append``, on the rows' size
    bounds (true wherever the records land: the bounds count the open batches' records).  The
    first cut of every partition is found for all partitions at once (at 256 partitions a call
    gives most of them one piece or two); only a partition with more whole batches loops."""
    parts = rows.group_partitions
    sizes = rows.records.size_bounds([opens[p].record_count if p in opens else 0 for p in parts],
                                     [o.base_timestamp for o in opens.values()])
    cum = np.concatenate(([0], np.cumsum(sizes)))
    budget = batch_size - BATCH_OVERHEAD
    starts = rows.group_starts.astype(np.int64)
    ends = np.append(starts[1:], len(sizes))
    open_batches = [opens.get(p) for p in parts]
    rooms = np.fromiter((batch_size - o.size if o is not None else 0 for o in open_batches), np.int64, len(parts))
    # where each open batch's share ends (no open batch: no share), then each first fresh batch
    extend_stops = np.clip(cum.searchsorted(cum[starts] + rooms, side="right") - 1, starts, ends)
    first_cuts = np.minimum(np.maximum(cum.searchsorted(cum[extend_stops] + budget, side="right") - 1,
                                       extend_stops + 1), ends)
    pieces = []
    for partition, open_batch, start, end, extend_stop, stop in zip(
            parts, open_batches, starts.tolist(), ends.tolist(), extend_stops.tolist(), first_cuts.tolist(), strict=True):
        if open_batch is not None:
            kind = PieceKind.EXTEND if extend_stop > start else PieceKind.SEAL
            pieces.append(Piece(kind, partition, Slice(start, extend_stop, False, open_batch.record_count,
                                                       open_batch.base_timestamp), rows.rows(start, extend_stop)))
            start = extend_stop
        while start < end:
            kind = PieceKind.FULL if stop < end else PieceKind.OPEN
            pieces.append(Piece(kind, partition, Slice(start, stop, kind is PieceKind.FULL), rows.rows(start, stop)))
            start = stop
            stop = min(max(int(cum.searchsorted(cum[start] + budget, side="right")) - 1, start + 1), end)
    return pieces


def encode_pieces(rows: PartitionedRows, pieces: list[Piece], compression_type: int,
                  compression_level: int | None = None) -> None:
    """Encode every piece's rows in one vectorised pass (``data``, ``max_timestamp``).  A FULL
    piece's batch has no CRC yet: the Sender stamps it (``ProducerBatch.close``), CRC and all."""
    with_rows = [piece for piece in pieces if piece.slice.stop > piece.slice.start]
    for piece, (data, max_ts) in zip(with_rows, rows.records.encode_slices([p.slice for p in with_rows],
                                                                          compression_type, compression_level,
                                                                          stamped_later=True), strict=True):
        piece.data, piece.max_timestamp = data, max_ts


def refused_before_queueing(refused: Refused, n: int) -> BulkSendError:
    """A check refused rows of a call of ``n`` rows: its first, before any row was queued."""
    row, error, partition = next(iter(refused))
    return BulkSendError(error, np.arange(n), None, row, partition)


def group_by_partition(parts: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(stable order that groups rows by ascending partition or None if already grouped,
    first row of each group in that order)."""
    n = parts.shape[0]
    if n > 1 and not (parts[1:] >= parts[:-1]).all():
        # Radix sort for small ints: numpy sorts 8/16-bit keys stably in linear time.
        top = int(parts.max())
        key = parts.astype(np.uint8 if top < 256 else np.uint16 if top < 65536 else np.int64)
        order = np.argsort(key, kind="stable")
        sorted_parts = parts[order]
    else:
        order, sorted_parts = None, parts
    starts = np.concatenate([[0], np.flatnonzero(sorted_parts[1:] != sorted_parts[:-1]) + 1])
    return order, starts


def resolve_partitions(topic: str, given: np.ndarray | None, keys: pa.Array, sizes: np.ndarray,
                       num_partitions: int, available: list[int], partitioner: Partitioner
                       ) -> tuple[np.ndarray, Refused]:
    """Each row's partition: the one given (``RecordColumns.partitions``), else (-1, or none
    given) the partitioner's choice; and the rows whose given partition the topic does not have."""
    if given is None:
        return partitioner.partition_many(topic, keys, sizes, num_partitions, available), Refused()
    bad = given >= num_partitions
    refused = Refused()
    if bad.any():
        count = int(bad.sum())
        refused = Refused.of([(row, InvalidPartitionError(
            f"Row {row}: partition {int(given[row])} of topic {topic!r} does not exist: the topic has "
            f"{num_partitions} partition(s) [0..{num_partitions - 1}] ({count} row(s) out of range)"),
            int(given[row])) for row in np.flatnonzero(bad).tolist()])
        given = np.where(bad, 0, given)  # (refused: the caller leaves them out)
    if (given >= 0).all():
        return given.astype(np.int32), refused
    chosen = partitioner.partition_many(topic, keys, sizes, num_partitions, available)
    return np.where(given >= 0, given, chosen).astype(np.int32), refused
