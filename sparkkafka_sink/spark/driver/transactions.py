"""Exactly-once on the driver: commit the transactions the tasks prepared, abort the rest.

Every task attempt wrote in its own transaction (id: the write's prefix, the partition and
Spark's task attempt id) and handed it over in its commit message.  Spark calls ``commit`` with
the messages of the attempts it kept -- one per partition -- so those transactions are
committed, and every other transaction under the prefix (failed attempts, speculative losers,
tasks killed before they could abort) is aborted.  ``abort`` aborts them all.  Nothing of a
write is visible to read_committed consumers before its commit, and nothing hangs after it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import replace

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.producer.handover import HANDOVER_APIS, BrokerLacking, PreparedTransaction, TransactionAdmin
from sparkkafka_sink.protocol.errors import InvalidTransactionTimeoutError
from sparkkafka_sink.spark.commit_message import CommitMessages, TaskCommitMessage
from sparkkafka_sink.spark.errors import SinkValidationError, in_option_names
from sparkkafka_sink.spark.options import SinkOptions, tls_files_here
from sparkkafka_sink.spark.write_fence import attempts_prefix, close_write, decide_commit, fence_idle_attempts

log = logging.getLogger("sparkkafka_sink.spark")

#: bound of each coordinator call from the driver (retries included)
_END_TIMEOUT_S = 120.0


class TransactionCommitError(KafkaError):
    """The driver could not commit every task's transaction: the message says what is visible."""


class _DriverTransactions:
    """One coordinator client (one set of connections) for a whole driver commit or abort;
    each call bounded by ``_END_TIMEOUT_S``, retries included.

    First the write is closed (``write_fence``: a task attempt that starts from now on writes
    nothing); then the others are ended: every open transaction under the prefix but the
    winners aborted, and the write's producers initialised but not yet in a transaction
    fenced."""

    def __init__(self, options: SinkOptions, batch_id: int | None = None):
        self.options, self.batch_id = options, batch_id
        assert options.transactional_id_prefix is not None, "exactly-once writes have a prefix"
        self.prefix = options.transactional_id_prefix
        self.admin = TransactionAdmin(options.producer_config)
        try:
            close_write(self.admin, options, batch_id, time.monotonic() + _END_TIMEOUT_S)
        except BaseException:
            self.admin.close()
            raise

    def __enter__(self) -> _DriverTransactions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.admin.close()

    def end(self, prepared: PreparedTransaction, commit: bool) -> None:
        self.admin.end(prepared, commit, time.monotonic() + _END_TIMEOUT_S)

    def decide_commit(self) -> None:
        decide_commit(self.admin, self.options, time.monotonic() + _END_TIMEOUT_S)

    def abort_others(self, keep: list[str]) -> list[str]:
        """Abort every open transaction of this write's attempts except ``keep`` -- of a streaming
        query, under its whole prefix, earlier runs' included (the prefix is the query's) -- and
        fence this write's idle producers; returns the ids whose transaction was aborted.  A batch
        write's prefix is its target's, which other writes running at once share: their
        transactions are theirs to end."""
        deadline = time.monotonic() + _END_TIMEOUT_S
        scope = self.prefix if self.options.commit_log_dir is not None else attempts_prefix(self.options, self.batch_id)
        aborted = self.admin.abort_lingering(scope, deadline, keep)
        fence_idle_attempts(self.admin, self.options, self.batch_id, keep, deadline)
        return aborted


def _prepared(messages: Iterable[TaskCommitMessage | None]) -> list[tuple[TaskCommitMessage, PreparedTransaction]]:
    return [(m, PreparedTransaction.from_json(m.transaction)) for m in messages
            if m is not None and m.transaction]


