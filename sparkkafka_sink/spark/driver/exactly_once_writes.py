"""Exactly-once on the driver: the Spark side of ``sparkkafka_sink.exactly_once``.

Every task attempt wrote in a transaction of its own and handed it over in its commit message
(with the name of the write it belongs to).  Spark calls ``commit`` with the messages of the
attempts it kept, one per partition: those transactions are the write's winners, which the
driver records as its decision and commits (``exactly_once.commit``); everything else of the
write is aborted.  ``abort`` -- which Spark also calls after a commit that failed -- ends the
write as decided: a write whose decision was recorded is completed, never aborted; any other
is aborted whole.

A streaming micro-batch is a write of its own; its decision is kept as the query's latest, so
the micro-batch Spark replays after a driver crash is recognised (already decided: its new
transactions are aborted, the earlier ones completed as recorded).  Spark plans the writer of a
micro-batch once for its tasks and again for its commit, so the driver takes the write's name
from the tasks' messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.exactly_once import keeper as keepers
from sparkkafka_sink.exactly_once.commit import CommitError, commit_write
from sparkkafka_sink.exactly_once.decision_log import DecisionLog
from sparkkafka_sink.exactly_once.ids import WriteId, parse, probe_id
from sparkkafka_sink.exactly_once.leases import judge
from sparkkafka_sink.exactly_once.owner import driver_process, driver_token
from sparkkafka_sink.exactly_once.replay import Replay, judge_micro_batch
from sparkkafka_sink.exactly_once.settle import LIVE_STATES, Settled, settle
from sparkkafka_sink.producer.handover import HANDOVER_APIS, BrokerLacking, PreparedTransaction, TransactionAdmin
from sparkkafka_sink.protocol.error_codes import InvalidTransactionTimeoutError
from sparkkafka_sink.spark.commit_message import CommitMessages, TaskCommitMessage
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.sink_errors import SinkValidationError, in_option_names

log = logging.getLogger("sparkkafka_sink.spark")

#: the bound of a driver's commit or abort (retries included), and what each task adds to it
_END_TIMEOUT_S = 120.0
_END_PER_TASK_S = 0.5
#: a registered write is kept this long past ``transaction.timeout.ms`` (its transactions cannot
#: be open longer)
_KEEP_MARGIN_S = 60.0


class TransactionCommitError(KafkaError):
    """The driver could not commit the write: the message says what is visible and what ends it."""


# -- before the tasks ------------------------------------------------------------------------------
def start_exactly_once(options: SinkOptions, streaming: bool = False, timeout_s: float = 15.0) -> SinkOptions:
    """On the driver, before any task of an exactly-once write: ``options`` naming this driver as
    the write's owner, once the coordinator accepted the write's settings (:func:`_probe`), the
    decisions topic exists, the driver's keeper beats (``exactly_once.keeper``) and -- for a
    batch write -- the writes under the prefix whose driver is gone have been ended (their
    transactions would hold back every read_committed reader of their partitions until the
    coordinator timed them out).  A streaming query's are ended at its commits.  The decisions
    topic is checked as ending a crashed write will need it (``DecisionLog.check``)."""
    process = driver_process()
    options = options.owned_by(driver_token(process))
    config, prefix = options.producer_config, options.transactional_id_prefix
    assert prefix is not None, "exactly-once writes have a prefix"
    with TransactionAdmin(config) as admin:
        _probe(admin, options, timeout_s)
        decisions = DecisionLog(admin, options.decision_topic)
        try:
            decisions.partitions(time.monotonic() + timeout_s, create=True)
            decisions.check(time.monotonic() + timeout_s)
        except KafkaError as e:
            raise SinkValidationError(f"deliveryGuarantee=exactly-once: {in_option_names(e)} (option "
                                      f"decisionTopic={options.decision_topic!r})") from None
        _keep(options, process, _registered(options))
        if not _per_query(options):
            _end_dead_drivers(admin, decisions, options, streaming)
    return options


def _per_query(options: SinkOptions) -> bool:
    """The prefix is one streaming query's (writeStream, or foreachBatch with its batch id)."""
    return options.batch_id is not None or options.streaming


