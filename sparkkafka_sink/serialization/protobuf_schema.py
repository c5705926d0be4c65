"""Protobuf (proto3) schemas of Spark's column types, and the binding of a schema to a column.

A column written as Protobuf is a struct: its message.  Each Spark type has one Protobuf form
(the table in ``docs/guide/serialization.md``), the inverse of what Spark's ``from_protobuf``
reads back where it has one, and Confluent's where it has not:

=====================================  =================================================
Spark                                  proto3
=====================================  =================================================
BOOLEAN                                ``bool``
TINYINT, SMALLINT, INT                 ``int32``
BIGINT                                 ``int64``
FLOAT, DOUBLE                          ``float``, ``double``
STRING, BINARY                         ``string``, ``bytes``
DECIMAL(p, s)                          ``confluent.type.Decimal`` (Confluent's)
DATE                                   ``google.type.Date``
TIMESTAMP, TIMESTAMP_NTZ               ``google.protobuf.Timestamp``
INTERVAL DAY TO SECOND                 ``google.protobuf.Duration``
STRUCT                                 a nested message, named after its field
ARRAY<T>                               ``repeated T``
MAP<K, V> (K string, integer, bool)    ``map<K, V>``
=====================================  =================================================

A nullable scalar field is ``optional`` (its presence is written, so a null reads back as
unset, not as 0); a message field has presence of its own.  Protobuf has no null inside a
``repeated`` field or a map's values, nor a repeated of a repeated: an array of arrays is
refused with the schema, and a row holding such a null is a bad row.  A null array or map is
written as an empty one (Protobuf cannot tell them apart).

:func:`check_protobuf_schema` binds a message to a column's Arrow type field by field, by name
(what Spark's ``to_protobuf`` does), and says which field does not fit, with both types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import pyarrow as pa

from sparkkafka_sink.serialization.arrow_types import is_binary, is_list, is_string, spark_type_name
from sparkkafka_sink.serialization.encoded import InvalidSchemaError
from sparkkafka_sink.varint import encode_unsigned_varint, zigzag

__all__ = ["ProtoField", "ProtoMessage", "ProtoFile", "ProtoBinding", "protobuf_schema_of", "parse_proto",
           "from_descriptor_set", "check_protobuf_schema", "WELL_KNOWN"]

#: the messages of other files a derived schema uses, by full name: the file that declares them
WELL_KNOWN = {
    "google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
    "google.protobuf.Duration": "google/protobuf/duration.proto",
    "google.type.Date": "google/type/date.proto",
    "confluent.type.Decimal": "confluent/type/decimal.proto",
}
#: scalar types by how they travel: a varint, 4 or 8 fixed bytes, or length-delimited
VARINT = {"bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "enum"}
FIXED32 = {"float", "fixed32", "sfixed32"}
FIXED64 = {"double", "fixed64", "sfixed64"}
DELIMITED = {"string", "bytes"}
SCALARS = VARINT | FIXED32 | FIXED64 | DELIMITED
_MAP_KEYS = {"string", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "fixed32", "fixed64",
             "sfixed32", "sfixed64"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
Label: TypeAlias = Literal["", "optional", "repeated"]


@dataclass(frozen=True)
class ProtoField:
    """One field: ``type`` a scalar's name or a message's full name (``message`` when declared
    in the same file); a map field's ``key`` type (its ``type`` is the value's)."""

    name: str
    number: int
    type: str
    label: Label = ""
    key: str | None = None
    message: ProtoMessage | None = None

    def declaration(self) -> str:
        shown = f"map<{self.key}, {self.type}>" if self.key is not None else self.type
        label = f"{self.label} " if self.label and self.key is None else ""
        return f"{label}{shown} {self.name} = {self.number};"


@dataclass(frozen=True)
class ProtoMessage:
    name: str
    fields: tuple[ProtoField, ...]
    nested: tuple[ProtoMessage, ...] = ()

    def lines(self, indent: str = "") -> list[str]:
        out = [f"{indent}message {self.name} {{"]
        for message in self.nested:
            out += message.lines(indent + "  ")
        out += [f"{indent}  {f.declaration()}" for f in self.fields]
        return [*out, f"{indent}}}"]


@dataclass(frozen=True)
class ProtoFile:
    """A ``.proto`` file's message that a column is written as: its package, imports, and its
    place among the file's top-level messages (``index``, which the framing names)."""

    message: ProtoMessage
    package: str = ""
    imports: tuple[str, ...] = ()
    index: int = 0
    #: every top-level message of the file, in order, when it has more than ``message``
    siblings: tuple[ProtoMessage, ...] = ()

    @property
    def full_name(self) -> str:
        """The message's full name (``package.Name``): what the record strategies name subjects after."""
        return f"{self.package}.{self.message.name}" if self.package else self.message.name

    def message_indexes(self) -> bytes:
        """The framing's message indexes after the schema id: Confluent's array of zigzag varints
        (its length, then the index of each level), ``[0]`` shortened to a single 0."""
        if self.index == 0:
            return b"\x00"
        return encode_unsigned_varint(zigzag(1)) + encode_unsigned_varint(zigzag(self.index))

    def text(self) -> str:
        """The file as proto3 text."""
        lines = ['syntax = "proto3";']
        if self.package:
            lines += ["", f"package {self.package};"]
        if self.imports:
            lines += ["", *(f'import "{i}";' for i in self.imports)]
        for message in self.siblings or (self.message,):
            lines += ["", *message.lines()]
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- derivation


