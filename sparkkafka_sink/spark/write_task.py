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

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from sparkkafka_sink.errors import (
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from sparkkafka_sink.spark.commit import TaskCommitMessage
from sparkkafka_sink.spark.dead_letter import BadRow, DeadLetters, is_bad_row, row_contents
from sparkkafka_sink.spark.delivery import DeliveryTracker
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.producer_pool import POOL
from sparkkafka_sink.spark.rate_limit import RateLimiter, payload_bytes
from sparkkafka_sink.spark.row_checks import NULL_TOPIC, RowError, check_headers, first_null
from sparkkafka_sink.spark.sink_metrics import task_metrics
from sparkkafka_sink.spark.validation import PREFIX, ColumnLayout

# Slack on top of delivery.timeout.ms for the final flush: by then the producer
# must have failed every record it could not deliver.
_FLUSH_MARGIN_S = 15.0
#: bound of an exactly-once task's look for its write's closed marker
_MARKER_CHECK_S = 30.0
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
    options = plan.options
    dead_letters = (DeadLetters(options.dead_letter_topic, options.dead_letter_context_headers, options.log_bad_rows,
                                task.partition, task.attempt, _max_request_size(options))
                    if options.tolerate_bad_rows else None)
    tracker = DeliveryTracker(dead_letters, plan.layout, transactional=options.exactly_once)
    dlq_tracker = DeliveryTracker()  # the dead-letter records: each must land, or the task fails
    producer = None
    rows_seen = 0
    ok = False
    limiter = rate_limiter(plan.options)
    # at-least-once tasks of one Python worker share producers (producer_pool.py)
    pooled = (not options.exactly_once and options.producer_cache_timeout_ms > 0
              and producer_factory is default_producer_factory)
    config = _task_config(options, task, pooled)
    baseline, created = {}, 0
    try:
        for batch in _paced(_coalesced(batches, plan.options.coalesce_bytes), limiter, plan.layout):
            if producer is None:  # empty partitions never open a connection
                if pooled:
                    producer, reused = POOL.acquire(config, producer_factory, options.producer_cache_timeout_ms / 1000)
                    baseline = _producer_metrics(producer) if reused else {}
                else:
                    producer, reused = producer_factory(config), False
                created = 0 if reused else 1
                if plan.options.exactly_once:
                    producer.init_transactions()
                    _check_write_open(config, options, task)
                    producer.begin_transaction()
            try:
                send_arrow_batch(producer, batch, plan.layout, plan.options.topic, rows_seen, tracker, dead_letters)
            except RowError as exc:
                tracker.fail_now(rows_seen + exc.index, exc.topic, exc.partition, InvalidRecordError(str(exc)))
                break
            rows_seen += batch.num_rows
            tracker.drain()
            if tracker.failed:
                break
            _send_dead_letters(producer, dead_letters, dlq_tracker)
        if producer is not None:
            _flush(producer, tracker, plan.options)
            while _send_dead_letters(producer, dead_letters, dlq_tracker):  # bad rows refused late
                _flush(producer, tracker, plan.options)
            if dead_letters is not None:
                _flush(producer, dlq_tracker, plan.options)
        metrics = task_metrics(_since(_producer_metrics(producer), baseline), tracker.delivered, tracker.failed,
                               task.micro_batch, limiter.throttled_s if limiter is not None else 0.0,
                               skipped=dead_letters.skipped if dead_letters is not None else 0,
                               dead_lettered=dlq_tracker.delivered, producers_created=created)
        if metrics_total is not None:  # a Spark accumulator of the sink's metrics
            metrics_total.add(metrics)
        if tracker.failed:
            raise _failure(tracker, task, plan.options)
        if dlq_tracker.failed:
            raise _failure(dlq_tracker, task, plan.options,
                           f"writing bad rows to the dead-letter topic {options.dead_letter_topic!r} failed")
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
        if producer is not None and ok and pooled:
            POOL.release(producer, config, options.producer_cache_timeout_ms / 1000)
        elif producer is not None:
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
                     tracker: DeliveryTracker, dead_letters: Optional[DeadLetters] = None) -> None:
    """Hand every row of ``batch`` (rows ``row_offset``.. of the task) to the producer, one
    ``send_batch`` per topic; rejections and failures go to ``tracker`` with their rows.

    Raises ``RowError`` (position within ``batch``) for a row no producer could take, before
    any row of the batch is sent.  With ``dead_letters`` (errors.tolerance=all) such rows, and
    rows the producer refuses, are taken out and handed there, and the rest is sent."""
    import numpy as np
    import pyarrow as pa

    positions = None  # batch rows -> positions in the original batch, once bad rows were taken out
    while True:
        try:
            _check_rows(batch, layout, topic_option)
            groups = _topic_groups(batch, layout, topic_option)
            break
        except RowError as exc:
            if dead_letters is None:
                raise
            i = exc.index
            header_error = str(exc) != NULL_TOPIC  # its headers cannot be read: left out
            topic = exc.topic or topic_option or (batch.column(layout.topic)[i].as_py() if layout.topic else None)
            dead_letters.reject(BadRow(row_offset + (i if positions is None else int(positions[i])), topic,
                                       exc.partition, InvalidRecordError(str(exc)), "row check",
                                       *row_contents(batch, layout, i, with_headers=not header_error)))
            keep = np.delete(np.arange(batch.num_rows), i)
            batch = batch.take(pa.array(keep))
            positions = keep if positions is None else positions[keep]
            if batch.num_rows == 0:
                return
    for topic, rows in groups:
        part = batch if rows is None else batch.take(pa.array(rows))
        if positions is not None:  # positions in the batch the task received
            rows = positions if rows is None else positions[rows]
        _send_part(producer, part, layout, topic, rows, row_offset, tracker, dead_letters)