def start_exactly_once(options: SinkOptions, streaming: bool = False, timeout_s: float = 15.0) -> SinkOptions:
    """On the driver, before any task of an exactly-once write: ``options`` with a run id naming
    this driver (``lease.new_run_id``), once the coordinator accepted the write's settings
    (:func:`_probe`), the driver's lease beats (``lease.ensure_lease``) and the writes of drivers
    that are gone have been ended (``lease.end_dead_writes``: their transactions would hold back
    every read_committed reader of their partitions until the coordinator timed them out)."""
    from sparkkafka_sink.spark.driver import lease

    process = lease.driver_process()
    token = lease.driver_token(process)
    options = replace(options, run_id=lease.new_run_id(token))
    config, prefix = options.producer_config, options.transactional_id_prefix
    assert prefix is not None, "exactly-once writes have a prefix"
    if not tls_files_here(config):
        return options  # TLS files shipped to the executors only: the tasks' InitProducerId will say
    with TransactionAdmin(config) as admin:
        _probe(admin, options, timeout_s)
        try:
            lease.ensure_lease(config, prefix, token, process, options.commit_log_dir)
        except KafkaError as e:
            raise SinkValidationError(f"deliveryGuarantee=exactly-once: {in_option_names(e)}") from None
        try:
            ended = lease.end_dead_writes(admin, prefix, token, time.monotonic() + _END_TIMEOUT_S,
                                          options.commit_log_dir)
        except KafkaError as e:  # a stream's next micro-batch tries again; a batch write must not leave them
            if not streaming:
                raise SinkValidationError(
                    f"deliveryGuarantee=exactly-once: the driver could not end the open transactions of earlier "
                    f"writes under {prefix!r} whose driver is gone: {type(e).__name__}: {in_option_names(e)}"
                ) from None
            log.warning("pyprod-kafka: could not end the open transactions of dead writes under %r: %s", prefix, e)
            ended = []
    if ended:
        log.warning("pyprod-kafka: ended %d open transactions under %r left by writes whose driver is gone (they "
                    "held back read_committed readers of their partitions): %s", len(ended), prefix, ", ".join(ended))
    return options


def _probe(admin: TransactionAdmin, options: SinkOptions, timeout_s: float) -> None:
    """The brokers accept ``transaction.timeout.ms`` (their ``transaction.max.timeout.ms`` caps
    it): InitProducerId under a probe id of this write asks exactly that; and the brokers the
    probe reached can serve the hand-over (``HANDOVER_APIS``: without them a failed attempt's
    transaction could not be found and aborted, nor a late attempt stopped, so Kafka before 3.0
    is refused, naming the broker's release).  A refusal fails the write with one clear line
    instead of failing every task, or the commit."""
    timeout_ms = options.producer_config["transaction.timeout.ms"]
    try:
        admin.fence(f"{options.transactional_id_prefix}-probe", time.monotonic() + timeout_s)
        lacking = admin.brokers_lacking(HANDOVER_APIS)  # those the probe reached
    except InvalidTransactionTimeoutError:
        raise SinkValidationError(
            f"kafka.transaction.timeout.ms={timeout_ms} is more than the brokers allow (their "
            "transaction.max.timeout.ms, 900000 by default): lower it, or raise the brokers' cap; under "
            "exactly-once a task's transaction stays open until the driver commits the whole job") from None
    except KafkaError as e:  # e.g. TRANSACTIONAL_ID_AUTHORIZATION_FAILED: every task would fail the same way
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once: the transaction coordinator refused the driver's probe under "
            f"transactional id {options.transactional_id_prefix!r}-probe: {type(e).__name__}: "
            f"{in_option_names(e)} (the tasks' transactional ids start with transactionalIdPrefix: the "
            "principal needs WRITE and DESCRIBE on them)") from None
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


def commit_all(messages: CommitMessages, options: SinkOptions) -> str:
    """Commit every prepared transaction; a summary line.  The losers go first (the write's
    other transactions aborted), then the decision is recorded at the coordinator
    (``write_fence.decide_commit``), then the winners are committed: a driver that dies in
    between leaves only winners open, which whoever ends its write commits."""
    done, failed = [], []
    winners = _prepared(messages)
    with _DriverTransactions(options) as txns:
        aborted = txns.abort_others(keep=[p.transactional_id for _, p in winners])
        txns.decide_commit()
        for message, prepared in winners:
            try:
                txns.end(prepared, True)
                done.append((message, prepared))
            except KafkaError as e:
                failed.append((message, prepared, e))
        if failed:
            visible = ", ".join(f"task of partition {m.partition_id}: {_partitions(p)}" for m, p in done) or "none"
            lost = "; ".join(f"partition {m.partition_id} ({_partitions(p)}): {in_option_names(e)}" for m, p, e in failed)
            txns.abort_others(keep=[])
            raise TransactionCommitError(
                f"pyprod-kafka: exactly-once commit failed for {len(failed)} of {len(failed) + len(done)} tasks; "
                f"their rows are NOT visible: {lost}. Committed and visible: {visible}")
    return (f"{len(done)} transactions committed under {options.transactional_id_prefix!r}"
            + (f", {len(aborted)} left by failed or losing attempts aborted" if aborted else ""))