def protobuf_schema_of(arrow_type: pa.DataType, message_name: str = "topLevelRecord", package: str = "",
                       column: str = "value") -> ProtoFile:
    """The proto3 schema of a struct column of ``arrow_type`` (see the module's table);
    ``InvalidSchemaError`` naming the field for a type Protobuf cannot hold."""
    if not pa.types.is_struct(arrow_type):
        raise InvalidSchemaError(f"the {column} column is {spark_type_name(arrow_type)}: Protobuf writes a message, "
                                 "so the column must be a struct (e.g. F.struct(...))")
    for name, what in ((message_name, "message name"), *((p, "package") for p in package.split(".") if package)):
        if not _IDENTIFIER.match(name):
            raise InvalidSchemaError(f"{name!r} is not a Protobuf {what}: letters, digits and _ only, not first a digit")
    imports: set[str] = set()
    message = _message(message_name, arrow_type, column, imports)
    return ProtoFile(message, package, tuple(sorted(imports)))


def _message(name: str, t: pa.DataType, path: str, imports: set[str]) -> ProtoMessage:
    fields: list[ProtoField] = []
    nested: list[ProtoMessage] = []
    taken: set[str] = set()
    for number, f in enumerate(t, start=1):
        where = f"{path}.{f.name}"
        if not _IDENTIFIER.match(f.name):
            raise InvalidSchemaError(f"field {where}: {f.name!r} is not a Protobuf field name (letters, digits and _ "
                                     "only, not first a digit): rename the column")
        value_type, key = f.type, None
        label: Label = "optional" if f.nullable else ""
        if is_list(value_type):
            value_type, label = value_type.value_type, "repeated"
            if is_list(value_type) or pa.types.is_map(value_type):
                raise InvalidSchemaError(f"field {where} is {spark_type_name(f.type)}: a Protobuf repeated field "
                                         "cannot hold arrays or maps directly (wrap them in a struct)")
        elif pa.types.is_map(value_type):
            key = _scalar(value_type.key_type, f"{where} key")
            if key is None or key not in _MAP_KEYS or key in ("float", "double", "bytes"):
                raise InvalidSchemaError(f"field {where} is {spark_type_name(f.type)}: a Protobuf map's keys are "
                                         "strings, integers or booleans")
            value_type, label = value_type.item_type, ""
            if is_list(value_type) or pa.types.is_map(value_type):
                raise InvalidSchemaError(f"field {where} is {spark_type_name(f.type)}: a Protobuf map's values "
                                         "cannot be arrays or maps (wrap them in a struct)")
        message = None
        type_name = _scalar(value_type, where)
        if type_name is None:
            type_name = _well_known(value_type)
            if type_name is not None:
                imports.add(WELL_KNOWN[type_name])
            elif pa.types.is_struct(value_type):
                message = _message(_message_name(f.name, taken), value_type, where, imports)
                nested.append(message)
                type_name = message.name
            else:
                raise InvalidSchemaError(f"field {where} is {spark_type_name(value_type)}, which Protobuf cannot hold")
        if label == "optional" and type_name not in SCALARS:
            label = ""  # a message field has presence of its own
        fields.append(ProtoField(f.name, number, type_name, label, key, message))
    return ProtoMessage(name, tuple(fields), tuple(nested))


