"""The Schema Registry's schemas: the records of its ``_schemas`` topic, replayed as the registry does.

Where the format comes from: Confluent's schema-registry, ``io.confluent.kafka.schemaregistry.storage``
(the JSON of ``SchemaRegistryKey`` and its subclasses ``SchemaKey``, ``ConfigKey``, ``ModeKey``,
``NoopKey``, ``DeleteSubjectKey``, ``ClearSubjectKey``, ``ContextKey``; of ``SchemaValue``,
``DeleteSubjectValue``, ``ClearSubjectValue``, written with Jackson) and how its
``KafkaStoreReaderThread`` and ``KafkaStoreMessageHandler`` apply them. Key and value are JSON::

    key   {"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}
    value {"subject":"orders-value","version":2,"id":7,"schemaType":"PROTOBUF",
           "references":[{"name":"common.proto","subject":"common","version":1}],
           "schema":"syntax = \\"proto3\\"; ...","deleted":false}        (plus md5, metadata, ruleSet)

* ``SCHEMA`` with a value registers (subject, version) -> the schema; ``"deleted": true`` is a soft
  delete (the version stays readable by id); a null value (a tombstone) is a hard delete of that
  version. ``schemaType`` absent means AVRO, ``references`` absent means none.
* A schema whose id is already held, in the same context, by a schema of another text is ignored (the
  registry logs "Found a schema with duplicate ID" and keeps the first).
* ``DELETE_SUBJECT`` (value ``{"subject":..,"version":N}``) soft-deletes versions 1..N of the subject;
  ``CLEAR_SUBJECT`` (value ``{"subject":..}``) hard-deletes its soft-deleted versions.
* ``NOOP`` (written by a registry leader to find the end of the topic), ``CONFIG``, ``MODE``,
  ``CONTEXT`` and ``ASSOC`` say nothing about schemas; tombstones of keys other than ``SCHEMA`` are
  ignored. A key or value that is not such JSON is skipped, as the registry skips it (it logs
  "Failed to deserialize"); :attr:`SchemaStore.skipped` says which offsets.

An id names a schema while any (subject, version) registered with it remains (soft-deleted or not):
the registry answers ``GET /schemas/ids/{id}`` for soft-deleted versions, so a consumer still decodes
their records. Subjects of other contexts (``:.ctx:subject``) have their own ids; a record's id is
looked up in the default context, as a deserializer without a context does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kafka_log_core import storage
from kafka_log_core.errors import KafkaLogError, SchemaError

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)
DEFAULT_CONTEXT = "."
#: The registry's ``kafkastore.topic`` default.
SCHEMAS_TOPIC = "_schemas"


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A schema another one imports: its name there (an Avro full name, a ``.proto`` file name, a JSON
    Schema ``$ref`` URL) and the (subject, version) that holds it."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """One (subject, version) of the registry."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False
    #: Where it was read: ``_schemas`` offset N, or a file.
    source: str = ""

    @property
    def context(self) -> str:
        return context_of(self.subject)

    def describe(self) -> str:
        return f"subject {self.subject!r} version {self.version} (id {self.id}, {self.source})"


def context_of(subject: str) -> str:
    """The context of a qualified subject ``:.ctx:name``; the default context ``.`` otherwise."""
    if subject.startswith(":.") and ":" in subject[2:]:
        return subject[1 : subject.index(":", 2)]
    return DEFAULT_CONTEXT


class SchemaStore:
    """Every (subject, version) the registry holds, and which ids name which schema."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}
        #: (context, id) -> {subject: version}, in registration order (the registry's guidToSubjectVersions).
        self._ids: dict[tuple[str, int], dict[str, int]] = {}
        self.skipped: list[str] = []

    # ------------------------------------------------------------------ lookups
    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema a record's id names (default context), soft-deleted versions included."""
        holders = self._ids.get((DEFAULT_CONTEXT, schema_id))
        if not holders:
            return None
        subject, version = next(iter(holders.items()))
        return self._versions[(subject, version)]

    def version(self, subject: str, version: int) -> RegisteredSchema | None:
        return self._versions.get((subject, version))

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's latest version that is not deleted (what ``/versions/latest`` answers)."""
        live = [s for (name, _), s in self._versions.items() if name == subject and not s.deleted]
        return max(live, key=lambda s: s.version) if live else None

    def versions_of(self, subject: str) -> list[RegisteredSchema]:
        """Every version of the subject the registry holds (soft-deleted ones too), oldest first."""
        return sorted(
            (s for (name, _), s in self._versions.items() if name == subject), key=lambda s: s.version
        )

    def subjects(self) -> list[str]:
        return sorted({name for name, _ in self._versions})

    def __len__(self) -> int:
        return len(self._versions)

    # ------------------------------------------------------------------ changes
    def register(self, schema: RegisteredSchema) -> bool:
        """Add or replace (subject, version); False when its id already names another schema text."""
        holder = self._id_holder(schema.context, schema.id)
        if holder is not None and holder.schema != schema.schema:
            return False
        key = (schema.subject, schema.version)
        old = self._versions.get(key)
        if old is not None and old.id != schema.id:
            self._forget_id(old)
        self._versions[key] = schema
        self._ids.setdefault((schema.context, schema.id), {})[schema.subject] = schema.version
        return True

    def tombstone(self, subject: str, version: int) -> None:
        old = self._versions.pop((subject, version), None)
        if old is not None:
            self._forget_id(old)

    def delete_subject(self, subject: str, up_to_version: int) -> None:
        for (name, version), schema in list(self._versions.items()):
            if name == subject and version <= up_to_version and not schema.deleted:
                self._versions[(name, version)] = replace(schema, deleted=True)

    def clear_subject(self, subject: str) -> None:
        for (name, version), schema in list(self._versions.items()):
            if name == subject and schema.deleted:
                self.tombstone(name, version)

    def _id_holder(self, context: str, schema_id: int) -> RegisteredSchema | None:
        holders = self._ids.get((context, schema_id))
        if not holders:
            return None
        subject, version = next(iter(holders.items()))
        return self._versions.get((subject, version))

    def _forget_id(self, schema: RegisteredSchema) -> None:
        holders = self._ids.get((schema.context, schema.id))
        if holders is not None and holders.get(schema.subject) == schema.version:
            del holders[schema.subject]
            if not holders:
                del self._ids[(schema.context, schema.id)]


