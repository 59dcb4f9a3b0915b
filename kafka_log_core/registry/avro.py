"""Avro: a schema's Arrow type, and payloads read with the table's schema by Avro's resolution rules.

Decoding is fastavro's (``schemaless_reader`` with the writer's schema, the one the record's id names,
and the reader's, the subject's latest): Avro's schema resolution applies, so a field added with a
default gets it in older records, a field removed is skipped, ``int`` widens to ``long``, ``float`` or
``double``, an enum symbol unknown to the reader takes the reader's default. A writer schema the
reader cannot resolve (a field added without a default) makes the record undecodable with fastavro's
reason.

Types, as Spark's ``from_avro`` maps them (``org.apache.spark.sql.avro.SchemaConverters``)::

    boolean int long float double       bool int32 int64 float32 float64
    bytes fixed string enum             binary binary string string (the symbol)
    record array map                    struct list map<string, V>
    union [null, T] / [T]               T (every column and field is nullable)
    union of int and long / float and double   int64 / float64
    any other union                     struct<member0, member1, ...> (one per non-null branch, in
                                        order; the branch written is set, the others null)
    date                                date32
    timestamp-millis, timestamp-micros  timestamp (UTC);  local-timestamp-*: timestamp without zone
    time-millis, time-micros            int32 (ms) / int64 (us) after midnight
    decimal(p, s)                       decimal(p, s) up to p = 38 (Spark's limit), else its string
    uuid                                string

A recursive type cannot be a table column: :class:`SchemaError`.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from kafka_log_core.errors import SchemaError, UndecodableError

MAX_DECIMAL_PRECISION = 38
PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
TIMESTAMP_LOCAL = pa.timestamp("us")
Convert = Callable[[Any], Any]


def parse(text: str, named: dict | None = None, where: str = "") -> Any:
    """fastavro's parsed form of a schema's JSON text; ``named``: the named types of its references
    (filled in place with this schema's own)."""
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(text), named_schemas=named if named is not None else {})
    except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError and fastavro's SchemaParseException
        raise SchemaError(f"{where}: not an Avro schema: {err}") from err


# ------------------------------------------------------------------------------------------ types
class _Types:
    """The Arrow type of a parsed schema, and a converter for values where fastavro's Python values do
    not fit Arrow as they are (None where they do)."""

    def __init__(self, named: Mapping[str, Any], where: str) -> None:
        self.named = named
        self.where = where
        self.visiting: list[str] = []

    def of(self, schema: Any) -> tuple[pa.DataType, Convert | None]:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return PRIMITIVES[schema], None
            if schema == "null":
                raise SchemaError(f"{self.where}: a null type outside a union cannot be a column")
            if schema in self.visiting:
                raise SchemaError(f"{self.where}: the recursive type {schema} cannot be a table column")
            if schema not in self.named:
                raise SchemaError(f"{self.where}: unknown type {schema!r}")
            return self.of(self.named[schema])  # a record pushes its own name on `visiting`
        if isinstance(schema, list):
            return self._union(schema)
        return self._complex(schema)

    def _complex(self, schema: Mapping) -> tuple[pa.DataType, Convert | None]:
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            found = self._logical(schema, kind, logical)
            if found is not None:
                return found
        if kind == "record" or kind == "error":
            name = schema.get("name", "")
            if name in self.visiting:
                raise SchemaError(f"{self.where}: the recursive type {name} cannot be a table column")
            self.visiting.append(name)
            try:
                fields = [(f["name"], *self.of(f["type"])) for f in schema["fields"]]
            finally:
                self.visiting.pop()
            struct = pa.struct([pa.field(name, t) for name, t, _ in fields])
            converters = [(name, c) for name, _, c in fields if c is not None]
            if not converters:
                return struct, None

            def record(value, converters=converters):
                out = dict(value)
                for name, convert in converters:
                    if out.get(name) is not None:
                        out[name] = convert(out[name])
                return out

            return struct, record
        if kind == "enum":
            return pa.string(), None
        if kind == "fixed":
            return pa.binary(), None
        if kind == "array":
            item, convert = self.of(schema["items"])
            return pa.list_(item), (None if convert is None else _each(convert))
        if kind == "map":
            item, convert = self.of(schema["values"])
            return pa.map_(pa.string(), item), (None if convert is None else _each_value(convert))
        return self.of(kind)  # {"type": "string"} and the like

    def _logical(self, schema: Mapping, kind: str, logical: str):
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
            if 0 < precision <= MAX_DECIMAL_PRECISION:
                return pa.decimal128(precision, scale), None
            return pa.string(), str
        if logical == "uuid" and kind in ("string", "fixed"):
            return pa.string(), str
        if logical == "date" and kind == "int":
            return pa.date32(), None
        if logical == "time-millis" and kind == "int":
            return pa.int32(), _time_millis
        if logical == "time-micros" and kind == "long":
            return pa.int64(), _time_micros
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TIMESTAMP_UTC, None
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return TIMESTAMP_LOCAL, None
        return None  # unknown or misplaced logical types are their underlying type, as Avro says

    def _union(self, branches: list) -> tuple[pa.DataType, Convert | None]:
        members = [b for b in branches if b != "null"]
        if not members:
            raise SchemaError(f"{self.where}: a union of null alone cannot be a column")
        if len(members) == 1:
            return self.of(members[0])
        if set(members) in ({"int", "long"}, {"float", "double"}):
            return self.of("long" if "long" in members else "double")
        typed = [self.of(b) for b in members]
        struct = pa.struct([pa.field(f"member{i}", t) for i, (t, _) in enumerate(typed)])
        pick = _branch_picker(members, self.named)
        names = [f"member{j}" for j in range(len(members))]

        def union(value, typed=typed, pick=pick, names=names):
            i, inner = pick(value)
            convert = typed[i][1]
            out: dict[str, Any] = dict.fromkeys(names)
            out[f"member{i}"] = inner if convert is None else convert(inner)
            return out

        return struct, union