def _message_name(field_name: str, taken: set[str]) -> str:
    """A nested message's name: its field's in CamelCase, made unique among its siblings."""
    base = "".join(p[:1].upper() + p[1:] for p in field_name.split("_") if p) or "Field"
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    taken.add(name)
    return name


def _scalar(t: pa.DataType, where: str) -> str | None:
    if pa.types.is_boolean(t):
        return "bool"
    if t in (pa.int8(), pa.int16(), pa.int32()):
        return "int32"
    if t == pa.int64():
        return "int64"
    if t == pa.float32():
        return "float"
    if t == pa.float64():
        return "double"
    if is_string(t):
        return "string"
    if is_binary(t):
        return "bytes"
    return None


def _well_known(t: pa.DataType) -> str | None:
    if pa.types.is_timestamp(t):
        return "google.protobuf.Timestamp"
    if pa.types.is_duration(t):
        return "google.protobuf.Duration"
    if pa.types.is_date32(t):
        return "google.type.Date"
    if pa.types.is_decimal(t):
        return "confluent.type.Decimal"
    return None


# ---------------------------------------------------------------------------------- parsing


_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[A-Za-z_][\w.]*|\.[A-Za-z_][\w.]*'
                    r'|-?\d[\w.+-]*|[{}\[\]<>()=;,:]', re.S)


def parse_proto(text: str, message_name: str | None = None) -> ProtoFile:
    """A proto3 ``.proto`` text as a :class:`ProtoFile` of ``message_name`` (a top-level message,
    by name or full name; the first by default).  What the encoder does not write yet -- proto2,
    enums, oneofs, groups, extensions -- is refused, naming it."""
    tokens = _tokens(text)
    package, imports, top = "", [], []
    syntax = "proto2"
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word == "syntax":
            syntax, i = tokens[i + 2].strip("'\""), _skip_statement(tokens, i)
        elif word == "package":
            package, i = tokens[i + 1], _skip_statement(tokens, i)
        elif word == "import":
            j = i + 1 + (tokens[i + 1] in ("public", "weak"))
            imports.append(tokens[j].strip("'\""))
            i = _skip_statement(tokens, i)
        elif word == "option":
            i = _skip_statement(tokens, i)
        elif word == "message":
            message, i = _parse_message(tokens, i)
            top.append(message)
        elif word == ";":
            i += 1
        else:
            raise InvalidSchemaError(f"the .proto text has {word!r} where a message, import, package or option "
                                     "was expected (enums, services and extensions are not supported)")
    if syntax != "proto3":
        raise InvalidSchemaError(f"the .proto text is {syntax}: only proto3 schemas are written")
    if not top:
        raise InvalidSchemaError("the .proto text declares no message")
    index = _chosen(top, package, message_name, "the .proto text")
    resolved = _resolved(top[index], [top[index]], {m.name: m for m in top}, package)
    return ProtoFile(resolved, package, tuple(imports), index, tuple(top) if len(top) > 1 else ())


def _chosen(top: list[ProtoMessage], package: str, message_name: str | None, source: str) -> int:
    """The index of the top-level message ``message_name`` (its name or full name; the first)."""
    if not message_name:
        return 0
    wanted = message_name.removeprefix(f"{package}.") if package else message_name
    for i, m in enumerate(top):
        if m.name == wanted:
            return i
    raise InvalidSchemaError(f"{source} has no top-level message {message_name!r} "
                             f"(it has {', '.join(m.name for m in top)})")


# ------------------------------------------------------------------------- descriptor sets

#: descriptor.proto's field types, by number, as proto3 text names them (11: a message, 14: an
#: enum, 10: a group)
_DESCRIPTOR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                     8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
                     17: "sint32", 18: "sint64"}


