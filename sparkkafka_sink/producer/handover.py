"""Ending transactions from another process: the Spark driver commits what tasks prepared.

A ``PreparedTransaction`` names a transactional id, its producer id and epoch.  EndTxn under
that id and epoch commits or aborts the transaction without fencing it -- the coordinator does
not care which connection asks -- and asking again after a lost answer is safe (a transaction
already committed answers NONE to the same commit).  A transaction begun under transactions v2
is ended with EndTxn v5 (the coordinator bumps its epoch), one of v1 with v4 at most.  ``abort_lingering`` finds the open
transactions whose ids start with a prefix (ListTransactions on every broker) and aborts them by
fencing (InitProducerId under their id makes the coordinator abort what is open), so a failed
job leaves nothing that blocks read_committed consumers until ``transaction.timeout.ms``.

These are short blocking calls (``BlockingAdmin``), each bounded by a deadline.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable, Mapping

from sparkkafka_sink.errors import KafkaConnectionError, KafkaError
from sparkkafka_sink.producer.admin import BlockingAdmin
from sparkkafka_sink.producer.transactions import COORDINATOR_TRANSACTION, PreparedTransaction
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.errors import error_for_code

log = logging.getLogger(__name__)

#: states of a transaction that still needs an end (Kafka's TransactionState names)
OPEN_STATES = ("Ongoing",)
#: ... and of a producer that may still begin one (initialised, nothing written yet)
OPEN_OR_IDLE_STATES = ("Ongoing", "Empty")


class TransactionAdmin(BlockingAdmin):
    """Blocking coordinator calls with the producer's configuration (security included)."""

    def __init__(self, config: Mapping[str, Any]):
        super().__init__(config, "txn-admin")

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

    def ask_coordinator(self, transactional_id: str, request: Any, deadline: float,
                        max_version: int | None = None) -> Any:
        """``request``'s answer from the coordinator of ``transactional_id``, looked up again
        whenever the connection to it is lost (it moved, or its broker died)."""
        while True:
            node = self.coordinator(transactional_id, deadline)
            try:
                return self.call(node, request, deadline, max_version)
            except KafkaConnectionError as e:
                self._backoff_or_raise(e, deadline)

    # -- transactions ----------------------------------------------------------------------------
    def end(self, prepared: PreparedTransaction, commit: bool, deadline: float) -> None:
        request = messages.EndTxnRequest(transactional_id=prepared.transactional_id,
                                         producer_id=prepared.producer_id,
                                         producer_epoch=prepared.producer_epoch, committed=commit)
        while True:
            body = self.ask_coordinator(prepared.transactional_id, request, deadline,
                                        prepared.max_version(request.API_KEY))
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
            body = self.ask_coordinator(transactional_id, request, deadline)
            error = error_for_code(body.error_code, f"InitProducerId {transactional_id!r}")
            if error is None:
                return
            self._backoff_or_raise(error, deadline)

    def state(self, transactional_id: str, deadline: float) -> str | None:
        """The coordinator's state of ``transactional_id`` (Kafka's names: Empty, Ongoing,
        CompleteCommit, ...), or None when the coordinator does not know it."""
        request = messages.DescribeTransactionsRequest(transactional_ids=[transactional_id])
        while True:
            (answer,) = self.ask_coordinator(transactional_id, request, deadline).transaction_states
            error = error_for_code(answer.error_code, f"DescribeTransactions {transactional_id!r}")
            if error is None:
                return answer.transaction_state
            if error.name == "TRANSACTIONAL_ID_NOT_FOUND":
                return None
            self._backoff_or_raise(error, deadline)

    def open_transactions(self, prefix: str, deadline: float,
                          states: tuple[str, ...] = OPEN_STATES) -> list[tuple[str, int, str]]:
        """``(transactional id, producer id, state)`` of every open transaction under ``prefix``.

        Each broker lists the transactions it coordinates; when one is down or still loading,
        all are asked again once fresh metadata names the brokers that took over."""
        request = messages.ListTransactionsRequest(state_filters=list(states), producer_id_filters=[],
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

    def abort_lingering(self, prefix: str, deadline: float, exclude: Iterable[str] = (),
                        states: tuple[str, ...] = OPEN_STATES) -> list[str]:
        """Abort every open transaction whose id starts with ``prefix`` (except ``exclude``);
        returns the ids aborted.  With ``OPEN_OR_IDLE_STATES`` producers initialised but not in a
        transaction are fenced too: they can never begin one."""
        if not prefix:
            raise KafkaError("abort_lingering needs a non-empty transactional id prefix")
        skip = set(exclude)
        aborted = []
        for txn_id, _, state in self.open_transactions(prefix, deadline, states):
            if txn_id in skip:
                continue
            log.info("fencing %r (%s)", txn_id, state)
            self.fence(txn_id, deadline)
            if state in OPEN_STATES:
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
