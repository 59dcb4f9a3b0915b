"""Kafka 4.4's max.decompressed.message.bytes in the cleaner (rules.record_size_limit).

Kafka 4.4.0's ``Cleaner`` passes ``log.config().maxDecompressedMessageBytes()`` to the streaming
iterators of both passes; ``DefaultRecord.readFrom`` refuses a record body above it and
``AbstractLegacyRecordBatch.DataLogInputStream`` an inner message size above it, for compressed batches
only. Expected sizes below come from the v2 record layout (format spec) and the legacy message layout,
not from our reader.
"""

from __future__ import annotations

import hashlib

import pytest

from kafka_log_core.errors import CorruptRecordError, RecordTooLargeError
from kafka_log_core.format import compression
from kafka_log_core.rules import record_size_limit
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import KafkaVersion
from tests.logbuild import batch
from tests.rules.cleaner_harness import (
    COMPACT,
    clean,
    data_records,
    layout,
    legacy,
    legacy_wrapper,
    open_log,
    part,
    single,
)

V43, V44 = BrokerConfig(kafka_version=KafkaVersion(4, 3)), BrokerConfig(kafka_version=KafkaVersion(4, 4))
VALUE = "v" * 1000
# v2 record body of key "k" and a 1000-byte value, first in its batch: attributes 1, timestamp delta 1,
# offset delta 1, key length varint 1, key 1, value length varint 2 (zigzag 2000), value 1000, headers 1
V2_BODY = 1 + 1 + 1 + 1 + 1 + 2 + 1000 + 1
# magic 1 message: crc 4, magic 1, attributes 1, timestamp 8, key length 4, key 1, value length 4, value
V1_MESSAGE = 4 + 1 + 1 + 8 + 4 + 1 + 4 + 1000


def limited(limit: int) -> LogConfig:
    return LogConfig(cleanup_policy=COMPACT.cleanup_policy, max_decompressed_message_bytes=limit)


def hashes(tmp_path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(part(tmp_path).iterdir())}


def _log(tmp_path, legacy_entries: bool = False, codec: int = compression.GZIP) -> None:
    if legacy_entries:
        old = legacy_wrapper([(0, "k", "1", 1), (1, "k", VALUE, 2)], codec=codec)
        layout(tmp_path, {0: [old], 2: [legacy(2, "k", "3")]})
    else:
        layout(
            tmp_path,
            {0: [batch(0, [("k", "1")]), batch(1, [("k", VALUE)], codec=codec)], 2: [single(2, "k")]},
        )


@pytest.mark.parametrize("legacy_entries", [False, True], ids=["v2", "magic-1"])
def test_from_4_4_a_compressed_record_above_the_limit_fails_the_round_and_changes_nothing(
    tmp_path, legacy_entries
):
    _log(tmp_path, legacy_entries)
    size = V1_MESSAGE if legacy_entries else V2_BODY
    before = hashes(tmp_path)
    with pytest.raises(
        RecordTooLargeError, match=rf"at position \d+: the record at offset 1 is {size} bytes"
    ):
        clean(tmp_path, cfg=limited(size - 1), broker=V44)
    assert hashes(tmp_path) == before


@pytest.mark.parametrize("legacy_entries", [False, True], ids=["v2", "magic-1"])
@pytest.mark.parametrize(
    ("broker", "margin"), [(V44, 0), (V43, -1)], ids=["4.4-at-the-limit", "4.3-no-limit"]
)
def test_a_record_at_the_limit_or_a_release_before_4_4_cleans(tmp_path, legacy_entries, broker, margin):
    _log(tmp_path, legacy_entries)
    size = V1_MESSAGE if legacy_entries else V2_BODY
    clean(tmp_path, cfg=limited(size + margin), broker=broker)
    # offset 0 goes (superseded by 1); 1 stays: the active segment (2) is beyond the round
    assert [offset for offset, _, _ in data_records(tmp_path)] == [1, 2]


def test_records_of_uncompressed_batches_are_not_checked(tmp_path):
    _log(tmp_path, codec=compression.NONE)
    clean(tmp_path, cfg=limited(V2_BODY - 1), broker=V44)
    assert [offset for offset, _, _ in data_records(tmp_path)] == [1, 2]


def test_the_check_decompresses_a_batch_up_to_max_decompressed_batch_bytes_as_the_passes_do(tmp_path):
    # One record of 65 MiB: a batch past the default limit (a topic read with the option raised). The
    # setting is lowered (so the check runs) to a size that holds the record.
    big = compression.MAX_BATCH_BYTES + (1 << 20)
    layout(tmp_path, {0: [batch(0, [("k", bytes(big))], codec=compression.ZSTD)], 1: [single(1, "k")]})
    segments = open_log(tmp_path).segments
    cfg = limited(2 * big)
    default = compression.MAX_BATCH_BYTES
    with pytest.raises(
        CorruptRecordError,
        match=rf"00000000000000000000\.log at position 0: .*more than {default} bytes.*--max-decompressed-batch-bytes",
    ):
        record_size_limit.check_round(segments, cfg, V44)  # the default limit: refused as a bomb would be
    record_size_limit.check_round(segments, cfg, V44, max_batch_bytes=2 * big)
    with pytest.raises(RecordTooLargeError, match=r"the record at offset 0 is \d+ bytes"):
        record_size_limit.check_round(segments, limited(big - 1), V44, max_batch_bytes=2 * big)
