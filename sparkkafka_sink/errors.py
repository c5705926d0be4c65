"""Exception hierarchy shared by every layer.

It sits below ``protocol/`` so that codecs, the network client, the producer and
the Spark sink raise and catch the same types.  Broker error codes get one
subclass of :class:`BrokerResponseError` each, generated in
``sparkkafka_sink.protocol.error_codes`` from the protocol's error table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_Error = TypeVar("_Error", bound=BaseException)


class Setting:
    """A configuration key named in a message, kept as data: the layer that knows what its users
    call the key (the Spark sink's ``kafka.linger.ms`` for the producer's ``linger.ms``) renders
    the message with its names (:func:`named`), and no one rewrites message text afterwards."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __str__(self) -> str:
        return self.key

    def __repr__(self) -> str:
        return repr(self.key)

    def __format__(self, spec: str) -> str:
        return format(self.key, spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Setting) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


class Message(str):
    """An error message built from a ``str.format`` template and its arguments, which it keeps:
    as a str it reads with the keys as the raising layer names them; :meth:`named` renders it
    again with another name for each :class:`Setting` (arguments that are messages or errors
    carrying one are renamed the same way).  Arguments are never parsed again, so a value
    that happens to look like a key stays as it was."""

    template: str
    parts: tuple[Any, ...]

    def __new__(cls, template: str, *parts: Any) -> Message:
        text = super().__new__(cls, template.format(*parts))
        text.template = template
        text.parts = parts
        return text

    def named(self, name: Callable[[str], str]) -> str:
        return self.template.format(*(_renamed(part, name) for part in self.parts))


def _renamed(part: Any, name: Callable[[str], str]) -> Any:
    if isinstance(part, Setting):
        return Setting(name(part.key))
    if isinstance(part, Message):
        return part.named(name)
    if isinstance(part, BaseException):
        return named(part, name)
    return part


def named(error: BaseException | str, name: Callable[[str], str]) -> str:
    """The message of ``error`` (an exception or a message itself) with each configuration key
    it names as ``name(key)``; the text as it is when it was not built as a :class:`Message`."""
    text = error if isinstance(error, str) else error.args[0] if len(error.args) == 1 else None
    return text.named(name) if isinstance(text, Message) else str(error)


class KafkaError(Exception):
    """Base class of every error this package raises on purpose."""

    #: True when the same operation may succeed if tried again.
    retriable: bool = False
    #: the record itself can never be written as it is -- a bad row, not bad luck: refused before
    #: sending (too large, malformed, a partition that does not exist) or by the broker (the
    #: broker's errors that say so, ``protocol.error_codes``)
    condemns_record: bool = False


def condemns_record(error: BaseException) -> bool:
    """``error`` says its record can never be written as it is (``KafkaError.condemns_record``)."""
    return isinstance(error, KafkaError) and error.condemns_record


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown, or its value is out of range."""


class ProtocolError(KafkaError):
    """Bytes from the wire that do not decode as the Kafka protocol says.

    The connection that produced them is closed and in-flight requests are
    retried, so it is retriable.
    """

    retriable = True
    #: ``(request, response)`` pairs decoded from the same bytes before the malformed frame
    #: (``BrokerProtocol.receive``): delivered before the connection closes, so none is lost
    answers: Sequence[tuple[Any, Any]] = ()


class UnsupportedVersionError(KafkaError):
    """The broker does not support any version of an API we can speak."""


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed or was closed.  ``refused``: the address answered that
    nothing listens there (ECONNREFUSED), an answer rather than silence."""

    retriable = True

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class AuthenticationError(KafkaError):
    """SASL authentication failed (wrong credentials, unknown mechanism, a broker that could
    not prove it knows the password).  Not retriable: trying again would fail the same way.
    Messages name the mechanism, the user and the broker, never a secret."""


class SslError(KafkaConnectionError):
    """The TLS handshake failed: the broker's certificate did not verify (unknown CA, hostname
    mismatch, expired), the broker asked for a client certificate, or one side does not speak
    TLS.  Not retriable."""

    retriable = False


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its configured bound."""

    retriable = True


class BufferExhaustedError(KafkaTimeoutError):
    """``send()`` waited ``max.block.ms`` for ``buffer.memory`` to free up."""


class RecordTooLargeError(KafkaError):
    """A record is larger than ``max.request.size`` or ``buffer.memory``."""

    condemns_record = True


class InvalidRecordError(KafkaError, TypeError):
    """A record's key, value, headers, timestamp or topic is malformed.

    ``row``: in a call of many records (``send_batch``), the first row at fault, when the check
    that refused it knows it (None: the call's columns as a whole)."""

    condemns_record = True

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row


class InvalidTopicError(InvalidRecordError):
    """A topic name Kafka rejects: not a str, empty, ``.``/``..``, over 249 characters, or a
    character other than ASCII letters, digits, ``.``, ``_`` and ``-``."""


class SerializationError(InvalidRecordError):
    """A record key or value (or header value) is not bytes, bytearray, memoryview, str or None."""


class InvalidHeaderError(InvalidRecordError):
    """Headers are not a dict or a list of ``(str, bytes | None)`` pairs (e.g. a bytes key)."""


class InvalidRecordTimestampError(InvalidRecordError):
    """A record timestamp is not an int of milliseconds in ``[0, 2**63 - 1]`` (or None)."""


class InvalidPartitionError(KafkaError, ValueError):
    """An explicit partition does not exist for the topic."""

    condemns_record = True


class UnknownTopicError(KafkaError):
    """The topic does not exist on the cluster (and was not created)."""


class ProducerClosedError(KafkaError):
    """``send()`` was called after ``close()``."""


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional id took over."""


class BrokerResponseError(KafkaError):
    """A broker answered with a non-zero error code.

    Subclasses (one per code) are generated in ``protocol.error_codes``; the code,
    its protocol name and whether it is retriable are class attributes.
    """

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    description: str = "The server experienced an unexpected error."
    #: leaders may have moved: refresh metadata before retrying
    invalid_metadata: bool = False
    #: the broker lost (or refuses) our producer id/epoch/sequence: take a new producer id
    producer_state_lost: bool = False
    #: resending the same bytes cannot change the answer
    resend_cannot_help: bool = False
    #: the broker already wrote this batch (an idempotent resend)
    already_written: bool = False
    #: the batch (or its record) is over the broker's size limit
    too_large: bool = False
    #: a batch of several records is split and sent again; only the records at fault fail
    splits_batch: bool = False
    #: the coordinator asked is not the key's coordinator (any more): find it again
    coordinator_moved: bool = False
    #: a transactional producer was fenced by a newer one with its id
    producer_fenced: bool = False

    def __init__(self, message: str | None = None):
        self.message = message
        if message:
            super().__init__(Message("[Error {}] {}: {} ({})", self.code, self.name, self.description, message))
        else:
            super().__init__(f"[Error {self.code}] {self.name}: {self.description}")


def again(error: _Error) -> _Error:
    """A copy of ``error`` to raise to another caller: an error kept (a producer's fatal error,
    a step's outcome) is raised afresh each time, with its own traceback."""
    cls = type(error)
    fresh = cls.__new__(cls)  # not __init__: the generated broker errors format their message there
    fresh.args = error.args
    fresh.__dict__.update(error.__dict__)
    return fresh
