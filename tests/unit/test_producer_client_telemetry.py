"""KIP-714's client side without a broker: the OTLP bytes (read by OpenTelemetry's own generated
classes), the states and errors as Java's ClientTelemetryReporter has them, deltas and codecs.
Against a broker: tests/integration/test_client_telemetry.py."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from sparkkafka_sink.producer.client_telemetry import (
    _FIRST_PUSH,
    DEFAULT_PUSH_INTERVAL_MS,
    METRICS,
    ClientTelemetry,
    TelemetryState,
)
from sparkkafka_sink.protocol.otlp import MetricPoint, Temporality, encode_metrics_data
from sparkkafka_sink.record.compression import CompressionType, decompress

metrics_pb2 = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2",
                                  reason="opentelemetry-proto is in the [test] extra")

INSTANCE = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _values(**more) -> dict:
    base = {"records_sent": 0, "records_failed": 0, "record_retries": 0, "batch_splits": 0,
            "request_latency_avg_ms": 0.0, "request_latency_max_ms": 0.0, "bytes_sent": 0, "batches_sent": 0,
            "buffer_available_bytes": 100, "buffer_total_bytes": 100, "buffer_wait_ms": 0.0}
    return {**base, **more}


def _subscription(requested=("org.apache.kafka.producer.",), interval=1000, codecs=(4, 3, 1, 2), delta=True,
                  error=0, instance=INSTANCE) -> SimpleNamespace:
    return SimpleNamespace(error_code=error, client_instance_id=instance, subscription_id=7, push_interval_ms=interval,
                           accepted_compression_types=list(codecs), delta_temporality=delta,
                           requested_metrics=list(requested))


def _decoded(request) -> metrics_pb2.MetricsData:
    data = metrics_pb2.MetricsData()
    data.ParseFromString(decompress(request.compression_type, request.metrics) if request.compression_type
                         else request.metrics)
    return data


def test_otlp_bytes_read_by_opentelemetrys_classes():
    points = [MetricPoint("a.total", 42, 2_000, 1_000, Temporality.CUMULATIVE, "what a counts", "{record}", {"x": "y"}),
              MetricPoint("b.avg", 2.5, 3_000, unit="ms"),
              MetricPoint("c.total", -3, 4_000, 3_500, Temporality.DELTA)]
    data = metrics_pb2.MetricsData()
    data.ParseFromString(encode_metrics_data({"client_id": "me"}, "scope", "1.0", points))
    (rm,) = data.resource_metrics
    assert {kv.key: kv.value.string_value for kv in rm.resource.attributes} == {"client_id": "me"}
    (sm,) = rm.scope_metrics
    assert (sm.scope.name, sm.scope.version) == ("scope", "1.0")
    a, b, c = sm.metrics
    assert (a.name, a.description, a.unit, a.WhichOneof("data")) == ("a.total", "what a counts", "{record}", "sum")
    assert a.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE and a.sum.is_monotonic
    (pa_,) = a.sum.data_points
    assert (pa_.as_int, pa_.start_time_unix_nano, pa_.time_unix_nano) == (42, 1_000, 2_000)
    assert {kv.key: kv.value.string_value for kv in pa_.attributes} == {"x": "y"}
    assert b.WhichOneof("data") == "gauge" and b.gauge.data_points[0].as_double == 2.5 and b.unit == "ms"
    assert c.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    assert c.sum.data_points[0].as_int == -3


def test_subscribe_then_push_deltas_after_the_jittered_interval():
    values = _values(records_sent=10, buffer_total_bytes=64)
    t = ClientTelemetry(lambda: values, "me")
    assert t.due_in(0, 30_000) == 0
    ask = t.request(0)
    assert type(ask).__name__ == "GetTelemetrySubscriptionsRequest" and ask.client_instance_id.int == 0
    assert t.due_in(1, 30_000) == 30_000  # in flight: wait for the answer
    t.answered(_subscription(), 100)
    assert t.state is TelemetryState.PUSH_NEEDED
    wait = t.due_in(100, 30_000)
    assert 1000 * _FIRST_PUSH[0] <= wait <= 1000 * _FIRST_PUSH[1]  # spread as Java spreads the first push
    push = t.request(100 + wait)
    assert type(push).__name__ == "PushTelemetryRequest" and not push.terminating
    assert (push.client_instance_id, push.subscription_id, push.compression_type) == (INSTANCE, 7, 4)  # zstd first
    sums = {m.name: m.sum.data_points[0].as_int for m in _decoded(push).resource_metrics[0].scope_metrics[0].metrics
            if m.WhichOneof("data") == "sum"}
    assert sums["org.apache.kafka.producer.record.send.total"] == 10
    t.answered(SimpleNamespace(error_code=0), 2000)
    assert t.pushes == 1 and t.due_in(2000, 30_000) == 1000  # then every interval
    values["records_sent"] = 25
    second = _decoded(t.request(3000)).resource_metrics[0].scope_metrics[0].metrics
    (sent,) = [m for m in second if m.name.endswith("record.send.total")]
    assert sent.sum.data_points[0].as_int == 15  # the delta since the last push
    assert sent.sum.data_points[0].start_time_unix_nano > 0


def test_cumulative_counters_count_from_the_start_and_metrics_follow_the_prefixes():
    t = ClientTelemetry(lambda: _values(records_sent=3, records_failed=1), "me")
    t.request(0)
    t.answered(_subscription(requested=("org.apache.kafka.producer.record.",), delta=False, codecs=()), 0)
    push = t.request(10_000)
    assert push.compression_type == 0  # the broker named no codec: uncompressed
    metrics = _decoded(push).resource_metrics[0].scope_metrics[0].metrics
    assert {m.name for m in metrics} == {"org.apache.kafka.producer.record.send.total",
                                         "org.apache.kafka.producer.record.error.total",
                                         "org.apache.kafka.producer.record.retry.total"}
    assert all(m.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE for m in metrics)


@pytest.mark.parametrize("codecs, expected", [((3, 1), 3), ((9, 2), 2), ((), 0)])
def test_the_brokers_first_codec_this_client_has(codecs, expected):
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)
    t.answered(_subscription(codecs=codecs), 0)
    push = t.request(10_000)
    assert push.compression_type == expected
    if expected:
        assert decompress(CompressionType(expected), push.metrics)


def test_no_metrics_requested_asks_again_an_interval_later():
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)
    t.answered(_subscription(requested=(), interval=2000), 50)
    assert t.state is TelemetryState.SUBSCRIPTION_NEEDED and t.due_in(50, 30_000) == 2000
    again = t.request(2050)
    assert again.client_instance_id == INSTANCE  # the id the broker gave, kept


@pytest.mark.parametrize("error, wait, enabled", [
    (117, 0, True),      # UNKNOWN_SUBSCRIPTION_ID: ask again at once
    (76, 0, True),       # UNSUPPORTED_COMPRESSION_TYPE: likewise
    (118, 1000, True),   # TELEMETRY_TOO_LARGE: an interval later
    (89, 1000, True),    # THROTTLING_QUOTA_EXCEEDED: likewise
    (42, None, False),   # INVALID_REQUEST: never again
    (87, None, False),   # INVALID_RECORD: never again
])
def test_errors_as_javas_client_takes_them(error, wait, enabled):
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)
    t.answered(_subscription(), 0)
    t.request(5000)
    t.answered(SimpleNamespace(error_code=error), 5000)
    assert t.enabled is enabled
    if enabled:
        assert t.state is TelemetryState.SUBSCRIPTION_NEEDED and t.due_in(5000, 30_000) == wait
    else:
        assert t.due_in(5000, 30_000) == float("inf") and t.request(99_999) is None


def test_closing_sends_one_terminating_push_then_nothing():
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)
    t.answered(_subscription(), 0)
    t.initiate_close()
    assert t.closing and t.due_in(1, 30_000) == 0  # at once, not an interval later
    push = t.request(1)
    assert push.terminating
    t.answered(SimpleNamespace(error_code=0), 2)
    assert not t.closing and t.state is TelemetryState.TERMINATED and t.pushes == 1
    assert t.request(10_000) is None


def test_closing_without_a_subscription_sends_nothing():
    t = ClientTelemetry(lambda: _values(), "me")
    t.initiate_close()
    assert not t.closing and t.request(0) is None
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)  # asked, not answered yet
    t.initiate_close()
    t.answered(_subscription(), 5)
    assert t.state is TelemetryState.TERMINATED and t.request(10) is None


def test_no_answer_asks_for_a_subscription_again_an_interval_later():
    t = ClientTelemetry(lambda: _values(), "me")
    t.request(0)
    t.failed(10)
    assert t.state is TelemetryState.SUBSCRIPTION_NEEDED and t.due_in(10, 30_000) == DEFAULT_PUSH_INTERVAL_MS


def test_every_metric_is_named_as_javas_producer_names_it():
    assert all(m.name == m.name.lower() and "-" not in m.name for m in METRICS)
    assert {m.name for m in METRICS if m.counter} == {"record.send.total", "record.error.total",
                                                      "record.retry.total", "batch.split.total",
                                                      "bufferpool.wait.time.ns.total"}
