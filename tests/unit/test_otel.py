"""OpenTelemetry in one process, with the SDK's in-memory exporter and reader: spans from and to
W3C traceparents, links, errors; the producer's instruments; the options that drive them; and
nothing paid or imported when turned off.  Spark's processes: tests/spark/test_spark_observability.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkkafka_sink.otel.spans import Span, valid_traceparent, valid_traceparents
from sparkkafka_sink.producer.metrics import ProducerMetrics
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.sink_errors import SinkValidationError

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is in the [test] extra")
from opentelemetry import metrics, trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BOOT = {"kafka.bootstrap.servers": "localhost:9092", "topic": "t"}


@pytest.fixture(scope="module")
def recorded():
    """The SDK in this process (once: OpenTelemetry keeps the first provider set), its spans
    and metrics kept in memory."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        provider = sdk_trace.TracerProvider()
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, reader


@pytest.mark.parametrize("text, valid", [
    (PARENT, True),
    ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", True),
    ("00-00000000000000000000000000000000-b7ad6b7169203331-01", False),  # a zero trace id
    ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", False),  # a zero span id
    ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", False),  # a version this is not
    ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", False),  # upper case
    ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01", False),
    ("not a traceparent", False),
])
def test_a_traceparent_is_checked_as_w3c_defines_it(text, valid):
    assert valid_traceparent(text) is valid
    assert valid_traceparents(pa.array([text, None])).to_pylist() == [valid, None]  # a column's, as routing checks it


def test_a_span_continues_the_trace_it_is_given_and_links_others(recorded):
    exporter, _ = recorded
    exporter.clear()
    task = Span.start("send t", parent=PARENT, producer=True, attributes={"spark.partition.id": 3})
    task.set({"messaging.batch.message_count": 10, "sparkkafka_sink.transactional_id": None})
    task_id = task.traceparent
    task.end()
    commit = Span.start("pyprod-kafka commit", parent=PARENT, links=[task_id, "not one"])
    commit.fail(ValueError("no"))
    commit.end()
    commit.end()  # ended once
    first, second = exporter.get_finished_spans()
    assert first.context.trace_id == second.context.trace_id == int(PARENT.split("-")[1], 16)
    assert first.parent.span_id == second.parent.span_id == int(PARENT.split("-")[2], 16)
    assert first.kind == trace.SpanKind.PRODUCER and second.kind == trace.SpanKind.INTERNAL
    assert dict(first.attributes) == {"spark.partition.id": 3, "messaging.batch.message_count": 10}
    assert task_id == f"00-{first.context.trace_id:032x}-{first.context.span_id:016x}-01"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert second.status.status_code == trace.StatusCode.ERROR and second.attributes["error.type"] == "ValueError"
    assert [e.name for e in second.events] == ["exception"]


def test_nothing_is_a_span_that_does_nothing():
    nothing = Span()
    nothing.set({"a": 1})
    nothing.fail(ValueError())
    nothing.end()
    assert nothing.traceparent is None


def test_the_current_span_is_what_a_write_continues(recorded):
    import sparkkafka_sink

    assert sparkkafka_sink.traceparent() is None  # no current span
    with trace.get_tracer("test").start_as_current_span("pipeline") as span:
        context = span.get_span_context()
        assert sparkkafka_sink.traceparent() == \
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_the_producers_events_on_the_meter(recorded):
    from sparkkafka_sink.otel.instruments import ProducerInstruments

    _, reader = recorded
    m = ProducerMetrics()
    m.observer = ProducerInstruments()
    m.record_batch_sent("meter-topic", 7, 700)
    m.record_batch_sent("meter-topic", 3, 300)
    m.record_request(25.0)
    m.record_retry("meter-topic", 3, TimeoutError())
    m.record_failure(2, KeyError("x"), "meter-topic")
    m.record_buffer_wait(40.0)
    points = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for p in metric.data.data_points:
                    if p.attributes.get("messaging.destination.name", "meter-topic") == "meter-topic":
                        points.setdefault(metric.name, []).append(p)
    sent = {p.attributes.get("error.type"): p.value for p in points["messaging.client.sent.messages"]}
    assert sent == {None: 10, "KeyError": 2}
    assert [p.value for p in points["sparkkafka_sink.producer.sent.bytes"]] == [1000]
    (batches,) = points["sparkkafka_sink.producer.batch.size"]
    assert (batches.count, batches.sum) == (2, 1000)
    (retries,) = points["sparkkafka_sink.producer.retries"]
    assert retries.value == 1 and retries.attributes["error.type"] == "TimeoutError"
    assert any(p.sum == pytest.approx(0.025) for p in points["messaging.client.operation.duration"])
    assert any(p.sum >= 0.04 for p in points["sparkkafka_sink.producer.buffer.wait.duration"])
    assert m.records_sent == 10 and m.records_failed == 2 and m.record_retries == 3  # the counters too


@pytest.mark.parametrize("options, message", [
    ({"traceParent": "00-abc"}, "option 'traceParent' must be a W3C traceparent"),
    ({"openTelemetrySetup": "no_function"}, "option 'openTelemetrySetup' must be module:function"),
    ({"openTelemetrySetup": "a.b:c d"}, "option 'openTelemetrySetup' must be module:function"),
])
def test_the_options_say_what_they_take(options, message):
    with pytest.raises(SinkValidationError, match=message):
        parse_options({**BOOT, **options})


def test_the_options_parsed():
    options = parse_options({**BOOT, "traceParent": PARENT, "openTelemetrySetup": "my.mod:set_up",
                             "openTelemetry": "false"})
    assert (options.trace_parent, options.open_telemetry_setup, options.open_telemetry) == (PARENT, "my.mod:set_up",
                                                                                           False)
    assert parse_options(BOOT).open_telemetry is True and parse_options(BOOT).trace_parent is None


def test_turned_off_a_write_traces_nothing_and_runs_no_set_up(monkeypatch):
    from sparkkafka_sink import otel
    from sparkkafka_sink.spark import observability

    called = []
    monkeypatch.setattr(otel, "set_up", called.append)
    options = parse_options({**BOOT, "openTelemetry": "false", "openTelemetrySetup": "my.mod:set_up"})
    assert observability.task_span(options, 0, 0, None).traceparent is None
    assert observability.instruments(options) is None and called == []


def test_without_opentelemetry_nothing_is_imported(monkeypatch):
    from sparkkafka_sink import otel
    from sparkkafka_sink.otel import spans

    monkeypatch.setattr(otel, "available", lambda: False)
    monkeypatch.setattr(spans, "available", lambda: False)
    from sparkkafka_sink.spark import observability

    options = parse_options({**BOOT, "traceParent": PARENT})
    assert observability.task_span(options, 0, 0, None).traceparent is None
    assert observability.instruments(options) is None
    assert spans.traceparent() is None
