"""One write task: Arrow batches in, one producer, a commit message out (Spark's KafkaWriteTask).

Shared by the batch and the streaming writer.  The task hands each (coalesced) Arrow batch to
``Producer.send_batch``, one call per topic in it, stops early once a record has failed,
flushes, waits until every future's callback has run, and only then either returns its
``TaskCommitMessage`` or raises ``SinkWriteError`` naming the first failed row: a row check
(``row_checks``), the producer's rejection (which names the row), or a failed batch (whose rows
its future lists).  Spark's task retry re-sends the whole partition, so delivery is
at-least-once; within a task the producer's idempotence keeps its own retries duplicate-free.
"""

from __future__ import annotations

import os

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from sparkkafka_sink.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from sparkkafka_sink.spark.commit import TaskCommitMessage
from sparkkafka_sink.spark.delivery import DeliveryTracker
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.rate_limit import RateLimiter, payload_bytes
from sparkkafka_sink.spark.row_checks import NULL_TOPIC, RowError, check_headers, first_null
from sparkkafka_sink.spark.sink_metrics import task_metrics
from sparkkafka_sink.spark.validation import PREFIX, ColumnLayout

# Slack on top of delivery.timeout.ms for the final flush: by then the producer
# must have failed every record it could not deliver.
_FLUSH_MARGIN_S = 15.0
_CLOSE_AFTER_FAILURE_S = 2.0


class SinkWriteError(KafkaError):
    """A write task could not deliver every record; the message says which and where."""


@dataclass(frozen=True)
class WritePlan:
    """Everything a task needs, decided on the driver and pickled into the writer."""

    options: SinkOptions
    layout: ColumnLayout


# Local properties Spark sets on every job of a streaming micro-batch (also inside foreachBatch).
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class TaskInfo:
    stage: int = 0
    partition: int = 0
    attempt: int = 0
    micro_batch: Optional[tuple] = None  # (query id, batch id) when streaming
    #: Spark's id of this task attempt, unique in the application (transactional ids use it)
    attempt_id: int = 0

    @classmethod
    def current(cls) -> "TaskInfo":
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return cls()
        query, batch = ctx.getLocalProperty(_QUERY_ID_PROPERTY), ctx.getLocalProperty(_BATCH_ID_PROPERTY)
        micro_batch = (query, int(batch)) if query and batch and batch.lstrip("-").isdigit() else None
        return cls(ctx.stageId(), ctx.partitionId(), ctx.attemptNumber(), micro_batch, ctx.taskAttemptId())


def default_producer_factory(config: dict):
    from sparkkafka_sink import Producer

    return Producer(config)


def run_write_task(
    batches: Iterator,
    plan: WritePlan,
    metrics_total=None,
    producer_factory: Callable[[dict], object] = default_producer_factory,
    task: Optional[TaskInfo] = None,
) -> TaskCommitMessage:
    task = task or TaskInfo.current()
    tracker = DeliveryTracker()
    producer = None
    rows_seen = 0
    ok = False
    limiter = rate_limiter(plan.options)
    try:
        for batch in _paced(_coalesced(batches, plan.options.coalesce_bytes), limiter, plan.layout):
            if producer is None:  # empty partitions never open a connection
                producer = producer_factory(_task_config(plan.options, task))
                if plan.options.exactly_once:
                    producer.init_transactions()
                    producer.begin_transaction()
            try:
                send_arrow_batch(producer, batch, plan.layout, plan.options.topic, rows_seen, tracker)
            except RowError as exc:
                tracker.fail_now(rows_seen + exc.index, exc.topic, exc.partition, InvalidRecordError(str(exc)))
                break
            rows_seen += batch.num_rows
            tracker.drain()
            if tracker.failed:
                break
        if producer is not None:
            _flush(producer, tracker, plan.options)
        metrics = task_metrics(_producer_metrics(producer), tracker.delivered, tracker.failed, task.micro_batch,
                               limiter.throttled_s if limiter is not None else 0.0)
        if metrics_total is not None:  # a Spark accumulator of the sink's metrics
            metrics_total.add(metrics)
        if tracker.failed:
            raise _failure(tracker, task, plan.options)
        transaction = None
        if producer is not None and plan.options.exactly_once:
            transaction = producer.prepare().to_json()  # the driver commits it with the job
        ok = True
        return TaskCommitMessage(
            partition_id=task.partition,
            attempt=task.attempt,
            records=tracker.delivered,
            offsets={tp: tuple(s) for tp, s in tracker.offsets.items()},
            metrics=metrics,
            transaction=transaction,
        )
    finally:
        if producer is not None and not ok and plan.options.exactly_once:
            _abort_quietly(producer)
        if producer is not None:
            try:
                producer.close(None if ok else _CLOSE_AFTER_FAILURE_S)
            except Exception:  # noqa: BLE001 - closing must not mask the task's own error
                if ok:
                    raise


