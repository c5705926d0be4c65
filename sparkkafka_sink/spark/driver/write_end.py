"""The driver's end of a write: Spark's ``commit()`` / ``abort()`` and their one-line summaries.

Spark passes the tasks' ``TaskCommitMessage`` objects to ``commit()`` (all succeeded) or
``abort()`` (some failed; failed tasks give None).  At-least-once, Kafka has nothing to commit or
roll back, so both only log: the summary says where the data went, the abort note says what is
already in Kafka and will be written again when the job is re-run.  Exactly-once, the tasks'
transactions are committed or aborted first (``exactly_once_writes.py``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sparkkafka_sink import otel
from sparkkafka_sink.otel.spans import Span
from sparkkafka_sink.producer.offset_ranges import merge_range
from sparkkafka_sink.spark.commit_message import CommitMessages, TaskCommitMessage
from sparkkafka_sink.spark.observability import end_span
from sparkkafka_sink.spark.plan import WritePlan

if TYPE_CHECKING:
    from sparkkafka_sink.spark.options import SinkOptions

log = logging.getLogger("sparkkafka_sink.spark")

_MAX_LISTED = 8


def commit_write(messages: CommitMessages, plan: WritePlan | None, batch_id: int | None = None) -> None:
    """Spark's ``commit()`` of a write (``batch_id``: of a streaming micro-batch)."""
    with _traced(messages, plan, batch_id, commit=True) as span:
        if plan is not None and plan.options.exactly_once:
            text, replay = _end_transactions(messages, plan.options, batch_id, commit=True)
            log_line(logging.INFO, text)
            if replay:  # its rows were aborted: the summary would name records nobody sees
                span.set({"sparkkafka_sink.decision": "replay"})
                return
        log_line(logging.INFO, commit_summary(messages, what=_what(batch_id)))
        span.set({"sparkkafka_sink.decision": "commit"})


def abort_write(messages: CommitMessages, plan: WritePlan | None, batch_id: int | None = None) -> None:
    """Spark's ``abort()`` of a write (``batch_id``: of a streaming micro-batch)."""
    with _traced(messages, plan, batch_id, commit=False) as span:
        if plan is not None and plan.options.exactly_once:
            log_line(logging.WARNING, _end_transactions(messages, plan.options, batch_id, commit=False)[0])
        else:
            log_line(logging.WARNING, abort_summary(messages, what=_what(batch_id)))
        span.set({"sparkkafka_sink.decision": "abort"})


@contextmanager
def _traced(messages: CommitMessages, plan: WritePlan | None, batch_id: int | None, commit: bool) -> Iterator[Span]:
    """The span of this end of the write (OpenTelemetry's; nothing when not traced): its error
    recorded, ended and flushed (this process ends soon after)."""
    span = end_span(plan.options if plan is not None else None, messages, batch_id, commit)
    try:
        yield span
    except BaseException as failed:
        span.fail(failed)
        raise
    finally:
        span.end()
        otel.flush()


def _end_transactions(messages: CommitMessages, options: SinkOptions, batch_id: int | None,
                      commit: bool) -> tuple[str, bool]:
    """Exactly-once: commit (or end as decided) the tasks' transactions; the line saying what
    was done, and whether the micro-batch was a replay of one decided before."""
    from sparkkafka_sink.spark.driver import exactly_once_writes  # the network stack: exactly-once only

    micro_batch = batch_id if batch_id is not None else options.batch_id  # foreachBatch's batchId option
    replay = False
    if micro_batch is None:
        text = (exactly_once_writes.commit_all if commit else exactly_once_writes.abort_all)(messages, options)
    elif commit:
        text, replay = exactly_once_writes.commit_micro_batch(messages, micro_batch, options)
    else:
        text = exactly_once_writes.abort_micro_batch(messages, micro_batch, options)
    return "pyprod-kafka: exactly-once: " + text, replay


def _what(batch_id: int | None) -> str:
    return "write" if batch_id is None else f"micro-batch {batch_id}"


def merge_offsets(messages: Iterable[TaskCommitMessage | None]) -> dict:
    """Combine the tasks' per topic-partition stats: counts add, offsets span."""
    out: dict = {}
    for m in messages:
        if m is None:
            continue
        for tp, (count, first, last) in m.offsets.items():
            merge_range(out, tp, count, first, last)
    return {tp: tuple(r) for tp, r in out.items()}


def describe_offsets(offsets: dict) -> str:
    parts = [
        f"{topic}-{partition} [{first}..{last}] ({count})"
        for (topic, partition), (count, first, last) in sorted(offsets.items())
    ]
    if len(parts) > _MAX_LISTED:
        parts = parts[:_MAX_LISTED] + [f"and {len(parts) - _MAX_LISTED} more"]
    return ", ".join(parts) if parts else "nothing"


def _finished(messages: CommitMessages) -> tuple[list, dict, int]:
    """The finished tasks' messages, their merged offsets and their records."""
    done = [m for m in messages if m is not None]
    return done, merge_offsets(done), sum(m.records for m in done)


def commit_summary(messages: CommitMessages, what: str = "write") -> str:
    done, offsets, records = _finished(messages)
    return (f"pyprod-kafka: {what} committed: {records} records to {len(offsets)} "
            f"topic-partitions from {len(done)} tasks: {describe_offsets(offsets)}")


def abort_summary(messages: CommitMessages, what: str = "write") -> str:
    """At-least-once, what an aborted write left in Kafka: the finished tasks' records, and those
    the unfinished ones had sent, which stay too but whose counts never reach the driver (Spark
    hands ``abort`` no message of a task that did not finish)."""
    done, offsets, records = _finished(messages)
    unfinished = len(messages) - len(done)
    also = (f"; the {unfinished} unfinished tasks may have sent records too, which also stay (their counts do "
            "not reach the driver)" if unfinished else "")
    return (f"pyprod-kafka: {what} aborted: {len(done)} of {len(messages)} tasks had finished and their "
            f"{records} records stay in Kafka{also} (a re-run writes them again: at-least-once): "
            f"{describe_offsets(offsets)}")


def log_line(level: int, line: str) -> None:
    """Log through ``sparkkafka_sink.spark``.

    commit()/abort() run in Spark's bare Python worker processes, where nobody
    configures logging and the root logger drops INFO: give our logger its own
    handler on the process's real stderr, which Spark forwards to its log.
    """
    if not log.handlers:
        handler = logging.StreamHandler(sys.__stderr__)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    log.log(level, line)
