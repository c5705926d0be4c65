"""JSON Schemas (draft-07, which Confluent's and Apicurio's registries accept): derived from a
DataFrame column for the JSON Spark's ``to_json`` writes, parsed from the user's text, and
checked against the column they are to describe.

* :func:`json_schema_of`: integers are ``integer``; floats and decimals ``number`` (Spark writes
  decimals as JSON numbers); strings ``string``; binary a base64 ``string``; dates ``format:
  date``; timestamps ``format: date-time`` (TIMESTAMP_NTZ a plain ``string``: Spark writes it
  without an offset, which ``date-time`` requires); arrays ``items``; maps
  ``additionalProperties``; structs ``properties`` with their non-nullable fields ``required``
  and ``additionalProperties: false`` -- a closed content model, as Confluent's serializers derive
  from classes, under which adding a nullable column stays backward compatible.  A nullable
  value also allows ``null``.  A null struct field is left out of the object (Spark's
  ``ignoreNullFields``), so it is never required.
* :func:`check_json_schema` binds a column to a user's schema structurally -- the types of
  properties, items and map values (``$ref`` to local definitions, ``oneOf``/``anyOf`` with a
  null branch, type lists), required properties present -- and returns the
  :class:`JsonBinding` tree ``json_encoder`` follows.  Keywords constraining values (``enum``,
  ``pattern``, ``minimum``, ...) are not checked here nor per row.  Errors name the field path
  (``value.address.zip``), Spark's type and the schema's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sparkkafka_sink.serialization.arrow_types import is_binary, is_list, is_string, spark_type_name
from sparkkafka_sink.serialization.encoded import InvalidSchemaError

__all__ = ["DRAFT_07", "JsonSchema", "JsonBinding", "JsonFieldBinding", "json_schema_of", "parse_json_schema",
           "check_json_schema"]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

#: a schema: an object, or true (anything) / false (nothing)
JsonSchema = dict[str, Any] | bool


def json_schema_of(arrow_type: pa.DataType, nullable: bool = False, column: str = "value") -> dict[str, Any]:
    """The JSON Schema of the JSON Spark's ``to_json`` writes for a column of ``arrow_type``."""
    return {"$schema": DRAFT_07, **_derive(arrow_type, nullable, column)}


def _derive(t: pa.DataType, nullable: bool, path: str) -> dict[str, Any]:
    schema: dict[str, Any]
    if pa.types.is_null(t):
        return {"type": "null"}
    if t == pa.bool_():
        schema = {"type": "boolean"}
    elif pa.types.is_integer(t):
        schema = {"type": "integer"}
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        schema = {"type": "number"}
    elif is_string(t):
        schema = {"type": "string"}
    elif is_binary(t):
        schema = {"type": "string", "contentEncoding": "base64"}
    elif t == pa.date32():
        schema = {"type": "string", "format": "date"}
    elif pa.types.is_timestamp(t):
        schema = {"type": "string", "format": "date-time"} if t.tz is not None else {"type": "string"}
    elif is_list(t):
        schema = {"type": "array", "items": _derive(t.value_type, t.value_field.nullable, path + "[]")}
    elif pa.types.is_map(t):
        _check_map_keys(t, path)
        schema = {"type": "object", "additionalProperties": _derive(t.item_type, t.item_field.nullable, path + "{}")}
    elif pa.types.is_struct(t):
        schema = {"type": "object",
                  "properties": {f.name: _derive(f.type, f.nullable, f"{path}.{f.name}") for f in t}}
        required = [f.name for f in t if not f.nullable]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
    else:
        raise _unsupported(t, path)
    if nullable:
        schema["type"] = [schema["type"], "null"]
    return schema


def _unsupported(t: pa.DataType, path: str) -> InvalidSchemaError:
    hint = "cast it to a string or a number" if pa.types.is_duration(t) else "cast the column"
    return InvalidSchemaError(f"{path}: Spark's {spark_type_name(t)} has no JSON counterpart here; {hint}")


def _check_map_keys(t: pa.MapType, path: str) -> None:
    """A map's keys become property names: strings, or values written as text."""
    k = t.key_type
    if not (is_string(k) or pa.types.is_integer(k) or k == pa.bool_() or pa.types.is_decimal(k) or k == pa.date32()):
        raise InvalidSchemaError(f"{path}: the keys of Spark's {spark_type_name(t)} cannot be JSON property names; "
                                 "cast them to STRING")


def parse_json_schema(text: str) -> JsonSchema:
    """Parse a JSON Schema given as text: an object (or a boolean) whose local ``$ref`` resolve."""
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"The JSON Schema is not JSON: {exc}") from exc
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchemaError(f"A JSON Schema is an object or a boolean, not {type(schema).__name__}")
    _check_refs(schema, schema)
    return schema


