"""What a write task reports back, and the driver's one-line summaries of it.

Spark passes the tasks' ``WriterCommitMessage`` objects to ``commit()`` (all
succeeded) or ``abort()`` (some failed; failed tasks give None).  At-least-once,
Kafka has nothing to commit or roll back, so both only log: the summary says
where the data went, the abort note says what is already in Kafka and will be
written again when the job is re-run.  Exactly-once, a message also carries the
task's open transaction, which ``spark.transactions`` commits or aborts.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Iterable, Optional

from pyspark.sql.datasource import WriterCommitMessage

from sparkkafka_sink.producer.offset_ranges import merge_range

log = logging.getLogger("sparkkafka_sink.spark")

_MAX_LISTED = 8


@dataclass
class TaskCommitMessage(WriterCommitMessage):
    """One successful write task: records per topic-partition with first/last offsets."""

    partition_id: int
    attempt: int
    records: int
    # (topic, partition) -> (count, first_offset, last_offset)
    offsets: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    #: exactly-once: the task's open transaction, for the driver to commit (JSON of a
    #: ``PreparedTransaction``), or None
    transaction: Optional[str] = None


def merge_offsets(messages: Iterable[Optional[TaskCommitMessage]]) -> dict:
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


def commit_summary(messages, what: str = "write") -> str:
    done = [m for m in messages if m is not None]
    offsets = merge_offsets(done)
    records = sum(m.records for m in done)
    return (
        f"pyprod-kafka: {what} committed: {records} records to {len(offsets)} "
        f"topic-partitions from {len(done)} tasks: {describe_offsets(offsets)}"
    )


def abort_summary(messages, what: str = "write") -> str:
    done = [m for m in messages if m is not None]
    offsets = merge_offsets(done)
    records = sum(m.records for m in done)
    return (
        f"pyprod-kafka: {what} aborted: {len(done)} of {len(messages)} tasks had finished and "
        f"their {records} records stay in Kafka (a re-run writes them again: at-least-once): "
        f"{describe_offsets(offsets)}"
    )


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