# ------------------------------------------------------------------------------------------ the _schemas topic
def replay(
    records: Iterable[tuple[int, bytes | None, bytes | None]], where: str = SCHEMAS_TOPIC
) -> SchemaStore:
    """The store after the records ``(offset, key, value)`` of the ``_schemas`` topic, in offset order."""
    store = SchemaStore()
    for offset, key, value in records:
        try:
            _apply(store, offset, key, value, where)
        except (ValueError, TypeError, KeyError) as err:  # what the registry's Jackson would refuse
            store.skipped.append(f"{where} offset {offset}: {err}")
    return store


def _apply(store: SchemaStore, offset: int, key: bytes | None, value: bytes | None, where: str) -> None:
    if key is None:
        raise ValueError("a record without a key")
    k = _json_object(key, "key")
    keytype = k.get("keytype")
    v = None if value is None else _json_object(value, "value")
    if keytype == "SCHEMA":
        subject, version = _text(k, "subject"), _int(k, "version")
        if v is None:
            store.tombstone(subject, version)
            return
        schema = _schema_value(v, f"{where} offset {offset}")
        if (schema.subject, schema.version) != (subject, version):
            schema = replace(schema, subject=subject, version=version)
        store.register(schema)
    elif keytype == "DELETE_SUBJECT" and v is not None:
        store.delete_subject(_text(v, "subject"), _int(v, "version"))
    elif keytype == "CLEAR_SUBJECT" and v is not None:
        store.clear_subject(_text(v, "subject"))
    elif keytype not in ("NOOP", "CONFIG", "MODE", "CONTEXT", "ASSOC", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
        raise ValueError(f"unknown keytype {keytype!r}")


def _schema_value(v: Mapping, source: str) -> RegisteredSchema:
    schema_type = v.get("schemaType") or AVRO
    if schema_type not in SCHEMA_TYPES:
        raise ValueError(f"unknown schemaType {schema_type!r}")
    references = tuple(
        SchemaReference(_text(r, "name"), _text(r, "subject"), _int(r, "version"))
        for r in (v.get("references") or ())
    )
    deleted = v.get("deleted", False)
    if not isinstance(deleted, bool):
        raise ValueError(f"deleted is {deleted!r}, not a boolean")
    return RegisteredSchema(
        _text(v, "subject"), _int(v, "version"), _int(v, "id"), schema_type, _text(v, "schema"),
        references, deleted, source,
    )  # fmt: skip


def _json_object(raw: bytes, what: str) -> dict:
    try:
        found = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"the {what} is not JSON ({err})") from err
    if not isinstance(found, dict):
        raise ValueError(f"the {what} is not a JSON object")
    return found


def _text(obj: Mapping, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{name} is {value!r}, not a string")
    return value


def _int(obj: Mapping, name: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} is {value!r}, not an integer")
    return value


# ------------------------------------------------------------------------------------------ a schema file
def read_schema_file(path: str) -> SchemaStore:
    """Schemas from a JSON file: an array of the registry's REST answers for a version
    (``GET /subjects/{subject}/versions/{version}`` or ``GET /schemas?deleted=true``: ``subject``,
    ``version``, ``id``, ``schemaType``, ``schema``, ``references``, ``deleted``), e.g. a registry's
    schemas saved with curl. Every entry must be valid: a file is the user's own, not the registry's log."""
    try:
        entries = json.loads(storage.read_regular(path).decode("utf-8"))
    except (OSError, KafkaLogError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SchemaError(f"{path}: cannot read the schema file: {err}") from err
    if not isinstance(entries, list):
        raise SchemaError(f"{path}: expected a JSON array of schemas, found {type(entries).__name__}")
    return store_of((f"{path} entry {i}", entry) for i, entry in enumerate(entries))


def store_of(entries: Iterable[tuple[str, object]]) -> SchemaStore:
    """The store of the registry's REST answers for versions ``(where, answer)``, each of which must be
    valid (a file or a live registry answers for itself; only the ``_schemas`` log skips what it must)."""
    store = SchemaStore()
    for where, entry in entries:
        try:
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            schema = _schema_value(entry, where)
        except ValueError as err:
            raise SchemaError(f"{where}: {err}") from err
        if not store.register(schema):
            raise SchemaError(f"{where}: id {schema.id} already names another schema")
    return store
