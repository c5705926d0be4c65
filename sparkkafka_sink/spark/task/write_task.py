"""One write task: Arrow batches in, one producer, a commit message out (Spark's KafkaWriteTask).

Shared by the batch and the streaming writer.  The task hands Spark's Arrow batches, grouped
into tables of ``coalesceBytes`` (``batches``), to ``Producer.send_batch``, one call per topic in
a table (``routing``), stops early once a record has
failed, flushes, waits until every future's callback has run, and only then either returns its
``TaskCommitMessage`` or raises ``SinkWriteError`` naming the first failed row: a row check, the
producer's rejection (which names the row), or a failed batch (whose rows its future lists);
a step of the task itself that fails (opening its producer, beginning its transaction,
serializing, writing dead letters) raises it naming the step.  Within a task the producer's idempotence keeps its own retries duplicate-free; Spark's task retry
re-sends the whole partition.  At-least-once (the default), what a failed attempt delivered is
then in Kafka twice.  Exactly-once, each attempt writes in a transaction of its own and hands it
over in its commit message (``TaskProducer.prepare``): the driver commits the attempts Spark kept
and aborts the others (``driver/exactly_once_writes.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from sparkkafka_sink import otel
from sparkkafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, SslError
from sparkkafka_sink.exactly_once.commit import CLOCK_SKEW_S, COMMIT_NEEDS_S
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.observability import instruments, record_task, task_span
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.plan import WritePlan
from sparkkafka_sink.spark.sink_errors import PREFIX, SinkWriteError, in_option_names
from sparkkafka_sink.spark.sink_metrics import task_metrics
from sparkkafka_sink.spark.task.batches import coalesced, paced
from sparkkafka_sink.spark.task.dead_letters import DeadLetters
from sparkkafka_sink.spark.task.delivery import DeliveryTracker
from sparkkafka_sink.spark.task.encoders import TaskEncoders
from sparkkafka_sink.spark.task.rate_limit import rate_limiter
from sparkkafka_sink.spark.task.routing import Part, route
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.task_producer import TaskProducer
from sparkkafka_sink.spark.task.worker_memory import raise_malloc_thresholds

log = logging.getLogger("sparkkafka_sink.spark")

# Slack on top of delivery.timeout.ms for the final flush: by then the producer
# must have failed every record it could not deliver.
_FLUSH_MARGIN_S = 15.0


def run_write_task(batches: Iterator, plan: WritePlan, metrics_total: Any, task: TaskInfo) -> TaskCommitMessage:
    """Write ``batches`` as Spark's task ``task`` (``TaskInfo.current()``); ``metrics_total``: the
    session's metrics accumulator, or None."""
    options = plan.options
    if options.tune_allocator:
        raise_malloc_thresholds()
    dead_letters = (DeadLetters(options.errors_deadletterqueue_topic_name,
                                options.errors_deadletterqueue_context_headers_enable, options.errors_log_enable,
                                task.partition, task.attempt, options.producer_config.max_request_size, plan.layout)
                    if options.tolerate_bad_rows else None)
    tracker = DeliveryTracker(dead_letters, transactional=options.exactly_once)  # the rows and their dead letters
    span = task_span(options, task.partition, task.attempt, task.micro_batch[1] if task.micro_batch else None)
    producer = TaskProducer(options, task, instruments(options))
    encoders = TaskEncoders(plan)  # valueFormat/keyFormat avro, json or protobuf
    rows_seen = 0
    ok = False
    limiter = rate_limiter(options)
    try:
        trace = _trace_header(span.traceparent, options, task)  # the records' traceparent header, or None
        for table in paced(coalesced(batches, options.coalesce_bytes), limiter, plan.layout):
            if producer.current is None:  # the task's first rows (an empty partition opens none)
                with _step(task, "could not open its producer"):
                    producer.open()
                if options.exactly_once:
                    with _step(task, "could not begin its exactly-once transaction"):
                        producer.begin()
            if options.exactly_once:
                _within_transaction_timeout(plan, task)
            current = producer.open()
            with _step(task, "could not serialize its rows") if encoders else nullcontext():
                outcomes = route(current, Part.of(table, rows_seen), plan.layout, options.topic, encoders,
                                 tracker.tolerant, trace)
            tracker.record(outcomes)
            rows_seen += table.num_rows
            tracker.drain()
            if tracker.failed:
                break
            _send_dead_letters(current, dead_letters, tracker, task, options)  # (their memory bounded by a table's)
        opened = producer.current  # None: no rows, no producer
        if opened is not None:
            _flush(opened, tracker, options, task)
            # every row's outcome is known: the bad rows the brokers refused in the flush, dead-lettered
            # in turn (a dead letter is never dead-lettered: one round)
            if not tracker.failed and _send_dead_letters(opened, dead_letters, tracker, task, options):
                _flush(opened, tracker, options, task)
        metrics = task_metrics(producer.metrics(), tracker.delivered, tracker.failed,
                               task.micro_batch, limiter.throttled_s if limiter is not None else 0.0,
                               skipped=dead_letters.skipped if dead_letters is not None else 0,
                               dead_lettered=tracker.dead_lettered, producers_created=producer.created)
        record_task(span, metrics, tracker.offsets, opened.config.transactional_id if opened is not None else None)
        if metrics_total is not None:  # a Spark accumulator of the sink's metrics
            metrics_total.add(metrics)
        if tracker.failed:
            raise _failure(tracker, task, options)
        transaction = producer.prepare()  # exactly-once: the driver commits it with the job
        ok = True
        return TaskCommitMessage(
            partition_id=task.partition,
            attempt=task.attempt,
            records=tracker.delivered,
            offsets={tp: tuple(s) for tp, s in tracker.offsets.items()},
            metrics=metrics,
            transaction=transaction,
            write=producer.write.name if producer.write is not None else None,
            query=task.micro_batch[0] if task.micro_batch else None,
            trace=span.traceparent,
        )
    except BaseException as failed:
        span.fail(failed)
        raise
    finally:
        producer.finish(ok)
        span.end()
        otel.flush()  # (an SDK's: the task's spans and metrics out before its worker may be ended)


