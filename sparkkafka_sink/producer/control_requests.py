"""Control requests: the producer-id and transaction requests (and the driver's check that a
write's topics exist and may be written), one handler each.

As the Java client's ``TxnRequestHandler``: a handler builds its request, reads the answer and
says what follows (``Outcome``): done, ask again after ``retry.backoff.ms``, find the
coordinator again first, or give up (``error`` says why, naming the request and the id).  What
an error code means is read from the error table's properties (``coordinator_moved``,
``retriable``, ``producer_fenced``) by ``outcome_of`` alone: one retry policy.

The same handlers run in two places: the producer's Sender sends whatever its
``IdempotenceManager`` / ``TransactionManager`` hands out next, without blocking; the driver's
``BlockingAdmin.run`` drives one to its end within a deadline.  ``Coordinators`` is the one
coordinator lookup both use.  Handlers hold no I/O, so they are unit-tested with decoded answers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from typing_extensions import Self

from sparkkafka_sink.errors import KafkaError, Message, ProducerFencedError, Setting
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import ApiKey, transactions_max_version
from sparkkafka_sink.protocol.error_codes import (
    InvalidTopicExceptionError,
    InvalidTransactionTimeoutError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
    broker_error,
    error_for_code,
)
from sparkkafka_sink.protocol.schema import ProtocolMessage

#: FindCoordinator's key type of a transactional id
COORDINATOR_TRANSACTION = 1


class Outcome(enum.Enum):
    DONE = "done"                          # the answer was applied
    RETRY = "retry"                        # ask again after retry.backoff.ms
    FIND_COORDINATOR = "find coordinator"  # the coordinator moved (or went): look it up, ask again
    FATAL = "fatal"                        # no retry can help: the handler's ``error`` says why


def outcome_of(error: BaseException) -> Outcome:
    """What a refused (or unanswered) control request calls for: the one retry policy."""
    if getattr(error, "coordinator_moved", False):
        return Outcome.FIND_COORDINATOR
    if getattr(error, "retriable", False):
        return Outcome.RETRY
    return Outcome.FATAL


class ControlRequest:
    """One control request and what its answer means.

    ``on_outcome(handler, outcome)`` (optional) is told every outcome, answered or not: the
    producer's managers apply results and failures through it; the blocking admin reads
    ``result`` instead."""

    #: the transactional id whose coordinator must answer (None: any broker)
    coordinator_key: str | None = None

    def __init__(self, on_outcome: Callable[[Self, Outcome], None] | None = None):
        self._on_outcome: Callable[[Self, Outcome], None] | None = on_outcome
        #: what the answer said (per handler), once DONE
        self.result: Any = None
        #: FATAL: what to raise; otherwise the last refusal, for a timeout's message
        self.error: BaseException | None = None

    # -- what subclasses say ------------------------------------------------------------------
    def build(self) -> ProtocolMessage:
        raise NotImplementedError

    @property
    def max_version(self) -> int | None:
        """The highest version this request may be sent at (None: the highest both speak)."""
        return None

    def describe(self) -> str:
        raise NotImplementedError

    def read(self, response: ProtocolMessage) -> Outcome:
        """Apply an answer: set ``result`` and return DONE, or ``self.refused(error)``."""
        raise NotImplementedError

    def fatal(self, error: BaseException) -> BaseException:
        """The error to raise for a refusal no retry cures (subclasses name the remedy)."""
        if getattr(error, "producer_fenced", False) and self.coordinator_key is not None:
            return fenced_error(self.coordinator_key, error)
        return error

    @property
    def failure(self) -> BaseException:
        """What a FATAL outcome fails with: ``error`` (every way to FATAL sets it)."""
        return self.error if self.error is not None else KafkaError(f"{self.describe()} failed")

    # -- driven by the Sender or the blocking admin -------------------------------------------
    def handle(self, response: ProtocolMessage) -> Outcome:
        return self._tell(self.read(response))

    def no_answer(self, error: BaseException | None) -> Outcome:
        """The connection went (or the request timed out) before an answer: a coordinator may
        have gone with its broker, so it is looked up again; any other broker is asked again."""
        self.error = error
        return self._tell(Outcome.FIND_COORDINATOR if self.coordinator_key is not None else Outcome.RETRY)

    def unsupported(self, error: BaseException) -> Outcome:
        """The broker speaks no version of this request."""
        return self.give_up(KafkaError(f"{self.describe()} is not supported by the broker: {error}"))

    def refused(self, error: BaseException) -> Outcome:
        """The broker refused: ``outcome_of`` decides; a fatal refusal's error names its remedy."""
        outcome = outcome_of(error)
        if outcome is Outcome.FIND_COORDINATOR and self.coordinator_key is None:
            outcome = Outcome.RETRY  # any broker answers this one: nothing to look up
        self.error = self.fatal(error) if outcome is Outcome.FATAL else error
        return outcome

    def give_up(self, error: BaseException) -> Outcome:
        """Fail for good without an answer (its coordinator cannot be found, say)."""
        self.error = error
        return self._tell(Outcome.FATAL)

    def _tell(self: Self, outcome: Outcome) -> Outcome:
        if self._on_outcome is not None:
            self._on_outcome(self, outcome)
        return outcome