def _registered(options: SinkOptions) -> str:
    """What the keeper keeps for this write: the write (a batch write), or the query's stream."""
    return f"{options.transactional_id_prefix}-stream" if _per_query(options) else options.write().name


def _keep(options: SinkOptions, process: tuple[int, int] | None = None, registered: str | None = None) -> None:
    """The driver's keeper beats under the prefix (started when none does), and keeps
    ``registered`` until it ends (or ``transaction.timeout.ms`` passes)."""
    if options.lease_keeper == "none":
        return
    prefix = options.transactional_id_prefix
    assert prefix is not None
    try:
        registry = keepers.Registry(prefix, options.owner)
        register = None if registered is None else (
            registered, options.producer_config.transaction_timeout_ms / 1000 + _KEEP_MARGIN_S)
        spec = keepers.KeeperSpec(options.producer_config.portable(), prefix, options.owner,
                                  process or driver_process(), options.decision_topic)
        keepers.ensure_keeper(spec, registry, register)
    except (KafkaError, OSError) as e:
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once: the driver's lease keeper could not start: {in_option_names(e)} (its "
            "files are kept under $SPARKKAFKA_LEASE_DIR, else the temp directory; option leaseKeeper=none starts "
            "no keeper)") from None


def _end_dead_drivers(admin: TransactionAdmin, decisions: DecisionLog, options: SinkOptions, streaming: bool) -> None:
    """End the open writes under the prefix of every other driver whose lease stands still."""
    prefix = options.transactional_id_prefix
    assert prefix is not None
    deadline = time.monotonic() + _END_TIMEOUT_S + options.lease_window_ms / 1000
    try:
        _, gone = judge(admin, prefix + "-r", deadline, spare=(options.owner,),
                        window_s=options.lease_window_ms / 1000)
        ended = [settle(admin, decisions, write, deadline) for write in sorted(gone)]
    except KafkaError as e:
        if streaming:
            log.warning("pyprod-kafka: could not end the open writes under %r whose driver is gone: %s", prefix, e)
            return
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once: the driver could not end the open writes under {prefix!r} whose driver "
            f"is gone: {type(e).__name__}: {in_option_names(e)}") from None
    if ended:
        log.warning("pyprod-kafka: ended %d writes under %r left open by drivers that are gone (they held back "
                    "read_committed readers of their partitions): %s", len(ended), prefix, _said(ended))


def _probe(admin: TransactionAdmin, options: SinkOptions, timeout_s: float) -> None:
    """The brokers accept ``transaction.timeout.ms`` (their ``transaction.max.timeout.ms`` caps
    it): InitProducerId under a probe id of the prefix asks exactly that; and the brokers the
    probe reached can serve the hand-over (``HANDOVER_APIS``: without them a failed attempt's
    transaction could not be found and aborted, nor a late attempt stopped, so Kafka before 3.0
    is refused, naming the broker's release).  A refusal fails the write with one clear line
    instead of failing every task, or the commit."""
    prefix = options.transactional_id_prefix
    assert prefix is not None
    timeout_ms = options.producer_config.transaction_timeout_ms
    try:
        admin.fence(probe_id(prefix), time.monotonic() + timeout_s)
        lacking = admin.brokers_lacking(HANDOVER_APIS)  # those the probe reached
    except InvalidTransactionTimeoutError:
        raise SinkValidationError(
            f"kafka.transaction.timeout.ms={timeout_ms} is more than the brokers allow (their "
            "transaction.max.timeout.ms, 900000 by default): lower it, or raise the brokers' cap; under "
            "exactly-once a task's transaction stays open until the driver commits the whole job") from None
    except KafkaError as e:  # e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED: every task would fail the same way
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once: the transaction coordinator refused the driver's probe under "
            f"transactional id {probe_id(prefix)!r}: {type(e).__name__}: {in_option_names(e)} (the tasks' "
            "transactional ids start with transactionalIdPrefix: the principal needs WRITE and DESCRIBE on "
            "them)") from None
    if lacking:
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once needs brokers of Apache Kafka {lacking[0].needed} or newer: the driver "
            "finds and aborts the transactions a failed or losing task attempt left open (ListTransactions), and a "
            "late attempt checks that its write is still open (DescribeTransactions), both KIP-664. Here "
            f"{_answering(lacking)}. Upgrade the brokers, or write with deliveryGuarantee=at-least-once (the default)")