#: the part of ``transaction.timeout.ms`` an exactly-once write may run before its tasks stop,
#: at most: the rest is the commit's (``exactly_once.commit.COMMIT_NEEDS_S`` and the clocks' skew)
#: and the tasks' last flushes'
_TRANSACTION_TIME_USED = 0.9
_FLUSH_RESERVE_S = 10.0


def transaction_budget_s(timeout_ms: int) -> float:
    """How long an exactly-once write's tasks may run, from planning, before they stop: 90 % of
    ``transaction.timeout.ms``, and no more than leaves the driver's commit what it needs."""
    return min(timeout_ms / 1000 * _TRANSACTION_TIME_USED,
               timeout_ms / 1000 - COMMIT_NEEDS_S - CLOCK_SKEW_S - _FLUSH_RESERVE_S)


def _within_transaction_timeout(plan: WritePlan, task: TaskInfo) -> None:
    """Exactly-once: stop before the write outlives its transactions.  The first tasks' began
    about when the driver planned the write; their coordinators abort them ``transaction.timeout.ms``
    later, and the driver decides only with the time its commit needs left: better this task
    fails now, naming the option, than the job after all its work."""
    timeout_ms = plan.options.producer_config.transaction_timeout_ms
    ran_ms = time.time() * 1000 - plan.planned_at_ms
    if plan.planned_at_ms and ran_ms > transaction_budget_s(timeout_ms) * 1000:
        raise SinkWriteError(
            f"{_task(task)}: this exactly-once write has run {ran_ms / 1000:.0f} s, close to "
            f"kafka.transaction.timeout.ms ({timeout_ms} ms): the coordinators would abort its first tasks' "
            "transactions before the driver could commit them, so it stops here and nothing of it becomes "
            "visible. Raise kafka.transaction.timeout.ms (the brokers cap it with transaction.max.timeout.ms, "
            "900000 by default: raise that too), or write less per job")


