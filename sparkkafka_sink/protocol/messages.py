"""The message classes of every declared API, generated from the specs on first use.

``messages.MetadataResponse`` is the class ``protocol.schema`` built from
``specs/MetadataResponse.json``; its nested structs hang off the schema
(``schema_of("MetadataResponse").structs["MetadataResponseTopic"]``).  A few classes gain
behaviour here (``ApiVersionsResponse.version_range``); requests gain ``API_KEY`` so the
network layer knows what it sends.  ``encode_body``/``decode_body`` are the generic codec for
any of them; ``protocol.produce`` keeps hand-written fast paths for the Produce hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sparkkafka_sink.protocol import codec
from sparkkafka_sink.protocol.api import DECLARED, ApiKey
from sparkkafka_sink.protocol.schema import MessageSchema, ProtocolMessage, load

#: the spec names of every declared message, requests and responses
SPEC_NAMES: tuple[str, ...] = tuple(f"{d.spec}{kind}" for d in DECLARED.values()
                                    for kind in ("Request", "Response"))
_C = TypeVar("_C", bound=Any)  # a class; Any: install sets API_KEY on it
_API_OF = {f"{d.spec}{kind}": key for key, d in DECLARED.items() for kind in ("Request", "Response")}


def schema_of(name: str) -> MessageSchema:
    """The loaded schema of a declared message, with request classes marked by ``API_KEY``."""
    message = load(name)
    if getattr(message.cls, "API_KEY", None) is None:
        setattr(message.cls, "API_KEY", _API_OF[name])  # noqa: B010 (a class made at run time)
    return message


def encode_body(message: ProtocolMessage, version: int) -> list:
    """The body of any declared message instance, as buffers."""
    return codec.encode(schema_of(type(message).__name__), message, version)


def decode_body(name: str, body: bytes | bytearray | memoryview, version: int) -> ProtocolMessage:
    return codec.decode(schema_of(name), body, version)


def _extend(name: str) -> Callable[[_C], _C]:
    """Install a subclass (behaviour only, no new fields) as the class ``name`` decodes to."""
    def install(cls: _C) -> _C:
        message = schema_of(name)
        cls.API_KEY = _API_OF[name]
        message.cls = cls
        return cls
    return install


_ApiVersionsResponseData: Any = load("ApiVersionsResponse").cls  # generated: its fields are known at run time


@_extend("ApiVersionsResponse")
class ApiVersionsResponse(_ApiVersionsResponseData):
    __slots__ = ()

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        """``(min, max)`` the broker speaks of ``api_key``, or None."""
        for k in self.api_keys or ():
            if k.api_key == api_key:
                return k.min_version, k.max_version
        return None


def metadata_request(topics: list[str] | None, allow_auto_topic_creation: bool = True) -> ProtocolMessage:
    """A MetadataRequest for topic names (``None``: every topic; ``[]``: brokers only).

    It asks for each topic's authorized operations (``write_refused`` reads them): a topic the
    principal may see but not write then fails before anything is sent -- under exactly-once a
    refused Produce would doom the whole transaction."""
    message = schema_of("MetadataRequest")
    topic_cls = message.structs["MetadataRequestTopic"].cls
    return message.cls(topics=None if topics is None else [topic_cls(name=t) for t in topics],
                       allow_auto_topic_creation=allow_auto_topic_creation,
                       include_topic_authorized_operations=True)


#: Kafka's AclOperation codes (each one's bit in authorized operations) and the "not asked" value
ACL_OPERATIONS = {"READ": 3, "WRITE": 4}
ACL_WRITE, AUTHORIZED_OPERATIONS_UNKNOWN = ACL_OPERATIONS["WRITE"], -2147483648


def operations_refused(topic_authorized_operations: int | None, operations: tuple[str, ...]) -> list[str]:
    """Which of ``operations`` (Kafka's names: READ, WRITE) a Metadata answer's authorized
    operations refuse the principal on a topic it may see; unknown values (not asked, old broker,
    0) refuse nothing: the request itself will say."""
    ops = topic_authorized_operations
    if ops in (None, AUTHORIZED_OPERATIONS_UNKNOWN, 0):
        return []
    assert ops is not None
    return [name for name in operations if not ops & (1 << ACL_OPERATIONS[name])]


def write_refused(topic_authorized_operations: int | None) -> bool:
    """A Metadata answer's authorized operations show the principal may see the topic but not
    WRITE it (see :func:`operations_refused`)."""
    return bool(operations_refused(topic_authorized_operations, ("WRITE",)))


def __getattr__(name: str) -> type[ProtocolMessage]:
    if name in _API_OF:
        return schema_of(name).cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SPEC_NAMES", "schema_of", "encode_body", "decode_body", "metadata_request", "write_refused",
           "operations_refused",
           "ApiVersionsResponse", "ApiKey"]
__all__ += [n for n in SPEC_NAMES if n != "ApiVersionsResponse"]  # the generated message classes