def _check_rows(batch, layout: ColumnLayout, topic_option) -> None:
    """Raise ``RowError`` for the first row no producer could take (a null topic, a header
    without a key), whichever check finds it."""
    errors = []
    if layout.headers:
        try:
            check_headers(batch.column(layout.headers))
        except RowError as exc:
            errors.append(exc)
    if topic_option is None:
        bad = first_null(batch.column(layout.topic))
        if bad is not None:
            errors.append(RowError(bad, NULL_TOPIC))
    if errors:
        raise min(errors, key=lambda e: e.index)


def _send_part(producer, part, layout: ColumnLayout, topic: str, rows, row_offset: int, tracker: DeliveryTracker,
               dead_letters: Optional[DeadLetters]) -> None:
    """One ``send_batch`` of ``part`` (``rows``: its rows' positions in the original batch, None
    for all in order); under tolerance a row the producer refuses is taken out and the rest
    sent again, and a topic it refuses (not authorized) makes every row of the part a bad row."""
    import numpy as np
    import pyarrow as pa

    while True:
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
                tracker.track_bulk(exc.partial, topic, row_offset, rows, part)
            first = exc.row or 0
            not_sent = getattr(exc, "rows_not_sent", None)
            row = row_offset + (first if rows is None else int(rows[first]))
            if dead_letters is not None and is_bad_row(exc) and not_sent is None and exc.row is not None:
                dead_letters.reject(BadRow(row, topic, exc.partition, exc, "producer",
                                           *row_contents(part, layout, first)))
                keep = np.delete(np.arange(part.num_rows), first)
                if len(keep) == 0:
                    return
                part = part.take(pa.array(keep))
                rows = keep if rows is None else np.asarray(rows)[keep]
                continue
            if dead_letters is not None and is_bad_row(exc) and exc.row is None and getattr(exc, "partial", None) is None:
                # the topic itself is refused (TOPIC_AUTHORIZATION_FAILED from Metadata): every row
                for i in range(part.num_rows):
                    dead_letters.reject(BadRow(row_offset + (i if rows is None else int(rows[i])), topic, None, exc,
                                               "producer", *row_contents(part, layout, i)))
                return
            tracker.fail_now(row, topic, exc.partition, exc, count=part.num_rows if not_sent is None else len(not_sent))
            return
        tracker.track_bulk(future, topic, row_offset, rows, part)
        return


def _max_request_size(options: SinkOptions) -> int:
    try:
        return int(options.producer_config.get("max.request.size", 1048576))
    except (TypeError, ValueError):
        return 1048576


