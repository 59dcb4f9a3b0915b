"""Protobuf: ``.proto`` text to descriptors, a message's Arrow type, payloads read as the table's message.

The registry keeps a Protobuf schema as ``.proto`` text (references: the files it imports, by import
path). The driver compiles the text once with ``protoc`` (grpcio-tools, the optional ``.[protobuf]``
extra) into a serialized ``FileDescriptorSet``; the executors need only the ``protobuf`` runtime.

Evolution is Protobuf's own: a payload is parsed with the table's message (the latest version's),
fields matched by number: a field the writer did not know gets its default (proto3: 0, "", false; an
``optional``, ``oneof`` or message field: null), a field the reader dropped is skipped. A record names
its message by the message indexes of the wire format (a path in the writer's file); it is read as the
table's message when that path names a message of the same full name in the writer's file, else it is
undecodable. The table's message is the first message of the latest version's file (Confluent's
default message of a schema).

Types, as Spark's ``from_protobuf`` maps them::

    double float int32 sint32 sfixed32   float64 float32 int32
    int64 sint64 sfixed64 / uint32 fixed32 / uint64 fixed64    int64 / int64 / decimal(20, 0)
    bool string bytes enum               bool string binary string (the value's name; an unknown
                                         number: the number as text)
    message, group / repeated / map      struct / list / map<K, V>
    google.protobuf.Timestamp            timestamp (UTC)
    google.protobuf.*Value wrappers      their value (null when unset)

A recursive message cannot be a table column: :class:`SchemaError`.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from kafka_log_core import storage
from kafka_log_core.errors import SchemaError, UndecodableError

TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
WRAPPERS = {
    "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
}  # fmt: skip
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MAIN_FILE = "schema.proto"


# ------------------------------------------------------------------------------------------ compiling (driver)
def compile_schema(text: str, imports: Mapping[str, str], where: str) -> bytes:
    """The serialized ``FileDescriptorSet`` of a ``.proto`` text and the files it imports (by import
    path), the main file named :data:`MAIN_FILE`. Google's well-known types come with protoc."""
    try:
        import grpc_tools
    except ImportError as err:
        raise SchemaError(
            f"{where}: a Protobuf schema needs protoc: pip install 'kafka-log-jobs[protobuf]' (grpcio-tools)"
        ) from err
    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="kafka-log-proto-") as tmp:
        for name, body in {**imports, MAIN_FILE: text}.items():
            path = Path(tmp, name)
            if not path.resolve().is_relative_to(Path(tmp).resolve()):
                raise SchemaError(f"{where}: import path {name!r} leaves the schema's directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        out = os.path.join(tmp, "descriptors.pb")
        found = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}", "--include_imports",
             f"--descriptor_set_out={out}", MAIN_FILE],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if found.returncode != 0:
            message = " ".join(line.strip() for line in found.stderr.splitlines() if line.strip())
            raise SchemaError(f"{where}: protoc cannot compile it: {message}")
        return storage.read_regular(out)


# ------------------------------------------------------------------------------------------ descriptors
class Descriptors:
    """The messages of one compiled schema (a pool of its own: two versions define the same names)."""

    def __init__(self, serialized: bytes) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool

        files = descriptor_pb2.FileDescriptorSet.FromString(serialized)
        self.pool = descriptor_pool.DescriptorPool()
        for proto in files.file:
            self.pool.Add(proto)
        self.main = self.pool.FindFileByName(MAIN_FILE)

    def first_message(self, where: str):
        if not self.main.message_types_by_name:
            raise SchemaError(f"{where}: the schema defines no message")
        return next(iter(self.main.message_types_by_name.values()))

    def message_at(self, indexes: tuple[int, ...]):
        """The message a wire-format index path names in the main file."""
        messages = list(self.main.message_types_by_name.values())
        found = None
        for depth, index in enumerate(indexes):
            if index >= len(messages):
                raise UndecodableError(
                    f"message index {index} at depth {depth}: the schema has {len(messages)}"
                )
            found = messages[index]
            messages = list(found.nested_types)
        return found

    def all_paths(self) -> dict[tuple[int, ...], str]:
        """Every message's index path in the main file and its full name."""
        out: dict[tuple[int, ...], str] = {}

        def walk(messages, prefix: tuple[int, ...]) -> None:
            for i, message in enumerate(messages):
                out[prefix + (i,)] = message.full_name
                walk(list(message.nested_types), prefix + (i,))

        walk(list(self.main.message_types_by_name.values()), ())
        return out


