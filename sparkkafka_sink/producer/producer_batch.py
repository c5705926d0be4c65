"""ProducerBatch: the records bound for one partition, and their shared fate.

The batch owns a ``RecordBatchBuilder`` while it is open, the built wire bytes
once the Sender drains it, and the :class:`ProduceRequestResult` its records'
futures wait on.  Retries resend the same bytes, so the broker can recognise
an idempotent duplicate by its sequence number.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkkafka_sink.producer.future import FutureRecordMetadata, ProduceRequestResult
from sparkkafka_sink.record.batch import (
    BuiltBatch,
    EncodedRecordsBuilder,
    RecordBatchBuilder,
    set_producer_state,
    split_batch,
)


class ProducerBatch:
    __slots__ = (
        "topic", "partition", "tp", "builder", "write_limit", "created_ms", "last_attempt_ms", "drained_ms",
        "attempts", "record_count", "result", "reserved", "built", "producer_id", "producer_epoch",
        "base_sequence", "_full", "last_error", "claimed", "stamped",
    )

    def __init__(self, topic: str, partition: int, builder: RecordBatchBuilder | EncodedRecordsBuilder | None,
                 write_limit: int,
                 created_ms: float, reserved: int):
        self.topic = topic
        self.partition = partition
        self.tp = (topic, partition)
        self.builder = builder
        self.write_limit = write_limit
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms = created_ms
        self.attempts = 0
        self.record_count = 0
        self.result = ProduceRequestResult(topic, partition)
        self.reserved = reserved
        self.built: BuiltBatch | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self._full = False
        self.last_error: BaseException | None = None
        #: a send_batch call is extending this open batch: the Sender leaves it alone meanwhile
        self.claimed = False
        #: ``built`` carries its producer state and CRC (a bulk batch gets them at ``close``)
        self.stamped = True

    @classmethod
    def prebuilt(cls, topic: str, partition: int, data: BuiltBatch, record_count: int,
                 created_ms: float, reserved: int, stamped: bool = True) -> ProducerBatch:
        """A batch encoded elsewhere (the Arrow bulk path): sealed, ready to drain;
        ``stamped=False``: its producer state and CRC are still to be written (``close``)."""
        batch = cls(topic, partition, None, len(data), created_ms, reserved)
        batch.built = data
        batch.record_count = record_count
        batch._full = True
        batch.stamped = stamped
        return batch

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]] | None) -> FutureRecordMetadata | None:
        """Append a record, or None when the batch is sealed or would grow past its limit."""
        builder = self.builder
        if builder is None or self._full:
            return None
        if not builder.try_append(timestamp, key, value, headers):
            self._full = True
            return None
        relative = self.record_count
        self.record_count = relative + 1
        if builder.estimated_size >= self.write_limit:
            self._full = True
        return FutureRecordMetadata(self.result, relative, timestamp,
                                    len(key) if key is not None else -1,
                                    len(value) if value is not None else -1)

    def append_records(self, records: memoryview | bytes, count: int, max_timestamp: int, reserved: int) -> int:
        """Add ``count`` encoded records (the bulk path's open batch, an
        ``EncodedRecordsBuilder``) holding ``reserved`` more bytes; returns the first's index."""
        first = self.encoded_builder.append(records, count, max_timestamp)
        self.record_count += count
        self.reserved += reserved
        return first

    @property
    def encoded_builder(self) -> EncodedRecordsBuilder:
        """The builder of an open bulk batch (the only kind ``send_batch`` extends)."""
        builder = self.builder
        if not isinstance(builder, EncodedRecordsBuilder):
            raise TypeError(f"the batch of {self.tp} is not an open bulk batch")
        return builder

    @property
    def is_full(self) -> bool:
        return self._full

    @property
    def estimated_size(self) -> int:
        if self.built is not None:
            return len(self.built)
        if self.builder is None:  # released (completed)
            return 0
        return self.builder.estimated_size

    @property
    def wire(self) -> BuiltBatch:
        """The built batch the Sender sends (``close`` builds it)."""
        if self.built is None:
            raise RuntimeError(f"the batch of {self.tp} is not closed yet")
        return self.built

    def seal(self) -> None:
        """Stop further appends (the batch is about to be drained)."""
        self._full = True

    def close(self, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
              is_transactional: bool = False) -> BuiltBatch:
        """Build (or re-stamp) the wire bytes with the producer state for this attempt."""
        if self.built is None:
            assert self.builder is not None  # only a prebuilt batch comes without one, built
            self.built = self.builder.build(producer_id, producer_epoch, base_sequence, is_transactional)
            self.builder = None
        elif is_transactional:
            self.built = set_producer_state(self.built, producer_id, producer_epoch, base_sequence, True)
        elif not self.stamped or (producer_id, producer_epoch, base_sequence) != (
                self.producer_id, self.producer_epoch, self.base_sequence):
            self.built = set_producer_state(self.built, producer_id, producer_epoch, base_sequence)
        self.stamped = True
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self._full = True
        return self.built

    def split(self, compression_level: int | None = None) -> list[ProducerBatch]:
        """This built batch as two of its records each (in order), for a broker that refused it
        as too large, compressed again at ``compression_level`` (the codec's; None: its default).  They keep its place: its sequence range and producer state, creation
        time and attempts; its memory goes with the first.  Its result completes when theirs
        have, each record's future answering from its own piece."""
        pieces, start = [], 0
        for data, count in split_batch(self.wire, 2, compression_level):
            child = ProducerBatch.prebuilt(self.topic, self.partition, data, count, self.created_ms, 0)
            child.attempts = self.attempts
            child.last_attempt_ms = self.last_attempt_ms
            child.drained_ms = self.drained_ms
            if self.base_sequence >= 0:
                seq = (self.base_sequence + start) & 0x7FFFFFFF
                child.built = set_producer_state(data, self.producer_id, self.producer_epoch, seq)
                child.producer_id, child.producer_epoch, child.base_sequence = \
                    self.producer_id, self.producer_epoch, seq
            pieces.append((start, count, child))
            start += count
        pieces[0][2].reserved = self.reserved
        self.result.split([(s, n, child.result) for s, n, child in pieces])
        return [child for _, _, child in pieces]

    def release(self) -> None:
        """Drop the batch's bytes once it completed and its memory went back to the pool: a
        caller that keeps its futures (a list of ``send_batch`` futures, say) keeps their
        records' metadata, as Java's futures do, not the megabytes they were sent as -- held, they
        made every later call's buffers fresh memory the kernel had to fault in."""
        self.built = None
        self.builder = None

    def reenqueued(self, now_ms: float) -> None:
        self.attempts += 1
        self.last_attempt_ms = now_ms

    def done(self, base_offset: int, log_append_time: int, error: BaseException | None) -> bool:
        """Complete every record of the batch; False if it had completed already."""
        if self.result.is_done():
            return False
        self.result.done(base_offset, log_append_time, error)
        return True

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: float) -> bool:
        return now_ms - self.created_ms >= delivery_timeout_ms

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, "
                f"attempts={self.attempts}, seq={self.base_sequence})")