def _check_refs(node: Any, root: JsonSchema) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            _follow(node["$ref"], root, "the schema")
        for value in node.values():
            _check_refs(value, root)
    elif isinstance(node, list):
        for value in node:
            _check_refs(value, root)


# --------------------------------------------------------------------------------- binding


@dataclass(frozen=True, eq=False)
class JsonBinding:
    """How one column (or nested value) is written: its JSON follows from ``arrow_type``; the
    schema says whether a null may be written here (``null_allowed``), and what the items,
    map values (``item``) and struct fields (``fields``) must be."""

    path: str
    arrow_type: pa.DataType
    null_allowed: bool
    item: JsonBinding | None = None
    fields: tuple[JsonFieldBinding, ...] = ()


@dataclass(frozen=True, eq=False)
class JsonFieldBinding:
    """A struct field as a property: ``required`` ones are written even when null (then as
    ``null``, if the schema allows it); others are left out when null, as Spark does."""

    name: str
    arrow_index: int
    binding: JsonBinding
    required: bool


def check_json_schema(schema: JsonSchema | str, arrow_type: pa.DataType, nullable: bool = True,
                      column: str = "value") -> JsonBinding:
    """Check that ``schema`` (parsed, or JSON text) describes what a column of ``arrow_type``
    writes; raise :class:`InvalidSchemaError` naming the field, both types and the fix.  A null
    column value is a tombstone, so ``nullable`` asks nothing of the schema."""
    del nullable  # top-level nulls become tombstones, never JSON values
    root = parse_json_schema(schema) if isinstance(schema, str) else schema
    return _bind(arrow_type, root, root, column)


def _follow(ref: str, root: JsonSchema, path: str) -> Any:
    """A local reference (``#/definitions/Address``, ``#/$defs/...``) resolved in ``root``."""
    if not ref.startswith("#"):
        raise InvalidSchemaError(f"{path}: only local $ref ('#/...') are supported, not {ref!r}; inline the schema")
    node: Any = root
    for token in [t for t in ref[1:].split("/") if t]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise InvalidSchemaError(f"{path}: $ref {ref!r} does not resolve in the schema")
    return node


def _types(node: JsonSchema) -> set[str] | None:
    """The JSON types a schema node allows (None: any)."""
    if node is True or not isinstance(node, dict) or "type" not in node:
        return None
    kind = node["type"]
    return {kind} if isinstance(kind, str) else set(kind)


def _describe(node: JsonSchema) -> str:
    return json.dumps(node, separators=(",", ":"))[:120]


def _bind(t: pa.DataType, node: Any, root: JsonSchema, path: str, depth: int = 0) -> JsonBinding:
    if depth > 64:
        raise InvalidSchemaError(f"{path}: the schema's $ref go round in a circle")
    if node is False:
        raise InvalidSchemaError(f"{path}: the JSON Schema allows nothing here (false); Spark's {spark_type_name(t)} "
                                 "cannot be written")
    if not isinstance(node, dict):
        if node is not True:
            raise InvalidSchemaError(f"{path}: a JSON Schema is an object or a boolean, not {node!r}")
        return _bind_value(t, True, True, root, path)
    if "$ref" in node:
        return _bind(t, _follow(node["$ref"], root, path), root, path, depth + 1)
    if "allOf" in node:
        raise InvalidSchemaError(f"{path}: allOf is not supported; merge its schemas into one")
    for combinator in ("oneOf", "anyOf"):
        if combinator in node:
            return _bind_branches(t, node, node[combinator], root, path, depth)
    types = _types(node)
    return _bind_value(t, node, types is None or "null" in types, root, path)


def _bind_branches(t: pa.DataType, node: dict[str, Any], branches: Any, root: JsonSchema, path: str, depth: int) -> JsonBinding:
    """``oneOf``/``anyOf``: a null branch allows null; the value goes to the first branch that
    can hold it."""
    if not isinstance(branches, list) or not branches:
        raise InvalidSchemaError(f"{path}: oneOf/anyOf needs a non-empty list of schemas")
    resolved = []
    for branch in branches:
        for _ in range(64):
            if not (isinstance(branch, dict) and "$ref" in branch):
                break
            branch = _follow(branch["$ref"], root, path)
        resolved.append(branch)
    null_allowed = any(_types(b) == {"null"} for b in resolved)
    values = [b for b in resolved if _types(b) != {"null"}]
    if pa.types.is_null(t):
        if not null_allowed:
            raise _mismatch(path, t, node)
        return JsonBinding(path, t, True)
    first_error: InvalidSchemaError | None = None
    for branch in values:
        try:
            found = _bind(t, branch, root, path, depth + 1)
        except InvalidSchemaError as exc:
            first_error = first_error or exc
            continue
        return JsonBinding(path, t, null_allowed or found.null_allowed, found.item, found.fields)
    if len(values) == 1 and first_error is not None:
        raise first_error
    raise _mismatch(path, t, node, "no branch can hold it")


