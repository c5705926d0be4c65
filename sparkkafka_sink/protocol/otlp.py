"""OpenTelemetry's metrics as bytes: ``MetricsData`` of OTLP v1, in Protocol Buffers' wire format.

A client that pushes its metrics to a broker (KIP-714: ``PushTelemetry``) sends them as one
``opentelemetry.proto.metrics.v1.MetricsData`` message.  This writes the part of it a client's
metrics need -- a resource and a scope, each with string attributes, and metrics that are a
``Sum`` (a counter: monotonic, cumulative or delta) or a ``Gauge`` of one number data point each
-- sans I/O, with no Protocol Buffers runtime (the tests read it with OpenTelemetry's own
generated classes, and what a broker received with the broker's decoder, in Java).

Field numbers are those of ``opentelemetry/proto/{metrics,common,resource}/v1/*.proto``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from sparkkafka_sink.varint import encode_unsigned_varint

__all__ = ["Temporality", "MetricPoint", "encode_metrics_data"]


class Temporality(IntEnum):
    """``AggregationTemporality``: what a sum's value counts."""

    DELTA = 1  # since the previous point
    CUMULATIVE = 2  # since ``start_ns``


@dataclass(frozen=True)
class MetricPoint:
    """One metric and its one data point: a ``Sum`` when ``temporality`` is set (a counter,
    monotonic), else a ``Gauge``."""

    name: str
    value: int | float
    time_ns: int
    start_ns: int = 0
    temporality: Temporality | None = None
    description: str = ""
    unit: str = ""
    attributes: Mapping[str, str] = field(default_factory=dict)


# wire types
_VARINT, _I64, _LEN = 0, 1, 2


def _tag(number: int, wire_type: int) -> bytes:
    return encode_unsigned_varint(number << 3 | wire_type)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _tag(number, _LEN) + encode_unsigned_varint(len(data)) + data


def _text_field(number: int, text: str) -> bytes:
    return _bytes_field(number, text.encode("utf-8")) if text else b""


def _key_values(number: int, attributes: Mapping[str, str]) -> bytes:
    """``repeated KeyValue`` (key 1, ``AnyValue`` 2 holding ``string_value`` 1)."""
    return b"".join(_bytes_field(number, _text_field(1, key) + _bytes_field(2, _text_field(1, value)))
                    for key, value in attributes.items())


def _data_point(point: MetricPoint) -> bytes:
    """``NumberDataPoint``: start 2 and time 3 (fixed64), ``as_double`` 4 or ``as_int`` 6, attributes 7."""
    out = _tag(2, _I64) + struct.pack("<Q", point.start_ns) if point.start_ns else b""
    out += _tag(3, _I64) + struct.pack("<Q", point.time_ns)
    if isinstance(point.value, float):
        out += _tag(4, _I64) + struct.pack("<d", point.value)
    else:
        out += _tag(6, _I64) + struct.pack("<q", point.value)
    return out + _key_values(7, point.attributes)


def _metric(point: MetricPoint) -> bytes:
    """``Metric``: name 1, description 2, unit 3, then ``gauge`` 5 or ``sum`` 7 (data points 1,
    temporality 2, monotonic 3)."""
    head = _text_field(1, point.name) + _text_field(2, point.description) + _text_field(3, point.unit)
    points = _bytes_field(1, _data_point(point))
    if point.temporality is None:
        return head + _bytes_field(5, points)
    return head + _bytes_field(7, points + _tag(2, _VARINT) + encode_unsigned_varint(point.temporality)
                               + _tag(3, _VARINT) + b"\x01")


def encode_metrics_data(resource: Mapping[str, str], scope: str, scope_version: str,
                        points: Sequence[MetricPoint]) -> bytes:
    """``MetricsData`` (``resource_metrics`` 1) of one ``ResourceMetrics`` (``resource`` 1 with its
    attributes 1, ``scope_metrics`` 2) of one ``ScopeMetrics`` (``scope`` 1: name 1, version 2;
    ``metrics`` 2)."""
    scope_metrics = (_bytes_field(1, _text_field(1, scope) + _text_field(2, scope_version))
                     + b"".join(_bytes_field(2, _metric(p)) for p in points))
    resource_metrics = _bytes_field(1, _key_values(1, resource)) + _bytes_field(2, scope_metrics)
    return _bytes_field(1, resource_metrics)