def fenced_error(transactional_id: str, error: BaseException) -> ProducerFencedError:
    """A newer producer owns ``transactional_id``: the error a fenced producer fails with."""
    return ProducerFencedError(
        f"Producer with transactional id {transactional_id!r} was fenced: another producer with the same id "
        f"took over ({error}); close this producer")


class TransactionalRequest(ControlRequest):
    """A request to a transactional id's coordinator."""

    def __init__(self, transactional_id: str, on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(on_outcome)
        self.transactional_id = transactional_id
        self.coordinator_key = transactional_id


class FindCoordinator(ControlRequest):
    """Which broker coordinates ``key`` (a transactional id); ``result``: its node id."""

    def __init__(self, key: str, on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(on_outcome)
        self.key = key

    def build(self) -> ProtocolMessage:
        return messages.FindCoordinatorRequest(key=self.key, key_type=COORDINATOR_TRANSACTION,
                                               coordinator_keys=[self.key])

    def describe(self) -> str:
        return f"FindCoordinator for {self.key!r}"

    def read(self, response: ProtocolMessage) -> Outcome:
        answer = response.coordinators[0] if getattr(response, "coordinators", None) else response
        if answer.error_code:
            return self.refused(broker_error(answer.error_code, self.describe()))
        self.result = answer.node_id
        return Outcome.DONE


class Coordinators:
    """Which broker coordinates each transactional id, as last found (the one lookup)."""

    def __init__(self) -> None:
        self._nodes: dict[str, int] = {}

    def node(self, key: str) -> int | None:
        return self._nodes.get(key)

    def lookup(self, key: str) -> FindCoordinator:
        """The FindCoordinator whose answer records ``key``'s coordinator here."""
        return FindCoordinator(key, on_outcome=self._found)

    def forget(self, key: str) -> None:
        self._nodes.pop(key, None)

    def _found(self, handler: ControlRequest, outcome: Outcome) -> None:
        if outcome is Outcome.DONE and isinstance(handler, FindCoordinator):
            self._nodes[handler.key] = handler.result


class InitProducerId(ControlRequest):
    """A producer id and epoch: of the idempotent producer (``transactional_id`` None, any
    broker), or of a transactional id from its coordinator -- which fences any older producer
    with that id and aborts its open transaction.  With ``producer_id``/``producer_epoch`` held,
    the same id gets a new epoch (KIP-360).  ``result``: ``(producer_id, producer_epoch)``.

    ``resume_lost``: a request that went unanswered (its connection dropped) may have been
    handled; asked again it would bump the epoch once more, and an epoch of 0 -- "the id was new:
    this is its first initialisation", which the exactly-once driver's close relies on -- would
    be lost to the retry.  So before asking again it asks DescribeTransactions: an id its
    coordinator holds at epoch 0 with no transaction (``Empty``) was initialised once, by the
    unanswered request (whoever else initialises such an id leaves it at epoch 1 or more:
    ``exactly_once.decision_log.fence``), and is taken as its answer (``resumed``); an id
    unknown, or further on, is initialised again."""

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int, producer_id: int = -1,
                 producer_epoch: int = -1, on_outcome: Callable[[Self, Outcome], None] | None = None,
                 resume_lost: bool = False):
        super().__init__(on_outcome)
        self.transactional_id = transactional_id
        self.coordinator_key = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.resume_lost = resume_lost and transactional_id is not None
        #: the question asked before asking again, once a request went unanswered (``resume_lost``)
        self._asking: DescribeTransactions | None = None
        #: the answer was the unanswered request's, read from DescribeTransactions
        self.resumed = False

    def build(self) -> ProtocolMessage:
        if self._asking is not None:
            return self._asking.build()
        return messages.InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch)

    def describe(self) -> str:
        what = "InitProducerId" + (f" for {self.transactional_id!r}" if self.transactional_id else "")
        return what + (" (DescribeTransactions: did its unanswered request initialise it?)" if self._asking else "")

    def no_answer(self, error: BaseException | None) -> Outcome:
        if self.resume_lost:
            assert self.transactional_id is not None
            self._asking = DescribeTransactions(self.transactional_id)
        return super().no_answer(error)

    def read(self, response: ProtocolMessage) -> Outcome:
        if self._asking is not None:
            return self._read_description(response)
        if response.error_code:
            return self.refused(broker_error(response.error_code, self.describe()))
        if response.producer_id < 0:
            self.error = KafkaError(f"{self.describe()} returned producer id {response.producer_id}")
            return Outcome.FATAL
        self.result = (response.producer_id, response.producer_epoch)
        return Outcome.DONE

    def _read_description(self, response: ProtocolMessage) -> Outcome:
        asking = self._asking
        assert asking is not None
        outcome = asking.read(response)
        if outcome is not Outcome.DONE:
            self.error = asking.error  # (asked again, or the failure of the whole request)
            return outcome
        self._asking = None
        found = asking.result
        if found is not None and found.state == "Empty" and found.producer_epoch == 0 and found.producer_id >= 0:
            self.result, self.resumed = (found.producer_id, 0), True
            return Outcome.DONE
        return Outcome.RETRY  # not initialised by it, or initialised since: ask InitProducerId again

    def fatal(self, error: BaseException) -> BaseException:
        if isinstance(error, InvalidTransactionTimeoutError):
            timeout = Setting("transaction.timeout.ms")
            return InvalidTransactionTimeoutError(Message(
                "{}={} is more than the brokers allow (their transaction.max.timeout.ms, 900000 by default): lower "
                "{} or raise the brokers' transaction.max.timeout.ms", timeout, self.transaction_timeout_ms, timeout))
        return super().fatal(error)


