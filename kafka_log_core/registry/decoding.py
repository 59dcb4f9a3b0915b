"""What decodes one side (key or value) of one topic: :class:`SideDecoder`, made on the driver from the
registry's schemas and shipped to the executors.

The subject of a side is Confluent's default ``TopicNameStrategy``: ``<topic>-key``, ``<topic>-value``.
Its latest version that is not deleted is the table's schema (its columns); a side whose subject has
no such version is not decoded (bytes, as without schemas). A record may name any version of the
subject, soft-deleted ones included (their ids stay readable, as the registry's ``/schemas/ids/{id}``
answers): it is read as the table's schema by its format's rules (:mod:`.avro`, :mod:`.protobuf`,
:mod:`.json_schema`). An id that is no version of the subject is undecodable: "schema id N is not a
version of subject S" (or "unknown schema id N" when the registry has no such id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kafka_log_core.errors import SchemaError, UndecodableError
from kafka_log_core.registry import avro, json_schema, protobuf, wire
from kafka_log_core.registry.storage import AVRO, JSON, PROTOBUF, RegisteredSchema, SchemaStore

KEY, VALUE = "key", "value"


def subject_for(topic: str, side: str) -> str:
    """Confluent's TopicNameStrategy."""
    return f"{topic}-{side}"


@dataclass(frozen=True)
class WriterSchema:
    """What an executor needs of one version the records may name."""

    id: int
    version: int
    #: Avro: the schema's JSON text and the texts of its references (named types, dependencies first);
    #: Protobuf: the index paths of the writer's messages -> full names; JSON: nothing.
    text: str = ""
    reference_texts: tuple[str, ...] = ()
    message_paths: tuple[tuple[tuple[int, ...], str], ...] = ()


@dataclass(frozen=True)
class SideDecoder:
    """Decodes the keys or the values of one topic as its subject's latest schema."""

    subject: str
    schema_type: str
    #: The table's schema: the latest version.
    latest: WriterSchema
    writers: tuple[WriterSchema, ...]
    #: Protobuf: the latest version's compiled FileDescriptorSet; JSON: its references' texts by name.
    descriptors: bytes = b""
    json_references: tuple[tuple[str, str], ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __getstate__(self) -> dict:
        state = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "_cache"}
        return state

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_cache", {})

    # ------------------------------------------------------------------ the table's type
    @property
    def arrow_type(self) -> pa.DataType:
        return self._table()[0]

    def describe(self) -> str:
        return (
            f"{self.schema_type} subject {self.subject!r} version {self.latest.version} (id {self.latest.id})"
        )

    # ------------------------------------------------------------------ decoding
    def decode(self, data: bytes) -> tuple[Any, int]:
        """The value of ``data`` as the table's schema and the schema id it named; UndecodableError."""
        framed = wire.split(data, protobuf=self.schema_type == PROTOBUF)
        reader = self._reader(framed.schema_id)
        if self.schema_type == PROTOBUF:
            return reader.read(framed.payload, framed.message_indexes), framed.schema_id
        return reader.read(framed.payload), framed.schema_id

    def _reader(self, schema_id: int):
        readers = self._cache.setdefault("readers", {})
        found = readers.get(schema_id)
        if found is None:
            found = readers[schema_id] = self._make_reader(schema_id)
        if isinstance(found, UndecodableError):
            raise found
        return found

    def _make_reader(self, schema_id: int):
        writer = next((w for w in self.writers if w.id == schema_id), None)
        if writer is None:
            return UndecodableError(f"schema id {schema_id} is not a version of subject {self.subject!r}")
        where = f"subject {self.subject!r} version {writer.version} (id {schema_id})"
        if self.schema_type == AVRO:
            named: dict = {}
            for text in writer.reference_texts:
                avro.parse(text, named, where)
            parsed = avro.parse(writer.text, named, where)
            reader_named, reader = self._avro_latest()
            try:
                return avro.reader_for(parsed, reader, writer.id == self.latest.id, reader_named, where)
            except SchemaError as err:
                return UndecodableError(str(err))
        if self.schema_type == PROTOBUF:
            _, convert = self._table()
            return protobuf.ProtobufReader(self._cache["message_class"], convert, dict(writer.message_paths))
        return json_schema.JsonReader(self._table()[1])

    def _avro_latest(self) -> tuple[dict, Any]:
        if "avro" not in self._cache:
            named: dict = {}
            where = self._where()
            for text in self.latest.reference_texts:
                avro.parse(text, named, where)
            self._cache["avro"] = (named, avro.parse(self.latest.text, named, where))
        return self._cache["avro"]

    def _table(self) -> tuple[pa.DataType, Any]:
        if "table" not in self._cache:
            where = self._where()
            if self.schema_type == AVRO:
                named, parsed = self._avro_latest()
                self._cache["table"] = avro.arrow_type(parsed, named, where)
            elif self.schema_type == PROTOBUF:
                descriptors = protobuf.Descriptors(self.descriptors)
                message = descriptors.first_message(where)
                self._cache["message_class"] = protobuf.message_class(message)
                self._cache["table"] = protobuf.arrow_type(message, where)
            else:
                references = {name: json_schema.parse(text, where) for name, text in self.json_references}
                self._cache["table"] = json_schema.arrow_type(
                    json_schema.parse(self.latest.text, where), references, where
                )
        return self._cache["table"]

    def _where(self) -> str:
        return f"subject {self.subject!r} version {self.latest.version} (id {self.latest.id})"