def abort_all(messages: CommitMessages, options: SinkOptions, batch_id: int | None = None) -> str:
    errors = []
    with _DriverTransactions(options, batch_id) as txns:
        for _, prepared in _prepared(messages):
            try:
                txns.end(prepared, False)
            except KafkaError as e:
                errors.append(f"{prepared.transactional_id}: {in_option_names(e)}")
        aborted = txns.abort_others(keep=[])
    text = f"every transaction under {options.transactional_id_prefix!r} aborted ({len(aborted)} lingering)"
    if errors:
        text += "; could not abort (the coordinator aborts them after kafka.transaction.timeout.ms): " + "; ".join(errors)
    return text


def _partitions(prepared: PreparedTransaction) -> str:
    return ", ".join(f"{t}-{p}" for t, p in prepared.partitions) or "no partitions"


def committed_before(options: SinkOptions, batch_id: int) -> bool:
    """Micro-batch ``batch_id`` was committed by an earlier run (Spark replays it)."""
    return MicroBatchLog(_commit_log_dir(options)).done(batch_id)


def _commit_log_dir(options: SinkOptions) -> str:
    assert options.commit_log_dir is not None, "exactly-once streaming writes record their commits"
    return options.commit_log_dir


# -- streaming: one commit per micro-batch, recorded so a replay is not written twice -------------
class MicroBatchLog:
    """``<checkpoint>/pyprod-kafka/<batch>.intent`` (the transactions about to be committed) and
    ``<batch>.done`` (all committed), each written whole (temporary file, then rename)."""

    def __init__(self, directory: str):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, batch_id: int, kind: str) -> str:
        return os.path.join(self.dir, f"{batch_id}.{kind}")

    def _write(self, batch_id: int, kind: str, text: str) -> None:
        path = self._path(batch_id, kind)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def intent_path(self, batch_id: int) -> str:
        """Where the transactions about to be committed for ``batch_id`` are recorded."""
        return self._path(batch_id, "intent")

    def done(self, batch_id: int) -> bool:
        return os.path.exists(self._path(batch_id, "done"))

    def intent(self, batch_id: int) -> list[PreparedTransaction] | None:
        path = self._path(batch_id, "intent")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return [PreparedTransaction.from_json(t) for t in json.load(f)]

    def write_intent(self, batch_id: int, prepared: list[PreparedTransaction]) -> None:
        self._write(batch_id, "intent", json.dumps([p.to_json() for p in prepared]))

    def write_done(self, batch_id: int) -> None:
        self._write(batch_id, "done", "")


def commit_micro_batch(messages: CommitMessages, batch_id: int, options: SinkOptions) -> str:
    """Commit micro-batch ``batch_id`` exactly once, even when Spark calls this again for it or
    replays the batch after a driver restart."""
    log = MicroBatchLog(_commit_log_dir(options))
    new = [p for _, p in _prepared(messages)]
    with _DriverTransactions(options, batch_id) as txns:
        if log.done(batch_id):
            for p in new:
                txns.end(p, False)
            return (f"micro-batch {batch_id} was committed before (a replay): its {len(new)} new "
                    "transactions aborted, nothing written twice")
        earlier = log.intent(batch_id)
        if earlier is None:
            log.write_intent(batch_id, new)
            to_commit, extra = new, []
        else:  # a crash between the intent and done: finish what was decided then
            to_commit, extra = earlier, new
        failed = []
        for p in to_commit:
            try:
                txns.end(p, True)
            except KafkaError as e:
                failed.append(f"{_partitions(p)}: {in_option_names(e)}")
        if failed:
            raise TransactionCommitError(
                f"pyprod-kafka: exactly-once commit of micro-batch {batch_id} failed for {len(failed)} of "
                f"{len(to_commit)} transactions ({'; '.join(failed)}); the query stops, and its restart tries these "
                f"commits again (recorded in {log.intent_path(batch_id)})")
        for p in extra:
            txns.end(p, False)
        aborted = txns.abort_others(keep=[p.transactional_id for p in to_commit])
    log.write_done(batch_id)
    return (f"micro-batch {batch_id}: {len(to_commit)} transactions committed"
            + (" (recorded by a run that crashed before it finished)" if earlier is not None else "")
            + (f", {len(extra) + len(aborted)} others aborted" if extra or aborted else ""))


def abort_micro_batch(messages: CommitMessages, batch_id: int, options: SinkOptions) -> str:
    log = MicroBatchLog(_commit_log_dir(options))
    if log.done(batch_id) or log.intent(batch_id) is not None:
        # decided before: only this attempt's new transactions go
        with _DriverTransactions(options, batch_id) as txns:
            for _, p in _prepared(messages):
                txns.end(p, False)
        return f"micro-batch {batch_id}: this attempt's transactions aborted (the batch was committed before)"
    return abort_all(messages, options, batch_id)