class AddPartitionsToTxn(TransactionalRequest):
    """Transactions v1: partitions join the transaction before their first batch is sent.
    ``result``: the partitions added; ``failed``: those refused (asked again unless fatal)."""

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: Iterable[tuple[str, int]], on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(transactional_id, on_outcome)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = frozenset(partitions)
        self.result: frozenset = frozenset()
        self.failed: frozenset = self.partitions

    def build(self) -> ProtocolMessage:
        schema = messages.schema_of("AddPartitionsToTxnRequest")
        topic_cls = schema.structs["AddPartitionsToTxnTopic"].cls
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            by_topic.setdefault(t, []).append(p)
        topics = [topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]
        return schema.cls(v3_and_below_transactional_id=self.transactional_id,
                          v3_and_below_producer_id=self.producer_id,
                          v3_and_below_producer_epoch=self.producer_epoch, v3_and_below_topics=topics)

    def describe(self) -> str:
        return f"AddPartitionsToTxn for {self.transactional_id!r}"

    def read(self, response: ProtocolMessage) -> Outcome:
        refusals = [((topic.name, p.partition_index), p.partition_error_code)
                    for topic in response.results_by_topic_v3_and_below or ()
                    for p in topic.results_by_partition if p.partition_error_code]
        self.failed = frozenset(tp for tp, _ in refusals)
        self.result = self.partitions - self.failed
        if not refusals:
            return Outcome.DONE
        (topic, partition), code = refusals[0]
        return self.refused(broker_error(code, f"{self.describe()}: {topic}-{partition}"))


