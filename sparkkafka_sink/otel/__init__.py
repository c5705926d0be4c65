"""OpenTelemetry, optional and off the hot path: a write's spans and its producers' metrics,
through OpenTelemetry's API when it is installed (the ``[otel]`` extra: ``opentelemetry-api``).

Nothing here imports OpenTelemetry unless :func:`available` says it is installed and a caller
asks for it; without it every function is a no-op and nothing is paid.  The API alone records
nothing: an SDK set up in the process (``opentelemetry-sdk`` with its exporters, by the user's
code, ``opentelemetry-instrument``, or the sink's ``openTelemetrySetup`` hook in every Python
process of a Spark write) decides where spans and metrics go.

* ``instruments``: the producer's metrics as OpenTelemetry instruments (a ``MetricsObserver``),
  named after OpenTelemetry's messaging conventions where they have a name;
* ``spans``: spans started from and carried as W3C ``traceparent`` strings, links, flushing.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

__all__ = ["available", "set_up", "flush", "MESSAGING_SYSTEM"]

#: what every span and instrument of the package carries (OpenTelemetry's messaging conventions)
MESSAGING_SYSTEM = {"messaging.system": "kafka"}


@functools.cache
def available() -> bool:
    """Whether OpenTelemetry's API is installed."""
    return importlib.util.find_spec("opentelemetry") is not None and \
        importlib.util.find_spec("opentelemetry.trace") is not None


_SET_UP: set[str] = set()
_SET_UP_LOCK = threading.Lock()


def set_up(hook: str | None) -> None:
    """Call the user's set-up ``"module:function"`` once in this process (the sink's
    ``openTelemetrySetup``: it installs an SDK and its exporters where Spark runs the write's
    Python code, which the user's own code never reaches)."""
    if not hook:
        return
    with _SET_UP_LOCK:
        if hook in _SET_UP:
            return
        _SET_UP.add(hook)
        module, _, name = hook.partition(":")
        function: Callable[[], object] = getattr(importlib.import_module(module), name or "set_up")
        function()


def flush(timeout_ms: int = 5000) -> None:
    """Hand what this process recorded to its exporters now (an SDK's providers; the API's own
    have nothing to flush): a Spark task's spans and metrics reach them before its Python worker
    may be ended."""
    if not available():
        return
    from opentelemetry.metrics import get_meter_provider
    from opentelemetry.trace import get_tracer_provider

    for provider in (get_tracer_provider(), get_meter_provider()):
        force_flush = getattr(provider, "force_flush", None)
        if force_flush is not None:
            try:
                force_flush(timeout_ms)
            except Exception:
                log.warning("OpenTelemetry: flushing %s failed", type(provider).__name__, exc_info=True)