def _answering(lacking: list[BrokerLacking]) -> str:
    """"the broker at host:port answers as Apache Kafka 2.8 does, without ..." for each."""
    return "; ".join(f"the broker at {b.address} answers as {b.release} does, without {' and '.join(b.missing)}"
                     for b in lacking)


# -- after the tasks -------------------------------------------------------------------------------
def _prepared(messages: Iterable[TaskCommitMessage | None]) -> list[tuple[TaskCommitMessage, PreparedTransaction]]:
    return [(m, PreparedTransaction.from_json(m.transaction)) for m in messages
            if m is not None and m.transaction]


def _write_of(messages: CommitMessages, options: SinkOptions, batch_id: int | None) -> WriteId | None:
    """The write the tasks wrote under (their messages name it), else the plan's own -- which is
    the tasks' for a batch write, but not for a streaming micro-batch (None then)."""
    for m in messages:
        if m is not None and m.write and (found := parse(m.write)) is not None:
            return found
    return options.write(batch_id) if not options.streaming else None


def _deadline(winners: int = 0) -> float:
    return time.monotonic() + _END_TIMEOUT_S + _END_PER_TASK_S * winners


def _query_of(messages: CommitMessages) -> str | None:
    """Spark's id of the streaming query the tasks wrote for (None: not known)."""
    return next((m.query for m in messages if m is not None and getattr(m, "query", None)), None)


def commit_all(messages: CommitMessages, options: SinkOptions, batch_id: int | None = None) -> str:
    """Commit the write's winners (``exactly_once.commit``); a summary line, or
    ``TransactionCommitError`` saying what is visible and what ends the write."""
    winners = [p for _, p in _prepared(messages)]
    write = _write_of(messages, options, batch_id)
    assert write is not None, "a commit has the tasks' messages"
    _keep(options)
    with TransactionAdmin(options.producer_config) as admin:
        decisions = DecisionLog(admin, options.decision_topic)
        deadline = _deadline(len(winners))
        try:
            done = commit_write(admin, decisions, options.producer_config, write, winners, deadline,
                                _query_of(messages))
        except CommitError as e:
            raise TransactionCommitError(f"pyprod-kafka: {in_option_names(e)}") from None
    _unregister(options, write)
    return (f"{len(done.committed)} transactions committed under {options.transactional_id_prefix!r}"
            + (f", {len(done.aborted)} left by failed or losing attempts aborted" if done.aborted else ""))


def abort_all(messages: CommitMessages, options: SinkOptions, batch_id: int | None = None) -> str:
    """End the write as decided -- Spark calls this after a failed job, and after a commit that
    failed: a decided write is completed, an undecided one aborted.  Where even that cannot be
    done now, the keeper is asked to (and readers wait at most ``transaction.timeout.ms``)."""
    writes = _writes_to_end(messages, options, batch_id)
    done = []
    with TransactionAdmin(options.producer_config) as admin:
        decisions = DecisionLog(admin, options.decision_topic)
        for write in writes:
            try:
                done.append(settle(admin, decisions, write, _deadline()))
            except KafkaError as e:
                _abandon(options, write)
                return (f"write {write} could not be ended now ({in_option_names(e)}): the driver's keeper ends it "
                        "as decided (the command too: python -m sparkkafka_sink.transactions)")
            _unregister(options, write)
    return _said(done) or "nothing was open"


