"""Kafka's message schemas (the ``*.json`` message definitions), read field by field as the generated
``read`` methods read them and written as the generated JSON converters write them.

A :class:`Schema` lists its fields in order, each with the versions that have it (``"0+"``, ``"1"``,
``"1-3"``, ``"none"``), the versions in which it may be null and, for a tagged field, its tag and default.
From ``flexible_from`` on, strings, bytes and arrays are compact (unsigned varint length + 1, 0 = null) and
each struct ends with its tagged fields (unsigned varint count, then tag, size and value each); before it,
strings have int16 lengths and bytes and arrays int32 ones (-1 = null). Kinds: ``int8`` .. ``int64``,
``uint16``, ``float64``, ``bool``, ``string``, ``bytes``, ``uuid``, ``[]int32`` / ``[]string`` / ``[]uuid``
(arrays of those), ``[]`` (an array of structs) and ``{}`` (one struct), the last two with ``fields``.

The JSON is what Kafka's converters write at a given version: fields in schema order, a tagged field only
when it is not its default, a field the read version did not have as its default, a uuid as Kafka prints
it (URL-safe base64 without padding). Reading and writing take their versions apart, because
kafka-dump-log reads the KRaft control records at version 0 and writes them at their stored version.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka_log_core.format.checkpoints import encode_uuid
from kafka_log_core.format.kafka_message import INT8, INT16, INT32, INT64, UINT16, MessageReader

MAX_STRING_LENGTH = 0x7FFF  # a compact string longer than this is refused by Kafka's generated readers
_FIXED = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "uint16": UINT16}
_FLOAT64 = struct.Struct(">d")


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field: JSON name, kind, versions, nullable versions, tag (tagged fields), default (the
    value of a tagged field not written, or of a field the read version lacks) and a struct's fields."""

    name: str
    kind: str
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    default: object = None
    fields: tuple[Field, ...] = ()


@dataclass(frozen=True, slots=True)
class Schema:
    fields: tuple[Field, ...]
    flexible_from: int | None = None  # None: no flexible version

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def in_versions(versions: str, version: int) -> bool:
    if versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


def _length(r: MessageReader, flexible: bool, wide: bool, what: str) -> int:
    """A string (int16), bytes or array (int32) length; -1 = null."""
    if flexible:
        return r.length(what)
    return r.fixed(INT32 if wide else INT16, what)


def _null(r: MessageReader, field: Field, version: int) -> None:
    if not in_versions(field.nullable, version):
        raise r.error(f"non-nullable field {field.name} was serialized as null")


def _read_value(r: MessageReader, field: Field, version: int, flexible: bool) -> object:
    kind = field.kind
    if kind in _FIXED:
        return r.fixed(_FIXED[kind], field.name)
    if kind == "bool":
        return r.fixed(INT8, field.name) != 0
    if kind == "float64":
        return float(_FLOAT64.unpack(r.take(_FLOAT64.size, field.name))[0])
    if kind == "uuid":
        return r.uuid(field.name)
    if kind == "{}":
        if in_versions(field.nullable, version):
            # a nullable struct starts with a presence mark: an int8 (-1: null) or, as a tagged field's
            # value, an unsigned varint (0: null)
            present = r.uvarint(field.name) > 0 if field.tag is not None else r.fixed(INT8, field.name) >= 0
            if not present:
                return None
        return read_struct(r, field.fields, version, flexible)
    if kind in ("string", "bytes"):
        n = _length(r, flexible, kind == "bytes", field.name)
        if n < 0:
            _null(r, field, version)
            return None
        if kind == "string" and n > MAX_STRING_LENGTH:
            raise r.error(f"string field {field.name} had invalid length {n}")
        raw = r.take(n, field.name)
        return raw.decode("utf-8", "replace") if kind == "string" else raw
    n = _length(r, flexible, True, field.name)  # an array
    if n < 0:
        _null(r, field, version)
        return None
    if kind == "[]":
        return [read_struct(r, field.fields, version, flexible) for _ in range(n)]
    element = Field(field.name, kind[2:])
    return [_read_value(r, element, version, flexible) for _ in range(n)]


def read_struct(r: MessageReader, fields: Sequence[Field], version: int, flexible: bool) -> dict[str, object]:
    """One struct's fields at ``version`` (then its tagged fields, when ``flexible``); unknown tags skipped."""
    values: dict[str, object] = {}
    for field in fields:
        if field.tag is None and in_versions(field.versions, version):
            values[field.name] = _read_value(r, field, version, flexible)
    if flexible:
        tagged = {f.tag: f for f in fields if f.tag is not None and in_versions(f.versions, version)}
        for _ in range(r.uvarint("tagged fields")):
            tag, size = r.uvarint("tag"), r.uvarint("tagged field size")
            data = r.take(size, "tagged field")
            if tag in tagged:
                field = tagged[tag]
                values[field.name] = _read_value(MessageReader(data, error=r.error), field, version, flexible)
    return values


def as_json(fields: Sequence[Field], values: Mapping[str, object], version: int) -> dict[str, object]:
    """The JSON object Kafka's generated converter writes at ``version``: schema order, tagged fields only
    when set, a field missing from ``values`` as its default."""
    out: dict[str, object] = {}
    for field in fields:
        if not in_versions(field.versions, version):
            continue
        value = values.get(field.name, field.default)
        if field.tag is not None and value == field.default:
            continue
        if field.kind == "uuid" and isinstance(value, bytes):
            value = encode_uuid(value)
        elif field.kind == "[]uuid" and isinstance(value, list):
            value = [encode_uuid(item) for item in value]
        elif field.kind == "[]" and isinstance(value, list):
            value = [as_json(field.fields, item, version) for item in value]
        elif field.kind == "{}" and isinstance(value, Mapping):
            value = as_json(field.fields, value, version)
        out[field.name] = value
    return out


def parse(schema: Schema, r: MessageReader, version: int) -> dict[str, object]:
    """A message read and written at ``version``."""
    return as_json(schema.fields, read_struct(r, schema.fields, version, schema.flexible(version)), version)