class EndTxn(TransactionalRequest):
    """Commit or abort the transaction of a producer id and epoch -- the producer's own, or one
    another process prepared.  Transactions v2 end with EndTxn v5, whose answer carries the
    bumped epoch (``result``: ``(producer_id, producer_epoch)``, or None under v1)."""

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                 transaction_v2: bool, on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(transactional_id, on_outcome)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.commit = commit
        self.transaction_v2 = transaction_v2

    def build(self) -> ProtocolMessage:
        return messages.EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, committed=self.commit)

    @property
    def max_version(self) -> int | None:
        return transactions_max_version(ApiKey.END_TXN, self.transaction_v2)

    def describe(self) -> str:
        return f"EndTxn({'commit' if self.commit else 'abort'}) of {self.transactional_id!r}"

    def read(self, response: ProtocolMessage) -> Outcome:
        if response.error_code:
            return self.refused(broker_error(response.error_code, self.describe()))
        pid, epoch = getattr(response, "producer_id", -1), getattr(response, "producer_epoch", -1)
        self.result = (pid, epoch) if pid is not None and pid >= 0 and epoch is not None and epoch >= 0 else None
        return Outcome.DONE


class TransactionDescription(NamedTuple):
    """What a transaction coordinator says of a transactional id (DescribeTransactions)."""

    #: Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, ...
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    #: when its open transaction began (-1: none open)
    start_time_ms: int
    #: the partitions in its open transaction
    partitions: tuple[tuple[str, int], ...]


class DescribeTransactions(TransactionalRequest):
    """The coordinator's view of a transactional id; ``result`` a :class:`TransactionDescription`,
    None when the coordinator does not know the id."""

    def build(self) -> ProtocolMessage:
        return messages.DescribeTransactionsRequest(transactional_ids=[self.transactional_id])

    def describe(self) -> str:
        return f"DescribeTransactions {self.transactional_id!r}"

    def read(self, response: ProtocolMessage) -> Outcome:
        (answer,) = response.transaction_states
        error = error_for_code(answer.error_code, self.describe())
        if error is None:
            self.result = TransactionDescription(
                answer.transaction_state, answer.producer_id, answer.producer_epoch, answer.transaction_timeout_ms,
                answer.transaction_start_time_ms,
                tuple((t.topic, p) for t in answer.topics for p in t.partitions))
        elif not isinstance(error, TransactionalIdNotFoundError):
            return self.refused(error)
        return Outcome.DONE


