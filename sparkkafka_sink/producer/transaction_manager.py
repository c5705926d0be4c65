"""TransactionManager: a transactional producer's state, and the requests that move it.

As the Java client's ``TransactionManager``: idempotence (producer id, epoch, sequences) plus
the transaction's life.  User threads ask for a step (``initialize``, ``begin``, ``end``) and
wait on its ``TransactionalResult``; ``next_request`` hands the Sender thread the control
requests (``producer.control_requests``) the step needs, one at a time, for the transaction
coordinator (looked up first, and again whenever it moved):

* InitProducerId with the transactional id: the producer id and a new epoch (fencing any older
  producer with the same id, and aborting its open transaction);
* AddPartitionsToTxn (transactions v1) for every partition before its first batch is drained;
* EndTxn to commit or abort, once every batch of the transaction is resolved.

Transactions v2 (KIP-890 part 2; on when the cluster finalized ``transaction.version`` >= 2, as
Kafka 4 does by default): no AddPartitionsToTxn -- Produce v12 adds a partition to the
transaction itself -- and EndTxn v5 bumps the epoch, which the answer carries.  Transactions v1
cap Produce at v11 and EndTxn at v4.  The version is chosen when a transaction begins.

What an answer means is the handlers' one retry policy: retriable answers (coordinator loading,
CONCURRENT_TRANSACTIONS) are asked again after ``retry.backoff.ms``, a moved coordinator is looked
up again; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH make the producer unusable (a newer producer
owns the id).  A failed batch makes the transaction abortable: commit then fails and
only abort is possible.  ``prepare`` hands the open transaction over: its ``PreparedTransaction``
lets another process (the Spark driver) commit or abort it with EndTxn under the same producer
id and epoch (``producer.handover``).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError, Message, Setting, again
from sparkkafka_sink.producer.control_requests import (
    AddPartitionsToTxn,
    ControlRequest,
    DescribeTransactions,
    EndTxn,
    InitProducerId,
    Outcome,
    fenced_error,
)
from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.producer.idempotence import IdempotenceManager
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.protocol.api import TRANSACTION_VERSION_FEATURE

log = logging.getLogger(__name__)


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"                    # producer id held, no transaction open
    IN_TRANSACTION = "in_transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable_error"  # a send failed: only abort is possible
    HANDED_OVER = "handed_over"        # prepare()d: another process ends it
    FATAL = "fatal"                    # fenced or refused: the producer must be closed


class TransactionalResult:
    """What a user thread waits for: one step's outcome (or a question's answer, ``value``),
    set by the Sender thread."""

    def __init__(self, what: str):
        self.what = what
        self._done = threading.Event()
        self.error: BaseException | None = None
        self.value: Any = None

    def set(self, error: BaseException | None = None, value: Any = None) -> None:
        self.error, self.value = error, value
        self._done.set()

    def wait(self, timeout_s: float | None) -> Any:
        if not self._done.wait(timeout_s):
            raise KafkaTimeoutError(Message("{} did not complete within {:.0f} s ({})", self.what, timeout_s,
                                            Setting("max.block.ms")))
        if self.error is not None:
            raise again(self.error)
        return self.value


class TransactionManager(IdempotenceManager):
    is_transactional = True
    transactional_id: str

    def __init__(self, transactional_id: str, transaction_timeout_ms: int):
        super().__init__(transaction_timeout_ms, required=True)
        self.transactional_id = transactional_id
        self.state = TransactionState.UNINITIALIZED
        self.abortable_error: KafkaError | None = None
        #: the cluster has transactions v2 (finalized transaction.version >= 2), as last seen
        self.cluster_transaction_v2 = False
        #: the open (or next) transaction uses transactions v2: fixed at begin_transaction()
        self.transaction_v2 = False
        #: a batch of this transaction failed: the broker's sequence numbers of its partition no
        #: longer follow ours, so the abort must end with a new epoch (KIP-360)
        self._epoch_bump_needed = False
        self._added: set[tuple[str, int]] = set()     # in the transaction (AddPartitionsToTxn answered)
        self._pending: set[tuple[str, int]] = set()   # to add before their first batch drains
        self._adding: set[tuple[str, int]] = set()    # in an AddPartitionsToTxn in flight
        #: what the user waits for, and the control request that moves it there
        self._step: TransactionalResult | None = None
        self._step_request: Callable[[], ControlRequest] | None = None
        #: questions about other transactional ids (``describe``), sent between our own requests
        self._questions: deque[ControlRequest] = deque()
        self._cond = threading.Condition()

    @property
    def coordinator(self) -> int | None:
        """The transaction coordinator's node id, as last found (None: to be looked up)."""
        return self.coordinators.node(self.transactional_id)

    # -- user threads ------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self.fatal_error is not None:
            raise again(self.fatal_error)
        if self.state is TransactionState.HANDED_OVER:
            raise KafkaError(f"Transaction of {self.transactional_id!r} was handed over by prepare(): "
                             "this producer cannot use it any more")

    def initialize(self, resume_lost: bool = False) -> TransactionalResult:
        """The first InitProducerId (``resume_lost``: see ``control_requests.InitProducerId``)."""
        with self._cond:
            self._check_usable()
            if self.state is not TransactionState.UNINITIALIZED:
                raise KafkaError(f"init_transactions() was already called for {self.transactional_id!r}")
            handler = self._init_request(resume_lost)
            return self._start("init_transactions()", lambda: handler)

    def begin(self) -> None:
        with self._cond:
            self._check_usable()
            if self.state is not TransactionState.READY:
                raise KafkaError(f"begin_transaction() needs a producer ready for a new transaction; "
                                 f"{self.transactional_id!r} is {self.state.value}"
                                 + (" (call init_transactions() first)"
                                    if self.state is TransactionState.UNINITIALIZED else ""))
            self.state = TransactionState.IN_TRANSACTION
            self.transaction_v2 = self.cluster_transaction_v2
            self._added.clear()
            self.abortable_error = None
            self._epoch_bump_needed = False

    def check_can_send(self, topic: str, partition: int) -> None:
        """A record may join the transaction: register its partition (added before it drains)."""
        state = self.state
        if state is TransactionState.IN_TRANSACTION:
            tp = (topic, partition)
            if tp not in self._added and tp not in self._pending:
                with self._cond:
                    if self.transaction_v2:
                        self._added.add(tp)  # Produce v12 adds it to the transaction
                    elif tp not in self._added:
                        self._pending.add(tp)
            return
        self._check_usable()
        if state is TransactionState.ABORTABLE_ERROR:
            raise KafkaError(f"Transaction of {self.transactional_id!r} must be aborted: {self.abortable_error}")
        raise KafkaError(f"Cannot send outside a transaction: call begin_transaction() first "
                         f"({self.transactional_id!r} is {state.value})")

    def end(self, commit: bool) -> TransactionalResult:
        """Commit or abort (the caller flushed first, so every batch is resolved)."""
        what = "commit_transaction()" if commit else "abort_transaction()"
        with self._cond:
            self._check_usable()
            if commit and self.state is TransactionState.ABORTABLE_ERROR:
                raise KafkaError(f"Cannot commit the transaction of {self.transactional_id!r}: "
                                 f"{self.abortable_error}; abort it")
            if self.state not in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
                raise KafkaError(f"No transaction to {'commit' if commit else 'abort'} for "
                                 f"{self.transactional_id!r} ({self.state.value})")
            self.state = TransactionState.COMMITTING if commit else TransactionState.ABORTING
            self._pending.clear()
            if not self._added:  # nothing was written: nothing for the coordinator to end
                self.state = TransactionState.READY
                result = TransactionalResult(what)
                result.set()
                return result
            return self._start(what, lambda: self._transaction().end_request(commit, self._ended))

    def describe(self, transactional_id: str) -> TransactionalResult:
        """Ask the coordinator of another transactional id for its state (Kafka's names: Empty,
        Ongoing, CompleteCommit, ...; None when it does not know the id), through this
        producer's own connections; a refusal fails the question, never the producer."""
        with self._cond:
            if self.fatal_error is not None:
                raise again(self.fatal_error)
            result = TransactionalResult(f"DescribeTransactions {transactional_id!r}")

            def answered(handler: ControlRequest, outcome: Outcome) -> None:
                if outcome is Outcome.DONE:
                    result.set(value=handler.result.state if handler.result is not None else None)
                elif outcome is Outcome.FATAL:
                    result.set(handler.failure)

            self._questions.append(DescribeTransactions(transactional_id, answered))
            return result

    def hand_over(self) -> PreparedTransaction:
        """The open transaction (every batch resolved) as a ``PreparedTransaction``."""
        with self._cond:
            self._check_usable()
            if self.state is TransactionState.ABORTABLE_ERROR:
                raise KafkaError(f"Cannot prepare the transaction of {self.transactional_id!r}: "
                                 f"{self.abortable_error}")
            if self.state is not TransactionState.IN_TRANSACTION:
                raise KafkaError(f"prepare() needs an open transaction ({self.state.value})")
            if self._pending or self._adding:
                raise KafkaError("prepare() before every partition joined the transaction: flush first")
            self.state = TransactionState.HANDED_OVER
            return self._transaction()

    def _transaction(self) -> PreparedTransaction:
        return PreparedTransaction(self.transactional_id, self.producer_id, self.producer_epoch,
                                   tuple(sorted(self._added)), self.transaction_v2)

    def _start(self, what: str, request: Callable[[], ControlRequest]) -> TransactionalResult:
        self._step = TransactionalResult(what)
        self._step_request = request
        return self._step

    def _finish_step(self) -> None:
        with self._cond:
            step, self._step, self._step_request = self._step, None, None
        if step is not None:
            step.set()

    # -- draining (Sender thread) ------------------------------------------------------------
    def may_drain(self, batch: ProducerBatch) -> bool:
        return batch.tp in self._added and super().may_drain(batch)

    def request_reset(self) -> None:
        """A transactional producer cannot renumber: the transaction is lost, abort it."""
        self.batch_failed(KafkaError("the broker lost this producer's sequence state"))

    def batch_failed(self, error: BaseException) -> None:
        with self._cond:
            if self.state is TransactionState.IN_TRANSACTION:
                self.state = TransactionState.ABORTABLE_ERROR
                self.abortable_error = KafkaError(f"a batch of the transaction failed: {error}")
            self._epoch_bump_needed = True

    def fenced_by(self, error: BaseException) -> BaseException:
        """A Produce answer says a newer producer owns the id: the producer becomes unusable;
        returns the error its sends fail with."""
        fatal = self.fatal_error
        if fatal is None:
            fatal = fenced_error(self.transactional_id, error)
            self.fail_fatally(fatal)
        return fatal

    def fail_fatally(self, error: BaseException) -> None:
        with self._cond:
            self.fatal_error = error
            self.state = TransactionState.FATAL
            step, self._step, self._step_request = self._step, None, None
            questions, self._questions = list(self._questions), deque()
        if step is not None:
            step.set(error)
        for question in questions:
            question.give_up(error)

    # -- control requests (Sender thread) ----------------------------------------------------
    def cluster_features(self, finalized: dict[str, int]) -> None:
        """The brokers' finalized features: transactions v2 for the next transaction when
        ``transaction.version`` >= 2 (an open transaction keeps the version it began with)."""
        self.cluster_transaction_v2 = finalized.get(TRANSACTION_VERSION_FEATURE, 0) >= 2

    def next_request(self, requests_in_flight: Callable[[], bool]) -> ControlRequest | None:
        """The control request to send next, or None: partitions waiting to join the transaction
        first, then the user's step (once no partition is being added), then questions."""
        if self.fatal_error is not None:
            return None
        with self._cond:
            if self._pending and self.state is TransactionState.IN_TRANSACTION and self.has_producer_id():
                self._adding, self._pending = self._pending, set()
                return AddPartitionsToTxn(self.transactional_id, self.producer_id, self.producer_epoch,
                                          self._adding, self._partitions_added)
            if self._step_request is not None and not self._adding:
                return self._step_request()
            if self._questions:
                return self._questions.popleft()
        return None

    def _init_request(self, resume_lost: bool = False) -> InitProducerId:
        bump = self.producer_id >= 0  # KIP-360: the same producer id, a new epoch
        return InitProducerId(self.transactional_id, self.transaction_timeout_ms,
                              self.producer_id if bump else -1, self.producer_epoch if bump else -1,
                              self._initialized, resume_lost=resume_lost and not bump)

    def _initialized(self, handler: InitProducerId, outcome: Outcome) -> None:
        if outcome is Outcome.DONE:
            self.set_producer_id(*handler.result)
            with self._cond:
                self.state = TransactionState.READY
            self._finish_step()
        elif outcome is Outcome.FATAL:
            self.fail_fatally(handler.failure)

    def _partitions_added(self, handler: AddPartitionsToTxn, outcome: Outcome) -> None:
        with self._cond:
            self._adding = set()
            self._added |= handler.result
            self._pending |= handler.failed  # asked again (unless fatal)
        if outcome is Outcome.FATAL:
            self.fail_fatally(handler.failure)

    def _ended(self, handler: EndTxn, outcome: Outcome) -> None:
        if outcome is Outcome.FATAL:
            self.fail_fatally(handler.failure)
        if outcome is not Outcome.DONE:
            return
        if handler.result is not None:
            self.set_producer_id(*handler.result)  # transactions v2: the bumped epoch
        with self._cond:
            self._added.clear()
            if self._epoch_bump_needed and handler.result is None:
                # transactions v1 keep the epoch and the broker's sequence numbers across an
                # abort: after a failed batch ours no longer match, so ask InitProducerId for a
                # new epoch (sequences restart) before abort_transaction() returns
                self._epoch_bump_needed = False
                self._step_request = self._init_request
                return
            self._epoch_bump_needed = False
            self.state = TransactionState.READY
        self._finish_step()
