"""A write seen through OpenTelemetry: its spans and its producers' instruments.

* One PRODUCER span per write task (``send <topic>``), the child of the write's ``traceParent``
  (else a trace of its own), carrying what the task did once it is known -- records, bytes,
  batches, retries, the topic-partitions written, bad rows skipped and dead-lettered, its
  transactional id under exactly-once
  -- and its error when it failed; its context goes home in the task's commit message.
* One span for the driver's end of the write (``pyprod-kafka commit`` or ``... abort``), the
  child of the same ``traceParent``, linked to every task's span, carrying the decision:
  ``commit``, ``abort``, or ``replay`` (a micro-batch decided before, its rows aborted).
* Each task's producer reports its events to the package's instruments (``otel.instruments``).

With ``openTelemetry=false``, or OpenTelemetry not installed, the spans are nothing and the
producers report to no one.  Shared by the tasks and the driver (``task/write_task.py``,
``driver/write_end.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkkafka_sink import otel
from sparkkafka_sink.otel.spans import Span
from sparkkafka_sink.producer.metrics import MetricsObserver
from sparkkafka_sink.spark.commit_message import CommitMessages
from sparkkafka_sink.spark.options import SinkOptions

__all__ = ["traced", "task_span", "record_task", "instruments", "end_span"]


def traced(options: SinkOptions) -> bool:
    """Whether the write is traced in this process: asked for (the default) and OpenTelemetry
    installed; the user's set-up hook run first (once per process)."""
    if not options.open_telemetry or not otel.available():
        return False
    otel.set_up(options.open_telemetry_setup)
    return True


def _common(options: SinkOptions, batch_id: int | None) -> dict[str, str | int]:
    return {**otel.MESSAGING_SYSTEM, "sparkkafka_sink.delivery_guarantee": options.delivery_guarantee,
            **({"messaging.destination.name": options.topic} if options.topic else {}),
            **({"spark.streaming.batch.id": batch_id} if batch_id is not None else {})}


def task_span(options: SinkOptions, partition: int, attempt: int, batch_id: int | None) -> Span:
    """A write task's span, started (nothing when not traced)."""
    if not traced(options):
        return Span()
    return Span.start(f"send {options.topic}" if options.topic else "send", parent=options.trace_parent,
                      producer=True, attributes={
                          **_common(options, batch_id), "messaging.operation.name": "send",
                          "messaging.operation.type": "send", "spark.partition.id": partition,
                          "spark.task.attempt": attempt})


#: a task's span attribute -> its metric (``sink_metrics.task_metrics``)
_TASK_ATTRIBUTES = (("messaging.batch.message_count", "records_sent"), ("sparkkafka_sink.bytes", "bytes_sent"),
                    ("sparkkafka_sink.batches", "batches_sent"), ("sparkkafka_sink.retries", "retries"),
                    ("sparkkafka_sink.records_failed", "records_failed"),
                    ("sparkkafka_sink.records_skipped", "records_skipped"),
                    ("sparkkafka_sink.records_dead_lettered", "records_dead_lettered"))


def record_task(span: Span, metrics: dict, written: Iterable[tuple[str, int]], transactional_id: str | None) -> None:
    """What the task did, on its span (``metrics``: the task's, ``sink_metrics.task_metrics``;
    ``written``: the topic-partitions it wrote to, as ``topic-partition`` names)."""
    span.set({**{attribute: metrics.get(metric, 0) for attribute, metric in _TASK_ATTRIBUTES},
              "sparkkafka_sink.topic_partitions": [f"{topic}-{partition}" for topic, partition in sorted(written)],
              "sparkkafka_sink.transactional_id": transactional_id})


def instruments(options: SinkOptions) -> MetricsObserver | None:
    """The producer's instruments, when the write is traced."""
    if not traced(options):
        return None
    from sparkkafka_sink.otel.instruments import ProducerInstruments

    return ProducerInstruments()


def end_span(options: SinkOptions | None, messages: CommitMessages, batch_id: int | None, commit: bool) -> Span:
    """The driver's span of Spark's ``commit()`` (``commit``) or ``abort()``, linked to the tasks'."""
    if options is None or not traced(options):
        return Span()
    finished = [m for m in messages if m is not None]
    return Span.start("pyprod-kafka commit" if commit else "pyprod-kafka abort", parent=options.trace_parent,
                      links=[m.trace for m in finished if m.trace], attributes={
                          **_common(options, batch_id), "sparkkafka_sink.tasks": len(messages),
                          "sparkkafka_sink.tasks_finished": len(finished),
                          "messaging.batch.message_count": sum(m.records for m in finished)})