class ListTransactions(ControlRequest):
    """The transactions the broker asked coordinates (each knows only its own) in ``states``
    whose ids start with ``prefix``; ``result``: ``[(transactional id, producer id, state)]``."""

    def __init__(self, prefix: str, states: Iterable[str], on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(on_outcome)
        self.prefix = prefix
        self.states = list(states)

    def build(self) -> ProtocolMessage:
        # v2 (KIP-1152) lets the broker keep to the prefix (a Java regex, the prefix quoted); the
        # answer is filtered here too, for the brokers before it
        pattern = f"\\Q{self.prefix}\\E.*" if self.prefix and "\\E" not in self.prefix else None
        return messages.ListTransactionsRequest(state_filters=self.states, producer_id_filters=[],
                                                duration_filter=-1, transactional_id_pattern=pattern)

    def describe(self) -> str:
        return f"ListTransactions under {self.prefix!r}"

    def read(self, response: ProtocolMessage) -> Outcome:
        if response.error_code:
            return self.refused(broker_error(response.error_code, self.describe()))
        self.result = [(t.transactional_id, t.producer_id, t.transaction_state)
                       for t in response.transaction_states if t.transactional_id.startswith(self.prefix)]
        return Outcome.DONE


class TopicCheckError(KafkaError):
    """A topic a write needs cannot be written: missing, invalid, or not authorized."""


class TopicMetadata(ControlRequest):
    """Metadata for the topics a write needs, from any broker; ``result``: ``{topic: partition
    count}`` once every one exists (or was just auto-created, with ``allow_auto_create``) and this
    principal may write to it.  A topic missing, invalid or refused is FATAL (``TopicCheckError``
    naming it); one still being created (no partitions, LEADER_NOT_AVAILABLE) is asked again.

    A KRaft broker answers the request that makes it auto-create a topic with
    UNKNOWN_TOPIC_OR_PARTITION and names the topic a moment later, so under ``allow_auto_create``
    a topic unknown is asked about again, up to ``AUTO_CREATE_ANSWERS`` answers, before it is
    taken for missing (a broker that does not auto-create keeps saying so)."""

    AUTO_CREATE_ANSWERS = 20

    def __init__(self, topics: Iterable[str], allow_auto_create: bool = False,
                 on_outcome: Callable[[Self, Outcome], None] | None = None):
        super().__init__(on_outcome)
        self.topics = sorted(set(topics))
        self.allow_auto_create = allow_auto_create
        self._unknown_answers = 0

    def build(self) -> ProtocolMessage:
        return messages.metadata_request(self.topics, allow_auto_topic_creation=self.allow_auto_create)

    def describe(self) -> str:
        return f"Metadata for {', '.join(map(repr, self.topics))}"

    def read(self, response: ProtocolMessage) -> Outcome:
        found, transient, unknown = {}, None, False
        for t in response.topics:
            error = error_for_code(t.error_code, f"topic {t.name!r}")
            if error is None and not t.partitions:
                error = LeaderNotAvailableError(f"topic {t.name!r}")  # still being created
            if error is None:
                if messages.write_refused(getattr(t, "topic_authorized_operations", None)):
                    return self._unwritable(f"not authorized to write to topic {t.name!r} (the principal may "
                                            "describe it but has no WRITE permission)")
                found[t.name] = len(t.partitions)
            elif isinstance(error, UnknownTopicOrPartitionError):
                if self.allow_auto_create and self._unknown_answers + 1 < self.AUTO_CREATE_ANSWERS:
                    unknown, transient = True, transient or error  # perhaps being created: ask again
                    continue
                if self.allow_auto_create:
                    return self._unwritable(f"topic {t.name!r} does not exist and the brokers do not create topics "
                                            "on demand (auto.create.topics.enable=false)")
                return self._unwritable(Message("topic {!r} does not exist ({} is false)", t.name,
                                                Setting("allow.auto.create.topics")))
            elif isinstance(error, TopicAuthorizationFailedError):
                return self._unwritable(f"not authorized to access topic {t.name!r} (TOPIC_AUTHORIZATION_FAILED)")
            elif isinstance(error, InvalidTopicExceptionError):
                return self._unwritable(f"{t.name!r} is not a valid topic name")
            elif outcome_of(error) is Outcome.FATAL:
                return self.refused(error)
            else:
                transient = transient or error
        self._unknown_answers += unknown
        if transient is not None:
            return self.refused(transient)
        self.result = found
        return Outcome.DONE

    def _unwritable(self, why: str) -> Outcome:
        self.error = TopicCheckError(why)
        return Outcome.FATAL