# ------------------------------------------------------------------------------------------ building (driver)
def side_decoder(store: SchemaStore, subject: str) -> SideDecoder | None:
    """The decoder of a subject's records, or None when the subject has no live version. A schema that
    cannot be the table's columns (unparseable, recursive, a reference missing) raises SchemaError."""
    latest = store.latest(subject)
    if latest is None:
        return None
    versions = store.versions_of(subject)
    if latest.schema_type == AVRO:
        writers = tuple(_avro_writer(store, s) for s in versions if s.schema_type == AVRO)
        decoder = SideDecoder(subject, AVRO, _avro_writer(store, latest), writers)
    elif latest.schema_type == PROTOBUF:
        compiled = {s.id: _compile(store, s) for s in versions if s.schema_type == PROTOBUF}
        writers = tuple(
            WriterSchema(
                s.id, s.version, message_paths=tuple(protobuf.Descriptors(compiled[s.id]).all_paths().items())
            )
            for s in versions
            if s.schema_type == PROTOBUF
        )
        decoder = SideDecoder(
            subject, PROTOBUF, WriterSchema(latest.id, latest.version), writers, compiled[latest.id]
        )
    else:
        writers = tuple(WriterSchema(s.id, s.version) for s in versions if s.schema_type == JSON)
        references = tuple(_reference_texts(store, latest, by_name=True))
        decoder = SideDecoder(
            subject,
            JSON,
            WriterSchema(latest.id, latest.version, latest.schema),
            writers,
            json_references=references,
        )
    decoder.arrow_type  # noqa: B018 -- a schema that cannot be columns fails here, on the driver
    return decoder


def _avro_writer(store: SchemaStore, schema: RegisteredSchema) -> WriterSchema:
    return WriterSchema(
        schema.id, schema.version, schema.schema, tuple(t for _, t in _reference_texts(store, schema))
    )


def _reference_texts(store: SchemaStore, schema: RegisteredSchema, *, by_name: bool = False, seen=None):
    """The texts a schema references, dependencies first: ``(name, text)``."""
    seen = set() if seen is None else seen
    out: list[tuple[str, str]] = []
    for ref in schema.references:
        target = store.version(ref.subject, ref.version)
        if target is None:
            raise SchemaError(
                f"{schema.describe()}: its reference {ref.name!r} (subject {ref.subject!r} version "
                f"{ref.version}) is not in the registry"
            )
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        out.extend(_reference_texts(store, target, by_name=by_name, seen=seen))
        out.append((ref.name, target.schema))
    return out


def _compile(store: SchemaStore, schema: RegisteredSchema) -> bytes:
    imports = dict(_reference_texts(store, schema))
    return protobuf.compile_schema(schema.schema, imports, schema.describe())


def decoders_for(store: SchemaStore, topic: str) -> Mapping[str, SideDecoder | None]:
    """The key and value decoders of a topic (None: that side stays bytes)."""
    return {side: side_decoder(store, subject_for(topic, side)) for side in (KEY, VALUE)}
