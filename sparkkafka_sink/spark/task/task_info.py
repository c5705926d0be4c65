"""Which task attempt this is, read from Spark's ``TaskContext``.

Client ids, transactional ids, metrics per micro-batch and every failure message name it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import TaskContext

# Local properties Spark sets on every job of a streaming micro-batch (also inside foreachBatch).
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class TaskInfo:
    stage: int = 0
    partition: int = 0
    attempt: int = 0
    micro_batch: tuple | None = None  # (query id, batch id) when streaming
    #: Spark's id of this task attempt, unique in the application (transactional ids use it)
    attempt_id: int = 0

    @classmethod
    def current(cls) -> TaskInfo:
        ctx = TaskContext.get()
        if ctx is None:
            return cls()
        query, batch = ctx.getLocalProperty(_QUERY_ID_PROPERTY), ctx.getLocalProperty(_BATCH_ID_PROPERTY)
        micro_batch = (query, int(batch)) if query and batch and batch.lstrip("-").isdigit() else None
        return cls(ctx.stageId(), ctx.partitionId(), ctx.attemptNumber(), micro_batch, ctx.taskAttemptId())
