"""Avro schemas: derived from a DataFrame column as Spark's ``to_avro`` derives them, parsed from
the user's JSON, and checked against the column they are to hold.

* :func:`avro_schema_of` is Spark's ``SchemaConverters.toAvroType`` for the Arrow type a Spark
  column arrives as (``arrow_types``): the same types, record and ``fixed`` names, namespaces and
  ``[T, "null"]`` unions, in the JSON Avro's Java ``Schema.toString()`` writes for it (so the text
  registered is the text a JVM job would register).
* :func:`parse_avro_schema` reads a schema (named types and references to them, unions,
  logical types, defaults) into an :class:`AvroSchema`, with errors that say where and why.
* :func:`check_avro_schema` binds a column to a schema the way Spark's ``AvroSerializer`` would
  accept it, and returns the :class:`AvroBinding` tree that ``avro_encoder`` follows: what each
  value is written as.  Errors name the field path (``value.address.zip``), Spark's type and
  Avro's.  It accepts what Spark accepts and the lossless widenings Avro's own schema
  resolution allows (TINYINT/SMALLINT/INT as ``long``, FLOAT as ``double``); a decimal may go
  into a ``decimal`` of another precision (a value that does not fit is a bad row), not of
  another scale; Avro fields missing from the DataFrame are written with their default (or
  null, as Spark writes them, when the field's type is a union with null).

Paths name array elements ``[]`` and map values ``{}``: ``value.orders[].lines{}.amount``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sparkkafka_sink.serialization.arrow_types import is_binary, is_list, is_string, spark_type_name
from sparkkafka_sink.serialization.encoded import InvalidSchemaError

__all__ = [
    "AvroJson",
    "AvroType",
    "AvroField",
    "AvroSchema",
    "AvroBinding",
    "FieldBinding",
    "NO_DEFAULT",
    "avro_schema_of",
    "avro_schema",
    "parse_avro_schema",
    "check_avro_schema",
    "fixed_size_for_precision",
    "max_decimal_precision",
]

#: a schema in its JSON form: a type name, a union (list) or a type object
AvroJson = str | list[Any] | dict[str, Any]

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: logical types and the types they annotate (the Avro 1.12 specification)
_LOGICAL_BASES = {
    "decimal": ("bytes", "fixed"), "big-decimal": ("bytes",), "uuid": ("string", "fixed"),
    "date": ("int",), "time-millis": ("int",), "time-micros": ("long",),
    "timestamp-millis": ("long",), "timestamp-micros": ("long",), "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",), "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",), "duration": ("fixed",),
}


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: an Avro field without a default
NO_DEFAULT: Any = _NoDefault()


@dataclass(eq=False)
class AvroType:
    """One node of a parsed schema.  Named types are one object however often referenced."""

    kind: str  # a primitive, "record", "enum", "array", "map", "fixed" or "union"
    name: str | None = None  # a record's, enum's or fixed's full name
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    size: int = 0  # a fixed's
    symbols: tuple[str, ...] = ()  # an enum's
    fields: list[AvroField] = field(default_factory=list)  # a record's
    items: AvroType | None = None  # an array's items, a map's values
    branches: tuple[AvroType, ...] = ()  # a union's

    def __str__(self) -> str:
        logical = ""
        if self.logical == "decimal":
            logical = f" (decimal({self.precision},{self.scale}))"
        elif self.logical:
            logical = f" ({self.logical})"
        if self.kind == "record":
            return f"record {self.name}"
        if self.kind == "enum":
            return f"enum {self.name} {{{', '.join(self.symbols[:6])}{', ...' if len(self.symbols) > 6 else ''}}}"
        if self.kind == "fixed":
            return f"fixed {self.name} (size {self.size}){logical}"
        if self.kind == "array":
            return f"array<{self.items}>"
        if self.kind == "map":
            return f"map<{self.items}>"
        if self.kind == "union":
            return "union [" + ", ".join(map(str, self.branches)) + "]"
        return f"{self.kind}{logical}"

    @property
    def nullable(self) -> bool:
        """A union with a null branch (or null itself): a null can be written here."""
        return self.kind == "null" or (self.kind == "union" and any(b.kind == "null" for b in self.branches))


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroType
    default: Any = NO_DEFAULT  # the JSON value; NO_DEFAULT when the field has none


class AvroSchema:
    """A parsed schema: its JSON (``json``, ``text``: what the Schema Registry stores) and its type
    tree (``root``).  Pickles as its text (a plan carries it into every task)."""

    def __init__(self, json_value: AvroJson, root: AvroType, text: str):
        self.json = json_value
        self.root = root
        self.text = text

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return parse_avro_schema, (self.text,)

    def __repr__(self) -> str:
        return f"AvroSchema({self.text[:200]})"


def parse_avro_schema(text: str) -> AvroSchema:
    """Parse and validate an Avro schema given as JSON text."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"The Avro schema is not JSON: {exc}") from exc
    return AvroSchema(value, _Parser().parse(value, "", "the schema"), text)


