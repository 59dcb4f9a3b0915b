"""JSON Schema: a schema's Arrow type, and JSON payloads read as the table's (the latest) schema.

The payload is JSON text; it is parsed and then fitted to the columns of the table's schema: a property
the schema has and the record lacks gets the property's ``default`` (else null), a property the record
has and the schema does not is left out, and a value of another type than the column's makes the
record undecodable (JSON Schema's own evolution: Confluent checks it as an open or closed content
model; a value that breaks the latest schema's types cannot be its column). JSON integers with a zero
fraction (``3.0``) are integers, as JSON Schema says.

Types::

    object with properties          struct (the properties, in the schema's order)
    object with additionalProperties only   map<string, V>
    array with items                list
    string / integer / number / boolean     string / int64 / float64 / bool
    type [null, T], oneOf/anyOf [{type: null}, T]   T (every column and field is nullable)
    enum of strings, const          string / the const's type
    $ref                            the schema it points to: "#/..." in the same document, or
                                    a reference of the registry entry (by its name)
    anything else (other unions, untyped, allOf, a recursive $ref)   string: the value's JSON text
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from kafka_log_core.errors import SchemaError, UndecodableError

Convert = Callable[[Any, str], Any]
MIN_LONG, MAX_LONG = -(1 << 63), (1 << 63) - 1
JSON_TEXT = pa.string()


def parse(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SchemaError(f"{where}: not a JSON Schema: {err}") from err


class _Types:
    def __init__(self, root: Any, references: Mapping[str, Any], where: str) -> None:
        self.root = root
        self.references = references
        self.where = where
        self.visiting: list[int] = []

    def of(self, schema: Any, document: Any) -> tuple[pa.DataType, Convert]:
        if schema is True or schema == {}:
            return JSON_TEXT, _json_text
        if not isinstance(schema, dict):
            raise SchemaError(f"{self.where}: {schema!r} is not a schema")
        if "$ref" in schema:
            target, target_document = self._resolve(schema["$ref"], document)
            if id(target) in self.visiting:
                return JSON_TEXT, _json_text  # recursive: its JSON text
            self.visiting.append(id(target))
            try:
                return self.of(target, target_document)
            finally:
                self.visiting.pop()
        for key in ("oneOf", "anyOf"):
            if key in schema:
                members = [m for m in schema[key] if not (isinstance(m, dict) and m.get("type") == "null")]
                if len(members) == 1:
                    return self.of(members[0], document)
                return JSON_TEXT, _json_text
        kind = schema.get("type")
        if kind is None:
            if "properties" in schema:
                kind = "object"
            elif "enum" in schema and all(isinstance(x, str) for x in schema["enum"]):
                kind = "string"
            elif "const" in schema:
                kind = _json_type(schema["const"])
        if isinstance(kind, list):
            members = [k for k in kind if k != "null"]
            if len(members) != 1:
                return JSON_TEXT, _json_text
            kind = members[0]
        if kind == "object":
            return self._object(schema, document)
        if kind == "array":
            items = schema.get("items")
            if items is None or isinstance(items, list):
                return pa.list_(JSON_TEXT), _list(_json_text)
            item, convert = self.of(items, document)
            return pa.list_(item), _list(convert)
        if kind in _SCALARS:
            return _SCALARS[kind]
        return JSON_TEXT, _json_text

    def _object(self, schema: Mapping, document: Any) -> tuple[pa.DataType, Convert]:
        properties = schema.get("properties")
        if not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                value, convert = self.of(extra, document)
                return pa.map_(pa.string(), value), _map(convert)
            return JSON_TEXT, _json_text
        fields = []
        for name, sub in properties.items():
            kind, convert = self.of(sub, document)
            default = sub.get("default") if isinstance(sub, dict) else None
            fields.append((name, kind, convert, default))
        struct = pa.struct([pa.field(name, kind) for name, kind, _, _ in fields])
        plan = [(name, convert, default) for name, _, convert, default in fields]

        def convert_object(value, path: str) -> dict:
            if not isinstance(value, dict):
                raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not an object")
            out = {}
            for name, convert, default in plan:
                found = value.get(name, default)
                out[name] = None if found is None else convert(found, f"{path}.{name}" if path else name)
            return out

        return struct, convert_object

    def _resolve(self, ref: str, document: Any) -> tuple[Any, Any]:
        base, _, pointer = ref.partition("#")
        if base:
            if base not in self.references:
                raise SchemaError(f"{self.where}: $ref {ref!r} names no reference of the schema")
            document = self.references[base]
        target = document
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"{self.where}: $ref {ref!r} points at nothing")
        return target, document


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _json_text(value, path: str) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _list(convert: Convert) -> Convert:
    def convert_list(value, path: str) -> list:
        if not isinstance(value, list):
            raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not an array")
        return [None if x is None else convert(x, f"{path}[{i}]") for i, x in enumerate(value)]

    return convert_list


def _map(convert: Convert) -> Convert:
    def convert_map(value, path: str) -> dict:
        if not isinstance(value, dict):
            raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not an object")
        return {k: None if x is None else convert(x, f"{path}.{k}") for k, x in value.items()}

    return convert_map


def _integer(value, path: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not an integer")
    if not MIN_LONG <= value <= MAX_LONG:
        raise UndecodableError(f"{path or 'the value'} {value} is out of a 64-bit integer's range")
    return value


def _number(value, path: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not a number")
    return float(value)


def _of_type(python: type, name: str) -> Convert:
    def check(value, path: str):
        if not isinstance(value, python):
            raise UndecodableError(f"{path or 'the value'} is {_json_type(value)}, not {name}")
        return value

    return check


_SCALARS: dict[str, tuple[pa.DataType, Convert]] = {
    "string": (pa.string(), _of_type(str, "a string")),
    "integer": (pa.int64(), _integer),
    "number": (pa.float64(), _number),
    "boolean": (pa.bool_(), _of_type(bool, "a boolean")),
}


def arrow_type(schema: Any, references: Mapping[str, Any], where: str = "") -> tuple[pa.DataType, Convert]:
    """The Arrow type of a parsed JSON Schema (``references``: the documents of its registry
    references, by name) and the function that fits a parsed JSON value to it."""
    return _Types(schema, references, where).of(schema, schema)


class JsonReader:
    """Reads JSON payloads as the table's schema."""

    def __init__(self, convert: Convert) -> None:
        self.convert = convert

    def read(self, payload: memoryview) -> Any:
        try:
            value = json.loads(bytes(payload))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise UndecodableError(f"JSON payload of {len(payload)} bytes: {err}") from err
        return None if value is None else self.convert(value, "")
