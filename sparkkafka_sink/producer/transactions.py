"""TransactionManager: a transactional producer's state, and the requests that move it.

As the Java client's ``TransactionManager``: idempotence (producer id, epoch, sequences) plus
the transaction's life.  User threads ask for a step (``initialize``, ``begin``, ``end``) and
wait on its ``TransactionalResult``; the Sender thread sends the control requests the step
needs, one at a time, to the transaction coordinator it finds first:

* FindCoordinator (key type TRANSACTION) whenever the coordinator is unknown or moved;
* InitProducerId with the transactional id: the producer id and a new epoch (fencing any older
  producer with the same id, and aborting its open transaction);
* AddPartitionsToTxn (transactions v1) for every partition before its first batch is drained;
* EndTxn to commit or abort, once every batch of the transaction is resolved.

Transactions v2 (KIP-890 part 2; on when the cluster finalized ``transaction.version`` >= 2, as
Kafka 4 does by default): no AddPartitionsToTxn -- Produce v12 adds a partition to the
transaction itself -- and EndTxn v5 bumps the epoch, which the answer carries.  Transactions v1
cap Produce at v11 and EndTxn at v4.  The version is chosen when a transaction begins.

Retriable answers (coordinator loading or moved, CONCURRENT_TRANSACTIONS) are asked again after
``retry.backoff.ms``; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH make the producer unusable (a newer
producer owns the id).  A failed batch makes the transaction abortable: commit then fails and
only abort is possible.  ``prepare`` hands the open transaction over: its ``PreparedTransaction``
lets another process (the Spark driver) commit or abort it with EndTxn under the same producer
id and epoch (``producer.handover``).
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError, ProducerFencedError
from sparkkafka_sink.producer.idempotence import IdempotenceManager
from sparkkafka_sink.producer.producer_batch import ProducerBatch
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import TRANSACTION_VERSION_FEATURE, TRANSACTIONS_V1_MAX
from sparkkafka_sink.protocol.errors import (
    InvalidProducerEpochError, InvalidTransactionTimeoutError, ProducerFencedBrokerError,
    TransactionalIdAuthorizationFailedError, error_for_code)

log = logging.getLogger(__name__)

#: FindCoordinator key type of a transactional id
COORDINATOR_TRANSACTION = 1


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
    """What a user thread waits for: one step's outcome, set by the Sender thread."""

    def __init__(self, what: str):
        self.what = what
        self._done = threading.Event()
        self.error: BaseException | None = None

    def set(self, error: BaseException | None = None) -> None:
        self.error = error
        self._done.set()

    def wait(self, timeout_s: float | None) -> None:
        if not self._done.wait(timeout_s):
            raise KafkaTimeoutError(f"{self.what} did not complete within {timeout_s:.0f} s (max.block.ms)")
        if self.error is not None:
            raise type(self.error)(str(self.error)) if isinstance(self.error, KafkaError) else self.error


