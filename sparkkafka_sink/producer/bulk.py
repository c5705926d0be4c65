"""The bulk path: many records from Arrow columns, no Python object per record.

Partitions are computed for whole columns (vectorised murmur2 for keys,
sticky chunks for null keys), rows are grouped per partition with one stable
argsort and one ``take`` per column, and each partition's rows are encoded
into record batches by ``record.arrow`` in one vectorised pass.  The result
is a :class:`BulkFuture` over those batches: one future per batch, not per row,
that still tells which original rows a failure concerns.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import InvalidPartitionError, InvalidRecordError, KafkaTimeoutError, RecordTooLargeError
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.producer.offset_ranges import merge_range
from sparkkafka_sink.producer.partitioner import Partitioner
from sparkkafka_sink.record.arrow import ArrowRecords, binary_column, record_size_upper_bounds
from sparkkafka_sink.record.batch import BATCH_OVERHEAD


class BulkResult:
    """What a bulk send achieved: counts and offsets per partition."""

    def __init__(self, topic: str, batches: list[tuple[ProducerBatch, np.ndarray]]):
        self.topic = topic
        per: dict[int, list[int]] = {}
        for batch, _rows in batches:
            for count, first, last in batch.result.landed(batch.record_count):
                merge_range(per, batch.partition, count, first, last)
        self.record_count = sum(v[0] for v in per.values())
        #: partition -> (records, first offset, last offset); offsets -1 when unknown (acks=0)
        self.partitions = {p: tuple(v) for p, v in sorted(per.items())}

    def __repr__(self) -> str:
        return f"BulkResult(topic={self.topic!r}, records={self.record_count}, partitions={self.partitions})"


class BulkFuture:
    """One future for a whole ``send_batch`` call, resolved batch by batch."""

    def __init__(self, topic: str, batches: list[tuple[ProducerBatch, np.ndarray]]):
        self.topic = topic
        self._batches = batches
        self.record_count = sum(b.record_count for b, _ in batches)

    def done(self) -> bool:
        return all(b.result.is_done() for b, _ in self._batches)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch, _ in self._batches:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not batch.result.wait(remaining):
                return False
        return True

    def errors(self) -> list[tuple[BaseException, int, np.ndarray]]:
        """(error, partition, original row indices) for every failed batch (or piece of one the
        broker made us split)."""
        return [(error, b.partition, rows[start:start + n]) for b, rows in self._batches if b.result.is_done()
                for error, start, n in b.result.failed_pieces(b.record_count)]

    def failed_count(self) -> int:
        return sum(len(rows) for _, _, rows in self.errors())

    def landed(self) -> BulkResult:
        """What was written so far: counts and offsets of the records that succeeded (the
        failed ones are in ``errors()``)."""
        return BulkResult(self.topic, [(b, rows) for b, rows in self._batches if b.result.is_done()])

    def get(self, timeout: float | None = None) -> BulkResult:
        """Wait for every batch; raise the first error (annotated with how many rows failed)."""
        if not self.wait(timeout):
            raise KafkaTimeoutError(
                f"{self.topic}: bulk send of {self.record_count} record(s) not acknowledged within {timeout} s")
        errors = self.errors()
        if errors:
            err, partition, rows = errors[0]
            failed = self.failed_count()
            try:
                err.add_note(f"{failed} of {self.record_count} record(s) of this bulk send failed; first failed "
                             f"batch: {self.topic}-{partition}, rows {int(rows.min())}..{int(rows.max())}")
            except AttributeError:
                pass
            raise err
        return BulkResult(self.topic, self._batches)

    def add_callback(self, fn: Callable[[BulkResult | None, BaseException | None], Any]) -> None:
        """``fn(result, error)`` once every batch completed (on the Sender thread)."""
        remaining = [len(self._batches)]

        def one_done(_):
            remaining[0] -= 1
            if remaining[0] == 0:
                errs = self.errors()
                fn(None, errs[0][0]) if errs else fn(BulkResult(self.topic, self._batches), None)

        if not self._batches:
            fn(BulkResult(self.topic, []), None)
        for batch, _ in self._batches:
            batch.result.add_callback(one_done)


def plan_and_encode(topic: str, *, values, keys, headers, partitions, timestamps, num_partitions: int,
                    available: list[int], partitioner: Partitioner, compression_type: int,
                    batch_size: int, max_request_size: int):
    """Encode the rows into ``[(partition, records, batch_bytes, original_rows)]``.

    Rows are grouped by partition with one stable sort, reordered with one ``take`` per
    column, and every partition's batches are encoded in a single vectorised pass.
    """
    n = next((len(c) for c in (values, keys) if c is not None), 0)
    values_b = binary_column(values, n, "value")
    keys_b = None if keys is None else binary_column(keys, n, "key")
    if len(values_b) != len(keys_b if keys_b is not None else values_b):
        raise InvalidRecordError(f"{len(keys_b)} keys but {len(values_b)} values")
    if headers is not None and not isinstance(headers, (pa.Array, pa.ChunkedArray)):
        headers = list(headers)
        if len(headers) != n:
            raise InvalidRecordError(f"headers has {len(headers)} rows, expected {n}")
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if isinstance(timestamps, pa.ChunkedArray):
        timestamps = timestamps.combine_chunks()
    elif timestamps is not None and not isinstance(timestamps, (int, np.integer, pa.Array)):
        try:
            timestamps = pa.array(np.asarray(timestamps, dtype=np.int64) if isinstance(timestamps, np.ndarray)
                                  else timestamps, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise InvalidRecordError(f"timestamps must be int64 milliseconds (or a timestamp column): {exc}") from exc
    if n == 0:
        return []
    parts = _resolve_partitions(topic, partitions, keys_b, record_size_upper_bounds(keys_b, values_b, headers),
                                num_partitions, available, partitioner)
    order, group_starts = group_by_partition(parts)
    if order is not None:
        indices = pa.array(order)
        keys_b, values_b = (None if keys_b is None else keys_b.take(indices)), values_b.take(indices)
        if isinstance(headers, list):
            headers = [headers[i] for i in order.tolist()]
        elif headers is not None:
            headers = headers.take(indices)
        if isinstance(timestamps, pa.Array):
            timestamps = timestamps.take(indices)
    records = ArrowRecords(keys_b, values_b, timestamps, headers, group_starts=group_starts)
    too_big = np.flatnonzero(records.sizes + BATCH_OVERHEAD > max_request_size)
    if len(too_big):
        rows = too_big if order is None else order[too_big]
        first = int(np.argmin(rows))
        row, size = int(rows[first]), int(records.sizes[too_big[first]]) + BATCH_OVERHEAD
        raise _about_row(RecordTooLargeError(
            f"Row {row} for topic {topic!r} is {size} bytes when serialized, which "
            f"is larger than {max_request_size}, the value of max.request.size ({len(too_big)} row(s) too large)"), row)
    encoded = records.encode(compression_type, batch_size)
    group_of = np.searchsorted(group_starts, [s for s, _, _ in encoded], side="right") - 1
    group_parts = parts[group_starts] if order is None else parts[order[group_starts]]
    out = []
    for (s, e, data), g in zip(encoded, group_of.tolist()):
        rows = np.arange(s, e) if order is None else order[s:e]
        out.append((int(group_parts[g]), e - s, data, rows))
    return out


def _about_row(exc: Exception, row: int, partition: int | None = None) -> Exception:
    """Mark a rejection with the first offending row (its position in the call's columns)."""
    exc.row, exc.partition = row, partition
    return exc


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


def _resolve_partitions(topic, partitions, keys_b, sizes, num_partitions, available, partitioner) -> np.ndarray:
    n = len(sizes)
    if partitions is None:
        return partitioner.partition_many(topic, keys_b, sizes, num_partitions, available)
    if isinstance(partitions, int):
        parts_arr = pa.array(np.full(n, partitions, dtype=np.int64))
    elif isinstance(partitions, (pa.Array, pa.ChunkedArray)):
        parts_arr = partitions.combine_chunks() if isinstance(partitions, pa.ChunkedArray) else partitions
    else:
        parts_arr = pa.array(list(partitions), pa.int64())
    if len(parts_arr) != n:
        raise InvalidRecordError(f"partitions has {len(parts_arr)} rows, expected {n}")
    valid = parts_arr.is_valid().to_numpy(zero_copy_only=False)
    explicit = pc.fill_null(parts_arr.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    bad = valid & ((explicit < 0) | (explicit >= num_partitions))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _about_row(InvalidPartitionError(
            f"Row {row}: partition {int(explicit[row])} of topic {topic!r} does not exist: the topic has "
            f"{num_partitions} partition(s) [0..{num_partitions - 1}] ({int(bad.sum())} row(s) out of range)"),
            row, int(explicit[row]))
    if valid.all():
        return explicit.astype(np.int32)
    chosen = partitioner.partition_many(topic, keys_b, sizes, num_partitions, available)
    return np.where(valid, explicit, chosen).astype(np.int32)
