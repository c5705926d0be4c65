"""OpenTelemetry's SDK set up to keep what a process records, for the tests: the sink's
``openTelemetrySetup`` hook (``sparkkafka_sink.testing.otel_capture:set_up``).

A Spark write records in processes the test cannot reach (every task's Python worker, the
driver's planning and commit processes), so the SDK's exporters here write each finished span
and each metrics export as one JSON line (the SDK's own ``to_json``) to a file of the process
under :data:`CAPTURE_DIR`, which :func:`spans` and :func:`metric_points` read back.  A test
tells its write's records apart by its trace (it gives the write a ``traceParent`` of its own)
and its metrics by their topic.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

#: where each process writes its lines (``spans-<pid>.jsonl``, ``metrics-<pid>.jsonl``)
CAPTURE_DIR = Path(tempfile.gettempdir()) / "sparkkafka-otel-capture"

_lock = threading.Lock()


def set_up() -> None:
    """Install a tracer and a meter provider exporting to this process's files (once)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    CAPTURE_DIR.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    span_file = open(CAPTURE_DIR / f"spans-{pid}.jsonl", "a", buffering=1, encoding="utf-8")
    metric_file = open(CAPTURE_DIR / f"metrics-{pid}.jsonl", "a", buffering=1, encoding="utf-8")
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=span_file, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(tracer_provider)
    # exported when a task flushes (the sink's otel.flush): an hour between the reader's own
    reader = PeriodicExportingMetricReader(ConsoleMetricExporter(
        out=metric_file, formatter=lambda data: data.to_json(indent=None) + "\n"), export_interval_millis=3_600_000)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))


def _exports(path: Path) -> list[dict]:
    with _lock:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def spans(trace_id: str) -> list[dict]:
    """Every span recorded in trace ``trace_id`` (32 hex digits), by any process."""
    return [s for path in sorted(CAPTURE_DIR.glob("spans-*.jsonl")) for s in _exports(path)
            if s["context"]["trace_id"] == f"0x{trace_id}"]


def metric_points(name: str, **attributes: str) -> list[dict]:
    """The data points of metric ``name`` whose attributes include ``attributes``, as each
    process last exported them (its totals so far: the SDK's sums and histograms are cumulative)."""
    found: list[dict] = []
    for path in sorted(CAPTURE_DIR.glob("metrics-*.jsonl")):
        latest: dict[tuple, dict] = {}
        for export in _exports(path):
            for resource in export.get("resource_metrics", []):
                for scope in resource.get("scope_metrics", []):
                    for metric in scope.get("metrics", []):
                        if metric["name"] != name:
                            continue
                        for point in metric["data"]["data_points"]:
                            if all(point["attributes"].get(k) == v for k, v in attributes.items()):
                                latest[tuple(sorted(point["attributes"].items()))] = point
        found += latest.values()
    return found
