"""Idempotent producer state: producer id, epoch and per-partition sequences.

The broker keeps the last five batches' sequence numbers per producer and
partition, so a resend of a batch it already wrote is recognised instead of
written twice.  That only works if a retried batch is resent with its
original sequence and ahead of every later batch, which ``may_drain`` enforces.
When sequences can no longer be trusted (a batch failed or expired after it
may have reached the broker) the producer id is reset and queued batches are
renumbered from zero under the new id/epoch.

A batch is pipelined behind another of its partition only if the broker surely holds our state
when that other one arrives: it was sent at most ``STATE_FRESH_MS`` after an acknowledgement on
the partition.  Otherwise it travels alone until acknowledged.  A broker holding no state for
our producer id accepts any sequence as the first, so if batch N bounced (say
NOT_LEADER_OR_FOLLOWER on a topic whose leader is still starting) while N+1 landed, N could
never be written in order after it.  That happens on a partition we never wrote to (seen on
Apache Kafka 4.4 right after CreateTopics) and after ``producer.id.expiration.ms`` of silence;
the rule costs one round trip at the start of such a burst and nothing while batches stream.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sparkkafka_sink.errors import KafkaError, Message, Setting
from sparkkafka_sink.producer.control_requests import ControlRequest, Coordinators, InitProducerId, Outcome
from sparkkafka_sink.producer.producer_batch import ProducerBatch

log = logging.getLogger(__name__)

#: an acknowledgement this recent proves the broker holds our producer state (brokers forget it
#: only after producer.id.expiration.ms of silence: a day by default, never this short in practice)
STATE_FRESH_MS = 1000.0


class IdempotenceManager:
    """Producer id, epoch and sequences of an idempotent producer, and the control requests
    that obtain them (``next_request``, run by the Sender)."""

    #: batches are stamped as part of a transaction (``TransactionManager``)
    is_transactional = False
    #: no transactional id: InitProducerId goes to any broker
    transactional_id: str | None = None

    def __init__(self, transaction_timeout_ms: int, required: bool = False):
        self.producer_id = -1
        self.producer_epoch = -1
        self.transaction_timeout_ms = transaction_timeout_ms
        #: enable.idempotence was set explicitly: without a producer id nothing may be sent
        self.required = required
        #: nothing can be sent any more (no producer id though required; fenced; ...)
        self.fatal_error: BaseException | None = None
        #: the brokers give no producer id and idempotence was only the default: the Sender
        #: goes on without it
        self.unavailable = False
        #: who coordinates each transactional id (the one lookup; unused without one)
        self.coordinators = Coordinators()
        self._next_sequence: dict[tuple[str, int], int] = {}
        self._in_flight: dict[tuple[str, int], list[ProducerBatch]] = {}
        #: when a batch of the partition was last acknowledged under the current producer id
        self._acknowledged_ms: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()
        self.needs_reset = False

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.needs_reset

    # -- control requests (Sender thread) ----------------------------------------------------
    def cluster_features(self, finalized: dict[str, int]) -> None:
        """The brokers' finalized features (transactions read them)."""

    def next_request(self, requests_in_flight: Callable[[], bool]) -> ControlRequest | None:
        """InitProducerId while no producer id is held -- after a reset only once every request
        carrying the old sequences is resolved (``requests_in_flight()``)."""
        if self.has_producer_id() or self.fatal_error is not None or self.unavailable:
            return None
        if self.needs_reset and requests_in_flight():
            return None
        return InitProducerId(None, self.transaction_timeout_ms, on_outcome=self._producer_id_answered)

    def _producer_id_answered(self, handler: InitProducerId, outcome: Outcome) -> None:
        if outcome is Outcome.DONE:
            log.debug("producer id %s epoch %s", *handler.result)
            self.set_producer_id(*handler.result)
        elif outcome is Outcome.FATAL:
            if self.required:
                self.fatal_error = KafkaError(Message("{}=true but the broker cannot give a producer id: {}",
                                                      Setting("enable.idempotence"), handler.error))
            else:
                log.warning("broker cannot give a producer id (%s); continuing without idempotence", handler.error)
                self.unavailable = True

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        with self._lock:
            if producer_id != self.producer_id or epoch != self.producer_epoch:
                self._next_sequence.clear()
                self._in_flight.clear()
                self._acknowledged_ms.clear()
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
        flights = self._in_flight.get(batch.tp)
        if not flights:
            return True
        # pipeline only behind a batch that reached a broker which surely knew our sequence
        acked = self._acknowledged_ms.get(batch.tp)
        return acked is not None and flights[0].drained_ms - acked <= STATE_FRESH_MS

    def assign_and_close(self, batch: ProducerBatch) -> None:
        with self._lock:
            if not (batch.base_sequence >= 0 and batch.producer_id == self.producer_id
                    and batch.producer_epoch == self.producer_epoch):
                seq = self._next_sequence.get(batch.tp, 0)
                self._next_sequence[batch.tp] = (seq + batch.record_count) & 0x7FFFFFFF
                batch.close(self.producer_id, self.producer_epoch, seq, self.is_transactional)
                flights = self._in_flight.setdefault(batch.tp, [])
                flights.append(batch)
            else:
                batch.close(batch.producer_id, batch.producer_epoch, batch.base_sequence, self.is_transactional)

    def first_in_flight_sequence(self, tp: tuple[str, int]) -> int:
        with self._lock:
            flights = self._in_flight.get(tp)
            return flights[0].base_sequence if flights else -1

    def is_first_in_flight(self, batch: ProducerBatch) -> bool:
        with self._lock:
            flights = self._in_flight.get(batch.tp)
            if not flights:
                return False
            return flights[0] is batch

    def split(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        """``batch`` was split into ``pieces`` that keep its sequence range: they take its place."""
        with self._lock:
            flights = self._in_flight.get(batch.tp)
            if flights and batch in flights:
                at = flights.index(batch)
                flights[at:at + 1] = pieces

    def complete(self, batch: ProducerBatch, acknowledged_ms: float | None = None) -> None:
        """The batch is finished (acknowledged at ``acknowledged_ms``, or failed for good):
        stop tracking it."""
        with self._lock:
            if acknowledged_ms is not None and batch.producer_id == self.producer_id \
                    and batch.producer_epoch == self.producer_epoch:
                self._acknowledged_ms[batch.tp] = acknowledged_ms
            flights = self._in_flight.get(batch.tp)
            if flights and batch in flights:
                flights.remove(batch)

    def has_in_flight(self) -> bool:
        with self._lock:
            return any(self._in_flight.values())
