"""Spans a write is seen by, started from and carried as W3C ``traceparent`` strings.

A Spark write runs in several processes (the user's, the driver's planning and commit
processes, one Python worker per task), so a span's context crosses them as text: the
caller's current span as the ``traceParent`` option, each task's span in its commit message.
:class:`Span` is a started span, or nothing (OpenTelemetry absent, or tracing off): its methods
are then no-ops, so the code that traces does not test for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from sparkkafka_sink.otel import available
from sparkkafka_sink.version import __version__

if TYPE_CHECKING:
    import pyarrow as pa
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import SpanContext

__all__ = ["Span", "traceparent", "valid_traceparent", "valid_traceparents", "TRACEPARENT_PATTERN"]

AttributeValue = str | bool | int | float | list[str]


#: a W3C traceparent of version 00, lower-case hex (neither id may be all zeros besides:
#: ``_ZERO_TRACE``, ``_ZERO_SPAN``, which can stand nowhere else in a text of the pattern)
TRACEPARENT_PATTERN = "^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
_ZERO_TRACE, _ZERO_SPAN = "00-" + "0" * 32 + "-", "-" + "0" * 16 + "-"


def valid_traceparent(text: str) -> bool:
    """Whether ``text`` is a W3C ``traceparent`` (version 00: ``00-<32 hex>-<16 hex>-<2 hex>``,
    lower case, neither id all zeros)."""
    return re.fullmatch(TRACEPARENT_PATTERN, text) is not None and not text.startswith(_ZERO_TRACE) \
        and _ZERO_SPAN not in text


def valid_traceparents(texts: pa.Array) -> pa.BooleanArray:
    """:func:`valid_traceparent` of each string of a column (a null stays null; pyarrow imported
    here: the driver's processes, which check the option, import neither it nor numpy)."""
    import pyarrow.compute as pc

    zero_id = pc.or_(pc.starts_with(texts, _ZERO_TRACE), pc.match_substring(texts, _ZERO_SPAN))
    return pc.and_(pc.match_substring_regex(texts, TRACEPARENT_PATTERN), pc.invert(zero_id))


def _format(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _context_of(traceparent: str) -> SpanContext | None:
    """The span context a ``traceparent`` names (OpenTelemetry's own parser), or None."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = trace.get_current_span(TraceContextTextMapPropagator().extract({"traceparent": traceparent}))
    span_context = context.get_span_context()
    return span_context if span_context.is_valid else None


def traceparent() -> str | None:
    """The caller's current span as a W3C ``traceparent`` (None: no span, or no OpenTelemetry):
    what a write's ``traceParent`` option takes, for its spans to continue the caller's trace."""
    if not available():
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return _format(context) if context.is_valid else None


class Span:
    """A started span (or nothing): attributes set as they become known, an error recorded,
    ended once."""

    def __init__(self, span: OtelSpan | None = None):
        self._span = span

    @classmethod
    def start(cls, name: str, *, parent: str | None = None, producer: bool = False,
              attributes: Mapping[str, AttributeValue] | None = None, links: Iterable[str] = ()) -> Span:
        """A span ``name``, the child of the span ``parent`` names (else of this process's current
        span), linked to the spans ``links`` name; a PRODUCER span when ``producer``."""
        if not available():
            return cls()
        from opentelemetry import context, trace

        parent_context = None
        if parent:
            remote = _context_of(parent)
            if remote is not None:
                parent_context = trace.set_span_in_context(trace.NonRecordingSpan(remote), context.Context())
        linked = [trace.Link(c) for c in (_context_of(t) for t in links if t) if c is not None]
        tracer = trace.get_tracer("sparkkafka_sink", __version__)
        kind = trace.SpanKind.PRODUCER if producer else trace.SpanKind.INTERNAL
        return cls(tracer.start_span(name, context=parent_context, kind=kind, attributes=dict(attributes or {}),
                                     links=linked))

    @property
    def traceparent(self) -> str | None:
        """This span as a W3C ``traceparent`` (None: nothing recorded)."""
        if self._span is None:
            return None
        context = self._span.get_span_context()
        return _format(context) if context.is_valid else None

    def set(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        if self._span is not None:
            self._span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def fail(self, error: BaseException) -> None:
        """The span's work failed with ``error`` (recorded as an exception event, status ERROR)."""
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.record_exception(error)
        self._span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        self._span.set_attribute("error.type", type(error).__name__)

    def end(self) -> None:
        if self._span is not None:
            self._span.end()
            self._span = None
