"""Ending transactions from another process: the Spark driver commits what tasks prepared.

A ``PreparedTransaction`` names a transactional id, its producer id and epoch.  EndTxn under
that id and epoch commits or aborts the transaction without fencing it -- the coordinator does
not care which connection asks -- and asking again after a lost answer is safe (a transaction
already committed answers NONE to the same commit).  A transaction begun under transactions v2
is ended with EndTxn v5 (the coordinator bumps its epoch), one of v1 with v4 at most.  ``abort_lingering`` finds the open
transactions whose ids start with a prefix (ListTransactions on every broker) and aborts them by
fencing (InitProducerId under their id makes the coordinator abort what is open), so a failed
job leaves nothing that blocks read_committed consumers until ``transaction.timeout.ms``.

These are short blocking calls over a ``NetworkClient`` of their own, bounded by a timeout.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable, Mapping

from sparkkafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from sparkkafka_sink.network.client import NetworkClient, now_ms
from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.network.sasl import sasl_settings
from sparkkafka_sink.network.ssl_context import build_ssl_context
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.transactions import COORDINATOR_TRANSACTION, PreparedTransaction
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.errors import error_for_code

log = logging.getLogger(__name__)

#: states of a transaction that still needs an end (Kafka's TransactionState names)
OPEN_STATES = ("Ongoing",)
_RETRY_NAMES = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                "CONCURRENT_TRANSACTIONS", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION")


class TransactionAdmin:
    """Blocking coordinator calls with the producer's configuration (security included)."""

    def __init__(self, config: Mapping[str, Any]):
        c = ProducerConfig({k: v for k, v in dict(config).items() if k != "transactional.id"})
        self.config = c
        self.retry_backoff_s = c["retry.backoff.ms"] / 1000
        self._sasl = sasl_settings(c)
        if self._sasl is not None:
            self._sasl.prepare()
        self.metadata = Metadata(c["bootstrap.servers"], max_age_ms=c["metadata.max.age.ms"],
                                 refresh_backoff_ms=c["retry.backoff.ms"], max_idle_ms=c["metadata.max.idle.ms"])
        self.client = NetworkClient(
            self.metadata, client_id=f"{c['client.id']}-txn-admin", request_timeout_ms=c["request.timeout.ms"],
            max_in_flight=5, reconnect_backoff_ms=c["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=c["reconnect.backoff.max.ms"],
            connection_setup_timeout_ms=c["socket.connection.setup.timeout.ms"],
            connection_setup_timeout_max_ms=c["socket.connection.setup.timeout.max.ms"],
            allow_auto_topic_creation=False, ssl_context=build_ssl_context(c), sasl=self._sasl)

    def close(self) -> None:
        self.client.close()
        if self._sasl is not None:
            self._sasl.close()

    def __enter__(self) -> "TransactionAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------
    def call(self, node: int | None, request: Any, deadline: float, max_version: int | None = None) -> Any:
        """Send ``request`` to ``node`` (None: any broker) and wait for its answer.

        A named node (a coordinator) that cannot be reached, or whose connection drops before
        the answer, raises ``KafkaConnectionError``: the caller asks who coordinates now."""
        answer: list = []
        sent = False
        while True:
            now = now_ms()
            if self.client.fatal_error is not None:
                raise type(self.client.fatal_error)(str(self.client.fatal_error))
            if time.monotonic() > deadline:
                last = self.metadata.last_error
                raise KafkaTimeoutError(f"{type(request).__name__} got no answer in time"
                                        + (f"; last error: {last}" if last else ""))
            if not sent:
                target = node if node is not None else self.client.least_loaded_node(now)
                if target is not None and self.client.ready(target, now):
                    self.client.send(target, request, answer.append, now, max_version=max_version)
                    sent = True
                elif node is not None and self.client.connection_failures(node):
                    raise KafkaConnectionError(f"{type(request).__name__}: node {node} cannot be reached")
            self.client.poll(50, now)
            if answer:
                resp = answer[0]
                if resp.response is None:
                    if node is not None:
                        raise KafkaConnectionError(f"{type(request).__name__}: connection to node {node} lost "
                                                   f"before the answer ({resp.error})")
                    answer.clear()
                    sent = False  # the connection went: ask again
                    time.sleep(self.retry_backoff_s)
                    continue
                return resp.response

    def brokers(self, deadline: float, fresh: bool = False) -> list[int]:
        """The brokers in the metadata (``fresh``: from an answer newer than this call)."""
        version = self.metadata.request_update()
        while self.metadata.cluster.is_bootstrap or (fresh and self.metadata.version <= version):
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no metadata from {self.config['bootstrap.servers']}: "
                                        f"{self.metadata.last_error}")
            self.client.poll(50, now_ms())
        return sorted(self.metadata.cluster.brokers)

    def coordinator(self, transactional_id: str, deadline: float) -> int:
        request = messages.FindCoordinatorRequest(key=transactional_id, key_type=COORDINATOR_TRANSACTION,
                                                  coordinator_keys=[transactional_id])
        while True:
            self.brokers(deadline)
            body = self.call(None, request, deadline)
            answer = body.coordinators[0] if getattr(body, "coordinators", None) else body
            if not answer.error_code:
                return answer.node_id
            self._backoff_or_raise(error_for_code(answer.error_code, f"FindCoordinator {transactional_id!r}"),
                                   deadline)

    def _backoff_or_raise(self, error: BaseException, deadline: float) -> None:
        if getattr(error, "name", "") not in _RETRY_NAMES and not getattr(error, "retriable", False):
            raise error
        if time.monotonic() + self.retry_backoff_s > deadline:
            raise KafkaTimeoutError(f"gave up retrying: {error}")
        time.sleep(self.retry_backoff_s)

    # -- transactions ----------------------------------------------------------------------------
    def end(self, prepared: PreparedTransaction, commit: bool, deadline: float) -> None:
        request = messages.EndTxnRequest(transactional_id=prepared.transactional_id,
                                         producer_id=prepared.producer_id,
                                         producer_epoch=prepared.producer_epoch, committed=commit)
        while True:
            node = self.coordinator(prepared.transactional_id, deadline)
            try:
                body = self.call(node, request, deadline, prepared.max_version(request.API_KEY))
            except KafkaConnectionError as e:  # the coordinator went: ask again who it is
                self._backoff_or_raise(e, deadline)
                continue
            error = error_for_code(body.error_code, f"EndTxn({'commit' if commit else 'abort'}) of "
                                                    f"{prepared.transactional_id!r}")
            if error is None:
                return
            self._backoff_or_raise(error, deadline)

    def fence(self, transactional_id: str, deadline: float, timeout_ms: int = 60000) -> None:
        """InitProducerId under ``transactional_id``: the coordinator aborts its open transaction."""
        request = messages.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                                                 producer_id=-1, producer_epoch=-1)
        while True:
            node = self.coordinator(transactional_id, deadline)
            try:
                body = self.call(node, request, deadline)
            except KafkaConnectionError as e:
                self._backoff_or_raise(e, deadline)
                continue
            error = error_for_code(body.error_code, f"InitProducerId {transactional_id!r}")
            if error is None:
                return
            self._backoff_or_raise(error, deadline)

    def open_transactions(self, prefix: str, deadline: float) -> list[tuple[str, int, str]]:
        """``(transactional id, producer id, state)`` of every open transaction under ``prefix``.

        Each broker lists the transactions it coordinates; when one is down or still loading,
        all are asked again once fresh metadata names the brokers that took over."""
        request = messages.ListTransactionsRequest(state_filters=list(OPEN_STATES), producer_id_filters=[],
                                                   duration_filter=-1)
        fresh = False
        while True:
            found = []
            try:
                for node in self.brokers(deadline, fresh):
                    body = self.call(node, request, deadline)
                    error = error_for_code(body.error_code, f"ListTransactions on node {node}")
                    if error is not None:
                        raise error
                    found += [(t.transactional_id, t.producer_id, t.transaction_state)
                              for t in body.transaction_states if t.transactional_id.startswith(prefix)]
                return found
            except KafkaError as e:
                self._backoff_or_raise(e, deadline)
                fresh = True

    def abort_lingering(self, prefix: str, deadline: float, exclude: Iterable[str] = ()) -> list[str]:
        """Abort every open transaction whose id starts with ``prefix`` (except ``exclude``);
        returns the ids aborted."""
        if not prefix:
            raise KafkaError("abort_lingering needs a non-empty transactional id prefix")
        skip = set(exclude)
        aborted = []
        for txn_id, _, state in self.open_transactions(prefix, deadline):
            if txn_id in skip:
                continue
            log.info("aborting lingering transaction %r (%s)", txn_id, state)
            self.fence(txn_id, deadline)
            aborted.append(txn_id)
        return aborted


def complete_transaction(prepared: PreparedTransaction, commit: bool, config: Mapping[str, Any],
                         timeout: float = 60.0) -> None:
    """Commit (or abort) a transaction another process ``prepare()``d, under its producer id and
    epoch; retriable answers are retried within ``timeout`` seconds."""
    with TransactionAdmin(config) as admin:
        admin.end(prepared, commit, time.monotonic() + timeout)


def abort_lingering(prefix: str, config: Mapping[str, Any], *, exclude: Iterable[str] = (),
                    timeout: float = 60.0) -> list[str]:
    """Abort every open transaction whose id starts with ``prefix`` (except ``exclude``);
    returns the ids aborted."""
    if not prefix:
        raise KafkaError("abort_lingering needs a non-empty transactional id prefix")
    with TransactionAdmin(config) as admin:
        return admin.abort_lingering(prefix, time.monotonic() + timeout, exclude)