def _send_dead_letters(producer, dead_letters: Optional[DeadLetters], dlq_tracker: DeliveryTracker) -> int:
    """Send the bad rows queued so far to the dead-letter topic; how many."""
    if dead_letters is None or producer is None:
        return 0
    queued = dead_letters.take()
    if not queued:
        return 0
    records = [dead_letters.record_of(b) for b in queued]
    future = producer.send_batch(dead_letters.topic, values=[v for _, v, _ in records],
                                 keys=[k for k, _, _ in records], headers=[h for _, _, h in records])
    dlq_tracker.track_bulk(future, dead_letters.topic, 0)
    return len(records)


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


def _task_config(options: SinkOptions, task: TaskInfo, pooled: bool = False) -> dict:
    config = dict(options.producer_config)
    # a pooled producer serves many tasks of this Python worker: named after the worker
    config.setdefault("client.id", f"pyprod-kafka-worker-{os.getpid()}" if pooled
                      else f"pyprod-kafka-s{task.stage}-p{task.partition}-a{task.attempt}")
    if options.exactly_once:
        # one id per task attempt: attempts never fence each other, the driver commits the winner's
        config["transactional.id"] = transactional_id(options, task)
    for key in _FILE_OPTIONS:
        if config.get(key):
            config[key] = _local_file(config[key])
    return config


def transactional_id(options: SinkOptions, task: TaskInfo) -> str:
    return f"{options.write_id(_micro_batch_id(options, task))}-p{task.partition}-t{task.attempt_id}"


def _micro_batch_id(options: SinkOptions, task: TaskInfo) -> Optional[int]:
    if options.batch_id is not None:  # foreachBatch: the batch id the user passed
        return options.batch_id
    return task.micro_batch[1] if task.micro_batch else None


def _check_write_open(config: dict, options: SinkOptions, task: TaskInfo) -> None:
    """Exactly-once: refuse to write once the driver ended the write (its closed marker exists).

    The driver creates the marker before it sweeps the write's transactions, fencing every
    producer initialised under the prefix; this attempt initialised its producer before looking.
    So either it looked too early and the sweep fences it, or it sees the marker here: a losing
    speculative copy or a task of a failed job never leaves a transaction open."""
    import time

    from sparkkafka_sink.producer.handover import TransactionAdmin

    marker = options.closed_marker(_micro_batch_id(options, task))
    with TransactionAdmin(config) as admin:
        if admin.state(marker, time.monotonic() + _MARKER_CHECK_S) is not None:
            raise SinkWriteError(
                f"{PREFIX}write task for Spark partition {task.partition} (attempt {task.attempt}): the driver "
                "already ended this write (another attempt won, or the job failed): this attempt writes nothing")


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


#: cumulative producer counters: a pooled producer's task reports what changed during the task
_PRODUCER_COUNTERS = ("records_sent", "bytes_sent", "batches_sent", "records_failed", "retries", "batch_splits",
                      "requests", "request_latency_sum_ms")


def _since(now: dict, baseline: dict) -> dict:
    if not baseline:
        return now
    out = dict(now)
    for key in _PRODUCER_COUNTERS:
        if key in now:
            out[key] = now[key] - baseline.get(key, 0)
    return out


def _producer_metrics(producer) -> dict:
    if producer is None:
        return {}
    try:
        return producer.metrics()
    except Exception:  # noqa: BLE001 - metrics are best effort, delivery is not
        return {}


def _failure(tracker: DeliveryTracker, task: TaskInfo, options: SinkOptions, what: str | None = None) -> SinkWriteError:
    first = tracker.first_failure
    err = first.error
    hint = ""
    if isinstance(err, (KafkaTimeoutError, KafkaConnectionError)):
        hint = f" (is kafka.bootstrap.servers={options.bootstrap_servers} reachable?)"
    exc = SinkWriteError(
        f"{PREFIX}write task for Spark partition {task.partition} (attempt {task.attempt}) "
        f"failed{': ' + what if what else ''}: {tracker.failed} record(s) failed, {tracker.delivered} delivered (the task stops "
        f"sending at the first failure). First failure at {first.where()}: "
        f"{type(err).__name__}: {err}{hint}"
    )
    exc.__cause__ = err
    return exc
