"""One encoder and one decoder for every message declared in ``protocol.schema``.

Versions decide which fields exist, which may be null and which travel as tagged fields;
flexible versions use compact strings, bytes and arrays and end every struct with a tagged-field
section.  A plan per (struct, version) is built once and cached.  Malformed input raises
``ProtocolError`` (through ``Reader``), never ``IndexError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkkafka_sink.errors import ProtocolError, UnsupportedVersionError
from sparkkafka_sink.protocol.api import DECLARED, check_version
from sparkkafka_sink.protocol.primitives import ZERO_UUID, Reader, Writer
from sparkkafka_sink.protocol.schema import Field, MessageSchema, ProtocolMessage, StructSchema

_FIXED_WRITE: dict[str, Callable[[Writer, Any], None]] = {
    "bool": Writer.boolean, "int8": Writer.int8, "int16": Writer.int16, "uint16": Writer.uint16,
    "int32": Writer.int32, "uint32": Writer.uint32, "int64": Writer.int64, "float64": Writer.float64,
    "uuid": Writer.uuid}
_FIXED_READ: dict[str, Callable[[Reader], Any]] = {
    "bool": Reader.boolean, "int8": Reader.int8, "int16": Reader.int16, "uint16": Reader.uint16,
    "int32": Reader.int32, "uint32": Reader.uint32, "int64": Reader.int64, "float64": Reader.float64,
    "uuid": Reader.uuid}
#: smallest encoding of one array element, to bound counts read from untrusted input
_MIN_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
             "float64": 8, "uuid": 16}


class _Plan:
    """How one struct looks at one version: its regular fields in order, its tagged ones by tag."""

    __slots__ = ("regular", "tagged", "flexible")

    def __init__(self, schema: StructSchema, version: int, flexible: bool):
        self.flexible = flexible
        self.regular: list[Field] = []
        self.tagged: dict[int, Field] = {}
        for f in schema.fields:
            if not f.present_in(version):
                continue
            if flexible and f.tagged_in(version):
                if f.tag is None:
                    raise ValueError(f"{schema.name}.{f.spec_name} has taggedVersions but no tag")
                self.tagged[f.tag] = f
            else:
                self.regular.append(f)
        self.tagged = dict(sorted(self.tagged.items()))


_plans: dict[tuple[int, int, bool], _Plan] = {}


def _plan(schema: StructSchema, version: int, flexible: bool) -> _Plan:
    key = (id(schema), version, flexible)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _Plan(schema, version, flexible)
    return plan


# ---------------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------------

def encode(message: MessageSchema, obj: ProtocolMessage, version: int, declared_versions_only: bool = True) -> list:
    """The body of ``obj`` (an instance of ``message.cls``) at ``version``, as buffers.
    ``declared_versions_only=False`` allows any version the spec has (tools that read other
    clients' traffic)."""
    _check(message, version, declared_versions_only)
    w = Writer()
    _write_struct(w, message, obj, version, message.is_flexible(version))
    return w.parts()


def _write_struct(w: Writer, schema: StructSchema, obj: ProtocolMessage, version: int, flexible: bool) -> None:
    plan = _plan(schema, version, flexible)
    for f in plan.regular:
        _write_field(w, f, getattr(obj, f.name), version, flexible)
    if flexible:
        _write_tagged(w, plan, obj, version)


def _write_tagged(w: Writer, plan: _Plan, obj: ProtocolMessage, version: int) -> None:
    present = obj._tags or ()
    unknown = obj._unknown_tags or {}
    out: dict[int, bytes] = dict(unknown)
    for tag, f in plan.tagged.items():
        value = getattr(obj, f.name)
        if tag in present or not _is_default(f, value):
            tw = Writer()
            _write_field(tw, f, value, version, True)
            out[tag] = tw.getvalue()
    w.uvarint(len(out))
    for tag in sorted(out):
        w.uvarint(tag)
        w.uvarint(len(out[tag]))
        w.raw(out[tag])


def _is_default(f: Field, value: Any) -> bool:
    if f.is_array:
        return value == [] if f.default is not None else value is None
    if f.struct is not None:
        return value is None if f.default is None else value == f.struct.cls()
    return value == f.default


def _write_field(w: Writer, f: Field, value: Any, version: int, flexible: bool) -> None:
    if f.is_array:
        if value is None:
            if not f.nullable_in(version):
                raise ValueError(f"{f.spec_name} may not be null at version {version}")
            w.uvarint(0) if flexible else w.int32(-1)
            return
        w.uvarint(len(value) + 1) if flexible else w.int32(len(value))
        for item in value:
            _write_value(w, f, f.element, item, version, flexible)
    else:
        _write_value(w, f, f.type, value, version, flexible)


def _write_value(w: Writer, f: Field, type_: str, value: Any, version: int, flexible: bool) -> None:
    fixed = _FIXED_WRITE.get(type_)
    if fixed is not None:
        fixed(w, value if value is not None or type_ != "uuid" else ZERO_UUID)
    elif type_ == "string":
        if value is None and not f.nullable_in(version):
            raise ValueError(f"{f.spec_name} may not be null at version {version}")
        if flexible:
            w.compact_nullable_string(value)
        else:
            w.nullable_string(value)
    elif type_ in ("bytes", "records"):
        if value is None and not f.nullable_in(version):
            raise ValueError(f"{f.spec_name} may not be null at version {version}")
        external = type_ == "records"  # record batches go out by reference, never copied
        if flexible:
            w.compact_nullable_bytes(value, external=external)
        else:
            w.nullable_bytes(value, external=external)
    else:
        if value is None:
            raise ValueError(f"{f.spec_name} may not be null at version {version}")
        assert f.struct is not None  # neither primitive nor array: a struct
        _write_struct(w, f.struct, value, version, flexible)


# ---------------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------------

def decode(message: MessageSchema, body: bytes | bytearray | memoryview, version: int,
           declared_versions_only: bool = True) -> ProtocolMessage:
    """An instance of ``message.cls`` from ``body`` at ``version``; trailing bytes are an error."""
    _check(message, version, declared_versions_only)
    r = Reader(body)
    obj = _read_struct(r, message, version, message.is_flexible(version))
    if r.remaining:
        raise ProtocolError(f"{message.name} v{version}: {r.remaining} unexpected trailing bytes")
    return obj


def _read_struct(r: Reader, schema: StructSchema, version: int, flexible: bool) -> ProtocolMessage:
    plan = _plan(schema, version, flexible)
    obj = schema.cls()
    for f in plan.regular:
        setattr(obj, f.name, _read_field(r, f, version, flexible))
    if flexible:
        tags = None
        unknown = None
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            data = r.raw(size)
            tagged = plan.tagged.get(tag)
            if tagged is None:
                unknown = unknown or {}
                unknown[tag] = bytes(data)
                continue
            sub = Reader(data)
            setattr(obj, tagged.name, _read_field(sub, tagged, version, True))
            if sub.remaining:
                raise ProtocolError(f"{schema.name}: tagged field {tagged.spec_name} has trailing bytes")
            tags = tags or set()
            tags.add(tag)
        obj._tags = tags
        obj._unknown_tags = unknown
    return obj


def read_tagged_value(f: Field, raw: bytes | bytearray | memoryview, version: int) -> Any:
    """The value of tagged field ``f`` from its raw bytes (hand-written decoders use it)."""
    sub = Reader(raw)
    value = _read_field(sub, f, version, True)
    if sub.remaining:
        raise ProtocolError(f"tagged field {f.spec_name} has trailing bytes")
    return value


def _read_field(r: Reader, f: Field, version: int, flexible: bool) -> Any:
    if f.is_array:
        element = f.element
        n = (r.compact_array_length(_MIN_SIZE.get(element, 1)) if flexible
             else r.array_length(_MIN_SIZE.get(element, 1)))
        if n is None:
            if not f.nullable_in(version):
                raise ProtocolError(f"{f.spec_name} is null at version {version}, which forbids it")
            return None
        read = _FIXED_READ.get(element)
        if read is not None:
            return [read(r) for _ in range(n)]
        return [_read_value(r, f, element, version, flexible) for _ in range(n)]
    return _read_value(r, f, f.type, version, flexible)


def _read_value(r: Reader, f: Field, type_: str, version: int, flexible: bool) -> Any:
    fixed = _FIXED_READ.get(type_)
    if fixed is not None:
        return fixed(r)
    value: str | memoryview | None
    if type_ == "string":
        value = r.compact_nullable_string() if flexible else r.nullable_string()
    elif type_ in ("bytes", "records"):
        value = r.compact_nullable_bytes() if flexible else r.nullable_bytes()
    else:
        assert f.struct is not None  # neither primitive nor array: a struct
        return _read_struct(r, f.struct, version, flexible)
    if value is None and not f.nullable_in(version):
        raise ProtocolError(f"{f.spec_name} is null at version {version}, which forbids it")
    return value


def _check(message: MessageSchema, version: int, declared_versions_only: bool) -> None:
    """Declared APIs: the versions we speak; otherwise: what the spec allows."""
    if declared_versions_only and message.api_key in DECLARED:
        check_version(message.api_key, version)
    elif message.valid is None or version not in message.valid:
        raise UnsupportedVersionError(f"{message.name} has no version {version}")