def _trace_header(traceparent: str | None, options: SinkOptions, task: TaskInfo) -> str | None:
    """The traceparent the records carry (``traceHeaders``): the task's span -- or, where it
    records nothing (no OpenTelemetry SDK set up in this Python worker), the write's
    ``traceParent``, the span the task's would have been the child of (logged once per task)."""
    if options.trace_headers == "none":
        return None
    if traceparent is None:
        log.warning("%s: traceHeaders=%s, but its span records nothing (no OpenTelemetry SDK set up in its Python "
                    "worker: give openTelemetrySetup): its records carry %s", _task(task), options.trace_headers,
                    "the write's traceParent" if options.trace_parent else "no traceparent of the task")
        return options.trace_parent
    return traceparent


def _send_dead_letters(producer: Producer, dead_letters: DeadLetters | None, tracker: DeliveryTracker,
                       task: TaskInfo, options: SinkOptions) -> bool:
    """Send the dead letters of the bad rows found so far, for the tracker to follow; whether any."""
    if dead_letters is None:
        return False
    with _step(task, _dead_lettering(options)):
        sent = dead_letters.send(producer)
    if sent is not None:
        tracker.record([sent])
    return sent is not None


def _flush(producer: Producer, tracker: DeliveryTracker, options: SinkOptions, task: TaskInfo) -> None:
    """Flush, then wait for every callback; a timeout becomes a clear task error."""
    bound = options.producer_config.delivery_timeout_ms / 1000 + _FLUSH_MARGIN_S
    try:
        producer.flush(bound)
    except KafkaTimeoutError as exc:
        raise SinkWriteError(
            f"{_task(task)}: flush did not finish within {bound:g} s (kafka.delivery.timeout.ms + "
            f"{_FLUSH_MARGIN_S:g} s): {tracker.pending} record(s) unresolved; brokers {options.bootstrap_servers}"
        ) from exc
    if not tracker.wait_all(_FLUSH_MARGIN_S):
        raise SinkWriteError(
            f"{_task(task)}: flush did not finish: {tracker.pending} record(s) unresolved "
            f"{_FLUSH_MARGIN_S:g} s after flush() returned"
        )


@contextmanager
def _step(task: TaskInfo, what: str) -> Iterator[None]:
    """A step of the task itself (not a record's delivery) that fails: the task's error, saying
    which step and why, in the sink's option names."""
    try:
        yield
    except SinkWriteError:
        raise
    except KafkaError as exc:
        raise SinkWriteError(f"{_task(task)} failed: {what}: {type(exc).__name__}: "
                             f"{in_option_names(exc)}") from exc


def _task(task: TaskInfo) -> str:
    """How every message of a write task starts."""
    return f"{PREFIX}write task for Spark partition {task.partition} (attempt {task.attempt})"


def _dead_lettering(options: SinkOptions) -> str:
    return f"writing bad rows to the dead-letter topic {options.errors_deadletterqueue_topic_name!r} failed"


def _failure(tracker: DeliveryTracker, task: TaskInfo, options: SinkOptions) -> SinkWriteError:
    first = tracker.first_failure
    assert first is not None, "a failed task has a first failure"
    what = _dead_lettering(options) if first.dead_letter else None
    err = first.error
    hint = ""
    if isinstance(err, (KafkaTimeoutError, KafkaConnectionError)) and not isinstance(err, SslError):
        hint = f" (is kafka.bootstrap.servers={options.bootstrap_servers} reachable?)"
    delivered = f"{tracker.delivered} delivered"
    if options.exactly_once:  # nothing of it is visible: the failed task aborts its transaction
        delivered += " in this attempt's transaction, which is aborted"
    exc = SinkWriteError(
        f"{_task(task)} failed{': ' + what if what else ''}: {tracker.failed} record(s) failed, {delivered} (the "
        f"task stops sending at the first failure). First failure at {first.where()}: "
        f"{type(err).__name__}: {in_option_names(err)}{hint}"
    )
    exc.__cause__ = err
    return exc
