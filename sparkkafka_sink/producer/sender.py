"""Sender: the background thread that moves batches from the accumulator to brokers.

Each loop: send the control request the idempotence (or transaction) manager
hands out next -- a producer id, a partition joining a transaction, its end --
to its coordinator or any broker (``producer.control_requests``), ask the accumulator
which leaders have sendable data, refresh metadata for partitions without a
known leader, drain one batch per partition into one Produce request per
broker, fail what outlived ``delivery.timeout.ms``, then poll the network.
Responses complete batches, re-enqueue retriable failures (in sequence order)
or fail them with the broker's error naming the topic-partition.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

from sparkkafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, Message, ProtocolError, Setting
from sparkkafka_sink.network.client import NetworkClient, now_ms
from sparkkafka_sink.network.in_flight import ClientResponse
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.producer.accumulator import RecordAccumulator
from sparkkafka_sink.producer.client_telemetry import ClientTelemetry
from sparkkafka_sink.producer.control_requests import ControlRequest, Outcome
from sparkkafka_sink.producer.idempotence import IdempotenceManager
from sparkkafka_sink.producer.metrics import ProducerMetrics
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.producer.transaction_manager import TransactionManager, TransactionState
from sparkkafka_sink.protocol.api import ApiKey, transactions_max_version
from sparkkafka_sink.protocol.error_codes import OutOfOrderSequenceNumberError, error_for_code
from sparkkafka_sink.protocol.produce import ProduceRequest
from sparkkafka_sink.protocol.schema import ProtocolMessage
from sparkkafka_sink.record.batch import BuiltBatch

log = logging.getLogger(__name__)

#: Every queue and flight is scanned for expired batches only once the oldest incomplete batch
#: is this close to delivery.timeout.ms: batches join the incomplete ones in creation order bar
#: a few ms between concurrent appends, so none can expire before it by more than that.
_EXPIRY_SCAN_SLACK_MS = 5_000


class Sender(threading.Thread):
    def __init__(self, client: NetworkClient, metadata: Metadata, accumulator: RecordAccumulator, *,
                 acks: int, retries: int, request_timeout_ms: int, delivery_timeout_ms: int,
                 max_request_size: int, retry_backoff_ms: int, guarantee_order: bool,
                 idempotence: IdempotenceManager | None, metrics: ProducerMetrics, client_id: str,
                 telemetry: ClientTelemetry | None = None):
        super().__init__(name=f"sparkkafka-sink-sender-{client_id}", daemon=True)
        self.client = client
        self.metadata = metadata
        self.accumulator = accumulator
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_request_size = max_request_size
        self.retry_backoff_ms = retry_backoff_ms
        self.guarantee_order = guarantee_order
        #: the producer id and sequences (a TransactionManager too when transactional), or None
        self.idempotence = idempotence
        self.metrics = metrics
        self._running = True
        self._force_close = False
        self._in_flight: dict[tuple[str, int], list[ProducerBatch]] = defaultdict(list)
        #: a transactional producer's manager (also its idempotence manager), else None
        self.transactions = idempotence if isinstance(idempotence, TransactionManager) else None
        #: the control request to send next (kept until sent: its coordinator may be looked up
        #: first), whether one is awaiting its answer, and when the next may go after a refusal
        self._control_next: ControlRequest | None = None
        self._control_pending = False
        self._control_retry_at = 0.0
        #: the client's metrics pushed to the brokers that ask for them (KIP-714), or None
        self.telemetry = telemetry

    # -- lifecycle ---------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self._running:
                self._run_once_safely()
            # Graceful close: deliver (or expire) everything already accepted.  Only records are
            # waited for: an unanswered Metadata/ApiVersions request to a hung broker would
            # otherwise hold close() for request.timeout.ms with nothing left to deliver.
            while not self._force_close and (self.accumulator.has_incomplete()
                                             or self.accumulator.appends_in_progress):
                self._run_once_safely()
            self._push_terminating_telemetry()
            if self._force_close:
                error = KafkaError("Producer was closed forcefully before the record was acknowledged")
                self.metrics.record_failure(self.accumulator.abort_incomplete(error), error)
        finally:
            self.client.close()

    def _run_once_safely(self) -> None:
        try:
            self.run_once()
        except Exception:  # the I/O thread must survive any bug in one iteration
            log.exception("unexpected error in the sender loop")
            self.client.poll(self.retry_backoff_ms, now_ms())

    def initiate_close(self) -> None:
        self._running = False
        self.accumulator.close()
        self.client.wakeup()

    def force_close(self) -> None:
        self._force_close = True
        self.initiate_close()

    def wakeup(self) -> None:
        self.client.wakeup()

    # -- one loop ----------------------------------------------------------------------
    def run_once(self) -> None:
        now = now_ms()
        fatal = self.client.fatal_error or (self.idempotence.fatal_error if self.idempotence is not None else None)
        if fatal is not None:  # authentication, certificate, fenced: nothing can be delivered any more
            self._fail_everything(fatal)
            self.client.poll(self.request_timeout_ms, now)
            return
        control = self.idempotence
        control_timeout = self._maybe_send_control_request(control, now) if control is not None else float("inf")
        telemetry_timeout = self._maybe_send_telemetry(now) if self.telemetry is not None else float("inf")
        self.client.poll(min(self._send_producer_data(now), control_timeout, telemetry_timeout), now)

    def _send_producer_data(self, now: float) -> float:
        cluster = self.metadata.cluster
        result = self.accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add_topic(topic, now)
            self.metadata.request_update()
        not_ready_timeout = float("inf")
        ready_nodes = set()
        for node in result.ready_nodes:
            if self.client.ready(node, now):
                ready_nodes.add(node)
            else:
                not_ready_timeout = min(not_ready_timeout, self.client.connection_delay(node, now))
        batches = self.accumulator.drain(cluster, ready_nodes, self.max_request_size, now)
        if self.guarantee_order:
            for node_batches in batches.values():
                for b in node_batches:
                    self.accumulator.mute(b.tp)
        self._expire(now)
        sent_any = False
        for node, node_batches in batches.items():
            if node_batches:
                self._send_produce_request(node, node_batches, now)
                sent_any = True
        timeout = min(result.next_ready_check_delay_ms, not_ready_timeout, self._time_to_next_expiry(now))
        if sent_any:
            timeout = 0
        return max(min(timeout, self.request_timeout_ms), 0)

    def _time_to_next_expiry(self, now: float) -> float:
        oldest = self.accumulator.oldest_incomplete_created_ms()
        if oldest is None:
            return float("inf")
        return max(oldest + self.delivery_timeout_ms - now, 0.0) + 1

    def _expire(self, now: float) -> None:
        oldest = self.accumulator.oldest_incomplete_created_ms()
        if oldest is None or now - oldest < self.delivery_timeout_ms - _EXPIRY_SCAN_SLACK_MS:
            return  # no batch is near its delivery timeout: no scan of every queue and flight
        expired = self.accumulator.expired_batches(now)
        for _tp, flights in list(self._in_flight.items()):
            for batch in list(flights):
                if batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now):
                    expired.append(batch)
                    if self.idempotence is not None:
                        # It may or may not have reached the broker: sequences are now unknown.
                        self.idempotence.request_reset()
        for batch in expired:
            elapsed = now - batch.created_ms
            template = "Expiring {} record(s) for {}-{}: {:.0f} ms has passed since batch creation ({}={})"
            parts = [batch.record_count, batch.topic, batch.partition, elapsed, Setting("delivery.timeout.ms"),
                     self.delivery_timeout_ms]
            if batch.last_error is not None:
                template, parts = template + "; last error: {}", [*parts, batch.last_error]
            self._fail_batch(batch, KafkaTimeoutError(Message(template, *parts)), now)

    # -- control requests: producer id and transactions, one at a time -------------------
    def _maybe_send_control_request(self, control: IdempotenceManager, now: float) -> float:
        """Send the next control request the idempotence (or transaction) manager hands out,
        to its coordinator -- looked up first when unknown -- or to any broker; returns how long
        the loop may sleep before this needs another look (an answer ends the sleep anyway)."""
        tm = self.transactions
        if tm is not None and tm.state is TransactionState.ABORTABLE_ERROR and self.accumulator.has_undrained():
            # as the Java client: what the transaction has not sent yet can only be aborted, so
            # fail it now rather than hold it until delivery.timeout.ms
            for batch in self.accumulator.take_undrained():
                self._fail_batch(batch, KafkaError(f"not sent: the transaction must be aborted ({tm.abortable_error})"),
                                 now)
        if self._control_pending:
            return float("inf")
        if now < self._control_retry_at:
            return self._control_retry_at - now
        control.cluster_features(self.client.finalized_features)
        if self._control_next is None:
            self._control_next = control.next_request(self._requests_in_flight)
        handler = self._control_next
        if handler is None:
            return float("inf")
        key = handler.coordinator_key
        node = None if key is None else control.coordinators.node(key)
        if key is not None and node is not None and not self.client.ready(node, now):
            if not self.client.connection_failures(node):
                return self.client.connection_delay(node, now)
            control.coordinators.forget(key)  # its broker is gone: look the coordinator up again
            node = None
        if node is None:
            if key is not None:
                handler = control.coordinators.lookup(key)
            node = self.client.least_loaded_node(now)
            if node is None:
                return self.retry_backoff_ms
            if not self.client.ready(node, now):
                return self.client.connection_delay(node, now)
        try:
            self.client.send(node, handler.build(), lambda resp: self._control_answered(handler, resp), now,
                             max_version=handler.max_version)
        except KafkaError as e:  # the broker speaks no version of it
            self._control_done(handler, handler.unsupported(e), now)
            return 0.0
        self._control_pending = True
        return float("inf")

    def _requests_in_flight(self) -> bool:
        return self.client.has_in_flight() or any(self._in_flight.values())

    def _control_answered(self, handler: ControlRequest, resp: ClientResponse) -> None:
        self._control_pending = False
        outcome = handler.handle(resp.response) if resp.response is not None else handler.no_answer(resp.error)
        self._control_done(handler, outcome, resp.received_ms)

    def _control_done(self, handler: ControlRequest, outcome: Outcome, now: float) -> None:
        control = self.idempotence
        if control is None:  # went on without idempotence before this answer came
            return
        waiting = self._control_next
        if waiting is not None and handler is not waiting and outcome is Outcome.FATAL:
            # the coordinator of the waiting request cannot be found: it fails with that error
            handler, outcome = waiting, waiting.give_up(handler.failure)
        if outcome is Outcome.FIND_COORDINATOR and handler.coordinator_key is not None:
            control.coordinators.forget(handler.coordinator_key)
        if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
            self._control_retry_at = now + self.retry_backoff_ms
        elif handler is waiting:  # done with it (or given up): the next one may go
            self._control_next = None
        if control.unavailable:
            self._continue_without_idempotence()

    def _continue_without_idempotence(self) -> None:
        self.accumulator.idempotence = None
        self.idempotence = None

    def _fail_everything(self, error: BaseException) -> None:
        self._in_flight.clear()
        self.metrics.record_failure(self.accumulator.abort_incomplete(error), error)

    # -- client metrics (KIP-714) -------------------------------------------------------
    def _maybe_send_telemetry(self, now: float) -> float:
        """Send the telemetry request that is due to the least loaded broker; returns how long
        the loop may sleep before the next is due."""
        telemetry = self.telemetry
        assert telemetry is not None
        wait = telemetry.due_in(now, self.request_timeout_ms)
        if wait > 0:
            return wait
        node = self.client.least_loaded_node(now)
        if node is None:
            return self.retry_backoff_ms
        if not self.client.ready(node, now):
            return self.client.connection_delay(node, now)
        request = telemetry.request(now)
        if request is None:
            return telemetry.due_in(now, self.request_timeout_ms)
        try:
            self.client.send(node, request, self._telemetry_answered, now)
        except KafkaError as e:  # the broker does not speak the telemetry APIs (before 3.7, ZooKeeper mode)
            log.debug("client telemetry off: %s", e)
            telemetry.unsupported()
            return float("inf")
        return telemetry.due_in(now, self.request_timeout_ms)

    def _telemetry_answered(self, resp: ClientResponse) -> None:
        assert self.telemetry is not None
        if resp.response is not None:
            self.telemetry.answered(resp.response, resp.received_ms)
        else:
            self.telemetry.failed(resp.received_ms)

    def _push_terminating_telemetry(self) -> None:
        """Closing: the last push, marked terminating, if a broker subscribed to this producer's
        metrics and a connection is open to carry it (none is opened for it) -- its answer
        waited for at most ``request.timeout.ms``."""
        telemetry = self.telemetry
        if telemetry is None or self._force_close:
            return
        telemetry.initiate_close()
        now = now_ms()
        node = self.client.least_loaded_node(now)
        if not telemetry.closing or node is None or not self.client.ready(node, now):
            return
        deadline = now + self.request_timeout_ms
        while telemetry.closing and not self._force_close and now < deadline:
            self.client.poll(min(self._maybe_send_telemetry(now), deadline - now), now)
            now = now_ms()

    # -- produce -----------------------------------------------------------------------
    def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, list[tuple[int, BuiltBatch]]] = defaultdict(list)
        by_tp: dict[tuple[str, int], ProducerBatch] = {}
        for b in batches:
            by_topic[b.topic].append((b.partition, b.wire))
            by_tp[b.tp] = b
            self._in_flight[b.tp].append(b)
        tm = self.transactions
        request = ProduceRequest(tm.transactional_id if tm is not None else None, self.acks,
                                 self.request_timeout_ms, list(by_topic.items()))
        try:
            self.client.send(node, request, lambda resp: self._handle_produce_response(resp, by_tp), now,
                             expect_response=self.acks != 0,
                             # Produce v12 means transactions v2: only a v2 transaction uses it
                             max_version=transactions_max_version(ApiKey.PRODUCE, tm is not None and tm.transaction_v2))
        except KafkaError as e:
            for b in batches:
                self._complete_batch(b, e, -1, -1, now)

    def _handle_produce_response(self, resp: ClientResponse, by_tp: dict) -> None:
        now = resp.received_ms
        if resp.disconnected or (resp.response is None and resp.error is not None):
            error = resp.error or KafkaConnectionError("disconnected")
            if not error.retriable:  # the connection died for whatever reason: the batches may be resent
                error = KafkaConnectionError(f"Connection closed: {error}")
            for batch in by_tp.values():
                self._complete_batch(batch, error, -1, -1, now)
            return
        self.metrics.record_request(resp.latency_ms)
        if resp.response is None:  # acks=0: nothing to wait for
            for batch in by_tp.values():
                self._complete_batch(batch, None, -1, -1, now)
            return
        for topic in resp.response.responses:
            for p in topic.partition_responses:
                batch = by_tp.pop((topic.name, p.index), None)
                if batch is None:
                    continue
                refusal = error_for_code(p.error_code, _describe(batch, p))
                if refusal is None or refusal.already_written:  # a resend of a batch already stored
                    offset = p.base_offset if refusal is None else -1
                    self._complete_batch(batch, None, offset, p.log_append_time_ms, now)
                else:
                    self._complete_batch(batch, refusal, -1, -1, now)
        for batch in by_tp.values():
            self._complete_batch(batch, ProtocolError(
                f"Produce response from node {resp.request.node_id} has no answer for "
                f"{batch.topic}-{batch.partition}"), -1, -1, now)

    def _complete_batch(self, batch: ProducerBatch, error: BaseException | None, base_offset: int,
                        log_append_time: int, now: float) -> None:
        flights = self._in_flight.get(batch.tp)
        if flights and batch in flights:
            flights.remove(batch)
        if self.guarantee_order:
            self.accumulator.unmute(batch.tp)
        if error is None:
            if self.idempotence is not None:
                self.idempotence.complete(batch, acknowledged_ms=now)
            if batch.done(base_offset, log_append_time, None):
                self.metrics.record_batch_sent(batch.topic, batch.record_count, len(batch.wire))
            self.accumulator.deallocate(batch)
            return
        if batch.result.is_done():  # expired while in flight: already failed
            if self.idempotence is not None:
                self.idempotence.complete(batch)
            self.accumulator.deallocate(batch)
            return
        batch.last_error = error
        if getattr(error, "splits_batch", False) and batch.record_count > 1:
            self._split(batch, error)
            return
        if self.transactions is not None and getattr(error, "producer_fenced", False):
            # a newer producer took the transactional id over: no retry can succeed
            self._fail_batch(batch, self.transactions.fenced_by(error), now)
            return
        retriable = getattr(error, "retriable", False) and not getattr(error, "resend_cannot_help", False)
        idem = self.idempotence
        if idem is not None and getattr(error, "producer_state_lost", False):
            # Retriable: an OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier failed batch clears when
            # that one is resent first; the oldest outstanding batch refused means the broker lost
            # our state (and UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_EPOCH always do): new producer id.
            retriable = True
            if not isinstance(error, OutOfOrderSequenceNumberError) or idem.is_first_in_flight(batch):
                idem.request_reset()
        if retriable and self._can_retry(batch, now):
            log.debug("retrying %s after %s", batch, error)
            self.metrics.record_retry(batch.topic, batch.record_count, error)
            if getattr(error, "invalid_metadata", False) or isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
                self.metadata.request_update()
            self.accumulator.reenqueue(batch, now)
            return
        renumber = batch.base_sequence >= 0
        self._fail_batch(batch, error, now)  # first: a transaction then names this error as its cause
        if idem is not None and renumber:
            # Later batches were numbered after this one, which never landed: renumber them.
            idem.request_reset()

    def _split(self, batch: ProducerBatch, error: BaseException) -> None:
        """As the Java client for a batch too large: a batch of several records the broker
        refused is sent again as two halves (recursively, down to single records); sequences
        are kept, so order and idempotence hold.  Only the single records at fault fail (the
        Java client fails a whole batch refused as INVALID_RECORD; splitting keeps its others)."""
        pieces = batch.split(self.accumulator.compression_level)
        log.info("%s-%d: %d records refused (%s): split into %s", batch.topic, batch.partition,
                 batch.record_count, error, [p.record_count for p in pieces])
        if self.idempotence is not None:
            self.idempotence.split(batch, pieces)
        self.accumulator.split_and_reenqueue(batch, pieces)
        self.metrics.batch_splits += 1

    def _can_retry(self, batch: ProducerBatch, now: float) -> bool:
        return (batch.attempts < self.retries and not self._force_close
                and not batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now))

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, now: float) -> None:
        if self.transactions is not None:
            self.transactions.batch_failed(error)
        flights = self._in_flight.get(batch.tp)
        if flights and batch in flights:
            flights.remove(batch)
        if self.idempotence is not None:
            self.idempotence.complete(batch)
        if self.guarantee_order:
            self.accumulator.unmute(batch.tp)
        if batch.done(-1, -1, error):
            self.metrics.record_failure(batch.record_count, error, batch.topic)
        self.accumulator.deallocate(batch)


def _describe(batch: ProducerBatch, p: ProtocolMessage) -> str:
    """The topic-partition and whatever the broker said about the refused batch."""
    detail = f"{batch.topic}-{batch.partition}"
    if p.error_message:
        detail += f": {p.error_message}"
    if p.record_errors:
        detail += "; record errors: " + ", ".join(
            f"#{e.batch_index} {e.batch_index_error_message or ''}".strip() for e in p.record_errors[:5])
    return detail