def _mismatch(path: str, t: pa.DataType, node: JsonSchema, hint: str = "") -> InvalidSchemaError:
    return InvalidSchemaError(f"{path}: Spark's {spark_type_name(t)} cannot be written as JSON Schema {_describe(node)}"
                              + (f" ({hint})" if hint else "") + "; cast the column or change the schema")


def _bind_value(t: pa.DataType, node: JsonSchema, null_allowed: bool, root: JsonSchema, path: str) -> JsonBinding:
    types = _types(node)
    fmt = node.get("format") if isinstance(node, dict) else None

    def allows(*kinds: str) -> bool:
        return types is None or any(k in types for k in kinds)

    def bound(**more: Any) -> JsonBinding:
        return JsonBinding(path, t, null_allowed, **more)

    if pa.types.is_null(t):
        if not null_allowed:
            raise _mismatch(path, t, node, "a VOID column holds only nulls")
        return bound()
    if pa.types.is_duration(t):
        raise _unsupported(t, path)
    if t == pa.bool_():
        ok = allows("boolean")
    elif pa.types.is_integer(t):
        ok = allows("integer", "number")
    elif pa.types.is_decimal(t):
        ok = allows("number") or t.scale == 0 and allows("integer")
    elif pa.types.is_floating(t):
        ok = allows("number")
    elif is_string(t) or is_binary(t):
        ok = allows("string")
    elif t == pa.date32() or pa.types.is_timestamp(t):
        ok = allows("string")
        written = "date" if t == pa.date32() else "date-time" if t.tz is not None else "local date-time"
        if ok and fmt in ("date", "date-time", "time") and fmt != written:
            raise _mismatch(path, t, node, f"Spark writes it as a {written}, which format {fmt} refuses"
                            + ("; cast the column to TIMESTAMP" if written == "local date-time" else ""))
    elif is_list(t):
        if not allows("array"):
            raise _mismatch(path, t, node)
        items = node.get("items", True) if isinstance(node, dict) else True
        if isinstance(items, list):
            raise InvalidSchemaError(f"{path}: tuple 'items' (a list of schemas) are not supported; give one schema")
        return bound(item=_bind(t.value_type, items, root, path + "[]"))
    elif pa.types.is_map(t):
        _check_map_keys(t, path)
        if not allows("object"):
            raise _mismatch(path, t, node)
        values = node.get("additionalProperties", True) if isinstance(node, dict) else True
        if values is False:
            raise _mismatch(path, t, node, "a map's keys are its properties, and additionalProperties is false")
        return bound(item=_bind(t.item_type, values, root, path + "{}"))
    elif pa.types.is_struct(t):
        if not allows("object"):
            raise _mismatch(path, t, node)
        return bound(fields=_bind_fields(t, node, root, path))
    else:
        raise _unsupported(t, path)
    if not ok:
        raise _mismatch(path, t, node)
    return bound()


def _bind_fields(t: pa.StructType, node: JsonSchema, root: JsonSchema, path: str) -> tuple[JsonFieldBinding, ...]:
    """Struct fields to properties by name; a field the schema does not list goes to
    ``additionalProperties`` (an error when false); a required property must be a field."""
    properties = node.get("properties", {}) if isinstance(node, dict) else {}
    required = node.get("required", []) if isinstance(node, dict) else []
    additional = node.get("additionalProperties", True) if isinstance(node, dict) else True
    names = {f.name for f in t}
    missing = [name for name in required if name not in names]
    if missing:
        raise InvalidSchemaError(
            f"{path}: the JSON Schema requires {', '.join(repr(m) for m in missing)}, not in the DataFrame (its "
            f"fields: {', '.join(names) or 'none'}); add the column or drop it from 'required'")
    out = []
    for i, f in enumerate(t):
        sub = properties.get(f.name, additional)
        if sub is False and f.name not in properties:
            raise InvalidSchemaError(
                f"{path}.{f.name}: the DataFrame's field {f.name!r} ({spark_type_name(f.type)}) is not a property of "
                f"the JSON Schema, which allows no others (its properties: {', '.join(properties) or 'none'}); add it "
                "to the schema or drop the column")
        out.append(JsonFieldBinding(f.name, i, _bind(f.type, sub, root, f"{path}.{f.name}"), f.name in required))
    return tuple(out)