def avro_schema(schema: AvroSchema | AvroJson) -> AvroSchema:
    """``schema`` as an :class:`AvroSchema`: one already, its JSON form (a dict, a list, a type
    name) or JSON text (a string starting with ``{``, ``[`` or ``"``)."""
    if isinstance(schema, AvroSchema):
        return schema
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"'):
        return parse_avro_schema(schema)
    if not isinstance(schema, (str, list, dict)):
        raise InvalidSchemaError(f"An Avro schema is JSON (a str, list or dict), not {type(schema).__name__}")
    return AvroSchema(schema, _Parser().parse(schema, "", "the schema"),
                      json.dumps(schema, separators=(",", ":"), ensure_ascii=False))


# ------------------------------------------------------------------------------------ parsing


def _invalid(where: str, what: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"Invalid Avro schema at {where}: {what}")


def _full_name(name: Any, namespace: Any, where: str) -> str:
    """A named type's full name (a dotted name ignores the namespace), every part validated."""
    if not isinstance(name, str) or not name:
        raise _invalid(where, f"a named type needs a non-empty string 'name', not {name!r}")
    if namespace is not None and not isinstance(namespace, str):
        raise _invalid(where, f"'namespace' must be a string, not {namespace!r}")
    full = name if "." in name or not namespace else f"{namespace}.{name}"
    for part in full.split("."):
        if not _NAME.match(part):
            raise _invalid(where, f"{full!r} is not a valid Avro name (each dotted part: letters, digits "
                                  "and '_', not starting with a digit)")
    return full


def _namespace_of(full_name: str) -> str:
    return full_name.rpartition(".")[0]


def max_decimal_precision(size: int) -> int:
    """The most decimal digits a two's complement number of ``size`` bytes holds."""
    return len(str(2 ** (8 * size - 1))) - 1 if size > 0 else 0


