"""Exactly-once on the driver: commit the transactions the tasks prepared, abort the rest.

Every task attempt wrote in its own transaction (id: the write's prefix, the partition and
Spark's task attempt id) and handed it over in its commit message.  Spark calls ``commit`` with
the messages of the attempts it kept -- one per partition -- so those transactions are
committed, and every other transaction under the prefix (failed attempts, speculative losers,
tasks killed before they could abort) is aborted.  ``abort`` aborts them all.  Nothing of a
write is visible to read_committed consumers before its commit, and nothing hangs after it.
"""

from __future__ import annotations

from typing import Iterable, Optional

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.producer.handover import abort_lingering, complete_transaction
from sparkkafka_sink.producer.transactions import PreparedTransaction
from sparkkafka_sink.spark.commit import TaskCommitMessage
from sparkkafka_sink.spark.options import SinkOptions

#: bound of each coordinator call from the driver (retries included)
_END_TIMEOUT_S = 120.0


class TransactionCommitError(KafkaError):
    """The driver could not commit every task's transaction: the message says what is visible."""


def _prepared(messages: Iterable[Optional[TaskCommitMessage]]) -> list[tuple[TaskCommitMessage, PreparedTransaction]]:
    return [(m, PreparedTransaction.from_json(m.transaction)) for m in messages
            if m is not None and m.transaction]


def commit_all(messages, options: SinkOptions) -> str:
    """Commit every prepared transaction, then abort the write's others; a summary line."""
    config = options.producer_config
    done, failed = [], []
    for message, prepared in _prepared(messages):
        try:
            complete_transaction(prepared, True, config, timeout=_END_TIMEOUT_S)
            done.append((message, prepared))
        except KafkaError as e:
            failed.append((message, prepared, e))
    if failed:
        visible = ", ".join(f"task of partition {m.partition_id}: {_partitions(p)}" for m, p in done) or "none"
        lost = "; ".join(f"partition {m.partition_id} ({_partitions(p)}): {e}" for m, p, e in failed)
        _abort_others(options, keep=[])
        raise TransactionCommitError(
            f"pyprod-kafka: exactly-once commit failed for {len(failed)} of {len(failed) + len(done)} tasks; "
            f"their rows are NOT visible: {lost}. Committed and visible: {visible}")
    aborted = _abort_others(options, keep=[p.transactional_id for _, p in done])
    return (f"{len(done)} transactions committed under {options.transactional_id_prefix!r}"
            + (f", {len(aborted)} left by failed or losing attempts aborted" if aborted else ""))


def abort_all(messages, options: SinkOptions) -> str:
    config = options.producer_config
    errors = []
    for _, prepared in _prepared(messages):
        try:
            complete_transaction(prepared, False, config, timeout=_END_TIMEOUT_S)
        except KafkaError as e:
            errors.append(f"{prepared.transactional_id}: {e}")
    aborted = _abort_others(options, keep=[])
    text = f"every transaction under {options.transactional_id_prefix!r} aborted ({len(aborted)} lingering)"
    if errors:
        text += "; could not abort (the coordinator aborts them after transaction.timeout.ms): " + "; ".join(errors)
    return text


def _abort_others(options: SinkOptions, keep: list[str]) -> list[str]:
    return abort_lingering(options.transactional_id_prefix, options.producer_config, exclude=keep,
                           timeout=_END_TIMEOUT_S)


def _partitions(prepared: PreparedTransaction) -> str:
    return ", ".join(f"{t}-{p}" for t, p in prepared.partitions) or "no partitions"
