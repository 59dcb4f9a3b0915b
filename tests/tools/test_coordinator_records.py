"""The coordinator decoders on records built here field by field from Kafka's message schemas (the
broker-written files are compared with Kafka's own DumpLogSegments in tests/broker/test_broker_dump.py):
the cases a broker rarely writes -- tombstones, unknown types and versions, a missing key, member
bytes that do not decode, every transaction state."""

from __future__ import annotations

import struct

import pytest

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.tools.coordinator_records import OFFSETS, TRANSACTION_LOG, TRANSACTION_STATES, decode


def _string(text: str) -> bytes:  # a non-flexible string: int16 length, UTF-8
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


def test_a_tombstone_prints_delete_and_an_offset_commit_key_its_fields():
    key = struct.pack(">h", 1) + _string("g") + _string("t") + struct.pack(">i", 3)
    assert decode(OFFSETS, 5, key, None) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":3}}',
        "<DELETE>",
    )


def test_an_offset_commit_value_of_version_1_has_its_expire_timestamp():
    value = struct.pack(">hq", 1, 42) + _string("m") + struct.pack(">qq", 1000, 2000)
    key = struct.pack(">h", 0) + _string("g") + _string("t") + struct.pack(">i", 0)
    _, payload = decode(OFFSETS, 0, key, value)
    assert (
        payload
        == '{"version":"1","data":{"offset":42,"metadata":"m","commitTimestamp":1000,"expireTimestamp":2000}}'
    )


def test_member_bytes_that_do_not_decode_stay_base64():
    member = _string("m1") + _string("c") + _string("/h") + struct.pack(">ii", 10, 20)
    member += struct.pack(">i", 3) + b"\x00\x09\x00" + struct.pack(">i", 0)  # subscription of version 9
    value = (
        struct.pack(">h", 1) + _string("consumer") + struct.pack(">i", 1) + _string("range") + _string("m1")
    )
    value += struct.pack(">i", 1) + member
    _, payload = decode(OFFSETS, 0, _group_key("g"), value)
    assert '"subscription":"AAkA","assignment":""' in payload
    assert '"rebalanceTimeout":10' in payload and "currentStateTimestamp" not in payload


def test_unknown_types_versions_and_a_missing_key():
    for unused in (9, 18):  # between the newer groups' types, given to none in Kafka 4.4
        assert decode(OFFSETS, 6, struct.pack(">h", unused) + _string("g"), None) == (
            f"Unknown record type {unused} at offset 6, skipping.",
            None,
        )
    assert decode(OFFSETS, 7, struct.pack(">h", 99), b"") == (
        "Unknown record type 99 at offset 7, skipping.",
        None,
    )
    assert decode(TRANSACTION_LOG, 7, struct.pack(">h", 1) + _string("x"), None)[0] == (
        "Unknown record type 1 at offset 7, skipping."
    )
    key, payload = decode(OFFSETS, 8, _group_key("g"), struct.pack(">h", 9))
    assert key.startswith("Error at offset 8, skipping.") and payload is None
    with pytest.raises(CorruptDataError, match="offset 9 using the specified decoder"):
        decode(OFFSETS, 9, None, b"")


@pytest.mark.parametrize("state", range(len(TRANSACTION_STATES)))
def test_every_transaction_state_is_shown_by_name(state):
    # version 0 (not flexible): no tagged fields
    value = struct.pack(">hqhib", 0, 5, 0, 60000, state) + struct.pack(">i", -1) + struct.pack(">qq", 1, 2)
    _, payload = decode(TRANSACTION_LOG, 0, struct.pack(">h", 0) + _string("tx"), value)
    assert payload == (
        '{"version":"0","data":{"producerId":5,"producerEpoch":0,"transactionTimeoutMs":60000,'
        f'"transactionStatus":"{TRANSACTION_STATES[state]}","transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":1,"transactionStartTimestampMs":2}}'
    )
