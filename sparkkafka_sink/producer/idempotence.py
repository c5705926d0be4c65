"""Idempotent producer state: producer id, epoch and per-partition sequences.

The broker keeps the last five batches' sequence numbers per producer and
partition, so a resend of a batch it already wrote is recognised instead of
written twice.  That only works if a retried batch is resent with its
original sequence and ahead of every later batch, which ``may_drain`` enforces.
When sequences can no longer be trusted (a batch failed or expired after it
may have reached the broker) the producer id is reset and queued batches are
renumbered from zero under the new id/epoch.

A partition's first batch under a producer id travels alone.  A broker with no state for the
producer accepts any first sequence, so if batch 0 bounced (say NOT_LEADER_OR_FOLLOWER on a
topic whose leader is still starting) while batch 1 landed, the resent batch 0 could never be
written in order (seen on Apache Kafka 4.4 right after CreateTopics).
"""

from __future__ import annotations

import threading

from sparkkafka_sink.producer.batch import ProducerBatch


class IdempotenceManager:
    def __init__(self):
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_sequence: dict[tuple[str, int], int] = {}
        self._in_flight: dict[tuple[str, int], list[ProducerBatch]] = {}
        #: partitions with at least one batch acknowledged under the current producer id
        self._acknowledged: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.needs_reset = False

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.needs_reset

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        with self._lock:
            if producer_id != self.producer_id or epoch != self.producer_epoch:
                self._next_sequence.clear()
                self._in_flight.clear()
                self._acknowledged.clear()
            self.producer_id = producer_id
            self.producer_epoch = epoch
            self.needs_reset = False

    def request_reset(self) -> None:
        """Sequences are unreliable: get a new id/epoch before sending more."""
        self.needs_reset = True

    def may_drain(self, batch: ProducerBatch) -> bool:
        if not self.has_producer_id():
            return False
        if batch.base_sequence >= 0 and batch.producer_id == self.producer_id \
                and batch.producer_epoch == self.producer_epoch:
            # A retry goes out only when it is the oldest unacknowledged batch of its partition.
            return self.first_in_flight_sequence(batch.tp) == batch.base_sequence
        # the broker learns our sequence from the first batch: nothing else until it is stored
        return batch.tp in self._acknowledged or not self._in_flight.get(batch.tp)

    def assign_and_close(self, batch: ProducerBatch) -> None:
        with self._lock:
            if not (batch.base_sequence >= 0 and batch.producer_id == self.producer_id
                    and batch.producer_epoch == self.producer_epoch):
                seq = self._next_sequence.get(batch.tp, 0)
                self._next_sequence[batch.tp] = (seq + batch.record_count) & 0x7FFFFFFF
                batch.close(self.producer_id, self.producer_epoch, seq)
                flights = self._in_flight.setdefault(batch.tp, [])
                flights.append(batch)
            else:
                batch.close(batch.producer_id, batch.producer_epoch, batch.base_sequence)

    def first_in_flight_sequence(self, tp) -> int:
        with self._lock:
            flights = self._in_flight.get(tp)
            return flights[0].base_sequence if flights else -1

    def is_first_in_flight(self, batch: ProducerBatch) -> bool:
        with self._lock:
            flights = self._in_flight.get(batch.tp)
            return bool(flights) and flights[0] is batch

    def complete(self, batch: ProducerBatch, acknowledged: bool = False) -> None:
        """The batch is finished (acknowledged or failed for good): stop tracking it."""
        with self._lock:
            if acknowledged and batch.producer_id == self.producer_id \
                    and batch.producer_epoch == self.producer_epoch:
                self._acknowledged.add(batch.tp)
            flights = self._in_flight.get(batch.tp)
            if flights and batch in flights:
                flights.remove(batch)

    def has_in_flight(self) -> bool:
        with self._lock:
            return any(self._in_flight.values())