def from_descriptor_set(data: bytes, message_name: str | None = None) -> ProtoFile:
    """The message ``message_name`` (the first of the set's last file by default) of a
    descriptor set as protoc writes it (``--descriptor_set_out``, ``--include_imports``), as
    proto3: what it imports must be the well-known types."""
    try:
        from google.protobuf import descriptor_pb2
    except ImportError as e:
        raise InvalidSchemaError("reading a descriptor set needs the protobuf package, not installed here: pip "
                                 "install 'sparkkafka-sink[protobuf]' (or give the schema's proto3 text in "
                                 f"valueSchema/keySchema) ({e})") from None
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - DecodeError: the file is not a descriptor set
        raise InvalidSchemaError(f"the descriptor file is not a FileDescriptorSet: {e}") from None
    own = [f for f in files.file if f.name not in WELL_KNOWN.values()]
    if not own:
        raise InvalidSchemaError("the descriptor set declares no file of its own")
    wanted = message_name.lstrip(".") if message_name else None
    file = next((f for f in own if wanted and any(wanted in (m.name, f"{f.package}.{m.name}")
                                                  for m in f.message_type)), own[-1])
    others = [d for d in file.dependency if d not in WELL_KNOWN.values()]
    if others:
        raise InvalidSchemaError(f"{file.name} imports {', '.join(others)}: only the well-known types can be imported "
                                 "(schema references are not supported)")
    if file.syntax != "proto3":
        raise InvalidSchemaError(f"{file.name} is {file.syntax or 'proto2'}: only proto3 schemas are written")
    top = [_from_descriptor(m, file.name) for m in file.message_type]
    index = _chosen(top, file.package, message_name, f"the descriptor set's {file.name}")
    resolved = _resolved(top[index], [top[index]], {m.name: m for m in top}, file.package)
    return ProtoFile(resolved, file.package, tuple(file.dependency), index, tuple(top))


def _from_descriptor(message: object, where: str) -> ProtoMessage:
    """A DescriptorProto as a message: map entries back to map fields, proto3 ``optional``'s
    synthetic oneofs back to the label."""
    m: Any = message
    if m.enum_type:
        raise InvalidSchemaError(f"message {m.name}: enum is not supported yet")
    entries = {e.name: e for e in m.nested_type if e.options.map_entry}
    real_oneofs = {i for i, f in enumerate(m.field) if f.HasField("oneof_index") and not f.proto3_optional}
    if real_oneofs:
        raise InvalidSchemaError(f"message {m.name}: oneof is not supported yet")
    fields = []
    for f in m.field:
        kind = _DESCRIPTOR_TYPES.get(f.type) or f.type_name  # fully qualified: .package.Name
        if f.type in (10, 14):
            raise InvalidSchemaError(f"message {m.name}: field {f.name!r} is an enum or a group, not supported yet")
        entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.type == 11 else None
        label: Label = "repeated" if f.label == 3 else "optional" if f.proto3_optional else ""
        if entry is not None:
            key, value = entry.field[0], entry.field[1]
            fields.append(ProtoField(f.name, f.number, _DESCRIPTOR_TYPES.get(value.type) or value.type_name, "",
                                     _DESCRIPTOR_TYPES[key.type]))
        else:
            fields.append(ProtoField(f.name, f.number, kind, label))
    nested = tuple(_from_descriptor(n, where) for n in m.nested_type if not n.options.map_entry)
    return ProtoMessage(m.name, tuple(fields), nested)


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise InvalidSchemaError(f"the .proto text cannot be read at {text[pos:pos + 20]!r}")
        pos = m.end()
        token = m.group()
        if not (token.isspace() or token.startswith(("//", "/*"))):
            out.append(token)
    return out


def _skip_statement(tokens: list[str], i: int) -> int:
    while tokens[i] != ";":
        i += 1
    return i + 1


def _skip_block(tokens: list[str], i: int) -> int:
    """Past the ``{ ... }`` starting at ``i`` (or the statement, if there is no block)."""
    while tokens[i] not in ("{", ";"):
        i += 1
    if tokens[i] == ";":
        return i + 1
    depth = 0
    while True:
        depth += {"{": 1, "}": -1}.get(tokens[i], 0)
        i += 1
        if depth == 0:
            return i