def _each(convert: Convert) -> Convert:
    return lambda items: [None if x is None else convert(x) for x in items]


def _each_value(convert: Convert) -> Convert:
    return lambda entries: {k: None if x is None else convert(x) for k, x in entries.items()}


def _time_millis(value: datetime.time) -> int:
    return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000


def _time_micros(value: datetime.time) -> int:
    return (value.hour * 3600 + value.minute * 60 + value.second) * 1_000_000 + value.microsecond


#: The Python type fastavro gives a branch of each kind (named types come back as (name, value)).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (float,),
    "double": (float,),
    "string": (str,),
    "bytes": (bytes,),
    "array": (list,),
    "map": (dict,),
    "record": (dict,),
    "error": (dict,),
    "enum": (str,),
    "fixed": (bytes,),
}


def _branch_picker(members: list, named: Mapping[str, Any]) -> Callable[[Any], tuple[int, Any]]:
    """Which branch of a union a decoded value came from. fastavro is asked for the name of named
    types (``return_named_type``), so a record, enum or fixed comes as ``(full name, value)``."""
    by_name: dict[str, int] = {}
    by_python: list[tuple[tuple[type, ...], int]] = []
    for i, member in enumerate(members):
        if isinstance(member, str) and member in named:  # a named type by its full name
            by_name[member] = i
            member = named[member]
        kind = member if isinstance(member, str) else member.get("type")
        if isinstance(member, dict) and kind in ("record", "error", "enum", "fixed"):
            by_name[str(member.get("name"))] = i
        if isinstance(kind, str) and kind in _PYTHON_TYPES:  # also a named type whose name is not given
            by_python.append((_PYTHON_TYPES[kind], i))

    def pick(value):
        if isinstance(value, tuple) and len(value) == 2 and value[0] in by_name:
            return by_name[value[0]], value[1]
        for types, i in by_python:
            if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
                return i, value
        raise UndecodableError(
            f"a value of Python type {type(value).__name__} matches no branch of its union"
        )

    return pick


def arrow_type(parsed: Any, named: Mapping[str, Any], where: str = "") -> tuple[pa.DataType, Convert | None]:
    """The Arrow type of a parsed schema and the converter its decoded values need (or None)."""
    return _Types(named, where).of(parsed)


def _has_multi_union(schema: Any, named: Mapping[str, Any], seen: set) -> bool:
    if isinstance(schema, list):
        members = [b for b in schema if b != "null"]
        if len(members) > 1 and set(members) not in ({"int", "long"}, {"float", "double"}):
            return True
        return any(_has_multi_union(b, named, seen) for b in members)
    if isinstance(schema, str):
        if schema in named and schema not in seen:
            seen.add(schema)
            return _has_multi_union(named[schema], named, seen)
        return False
    kind = schema.get("type")
    if kind in ("record", "error"):
        return any(_has_multi_union(f["type"], named, seen) for f in schema["fields"])
    if kind == "array":
        return _has_multi_union(schema["items"], named, seen)
    if kind == "map":
        return _has_multi_union(schema["values"], named, seen)
    return False


# ------------------------------------------------------------------------------------------ decoding
class AvroReader:
    """Reads payloads written with one writer schema as the reader schema."""

    def __init__(
        self, writer: Any, reader: Any, same: bool, convert: Convert | None, named_types: bool
    ) -> None:
        self.writer = writer
        self.reader = None if same else reader
        self.convert = convert
        self.named_types = named_types

    def read(self, payload: memoryview) -> Any:
        import fastavro

        try:
            value = fastavro.schemaless_reader(
                io.BytesIO(payload), self.writer, self.reader,
                return_named_type=self.named_types, return_named_type_override=self.named_types,
            )  # fmt: skip
        except EOFError as err:
            raise UndecodableError(f"Avro payload of {len(payload)} bytes cut short") from err
        except Exception as err:  # fastavro's SchemaResolutionError, ValueError, struct errors...
            raise UndecodableError(
                f"Avro payload of {len(payload)} bytes: {type(err).__name__}: {err}"
            ) from err
        if self.convert is not None and value is not None:
            value = self.convert(value)
        return value


def reader_for(writer: Any, reader: Any, same: bool, named: Mapping[str, Any], where: str) -> AvroReader:
    _, convert = arrow_type(reader, named, where)
    return AvroReader(writer, reader, same, convert, _has_multi_union(reader, named, set()))
