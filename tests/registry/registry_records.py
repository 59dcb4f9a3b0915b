"""The records of a Schema Registry's ``_schemas`` topic, written as the registry writes them.

The JSON follows Confluent's schema-registry (``io.confluent.kafka.schemaregistry.storage``): the key
classes ``SchemaKey`` (``{"keytype":"SCHEMA","subject":..,"version":..,"magic":1}``), ``NoopKey``
(``{"keytype":"NOOP","magic":0}``), ``ConfigKey``, ``DeleteSubjectKey``, ``ClearSubjectKey`` (magic 0,
``{"keytype":..,"subject":..,"magic":0}``), serialized by Jackson in their ``@JsonPropertyOrder``; the
value ``SchemaValue`` (``subject``, ``version``, ``id``, then ``schemaType`` and ``references`` only when
they are not Avro / empty, ``schema``, ``deleted``), ``DeleteSubjectValue`` (``subject``, ``version``),
``ClearSubjectValue`` (``subject``), ``ConfigValue`` (``compatibilityLevel``). Jackson writes compact
JSON (no spaces). A hard delete is a tombstone: the ``SchemaKey`` with a null value.
"""

from __future__ import annotations

import json


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(
    subject: str, version: int, schema_id: int, schema: str, schema_type: str = "AVRO",
    references: list[dict] | None = None, deleted: bool = False,
) -> bytes:  # fmt: skip
    value: dict = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    value["schema"] = schema
    value["deleted"] = deleted
    return _dump(value)


def schema_record(subject, version, schema_id, schema, schema_type="AVRO", references=None, deleted=False):
    return (
        schema_key(subject, version),
        schema_value(subject, version, schema_id, schema, schema_type, references, deleted),
    )


def noop_key() -> bytes:
    return _dump({"keytype": "NOOP", "magic": 0})


def config_record(subject: str | None, level: str = "BACKWARD") -> tuple[bytes, bytes]:
    key: dict = {"keytype": "CONFIG"}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return _dump(key), _dump({"compatibilityLevel": level})


def delete_subject_record(subject: str, version: int) -> tuple[bytes, bytes]:
    return (
        _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}),
        _dump({"subject": subject, "version": version}),
    )


def clear_subject_record(subject: str) -> tuple[bytes, bytes]:
    return (
        _dump({"keytype": "CLEAR_SUBJECT", "subject": subject, "magic": 0}),
        _dump({"subject": subject}),
    )
