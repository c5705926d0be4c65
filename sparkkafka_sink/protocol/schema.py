"""Kafka's message declarations, read from Apache Kafka's own JSON specs (vendored in ``specs/``).

Every request and response is declared once, as data: its fields with the versions they exist
in (``versions``), may be null in (``nullableVersions``) or travel as tagged fields in
(``taggedVersions``, ``tag``), and the versions that use compact encodings
(``flexibleVersions``).  ``load(name)`` turns a spec into a :class:`MessageSchema` whose
structs are Python classes (one per struct, fields in snake_case: ``ThrottleTimeMs`` ->
``throttle_time_ms``); ``protocol.codec`` encodes and decodes them for any version.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field, make_dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

SPECS = Path(__file__).with_name("specs")
ZERO_UUID = uuid.UUID(int=0)

#: primitive type names of the spec language
PRIMITIVES = frozenset({"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
                        "string", "bytes", "records", "uuid"})


class ProtocolMessage:
    """A request, a response or one of their structs: a class generated from Kafka's JSON message
    definitions (:func:`load`), one attribute per field, snake_case.  mypy cannot see generated
    fields, so a field read is ``Any`` (``__getattr__``, for the type checker only); but a value
    that is not a message where one belongs is caught."""

    __slots__ = ()

    if TYPE_CHECKING:
        #: a request's API (``messages.install`` sets it on the request classes)
        API_KEY: ClassVar[int]

        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``hi`` is None for "N+" and the range is empty for "none"."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str | None) -> Versions | None:
        if text is None or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        lo, _, hi = text.partition("-")
        return cls(int(lo), int(hi or lo))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)


def _in(versions: Versions | None, version: int) -> bool:
    return versions is not None and version in versions


def snake(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``, ``V3AndBelowTopics`` -> ``v3_and_below_topics``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", name).lower()


@dataclass(frozen=True)
class Field:
    name: str            # snake_case attribute name
    spec_name: str       # the spec's CamelCase name
    type: str            # primitive name, "[]<element>", or a struct name
    versions: Versions | None
    nullable: Versions | None
    tagged: Versions | None
    tag: int | None
    default: Any
    struct: StructSchema | None = None  # element/struct schema for struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def present_in(self, version: int) -> bool:
        return _in(self.versions, version)

    def tagged_in(self, version: int) -> bool:
        return _in(self.tagged, version)

    def nullable_in(self, version: int) -> bool:
        return _in(self.nullable, version)

    def new_default(self) -> Any:
        """A fresh default value (lists and structs are never shared between instances)."""
        if self.is_array:
            return None if self.default is None else []
        if self.struct is not None:
            return None if self.default is None and self.nullable is not None else self.struct.cls()
        return self.default


@dataclass
class StructSchema:
    name: str
    fields: list[Field]
    cls: type[ProtocolMessage] = ProtocolMessage  # the generated class, set once the fields are read (they may refer back)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")


@dataclass
class MessageSchema(StructSchema):
    api_key: int = -1
    kind: str = ""                       # "request" | "response" | "header" | "data"
    valid: Versions | None = None
    flexible: Versions | None = None
    structs: dict[str, StructSchema] = field(default_factory=dict)

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def _default(type_: str, nullable: bool, raw: Any) -> Any:
    if type_.startswith("[]") or type_ not in PRIMITIVES:  # arrays and structs: a fresh one, or null
        return None if raw == "null" else []
    if raw is None:
        if type_ in ("string",):
            return None if nullable else ""
        if type_ in ("bytes", "records"):
            return None if nullable else b""
        if type_ == "bool":
            return False
        if type_ == "uuid":
            return ZERO_UUID
        if type_ == "float64":
            return 0.0
        return 0 if type_ in PRIMITIVES else None
    if raw == "null":
        return None
    if type_ == "bool":
        return raw is True or str(raw).lower() == "true"
    if type_ in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        text = str(raw)
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    if type_ == "float64":
        return float(raw)
    return raw


class _Loader:
    def __init__(self, spec: dict):
        self.spec = spec
        self.common = {s["name"]: s for s in spec.get("commonStructs", [])}
        self.structs: dict[str, StructSchema] = {}

    def struct(self, name: str, fields_spec: list) -> StructSchema:
        if name in self.structs:
            return self.structs[name]
        schema = StructSchema(name, [])
        self.structs[name] = schema
        schema.fields = [self.field(f) for f in fields_spec]
        schema.cls = _make_class(name, schema.fields)
        return schema

    def field(self, f: dict) -> Field:
        type_ = f["type"]
        nullable = Versions.parse(f.get("nullableVersions"))
        element = type_[2:] if type_.startswith("[]") else type_
        struct = None
        if element not in PRIMITIVES:
            fields_spec = f.get("fields")
            if fields_spec is None:
                fields_spec = self.common[element]["fields"]
            struct = self.struct(element, fields_spec)
        return Field(snake(f["name"]), f["name"], type_, Versions.parse(f.get("versions")), nullable,
                     Versions.parse(f.get("taggedVersions")), f.get("tag"),
                     _default(type_, nullable is not None, f.get("default")), struct)


def _make_class(name: str, fields: list[Field]) -> type[ProtocolMessage]:
    """A slotted class with one attribute per field (keyword or positional, in spec order).

    Fields appearing twice under different versions (FindCoordinator's ``NodeId``) share one
    attribute.  ``_tags`` remembers which tagged fields a decoded message carried, and
    ``_unknown_tags`` the raw bytes of tags the spec does not know, so re-encoding reproduces
    the input."""
    spec, seen = [], set()
    for f in fields:
        if f.name in seen:
            continue
        seen.add(f.name)
        spec.append((f.name, Any, field(default_factory=f.new_default)))
    spec.append(("_tags", Any, field(default=None, repr=False, compare=False)))
    spec.append(("_unknown_tags", Any, field(default=None, repr=False, compare=False)))
    return make_dataclass(name, spec, slots=True, bases=(ProtocolMessage,))


@cache
def load(name: str) -> MessageSchema:
    """The schema of spec ``specs/<name>.json`` (e.g. ``"ProduceRequest"``)."""
    spec = json.loads(_strip_comments((SPECS / f"{name}.json").read_text()))
    loader = _Loader(spec)
    message = MessageSchema(spec["name"], [], api_key=spec.get("apiKey", -1), kind=spec["type"],
                            valid=Versions.parse(spec["validVersions"]),
                            flexible=Versions.parse(spec.get("flexibleVersions", "none")))
    message.fields = [loader.field(f) for f in spec["fields"]]
    message.cls = _make_class(spec["name"], message.fields)
    message.structs = loader.structs
    return message
