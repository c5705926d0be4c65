"""Sans-I/O Kafka wire protocol: bytes in, objects out; no sockets here.

Messages are declared once, as Apache Kafka's JSON specs (``specs/``, loaded by ``schema``) and
encoded/decoded by one generic ``codec``; ``messages`` exposes their classes (e.g.
``protocol.MetadataResponse``), ``produce`` the hand-written Produce hot path.  The network layer
frames bytes with ``FrameReader`` and adds headers with ``encode_request`` /
``decode_response_header``.
"""

from __future__ import annotations

from sparkkafka_sink.protocol.api import (  # noqa: F401
    DECLARED,
    SUPPORTED_VERSIONS,
    ApiKey,
    check_version,
    is_flexible,
    negotiate,
)
from sparkkafka_sink.protocol.error_codes import ERROR_CLASSES, error_for_code  # noqa: F401
from sparkkafka_sink.protocol.framing import FrameReader  # noqa: F401
from sparkkafka_sink.protocol.header import decode_response_header, encode_request  # noqa: F401
from sparkkafka_sink.protocol.primitives import Reader, Writer  # noqa: F401
from sparkkafka_sink.protocol.produce import ProduceRequest, decode_produce_response  # noqa: F401
from sparkkafka_sink.protocol.schema import ProtocolMessage


def __getattr__(name: str) -> type[ProtocolMessage]:
    """Declared message classes (``ApiVersionsResponse``, ``MetadataRequest``, ...), on first use."""
    import importlib

    if name.startswith("__") or not name[:1].isupper():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    messages = importlib.import_module("sparkkafka_sink.protocol.messages")
    if name in messages.SPEC_NAMES and name != "ProduceRequest":
        return getattr(messages, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
