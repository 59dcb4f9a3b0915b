"""The ``_schemas`` topic replayed as the registry applies it: registrations, soft and hard deletes,
subject deletes and clears, NOOP and config keys, duplicate ids, records it cannot parse."""

from __future__ import annotations

import json

import pytest

from kafka_log_core.errors import SchemaError
from kafka_log_core.registry.storage import PROTOBUF, SchemaReference, read_schema_file, replay
from tests.registry import registry_records as rr

STRING = '"string"'
LONG = '"long"'


def _records(*pairs):
    return [(offset, key, value) for offset, (key, value) in enumerate(pairs)]


def test_registrations_are_found_by_id_and_latest_by_subject():
    store = replay(
        _records(
            (rr.noop_key(), None),
            rr.schema_record("orders-value", 1, 1, STRING),
            rr.config_record(None),
            rr.schema_record("orders-value", 2, 5, LONG),
            rr.schema_record("orders-key", 1, 1, STRING),
        )
    )
    assert store.by_id(5).schema == LONG
    assert store.by_id(1).schema == STRING
    assert store.latest("orders-value").version == 2
    assert store.latest("orders-value").schema_type == "AVRO"  # schemaType absent = AVRO
    assert store.by_id(99) is None
    assert store.skipped == []


def test_soft_deleted_versions_stay_readable_by_id_but_are_not_latest():
    store = replay(
        _records(
            rr.schema_record("t-value", 1, 1, STRING),
            rr.schema_record("t-value", 2, 2, LONG),
            rr.schema_record("t-value", 2, 2, LONG, deleted=True),
        )
    )
    assert store.latest("t-value").version == 1
    assert store.by_id(2).deleted and store.by_id(2).schema == LONG


def test_a_tombstone_hard_deletes_the_version_and_its_id():
    key, _ = rr.schema_record("t-value", 2, 2, LONG)
    store = replay(
        _records(
            rr.schema_record("t-value", 1, 1, STRING), rr.schema_record("t-value", 2, 2, LONG), (key, None)
        )
    )
    assert store.by_id(2) is None
    assert store.version("t-value", 2) is None
    assert store.latest("t-value").version == 1


def test_an_id_shared_by_two_subjects_survives_the_hard_delete_of_one():
    key, _ = rr.schema_record("a-value", 1, 7, LONG)
    store = replay(
        _records(
            rr.schema_record("a-value", 1, 7, LONG), rr.schema_record("b-value", 1, 7, LONG), (key, None)
        )
    )
    assert store.by_id(7).subject == "b-value"


def test_delete_subject_soft_deletes_up_to_its_version_and_clear_subject_hard_deletes_them():
    records = [
        rr.schema_record("t-value", 1, 1, STRING),
        rr.schema_record("t-value", 2, 2, LONG),
        rr.schema_record("t-value", 3, 3, '"int"'),
        rr.delete_subject_record("t-value", 2),
    ]
    store = replay(_records(*records))
    assert [s.deleted for s in store.versions_of("t-value")] == [True, True, False]
    assert store.by_id(1) is not None
    store = replay(_records(*records, rr.clear_subject_record("t-value")))
    assert [s.version for s in store.versions_of("t-value")] == [3]
    assert store.by_id(1) is None and store.by_id(2) is None


def test_a_duplicate_id_with_another_schema_is_ignored_as_the_registry_ignores_it():
    store = replay(
        _records(rr.schema_record("a-value", 1, 4, STRING), rr.schema_record("b-value", 1, 4, LONG))
    )
    assert store.by_id(4).schema == STRING
    assert store.version("b-value", 1) is None


def test_references_and_schema_type_are_read():
    refs = [{"name": "common.proto", "subject": "common", "version": 1}]
    store = replay(_records(rr.schema_record("t-value", 1, 3, "syntax = 'proto3';", PROTOBUF, refs)))
    found = store.by_id(3)
    assert found.schema_type == PROTOBUF
    assert found.references == (SchemaReference("common.proto", "common", 1),)


def test_records_the_registry_cannot_parse_are_skipped_with_their_offset():
    store = replay(
        [
            (0, b"not json", b"{}"),
            (1, rr.schema_key("t-value", 1), b'{"subject":"t-value"}'),  # no id, no schema
            (2, None, b"{}"),
            (3, *rr.schema_record("t-value", 1, 1, STRING)),
        ]
    )
    assert store.latest("t-value").id == 1
    assert [line.split(":")[0] for line in store.skipped] == [
        "_schemas offset 0", "_schemas offset 1", "_schemas offset 2",
    ]  # fmt: skip


def test_other_contexts_do_not_answer_default_context_ids():
    store = replay(_records(rr.schema_record(":.staging:t-value", 1, 1, STRING)))
    assert store.by_id(1) is None
    assert store.latest(":.staging:t-value").id == 1


def test_a_schema_file_of_rest_answers(tmp_path):
    path = tmp_path / "schemas.json"
    path.write_text(
        json.dumps(
            [
                {"subject": "t-value", "version": 1, "id": 1, "schema": STRING},
                {"subject": "t-value", "version": 2, "id": 2, "schemaType": "JSON", "schema": "{}"},
            ]
        )
    )
    store = read_schema_file(str(path))
    assert store.latest("t-value").schema_type == "JSON"
    path.write_text(json.dumps([{"subject": "t-value", "version": 1, "id": "x", "schema": STRING}]))
    with pytest.raises(SchemaError, match=r"schemas.json entry 0: id is 'x', not an integer"):
        read_schema_file(str(path))
