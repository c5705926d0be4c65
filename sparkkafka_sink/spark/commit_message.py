"""What a write task reports back to the driver's ``commit()`` / ``abort()``.

Spark passes the tasks' ``WriterCommitMessage`` objects to ``commit()`` (all succeeded) or
``abort()`` (some failed; failed tasks give None); ``driver/write_end.py`` acts on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from pyspark.sql.datasource import WriterCommitMessage


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
    transaction: str | None = None
    #: exactly-once: the write the task wrote under (``exactly_once.ids``), or None
    write: str | None = None
    #: streaming: Spark's id of the query (kept in its checkpoint: the same across restarts, a
    #: new one for a new query on a reused checkpoint location), or None
    query: str | None = None
    #: the task's span (OpenTelemetry), a W3C ``traceparent``, for the driver's commit span to
    #: link; None: not traced
    trace: str | None = None


#: what Spark hands ``commit()`` and ``abort()``: one per task, None for a task that failed
CommitMessages = Sequence[TaskCommitMessage | None]


def task_messages(messages: Sequence[WriterCommitMessage | None]) -> CommitMessages:
    """Spark's messages as what the tasks returned (``write()`` returns a ``TaskCommitMessage``)."""
    return cast(CommitMessages, messages)