def _parse_message(tokens: list[str], i: int) -> tuple[ProtoMessage, int]:
    name = tokens[i + 1]
    assert tokens[i + 2] == "{", f"message {name}: {{ expected"
    i += 3
    fields: list[ProtoField] = []
    nested: list[ProtoMessage] = []
    while tokens[i] != "}":
        word = tokens[i]
        if word == "message":
            message, i = _parse_message(tokens, i)
            nested.append(message)
        elif word in ("option", "reserved", "extensions"):
            i = _skip_statement(tokens, i)
        elif word == ";":
            i += 1
        elif word in ("enum", "oneof", "extend", "group"):
            raise InvalidSchemaError(f"message {name}: {word} is not supported yet (only messages, scalars, "
                                     "repeated fields and maps are written)")
        else:
            field_, i = _parse_field(tokens, i, name)
            fields.append(field_)
    return ProtoMessage(name, tuple(fields), tuple(nested)), i + 1


def _parse_field(tokens: list[str], i: int, message: str) -> tuple[ProtoField, int]:
    label: Label = ""
    if tokens[i] in ("optional", "repeated"):
        label, i = ("optional" if tokens[i] == "optional" else "repeated"), i + 1
    elif tokens[i] == "required":
        raise InvalidSchemaError(f"message {message}: 'required' is proto2, not proto3")
    key = None
    if tokens[i] == "map":  # map < K , V >
        key, kind, i = tokens[i + 2], tokens[i + 4], i + 6
    else:
        kind, i = tokens[i], i + 1
    name, number = tokens[i], tokens[i + 2]
    if tokens[i + 1] != "=" or not number.isdigit():
        raise InvalidSchemaError(f"message {message}: field {name!r} has no number")
    return ProtoField(name, int(number), kind, label, key), _skip_statement(tokens, i)


def _resolved(message: ProtoMessage, scope: list[ProtoMessage], top: dict[str, ProtoMessage], package: str
              ) -> ProtoMessage:
    """``message`` with each field's message type found (innermost scope first, as protoc does)."""
    fields = []
    for f in message.fields:
        if f.type in SCALARS or f.type.lstrip(".") in WELL_KNOWN:
            fields.append(ProtoField(f.name, f.number, f.type.lstrip("."), f.label, f.key))
            continue
        found = _find(f.type, scope, top, package)
        if found is None:
            raise InvalidSchemaError(f"message {message.name}: field {f.name!r} has type {f.type!r}, which is "
                                     "neither a scalar, a well-known type nor a message of this file")
        inner, path = found
        if any(inner is m for m in scope):
            raise InvalidSchemaError(f"message {message.name}: field {f.name!r} makes {inner.name} recursive, "
                                     "which no Spark type is")
        fields.append(ProtoField(f.name, f.number, f.type, f.label, f.key, _resolved(inner, path, top, package)))
    return ProtoMessage(message.name, tuple(fields), message.nested)


def _find(type_name: str, scope: list[ProtoMessage], top: dict[str, ProtoMessage], package: str
          ) -> tuple[ProtoMessage, list[ProtoMessage]] | None:
    parts = type_name.lstrip(".").removeprefix(f"{package}.").split(".") if package else \
        type_name.lstrip(".").split(".")
    for depth in range(len(scope), -1, -1):
        candidates = scope[depth - 1].nested if depth else tuple(top.values())
        path = list(scope[:depth])
        found = None
        for part in parts:
            found = next((m for m in candidates if m.name == part), None)
            if found is None:
                break
            path.append(found)
            candidates = found.nested
        if found is not None:
            return found, path
    return None


# ---------------------------------------------------------------------------------- binding