def _abort_quietly(producer) -> None:
    """A failed exactly-once task aborts its transaction (best effort: the driver also aborts
    every transaction of the write that it does not commit)."""
    try:
        producer.abort_transaction(_CLOSE_AFTER_FAILURE_S)
    except Exception:  # noqa: BLE001 - the task's own error is what matters
        pass


def send_arrow_batch(producer, batch, layout: ColumnLayout, topic_option, row_offset: int,
                     tracker: DeliveryTracker) -> None:
    """Hand every row of ``batch`` (rows ``row_offset``.. of the task) to the producer, one
    ``send_batch`` per topic; rejections and failures go to ``tracker`` with their rows.

    Raises ``RowError`` (position within ``batch``) for a row no producer could take, before
    any row of the batch is sent."""
    import pyarrow as pa

    if layout.headers:
        check_headers(batch.column(layout.headers))
    for topic, rows in _topic_groups(batch, layout, topic_option):
        part = batch if rows is None else batch.take(pa.array(rows))
        col = part.column
        try:
            future = producer.send_batch(
                topic,
                values=col(layout.value),
                keys=col(layout.key) if layout.key else None,
                headers=col(layout.headers) if layout.headers else None,
                partitions=col(layout.partition) if layout.partition else None,
                timestamps=col(layout.timestamp) if layout.timestamp else None,
            )
        except KafkaError as exc:
            if getattr(exc, "partial", None) is not None:  # batches queued before the rejection
                tracker.track_bulk(exc.partial, topic, row_offset, rows)
            first = exc.row or 0
            not_sent = getattr(exc, "rows_not_sent", None)
            tracker.fail_now(row_offset + (first if rows is None else int(rows[first])), topic, exc.partition,
                             exc, count=part.num_rows if not_sent is None else len(not_sent))
            return
        tracker.track_bulk(future, topic, row_offset, rows)


def _topic_groups(batch, layout: ColumnLayout, topic_option):
    """[(topic, row indices or None for all rows)]; the topic option wins over the column."""
    import numpy as np
    import pyarrow.compute as pc

    if topic_option is not None:
        return [(topic_option, None)]
    col = batch.column(layout.topic)
    bad = first_null(col)
    if bad is not None:
        raise RowError(bad, NULL_TOPIC)
    topics = pc.unique(col).to_pylist()
    if len(topics) == 1:
        return [(topics[0], None)]
    return [(t, np.flatnonzero(pc.equal(col, t).to_numpy(zero_copy_only=False))) for t in topics]