def fixed_size_for_precision(precision: int) -> int:
    """Spark's ``minBytesForPrecision``: the fewest bytes that hold ``precision`` digits."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


class _Parser:
    def __init__(self) -> None:
        self.named: dict[str, AvroType] = {}

    def parse(self, obj: Any, namespace: str, where: str) -> AvroType:
        if isinstance(obj, str):
            return self._reference(obj, namespace, where)
        if isinstance(obj, list):
            return self._union(obj, namespace, where)
        if not isinstance(obj, dict):
            raise _invalid(where, f"a schema is a type name, a union (list) or an object, not {obj!r}")
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise _invalid(where, f"an object needs a string 'type', not {kind!r}")
        if kind in PRIMITIVES:
            return self._logical(AvroType(kind), obj, where)
        if kind in ("record", "error"):
            return self._record(obj, namespace, where)
        if kind == "enum":
            return self._enum(obj, namespace, where)
        if kind == "fixed":
            full = self._define(obj, namespace, where)
            size = obj.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise _invalid(where, f"fixed {full} needs a non-negative integer 'size', not {size!r}")
            return self._logical(self._register(AvroType("fixed", name=full, size=size)), obj, where)
        if kind in ("array", "map"):
            attribute = "items" if kind == "array" else "values"
            if attribute not in obj:
                raise _invalid(where, f"an {kind} needs '{attribute}'")
            return AvroType(kind, items=self.parse(obj[attribute], namespace, f"{where}, {kind} {attribute}"))
        return self._reference(kind, namespace, where)

    def _reference(self, name: str, namespace: str, where: str) -> AvroType:
        if name in PRIMITIVES:
            return AvroType(name)
        candidates = [f"{namespace}.{name}", name] if namespace and "." not in name else [name]
        for candidate in candidates:
            if candidate in self.named:
                return self.named[candidate]
        raise _invalid(where, f"unknown type {name!r}: not a primitive type ({', '.join(PRIMITIVES)}) nor a "
                              "named type defined before this use")

    def _define(self, obj: dict[str, Any], namespace: str, where: str) -> str:
        full = _full_name(obj.get("name"), obj.get("namespace", namespace), where)
        if full in self.named:
            raise _invalid(where, f"{full} is defined twice (refer to it by name the second time)")
        return full

    def _register(self, node: AvroType) -> AvroType:
        assert node.name is not None
        self.named[node.name] = node
        return node

    def _union(self, branches: list[Any], namespace: str, where: str) -> AvroType:
        if not branches:
            raise _invalid(where, "a union needs at least one branch")
        parsed = []
        seen: set[str] = set()
        for i, branch in enumerate(branches):
            node = self.parse(branch, namespace, f"{where}, union branch {i}")
            if node.kind == "union":
                raise _invalid(where, "a union cannot hold a union directly")
            branch_type = node.name if node.name is not None else node.kind
            if branch_type in seen:
                raise _invalid(where, f"the union holds {branch_type} twice")
            seen.add(branch_type)
            parsed.append(node)
        return AvroType("union", branches=tuple(parsed))

    def _record(self, obj: dict[str, Any], namespace: str, where: str) -> AvroType:
        full = self._define(obj, namespace, where)
        node = self._register(AvroType("record", name=full))  # before its fields: they may refer to it
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise _invalid(where, f"record {full} needs a list of 'fields'")
        inner = _namespace_of(full)
        for i, f in enumerate(fields):
            at = f"record {full}, field {i}"
            if not isinstance(f, dict):
                raise _invalid(at, f"a field is an object, not {f!r}")
            name = f.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise _invalid(at, f"{name!r} is not a valid field name (letters, digits and '_', not starting "
                                   "with a digit)")
            at = f"record {full}, field '{name}'"
            if any(g.name == name for g in node.fields):
                raise _invalid(at, "the record has two fields of that name")
            if "type" not in f:
                raise _invalid(at, "a field needs a 'type'")
            ftype = self.parse(f["type"], inner, at)
            default = f.get("default", NO_DEFAULT)
            if default is not NO_DEFAULT:
                _check_default(ftype, default, at)
            node.fields.append(AvroField(name, ftype, default))
        return node

    def _enum(self, obj: dict[str, Any], namespace: str, where: str) -> AvroType:
        full = self._define(obj, namespace, where)
        symbols = obj.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) and _NAME.match(s) for s in symbols):
            raise _invalid(where, f"enum {full} needs 'symbols': a list of names (letters, digits and '_')")
        if len(set(symbols)) != len(symbols):
            raise _invalid(where, f"enum {full} repeats a symbol")
        if "default" in obj and obj["default"] not in symbols:
            raise _invalid(where, f"enum {full}'s default {obj['default']!r} is not one of its symbols")
        return self._register(AvroType("enum", name=full, symbols=tuple(symbols)))

    def _logical(self, node: AvroType, obj: dict[str, Any], where: str) -> AvroType:
        logical = obj.get("logicalType")
        if logical is None:
            return node
        if logical not in _LOGICAL_BASES:  # the specification: unknown logical types are ignored
            return node
        if node.kind not in _LOGICAL_BASES[logical]:
            raise _invalid(where, f"logical type {logical} annotates {' or '.join(_LOGICAL_BASES[logical])}, "
                                  f"not {node.kind}")
        node.logical = logical
        if logical == "uuid" and node.kind == "fixed" and node.size != 16 \
                or logical == "duration" and node.size != 12:
            raise _invalid(where, f"logical type {logical} needs a fixed of size {16 if logical == 'uuid' else 12}")
        if logical == "decimal":
            precision, scale = obj.get("precision"), obj.get("scale", 0)
            if not isinstance(precision, int) or isinstance(precision, bool) or precision < 1:
                raise _invalid(where, f"a decimal needs an integer 'precision' of at least 1, not {precision!r}")
            if not isinstance(scale, int) or isinstance(scale, bool) or not 0 <= scale <= precision:
                raise _invalid(where, f"a decimal's 'scale' is an integer from 0 to its precision, not {scale!r}")
            if node.kind == "fixed" and precision > max_decimal_precision(node.size):
                raise _invalid(where, f"fixed {node.name} of size {node.size} holds at most "
                                      f"{max_decimal_precision(node.size)} digits, not decimal({precision},{scale})")
            node.precision, node.scale = precision, scale
        return node


def _check_default(t: AvroType, value: Any, where: str) -> None:
    """A field's default must be a value of its type (a union's: of its first branch)."""
    def bad(why: str) -> InvalidSchemaError:
        return _invalid(where, f"the default {json.dumps(value)[:80]} is not a value of {t}: {why}")

    kind = t.kind
    if kind == "union":
        try:
            _check_default(t.branches[0], value, where)
        except InvalidSchemaError:
            raise bad(f"a union's default is a value of its first branch, {t.branches[0]}") from None
    elif kind == "null":
        if value is not None:
            raise bad("expected null")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise bad("expected true or false")
    elif kind in ("int", "long"):
        bits = 31 if kind == "int" else 63
        if not isinstance(value, int) or isinstance(value, bool) or not -(1 << bits) <= value < 1 << bits:
            raise bad(f"expected a {bits + 1}-bit integer")
    elif kind in ("float", "double"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise bad("expected a number")
    elif kind in ("bytes", "fixed"):
        if not isinstance(value, str) or any(ord(c) > 255 for c in value):
            raise bad("expected a string of code points 0-255 (one per byte)")
        if kind == "fixed" and len(value) != t.size:
            raise bad(f"expected {t.size} bytes")
    elif kind == "string":
        if not isinstance(value, str):
            raise bad("expected a string")
    elif kind == "enum":
        if value not in t.symbols:
            raise bad("expected one of its symbols")
    elif kind == "array":
        if not isinstance(value, list):
            raise bad("expected a list")
        assert t.items is not None
        for item in value:
            _check_default(t.items, item, where)
    elif kind == "map":
        if not isinstance(value, dict):
            raise bad("expected an object")
        assert t.items is not None
        for item in value.values():
            _check_default(t.items, item, where)
    elif kind == "record":
        if not isinstance(value, dict):
            raise bad("expected an object")
        for f in t.fields:
            if f.name in value:
                _check_default(f.type, value[f.name], where)
            elif f.default is NO_DEFAULT:
                raise bad(f"its field {f.name!r} has no default")


# ------------------------------------------------------------------------ Spark's derivation


def avro_schema_of(arrow_type: pa.DataType, nullable: bool = False, record_name: str = "topLevelRecord",
                   namespace: str = "", column: str = "value") -> AvroJson:
    """The Avro schema Spark's ``to_avro`` derives for a column (``SchemaConverters.toAvroType``),
    in the JSON form Avro's Java library writes it.  ``record_name``/``namespace`` name the top
    record (Spark's ``recordName``/``recordNamespace`` options); ``column`` names the column in
    errors (a map with non-string keys, a field name Avro does not allow)."""
    return _derive(arrow_type, nullable, record_name, namespace, None, column)


def _derive(t: pa.DataType, nullable: bool, name: str, namespace: str, enclosing: str | None,
            path: str) -> AvroJson:
    """``enclosing``: the namespace of the nearest record written around this type (Java writes a
    named type's namespace only when it differs)."""
    def named(kind: str, full: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind, "name": full.rpartition(".")[2]}
        space = _namespace_of(full)
        if space and space != enclosing:
            out["namespace"] = space
        elif not space and enclosing:
            out["namespace"] = ""
        return out

    schema: AvroJson
    if pa.types.is_null(t):
        return "null"
    if t == pa.bool_():
        schema = "boolean"
    elif t in (pa.int8(), pa.int16(), pa.int32()):
        schema = "int"
    elif t == pa.int64():
        schema = "long"
    elif t == pa.float32():
        schema = "float"
    elif t == pa.float64():
        schema = "double"
    elif is_string(t):
        schema = "string"
    elif is_binary(t):
        schema = "bytes"
    elif pa.types.is_decimal128(t):
        full = f"{name}.fixed" if not namespace else f"{namespace}.{name}.fixed"
        _full_name(full, None, path)
        schema = {**named("fixed", full), "size": fixed_size_for_precision(t.precision),
                  "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    elif t == pa.date32():
        schema = {"type": "int", "logicalType": "date"}
    elif pa.types.is_timestamp(t):
        schema = {"type": "long", "logicalType": "timestamp-micros" if t.tz is not None else "local-timestamp-micros"}
    elif pa.types.is_duration(t):
        schema = {"type": "long", "spark.sql.catalyst.type": "interval day to second"}
    elif pa.types.is_map(t):
        if not is_string(t.key_type):
            raise InvalidSchemaError(
                f"{path}: Avro maps have string keys; Spark's {spark_type_name(t)} cannot be written as Avro. "
                "Cast the keys to STRING, or write the map as an array of key/value structs (map_entries)")
        schema = {"type": "map", "values": _derive(t.item_type, t.item_field.nullable, name, namespace,
                                                   enclosing, path + "{}")}
    elif is_list(t):
        schema = {"type": "array", "items": _derive(t.value_type, t.value_field.nullable, name, namespace,
                                                    enclosing, path + "[]")}
    elif pa.types.is_struct(t):
        full = f"{namespace}.{name}" if namespace else name
        _full_name(full, None, path)
        child_namespace = full
        record = named("record", full)
        fields = []
        for f in t:
            if not _NAME.match(f.name):
                raise InvalidSchemaError(
                    f"{path}.{f.name}: {f.name!r} is not a valid Avro field name (letters, digits and '_', not "
                    "starting with a digit); rename the column (alias) or give an Avro schema")
            fields.append({"name": f.name, "type": _derive(f.type, f.nullable, f.name, child_namespace,
                                                           _namespace_of(full) or None, f"{path}.{f.name}")})
        record["fields"] = fields
        schema = record
    else:
        raise InvalidSchemaError(f"{path}: Spark's {spark_type_name(t)} has no Avro counterpart; cast the column")
    return [schema, "null"] if nullable else schema


# --------------------------------------------------------------------------------- binding


@dataclass(frozen=True, eq=False)
class AvroBinding:
    """How one column (or nested value) is written: the check's verdict and the encoder's plan.

    ``write`` says how a value becomes ``avro`` (the type, or union branch, values are written
    as): ``null``, ``boolean``, ``int`` (any integer, a date, an interval: a zigzag varint),
    ``float``, ``double``, ``bytes`` (string or binary, length first), ``fixed``, ``enum``,
    ``decimal_fixed``, ``decimal_bytes``, ``timestamp_micros``, ``timestamp_millis`` (timestamps
    and day-time intervals), ``array``, ``map`` or ``record``.  ``branch``/``null_branch``: the union branches written for a value and
    for a null (None: no union / a null is a bad row)."""

    path: str
    arrow_type: pa.DataType
    declared: AvroType  # the schema's type here (a union, if any)
    avro: AvroType
    write: str
    branch: int | None = None
    null_branch: int | None = None
    item: AvroBinding | None = None  # array items, map values
    fields: tuple[FieldBinding, ...] = ()  # a record's, in the schema's order


@dataclass(frozen=True, eq=False)
class FieldBinding:
    """An Avro record field and what fills it: the struct's child ``arrow_index``, or (None) the
    field's default, or a null."""

    field: AvroField
    arrow_index: int | None
    binding: AvroBinding | None


def check_avro_schema(schema: AvroSchema | AvroJson, arrow_type: pa.DataType, nullable: bool = True,
                      column: str = "value") -> AvroBinding:
    """Check that ``schema`` can hold a column of ``arrow_type`` (``column``: its name in
    messages); raise :class:`InvalidSchemaError` naming the field, both types and the fix.
    A null column value is a tombstone whatever the schema, so ``nullable`` asks nothing of it."""
    del nullable  # top-level nulls become tombstones, never Avro values
    return _bind(arrow_type, avro_schema(schema).root, column)


def _natural_kind(t: pa.DataType) -> str:
    """The Avro kind Spark derives for ``t``: a union branch of that kind is tried first."""
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.date32()):
        return "int"
    if t == pa.int64() or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return "long"
    simple = {pa.bool_(): "boolean", pa.float32(): "float", pa.float64(): "double", pa.null(): "null"}
    if t in simple:
        return simple[t]
    return ("string" if is_string(t) else "bytes" if is_binary(t) else "fixed" if pa.types.is_decimal(t)
            else "map" if pa.types.is_map(t) else "array" if is_list(t) else "record")


def _mismatch(path: str, t: pa.DataType, avro: AvroType, hint: str = "") -> InvalidSchemaError:
    return InvalidSchemaError(
        f"{path}: Spark's {spark_type_name(t)} cannot be written as Avro {avro}"
        + (f" ({hint})" if hint else "") + "; cast the column or change the schema")


def _bind(t: pa.DataType, declared: AvroType, path: str) -> AvroBinding:
    if declared.kind != "union":
        if pa.types.is_null(t) and declared.kind != "null":
            raise _mismatch(path, t, declared, "a VOID column holds only nulls: the schema needs null here")
        return _bind_value(t, declared, declared, path, None, None)
    null_branch = next((i for i, b in enumerate(declared.branches) if b.kind == "null"), None)
    if pa.types.is_null(t):
        if null_branch is None:
            raise _mismatch(path, t, declared, "a VOID column holds only nulls: the union needs a null branch")
        return AvroBinding(path, t, declared, declared.branches[null_branch], "null", null_branch, null_branch)
    candidates = [(i, b) for i, b in enumerate(declared.branches) if b.kind != "null"]
    if not candidates:
        raise _mismatch(path, t, declared, "the union holds only null")
    natural = _natural_kind(t)
    candidates.sort(key=lambda c: c[1].kind != natural)
    first_error: InvalidSchemaError | None = None
    for i, branch in candidates:
        try:
            return _bind_value(t, declared, branch, path, i, null_branch)
        except InvalidSchemaError as exc:
            first_error = first_error or exc
    if len(candidates) == 1:
        assert first_error is not None
        raise first_error
    raise _mismatch(path, t, declared, "no branch of the union can hold it")


def _bind_value(t: pa.DataType, declared: AvroType, avro: AvroType, path: str, branch: int | None,
                null_branch: int | None) -> AvroBinding:
    def bound(write: str, **more: Any) -> AvroBinding:
        return AvroBinding(path, t, declared, avro, write, branch, null_branch, **more)

    kind = avro.kind
    if pa.types.is_null(t) and kind == "null":
        return bound("null")
    if t == pa.bool_() and kind == "boolean":
        return bound("boolean")
    if t in (pa.int8(), pa.int16(), pa.int32()) and kind in ("int", "long") \
            or t == pa.int64() and kind == "long":
        return bound("int")
    if t == pa.float32() and kind in ("float", "double") or t == pa.float64() and kind == "double":
        return bound(kind)
    if is_string(t) and kind == "string":
        return bound("bytes")
    if is_string(t) and kind == "enum":
        return bound("enum")
    if is_binary(t) and kind in ("bytes", "fixed"):
        return bound(kind)
    if pa.types.is_decimal128(t) and kind in ("bytes", "fixed"):
        if avro.logical != "decimal":
            raise _mismatch(path, t, avro, "a decimal is written as bytes or fixed with logical type decimal")
        if avro.scale != t.scale:
            raise _mismatch(path, t, avro, f"the scales differ: cast the column to DECIMAL({t.precision},{avro.scale})"
                                           f" if rounding to {avro.scale} places is meant")
        return bound("decimal_" + kind)
    if t == pa.date32() and kind == "int":
        return bound("int")
    if pa.types.is_timestamp(t) and kind == "long":
        prefix = "" if t.tz is not None else "local-"
        if avro.logical in (None, prefix + "timestamp-millis"):
            return bound("timestamp_millis")
        if avro.logical == prefix + "timestamp-micros":
            return bound("timestamp_micros")
        other = "TIMESTAMP" if prefix else "TIMESTAMP_NTZ"
        hint = (f"that is how Spark's {other} is written" if avro.logical.endswith(("-millis", "-micros"))
                else f"{spark_type_name(t)} is written as long, {prefix}timestamp-millis or {prefix}timestamp-micros")
        raise _mismatch(path, t, avro, hint)
    if pa.types.is_duration(t) and kind == "long":
        return bound("timestamp_micros")
    if is_list(t) and kind == "array":
        assert avro.items is not None
        return bound("array", item=_bind(t.value_type, avro.items, path + "[]"))
    if pa.types.is_map(t) and kind == "map":
        if not is_string(t.key_type):
            raise _mismatch(path, t, avro, "Avro maps have string keys: cast the keys to STRING")
        assert avro.items is not None
        return bound("map", item=_bind(t.item_type, avro.items, path + "{}"))
    if pa.types.is_struct(t) and kind == "record":
        return bound("record", fields=_bind_fields(t, avro, path))
    raise _mismatch(path, t, avro)


def _bind_fields(t: pa.StructType, record: AvroType, path: str) -> tuple[FieldBinding, ...]:
    """Struct fields to record fields by name (case-insensitively when unambiguous, as Spark's
    default resolver); every struct field needs a record field, every record field a value."""
    exact = {f.name: f for f in record.fields}
    folded: dict[str, list[AvroField]] = {}
    for f in record.fields:
        folded.setdefault(f.name.casefold(), []).append(f)
    filled: dict[str, tuple[int, AvroBinding]] = {}
    for i, child in enumerate(t):
        target = exact.get(child.name)
        if target is None:
            matches = folded.get(child.name.casefold(), [])
            if len(matches) > 1:
                raise InvalidSchemaError(
                    f"{path}.{child.name}: record {record.name} has several fields matching {child.name!r} "
                    f"({', '.join(m.name for m in matches)}) but none of exactly that name; rename the column")
            if not matches:
                raise InvalidSchemaError(
                    f"{path}.{child.name}: the DataFrame's field {child.name!r} ({spark_type_name(child.type)}) is "
                    f"not in Avro record {record.name} (its fields: {', '.join(exact) or 'none'}); add it to "
                    "the schema or drop the column")
            target = matches[0]
        if target.name in filled:
            raise InvalidSchemaError(
                f"{path}.{child.name}: two of the DataFrame's fields match Avro field {target.name!r}; rename one")
        filled[target.name] = (i, _bind(child.type, target.type, f"{path}.{child.name}"))
    out = []
    for f in record.fields:
        if f.name in filled:
            index, binding = filled[f.name]
            out.append(FieldBinding(f, index, binding))
        elif f.default is not NO_DEFAULT or f.type.nullable:
            out.append(FieldBinding(f, None, None))
        else:
            raise InvalidSchemaError(
                f"{path}.{f.name}: Avro record {record.name}'s field {f.name!r} ({f.type}) is not in the DataFrame "
                f"and has no default (the struct's fields: {', '.join(c.name for c in t) or 'none'}); add the "
                "column or give the field a default")
    return tuple(out)