@dataclass(frozen=True)
class ProtoBinding:
    """A field of the schema bound to a column of the data: ``write`` says how its values are
    written (a scalar's type, ``message``, or a well-known message's full name); ``children``
    the bound fields of a message (by Arrow index), ``element`` what a map's value or a
    repeated field's element is; ``path`` names it in messages."""

    path: str
    arrow_type: pa.DataType
    number: int
    write: str
    repeated: bool = False
    #: written only when set (``optional`` scalars, messages); a scalar without it is left out
    #: when it holds its type's default, as Protobuf's own serializers do
    presence: bool = False
    key: ProtoBinding | None = None
    element: ProtoBinding | None = None
    children: tuple[tuple[int, ProtoBinding], ...] = field(default=())


def check_protobuf_schema(message: ProtoMessage, arrow_type: pa.DataType, column: str = "value") -> ProtoBinding:
    """``message`` bound to a struct column of ``arrow_type``: every field of the struct to the
    message's field of its name, whose type must hold it (``InvalidSchemaError`` naming the
    field, Spark's type and the schema's otherwise)."""
    if not pa.types.is_struct(arrow_type):
        raise InvalidSchemaError(f"the {column} column is {spark_type_name(arrow_type)}: Protobuf writes a message, "
                                 "so the column must be a struct")
    return ProtoBinding(column, arrow_type, 0, "message", presence=True, children=_children(message, arrow_type, column))


def _children(message: ProtoMessage, t: pa.DataType, path: str) -> tuple[tuple[int, ProtoBinding], ...]:
    by_name = {f.name: f for f in message.fields}
    out = []
    for index, f in enumerate(t):
        where = f"{path}.{f.name}"
        proto = by_name.get(f.name)
        if proto is None:
            raise InvalidSchemaError(f"field {where} ({spark_type_name(f.type)}) is not in message {message.name}")
        out.append((index, _bind(proto, f.type, where)))
    return tuple(sorted(out, key=lambda pair: pair[1].number))


def _bind(proto: ProtoField, t: pa.DataType, where: str) -> ProtoBinding:
    declared = proto.declaration()

    def refuse(why: str = "") -> InvalidSchemaError:
        return InvalidSchemaError(f"field {where} is {spark_type_name(t)}, which Protobuf {declared!r} cannot "
                                  f"hold{': ' + why if why else ''}")

    if proto.key is not None:
        if not pa.types.is_map(t):
            raise refuse()
        key = _value(ProtoField("key", 1, proto.key), t.key_type, f"{where}.key", refuse)
        value = _value(ProtoField("value", 2, proto.type, message=proto.message), t.item_type, f"{where}.value",
                       refuse)
        return ProtoBinding(where, t, proto.number, "map", repeated=True, key=key, element=value)
    if proto.label == "repeated":
        if not is_list(t):
            raise refuse()
        element = _value(ProtoField(proto.name, proto.number, proto.type, message=proto.message), t.value_type,
                         f"{where}[]", refuse)
        return ProtoBinding(where, t, proto.number, "repeated", repeated=True, element=element)
    bound = _value(proto, t, where, refuse)
    presence = proto.label == "optional" or bound.write not in SCALARS
    return ProtoBinding(where, t, proto.number, bound.write, presence=presence, children=bound.children)


def _value(proto: ProtoField, t: pa.DataType, where: str, refuse: Callable[[], InvalidSchemaError]
           ) -> ProtoBinding:
    """A single value of the field (an element, a map's key or value, or the field itself)."""
    kind = proto.type
    if proto.message is not None:
        if not pa.types.is_struct(t):
            raise refuse()
        return ProtoBinding(where, t, proto.number, "message", presence=True,
                            children=_children(proto.message, t, where))
    if kind in WELL_KNOWN:
        if _well_known(t) != kind and not (kind == "google.protobuf.Timestamp" and pa.types.is_timestamp(t)):
            raise refuse()
        return ProtoBinding(where, t, proto.number, kind, presence=True)
    fits = {
        "bool": pa.types.is_boolean(t),
        "int32": t in (pa.int8(), pa.int16(), pa.int32()),
        "int64": t in (pa.int8(), pa.int16(), pa.int32(), pa.int64()),
        "float": t == pa.float32(),
        "double": t in (pa.float32(), pa.float64()),
        "string": is_string(t),
        "bytes": is_binary(t) or is_string(t),
    }
    if not fits.get(kind, False):
        raise refuse()
    return ProtoBinding(where, t, proto.number, kind)