def _coalesced(batches: Iterator, limit: int) -> Iterator:
    """Spark's Arrow batches, consecutive ones joined until they hold ``limit`` bytes.

    Row order is kept, so a position in a joined batch is still the task's row count plus
    the index.  Empty batches are dropped.
    """
    pending, size = [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if limit <= 0:
            yield batch
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= limit:
            yield _concat(pending)
            pending, size = [], 0
    if pending:
        yield _concat(pending)


def _paced(batches: Iterator, limiter: Optional[RateLimiter], layout: ColumnLayout) -> Iterator:
    """``batches`` as they are, or cut into slices each sent at its turn under the rate limits."""
    if limiter is None:
        yield from batches
        return
    count = payload_bytes(layout)
    for batch in batches:
        yield from limiter.paced(batch, count)


def rate_limiter(options: SinkOptions) -> Optional[RateLimiter]:
    if not options.max_records_per_s and not options.max_bytes_per_s:
        return None
    return RateLimiter(options.max_records_per_s, options.max_bytes_per_s)


def _concat(batches: list):
    if len(batches) == 1:
        return batches[0]
    import pyarrow as pa

    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


#: options naming files, which on a cluster are shipped to the executors with --files / addFile
_FILE_OPTIONS = ("ssl.truststore.location", "ssl.keystore.location")


def _task_config(options: SinkOptions, task: TaskInfo) -> dict:
    config = dict(options.producer_config)
    config.setdefault("client.id", f"pyprod-kafka-s{task.stage}-p{task.partition}-a{task.attempt}")
    if options.exactly_once:
        # one id per task attempt: attempts never fence each other, the driver commits the winner's
        if options.batch_id is not None:  # foreachBatch: the batch id the user passed
            task = dataclasses.replace(task, micro_batch=(None, options.batch_id))
        config["transactional.id"] = transactional_id(options.transactional_id_prefix, options.run_id, task)
    for key in _FILE_OPTIONS:
        if config.get(key):
            config[key] = _local_file(config[key])
    return config


def transactional_id(prefix: str, run_id: str, task: TaskInfo) -> str:
    run = f"-r{run_id}" if run_id else ""
    where = f"-b{task.micro_batch[1]}" if task.micro_batch else ""
    return f"{prefix}{run}{where}-p{task.partition}-t{task.attempt_id}"


def _local_file(path: str) -> str:
    """``path`` if it exists here, else the copy Spark shipped to this executor (``--files`` or
    ``SparkContext.addFile`` put it in the SparkFiles directory under its base name)."""
    if os.path.exists(path):
        return path
    try:
        from pyspark import SparkFiles

        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 - no SparkFiles here: the producer reports the missing file
        return path
    return shipped if os.path.exists(shipped) else path


def _flush(producer, tracker: DeliveryTracker, options: SinkOptions) -> None:
    """Flush, then wait for every callback; a timeout becomes a clear task error."""
    bound = options.delivery_timeout_s + _FLUSH_MARGIN_S
    try:
        producer.flush(bound)
    except KafkaTimeoutError as exc:
        raise SinkWriteError(
            f"{PREFIX}flush did not finish within {bound:.0f}s (delivery.timeout.ms + "
            f"{_FLUSH_MARGIN_S:.0f}s); {tracker.pending} records unresolved; brokers "
            f"{options.bootstrap_servers}"
        ) from exc
    if not tracker.wait_all(_FLUSH_MARGIN_S):
        raise SinkWriteError(
            f"{PREFIX}{tracker.pending} record futures still unresolved after flush() returned"
        )


def _producer_metrics(producer) -> dict:
    if producer is None:
        return {}
    try:
        return producer.metrics()
    except Exception:  # noqa: BLE001 - metrics are best effort, delivery is not
        return {}


def _failure(tracker: DeliveryTracker, task: TaskInfo, options: SinkOptions) -> SinkWriteError:
    first = tracker.first_failure
    err = first.error
    hint = ""
    if isinstance(err, (KafkaTimeoutError, KafkaConnectionError)):
        hint = f" (is kafka.bootstrap.servers={options.bootstrap_servers} reachable?)"
    exc = SinkWriteError(
        f"{PREFIX}write task for Spark partition {task.partition} (attempt {task.attempt}) "
        f"failed: {tracker.failed} record(s) failed, {tracker.delivered} delivered (the task stops "
        f"sending at the first failure). First failure at {first.where()}: "
        f"{type(err).__name__}: {err}{hint}"
    )
    exc.__cause__ = err
    return exc