@dataclass(frozen=True)
class PreparedTransaction:
    """An open transaction handed over: small, picklable and JSON-able (Spark commit messages)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    #: begun under transactions v2: its EndTxn is v5 (v4 at most otherwise)
    transaction_v2: bool = False

    def to_json(self) -> str:
        return json.dumps({"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                           "producer_epoch": self.producer_epoch, "partitions": [list(p) for p in self.partitions],
                           "transaction_v2": self.transaction_v2})

    @classmethod
    def from_json(cls, text: str) -> "PreparedTransaction":
        d = json.loads(text)
        return cls(d["transactional_id"], int(d["producer_id"]), int(d["producer_epoch"]),
                   tuple((t, int(p)) for t, p in d["partitions"]), bool(d.get("transaction_v2", False)))

    def max_version(self, api_key: int) -> int | None:
        """The highest version of ``api_key`` this transaction may be ended with."""
        return max_version_for(api_key, self.transaction_v2)


def max_version_for(api_key: int, transaction_v2: bool) -> int | None:
    """Transactions v1 cap Produce and EndTxn below the versions that mean v2."""
    return None if transaction_v2 else TRANSACTIONS_V1_MAX.get(api_key)


class TransactionManager(IdempotenceManager):
    is_transactional = True

    def __init__(self, transactional_id: str, transaction_timeout_ms: int):
        super().__init__()
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = TransactionState.UNINITIALIZED
        #: the coordinator's node id, or None until FindCoordinator answered
        self.coordinator: int | None = None
        self.fatal_error: KafkaError | None = None
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
        #: the step the Sender works on: ("init" | "end", TransactionalResult, commit flag)
        self._step: tuple[str, TransactionalResult, bool] | None = None
        self._cond = threading.Condition()

    # -- user threads ------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self.fatal_error is not None:
            raise type(self.fatal_error)(str(self.fatal_error))
        if self.state is TransactionState.HANDED_OVER:
            raise KafkaError(f"Transaction of {self.transactional_id!r} was handed over by prepare(): "
                             "this producer cannot use it any more")

    def initialize(self) -> TransactionalResult:
        with self._cond:
            self._check_usable()
            if self.state is not TransactionState.UNINITIALIZED:
                raise KafkaError(f"init_transactions() was already called for {self.transactional_id!r}")
            return self._start("init_transactions()", "init", False)

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
                result = TransactionalResult("commit_transaction()" if commit else "abort_transaction()")
                result.set()
                return result
            return self._start("commit_transaction()" if commit else "abort_transaction()", "end", commit)

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
            return PreparedTransaction(self.transactional_id, self.producer_id, self.producer_epoch,
                                       tuple(sorted(self._added)), self.transaction_v2)

    def _start(self, what: str, kind: str, commit: bool) -> TransactionalResult:
        result = TransactionalResult(what)
        self._step = (kind, result, commit)
        return result

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

    # -- control requests (Sender thread) ----------------------------------------------------
    def cluster_features(self, finalized: dict[str, int]) -> None:
        """The brokers' finalized features: transactions v2 for the next transaction when
        ``transaction.version`` >= 2 (an open transaction keeps the version it began with)."""
        self.cluster_transaction_v2 = finalized.get(TRANSACTION_VERSION_FEATURE, 0) >= 2

    def max_version(self, api_key: int) -> int | None:
        """The highest version of ``api_key`` the current transaction may use."""
        return max_version_for(api_key, self.transaction_v2)

    def needs_coordinator(self) -> bool:
        return self.coordinator is None and (self._step is not None or bool(self._pending))

    def next_request(self) -> tuple[str, Any] | None:
        """The control request the coordinator should get next, or None."""
        if self.fatal_error is not None or self.coordinator is None:
            return None
        if self._step is not None and self._step[0] == "init":
            bump = self.producer_id >= 0  # KIP-360: the same producer id, a new epoch
            return "init", messages.InitProducerIdRequest(
                transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=self.producer_id if bump else -1, producer_epoch=self.producer_epoch if bump else -1)
        if self._pending and self.state is TransactionState.IN_TRANSACTION and self.has_producer_id():
            with self._cond:
                self._adding = set(self._pending)
                self._pending.clear()
            return "add", self._add_partitions_request(self._adding)
        if self._step is not None and self._step[0] == "end" and not self._adding:
            return "end", messages.EndTxnRequest(
                transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, committed=self._step[2])
        return None

    def _add_partitions_request(self, partitions) -> Any:
        schema = messages.schema_of("AddPartitionsToTxnRequest")
        topic_cls = schema.structs["AddPartitionsToTxnTopic"].cls
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(partitions):
            by_topic.setdefault(t, []).append(p)
        topics = [topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]
        return schema.cls(v3_and_below_transactional_id=self.transactional_id,
                          v3_and_below_producer_id=self.producer_id,
                          v3_and_below_producer_epoch=self.producer_epoch, v3_and_below_topics=topics)

    def coordinator_found(self, node_id: int) -> None:
        self.coordinator = node_id

    def coordinator_lost(self) -> None:
        self.coordinator = None

    def request_failed(self, kind: str, error: BaseException | None) -> bool:
        """A control request got no answer or a retriable error: ask again (True) unless fatal."""
        if kind == "add":
            with self._cond:
                self._pending |= self._adding
                self._adding = set()
        if error is None or _moved(error) or getattr(error, "invalid_metadata", False):
            self.coordinator = None  # no answer (connection lost) or moved: find it again
        return self.fatal_error is None

    def fail_fatally(self, error: KafkaError) -> None:
        with self._cond:
            self.fatal_error = error
            self.state = TransactionState.FATAL
            step, self._step = self._step, None
        if step is not None:
            step[1].set(error)

    def handle_answer(self, kind: str, response: Any) -> str:
        """Apply a control request's answer: "done", "retry" or "fatal"."""
        if kind == "init":
            error = error_for_code(response.error_code, f"InitProducerId for {self.transactional_id!r}")
            if error is not None:
                return self._classify(error)
            self.set_producer_id(response.producer_id, response.producer_epoch)
            with self._cond:
                self.state = TransactionState.READY
                step, self._step = self._step, None
            step[1].set()
            return "done"
        if kind == "add":
            failures = []
            for topic in response.results_by_topic_v3_and_below or ():
                for p in topic.results_by_partition:
                    if p.partition_error_code:
                        failures.append(((topic.name, p.partition_index), p.partition_error_code))
            with self._cond:
                adding, self._adding = self._adding, set()
                failed = {tp for tp, _ in failures}
                self._added |= adding - failed
            if not failures:
                return "done"
            worst = error_for_code(failures[0][1], f"AddPartitionsToTxn {failures[0][0][0]}-{failures[0][0][1]}")
            with self._cond:
                self._pending |= failed
            return self._classify(worst)
        # end
        error = error_for_code(response.error_code, f"EndTxn for {self.transactional_id!r}")
        if error is not None:
            return self._classify(error)
        bumped = getattr(response, "producer_epoch", -1) not in (-1, None) and response.producer_epoch >= 0 \
            and getattr(response, "producer_id", -1) >= 0
        if bumped:
            self.set_producer_id(response.producer_id, response.producer_epoch)  # transactions v2
        with self._cond:
            self._added.clear()
            if self._epoch_bump_needed and not bumped:
                # transactions v1 keep the epoch and the broker's sequence numbers across an
                # abort: after a failed batch ours no longer match, so ask InitProducerId for a
                # new epoch (sequences restart) before abort_transaction() returns
                self._epoch_bump_needed = False
                self._step = ("init", self._step[1], False)
                return "done"
            self._epoch_bump_needed = False
            self.state = TransactionState.READY
            step, self._step = self._step, None
        step[1].set()
        return "done"

    @staticmethod
    def is_fencing(error: BaseException) -> bool:
        """The broker says a newer producer owns the transactional id."""
        return isinstance(error, (ProducerFencedBrokerError, InvalidProducerEpochError))

    def fenced(self, error: BaseException) -> KafkaError:
        """Make the producer unusable (fatal), and return the error its sends fail with."""
        if self.fatal_error is None:
            self.fail_fatally(ProducerFencedError(
                f"Producer with transactional id {self.transactional_id!r} was fenced: another producer with "
                f"the same id took over ({error}); close this producer"))
        return self.fatal_error

    def _classify(self, error: BaseException) -> str:
        if isinstance(error, InvalidTransactionTimeoutError):
            self.fail_fatally(KafkaError(
                f"transaction.timeout.ms={self.transaction_timeout_ms} is more than the brokers allow "
                "(their transaction.max.timeout.ms, 900000 by default): lower transaction.timeout.ms "
                "(Spark: kafka.transaction.timeout.ms) or raise the brokers' transaction.max.timeout.ms"))
            return "fatal"
        if self.is_fencing(error):
            self.fenced(error)
            return "fatal"
        if isinstance(error, TransactionalIdAuthorizationFailedError) or not error.retriable and not _moved(error) \
                and not _concurrent(error):
            self.fail_fatally(KafkaError(f"Transaction of {self.transactional_id!r} failed: {error}"))
            return "fatal"
        if _moved(error):
            self.coordinator = None
        return "retry"


def _moved(error: BaseException | None) -> bool:
    name = getattr(error, "name", "")
    return name in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")


def _concurrent(error: BaseException) -> bool:
    return getattr(error, "name", "") in ("CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS")