# ------------------------------------------------------------------------------------------ types
Convert = Callable[[Any], Any]


def arrow_type(message, where: str = "") -> tuple[pa.DataType, Convert]:
    """The Arrow type of a message and the function from a parsed message to that type's Python value."""
    return _message(message, [], where)


def _message(message, visiting: list[str], where: str) -> tuple[pa.DataType, Convert]:
    if message.full_name in visiting:
        raise SchemaError(f"{where}: the recursive message {message.full_name} cannot be a table column")
    visiting.append(message.full_name)
    try:
        fields = [(f, *_field(f, visiting, where)) for f in message.fields]
    finally:
        visiting.pop()
    struct = pa.struct([pa.field(f.name, t) for f, t, _ in fields])
    plan = [(f.name, f.has_presence and not f.is_repeated, convert) for f, _, convert in fields]

    def convert_message(msg) -> dict:
        out: dict[str, Any] = {}
        for name, presence, convert in plan:
            if presence and not msg.HasField(name):
                out[name] = None
            else:
                out[name] = convert(getattr(msg, name))
        return out

    return struct, convert_message


def _field(field, visiting: list[str], where: str) -> tuple[pa.DataType, Convert]:
    if field.is_repeated and field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_type, key_convert = _single(field.message_type.fields_by_name["key"], visiting, where)
        value_type, value_convert = _single(field.message_type.fields_by_name["value"], visiting, where)
        return pa.map_(key_type, value_type), lambda m: [
            (key_convert(k), value_convert(v)) for k, v in m.items()
        ]
    kind, convert = _single(field, visiting, where)
    if field.is_repeated:
        return pa.list_(kind), lambda items: [convert(x) for x in items]
    return kind, convert


def _identity(value):
    return value


def _single(field, visiting: list[str], where: str) -> tuple[pa.DataType, Convert]:
    from google.protobuf.descriptor import FieldDescriptor as F

    t = field.type
    if t in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        name = field.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return TIMESTAMP_UTC, _timestamp
        if name in WRAPPERS:
            inner, convert = _single(field.message_type.fields_by_name["value"], visiting, where)
            return inner, lambda m: convert(m.value)
        return _message(field.message_type, visiting, where)
    if t == F.TYPE_ENUM:
        values = field.enum_type.values_by_number
        return pa.string(), lambda v: values[v].name if v in values else str(v)
    if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return pa.decimal128(20, 0), Decimal
    return _SCALARS[t], _identity


def _scalars() -> dict[int, pa.DataType]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_DOUBLE: pa.float64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_INT64: pa.int64(),
        F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(), F.TYPE_INT32: pa.int32(),
        F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(), F.TYPE_UINT32: pa.int64(),
        F.TYPE_FIXED32: pa.int64(), F.TYPE_BOOL: pa.bool_(), F.TYPE_STRING: pa.string(),
        F.TYPE_BYTES: pa.binary(),
    }  # fmt: skip


_SCALARS = _scalars()


def _timestamp(m) -> datetime.datetime:
    return EPOCH + datetime.timedelta(seconds=m.seconds, microseconds=m.nanos // 1000)


# ------------------------------------------------------------------------------------------ decoding
class ProtobufReader:
    """Reads the payloads of one writer schema as the table's message."""

    def __init__(self, message_class, convert: Convert, paths: Mapping[tuple[int, ...], str]) -> None:
        self.message_class = message_class
        self.name = message_class.DESCRIPTOR.full_name
        self.convert = convert
        self.paths = paths

    def read(self, payload: memoryview, indexes: tuple[int, ...]) -> Any:
        name = self.paths.get(indexes)
        if name is None:
            raise UndecodableError(f"message indexes {list(indexes)} name no message of the writer's schema")
        if name != self.name:
            raise UndecodableError(f"message {name}, not the table's message {self.name}")
        try:
            message = self.message_class.FromString(bytes(payload))
        except Exception as err:  # google.protobuf.message.DecodeError
            raise UndecodableError(f"Protobuf payload of {len(payload)} bytes: {err}") from err
        return self.convert(message)


def message_class(descriptor):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)