def _writes_to_end(messages: CommitMessages, options: SinkOptions, batch_id: int | None) -> list[WriteId]:
    write = _write_of(messages, options, batch_id)
    if write is not None:
        return [write]
    # a micro-batch none of whose tasks finished: its writes are this driver's of that batch
    prefix = options.transactional_id_prefix
    assert prefix is not None
    with TransactionAdmin(options.producer_config) as admin:
        listed = admin.open_transactions(f"{prefix}-r{options.owner}", _deadline(), LIVE_STATES)
    return sorted({w for t, _, _ in listed if (w := parse(t)) is not None and w.batch == batch_id})


def _said(ended: list[Settled]) -> str:
    return "; ".join(f"write {s.write} {'completed as decided' if s.decided else 'aborted'} "
                     f"({len(s.committed)} committed, {len(s.aborted)} aborted"
                     + (f", {len(s.lost)} LOST to their coordinator's timeout" if s.lost else "") + ")"
                     for s in ended)


def _unregister(options: SinkOptions, write: WriteId) -> None:
    if options.lease_keeper != "none" and not _per_query(options):
        assert options.transactional_id_prefix is not None
        keepers.Registry(options.transactional_id_prefix, options.owner).unregister(write.name)


def _abandon(options: SinkOptions, write: WriteId) -> None:
    if options.lease_keeper != "none":
        assert options.transactional_id_prefix is not None
        keepers.Registry(options.transactional_id_prefix, options.owner).abandon(write.name)


# -- streaming: one write per micro-batch, the query's latest decision kept ---------------------
def commit_micro_batch(messages: CommitMessages, batch_id: int, options: SinkOptions) -> tuple[str, bool]:
    """Commit micro-batch ``batch_id`` exactly once, even when Spark replays it after a driver
    restart: ``(summary, replay)`` -- a replay of a batch decided before (its new transactions
    aborted, the earlier ones completed as recorded)."""
    prefix = options.transactional_id_prefix
    assert prefix is not None
    write = _write_of(messages, options, batch_id)
    ended = []
    with TransactionAdmin(options.producer_config) as admin:
        decisions = DecisionLog(admin, options.decision_topic)
        deadline = _deadline()
        # the query runs once at a time (Spark's rule): another driver's writes under its prefix
        # are an earlier run's -- the last decided micro-batch among them completed as recorded
        for other in sorted({w for t, _, _ in admin.open_transactions(prefix + "-r", deadline, LIVE_STATES)
                             if (w := parse(t)) is not None and w.owner != options.owner}):
            ended.append(settle(admin, decisions, other, deadline))
        latest = decisions.latest_of_query(prefix, deadline)
        query = _query_of(messages)
        verdict = judge_micro_batch(latest, write, batch_id, query)
        if verdict is Replay.DECIDED:  # a commit asked again
            assert write is not None
            return f"micro-batch {batch_id}: {_said([settle(admin, decisions, write, deadline)])}", False
        if verdict is Replay.OTHER_QUERY:
            assert latest is not None
            log.warning("pyprod-kafka: the checkpoint location's decisions under %r are another query's (Spark's id "
                        "%s; this query's is %s): the location was reused by a new query, whose micro-batches are its "
                        "own, not replays", prefix, latest.query, query)
        elif verdict is Replay.REPLAY:
            assert latest is not None
            done = [settle(admin, decisions, w, deadline) for w in (latest.write, write) if w is not None]
            return (f"micro-batch {batch_id} was decided before by {latest.write} (a replay): "
                    f"{_said(done)}; nothing written twice", True)
    text = commit_all(messages, options, batch_id)
    earlier = f"; first ended what an earlier run left: {_said(ended)}" if ended else ""
    return f"micro-batch {batch_id}: {text}{earlier}", False


def abort_micro_batch(messages: CommitMessages, batch_id: int, options: SinkOptions) -> str:
    return f"micro-batch {batch_id}: " + abort_all(messages, options, batch_id)
