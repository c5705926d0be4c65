"""Rate limits of a write task: ``maxRecordsPerSecond`` and ``maxBytesPerSecond``.

A backfill must not flood a shared cluster.  Each write task paces what it hands the producer:
every Arrow batch is cut into slices of about a tenth of a second's allowance and each slice
waits for its turn (virtual scheduling: slice k may go once the slices before it have "cost"
their records or bytes at the limit).  The rate is smooth -- no burst above one slice, far
below one Arrow batch -- and a task slower than the limit never saves up credit for a burst.
Bytes are what the records carry: key, value and header bytes, before compression.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.plan import ColumnLayout

#: a slice holds this many seconds of the allowance
SLICE_SECONDS = 0.1


class RateLimiter:
    """Paces slices of Arrow tables to at most ``records_per_s`` and ``bytes_per_s``."""

    def __init__(self, records_per_s: float | None, bytes_per_s: float | None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        if not records_per_s and not bytes_per_s:
            raise ValueError("RateLimiter needs a records or a bytes limit")
        self.records_per_s = records_per_s or None
        self.bytes_per_s = bytes_per_s or None
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None  # when the next slice may go
        #: seconds this task waited for its turn (a metric)
        self.throttled_s = 0.0

    def paced(self, batch: pa.Table, payload_bytes: Callable[[pa.Table], int]) -> Iterator[pa.Table]:
        """Slices of ``batch`` (zero-copy, in order), each yielded when its turn came."""
        rows = batch.num_rows
        if rows == 0:
            return
        nbytes = payload_bytes(batch)
        per_slice = rows
        if self.records_per_s:
            per_slice = min(per_slice, self.records_per_s * SLICE_SECONDS)
        if self.bytes_per_s and nbytes:
            per_slice = min(per_slice, self.bytes_per_s * SLICE_SECONDS * rows / nbytes)
        per_slice = max(1, int(per_slice))
        for start in range(0, rows, per_slice):
            piece = batch.slice(start, per_slice) if per_slice < rows else batch
            piece_bytes = nbytes if piece is batch else nbytes * piece.num_rows // rows
            self.acquire(piece.num_rows, piece_bytes)
            yield piece

    def acquire(self, records: int, nbytes: int) -> None:
        """Wait until ``records`` records of ``nbytes`` bytes may go."""
        now = self._clock()
        if self._next is not None and self._next > now:
            self._sleep(self._next - now)
            self.throttled_s += self._next - now
            now = self._next
        cost = 0.0
        if self.records_per_s:
            cost = records / self.records_per_s
        if self.bytes_per_s:
            cost = max(cost, nbytes / self.bytes_per_s)
        # from now, not from an old turn: a slow task never saves credit for a burst
        self._next = now + cost


def rate_limiter(options: SinkOptions) -> RateLimiter | None:
    """The task's limiter under ``maxRecordsPerSecond`` / ``maxBytesPerSecond``, or None."""
    if not options.max_records_per_second and not options.max_bytes_per_second:
        return None
    return RateLimiter(options.max_records_per_second, options.max_bytes_per_second)


def payload_bytes(layout: ColumnLayout) -> Callable[[pa.Table], int]:
    """``table -> bytes`` of key, value and headers (the columns of ``layout``) in a batch.  A key
    or value serialized by the sink (Avro, JSON, Protobuf) counts its data before serialization: strings
    and binaries by their length, other values by their Arrow width."""

    def lengths(col: pa.Array) -> int:
        t = col.type
        if pa.types.is_struct(t):
            return sum(lengths(col.field(i)) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return lengths(col.keys) + lengths(col.items)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return lengths(pc.list_flatten(col))
        if pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            return int(pc.sum(pc.binary_length(col)).as_py() or 0)
        return len(col) * (t.bit_width // 8 if hasattr(t, "bit_width") and t.bit_width >= 8 else 1)

    def count(table: pa.Table) -> int:
        names = [n for n in (layout.key, layout.value, layout.headers) if n]
        return sum(lengths(piece) for n in names for piece in table.column(n).chunks)

    return count
