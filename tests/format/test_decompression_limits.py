"""Memory bounded by design: a record area never decompresses past its limit (what the batch's records
may hold, and ``--max-decompressed-batch-bytes``), and a batch's record count is checked against the
bytes that hold its records before anything is sized by it.

Compressed areas are made by the codec libraries themselves (gzip, cramjam, lz4.frame, zstandard), records
by kafka-python, batches framed here with ``struct`` and the crc32c package: nothing under test made them.
"""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import crc32c
import lz4.frame
import numpy as np
import pytest
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder

from jobs.cli import dump
from kafka_log_core.errors import CompressionError, CorruptRecordError
from kafka_log_core.format import compression, log_file
from kafka_log_core.format.compression import GZIP, LZ4, SNAPPY, ZSTD
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.kernels import record_walk
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition
from tests.clirun import invoke
from tests.logbuild import batch, make_log

LIMIT = 1 << 20
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
IDS = ["gzip", "snappy", "lz4", "zstd"]
_HEADER = struct.Struct(">qiibIhiqqqhii")  # a v2 batch header, as Kafka's DefaultRecordBatch lays it out
TS = 1_700_000_000_000


def with_library(codec: int, data: bytes) -> bytes:
    """``data`` compressed the way each library frames it on its own (bare snappy, a standard lz4 frame
    of independent 64 KiB blocks without a content size, as Kafka's: forms Kafka's readers accept)."""
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False
        )
    return zstandard.ZstdCompressor().compress(data)


def record_area(values: list[bytes]) -> bytes:
    """The uncompressed record area of a batch of ``values`` (key b"k"), as kafka-python encodes it."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=TS, key=b"k", value=value, headers=[])
    return bytes(builder.build())[_HEADER.size :]


def raw_batch(base_offset: int, count: int, area: bytes, codec: int = 0) -> bytes:
    """A v2 batch of ``count`` claimed records over ``area`` (already compressed with ``codec``)."""
    length = _HEADER.size - 12 + len(area)
    header = _HEADER.pack(base_offset, length, 0, 2, 0, codec, max(count - 1, 0), TS, TS, -1, -1, -1, count)
    data = bytearray(header + area)
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    return bytes(data)


# ---------------------------------------------------------------------------------------------- codecs
@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_record_area_decompresses_up_to_its_limit_and_no_further(codec):
    exact = bytes(range(256)) * (LIMIT // 256)
    assert compression.decompress(codec, with_library(codec, exact), limit=LIMIT) == exact
    with pytest.raises(CompressionError, match=rf"more than {LIMIT} bytes.*--max-decompressed-batch-bytes"):
        compression.decompress(codec, with_library(codec, exact + b"!"), limit=LIMIT)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD], ids=["gzip", "lz4", "zstd"])
def test_a_compression_bomb_costs_its_limit_not_its_size(codec):
    bomb = with_library(codec, bytes(64 * LIMIT))  # 64 MiB of zeros in a few KiB
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match=rf"more than {LIMIT} bytes"):
            compression.decompress(codec, bomb, limit=LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * LIMIT, f"{peak} bytes at the peak for a {LIMIT}-byte limit"


def test_a_snappy_block_declaring_more_than_the_limit_is_refused_before_it_is_decoded():
    # The preamble declares 4 GiB - 1; the body is not snappy at all: the length alone refuses it.
    bomb = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x00" * 16
    with pytest.raises(CompressionError, match=rf"more than {LIMIT} bytes"):
        compression.decompress(SNAPPY, bomb, limit=LIMIT)


# ---------------------------------------------------------------------------------------------- batches
def test_a_count_the_bytes_cannot_hold_is_refused_at_the_batch_before_anything_is_sized():
    area = record_area([b"v"])
    data = b"\x00" * 100 + raw_batch(0, 2**31 - 1, area)  # the batch at position 100 of its file
    (batch,) = log_file.iter_batches(data, "orders-0/00000000000000000000.log", start=100)
    with pytest.raises(CorruptRecordError, match=r"\.log at position 100: .*claims 2147483647 records"):
        batch.records()
    buf = np.frombuffer(data, dtype=np.uint8)
    err, err_pos, table = record_walk.walk_records(buf, 161, len(data), 2**31 - 1, 0)
    assert (err, err_pos, table.shape[0]) == (record_walk.ERR_RECORD_COUNT, 161, 0)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_compressed_count_lie_is_refused_against_what_the_area_holds(codec):
    area = record_area([b"v"])  # one record of 10 bytes claimed to be 1000 records (7000 bytes at least)
    (batch,) = log_file.iter_batches(raw_batch(0, 1000, with_library(codec, area), codec))
    with pytest.raises(
        CorruptRecordError, match=rf"position 0: .*claims 1000 records.*holds {len(area)} bytes"
    ):
        batch.records()


def test_a_count_no_limit_can_hold_is_refused_before_decompressing():
    area = with_library(ZSTD, record_area([b"v"]))
    (batch,) = log_file.iter_batches(raw_batch(0, LIMIT, area, ZSTD))  # 7 MiB at least, over a 1 MiB limit
    with pytest.raises(CorruptRecordError, match=rf"claims {LIMIT} records.*at most {LIMIT} bytes"):
        batch.records(max_batch_bytes=LIMIT)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_batch_of_one_large_record_reads_within_a_limit_that_holds_it(codec):
    area = record_area([bytes(LIMIT - 100)])
    (batch,) = log_file.iter_batches(raw_batch(0, 1, with_library(codec, area), codec))
    (record,) = batch.records(max_batch_bytes=len(area))
    assert record.value == bytes(LIMIT - 100)
    with pytest.raises(
        CorruptRecordError, match=rf"position 0: batch at offset 0: .*more than {len(area) - 1}"
    ):
        batch.records(max_batch_bytes=len(area) - 1)


# ---------------------------------------------------------------------------------------------- 0 records
# Kafka's readers never look at the record area of a batch that declares 0 records, and its cleaner drops
# such a batch; offline its bytes may be the only copy of something, so they are refused like any bytes
# left over after a batch's records.
@pytest.mark.parametrize("codec", [0, *CODECS], ids=["none", *IDS])
def test_a_batch_declaring_no_records_over_bytes_is_refused_at_its_position(codec):
    area = record_area([b"v"])
    body = with_library(codec, area) if codec else area
    data = b"\x00" * 100 + raw_batch(0, 0, body, codec)
    (batch,) = log_file.iter_batches(data, "orders-0/00000000000000000000.log", start=100)
    with pytest.raises(
        CorruptRecordError,
        match=rf"\.log at position 100: batch at offset 0 declares 0 records but holds {len(body)} bytes",
    ):
        batch.records()


@pytest.mark.parametrize("codec", [0, *CODECS], ids=["none", *IDS])
def test_a_batch_declaring_no_records_over_nothing_or_an_empty_stream_reads_as_empty(codec):
    bodies = [b""] + ([with_library(codec, b"")] if codec else [])
    for body in bodies:
        (batch,) = log_file.iter_batches(raw_batch(0, 0, body, codec))
        assert batch.records() == []


# ---------------------------------------------------------------------------------------------- the option
def _large_batch_log(log_dir, codec: int) -> tuple[object, int]:
    """A partition whose first batch (key "k", a 100 KB value) is superseded by the next one."""
    area = record_area([bytes(100_000)])
    make_log(log_dir, "big", 0, {0: [raw_batch(0, 1, with_library(codec, area), codec), batch(1, [("k", "new")])],
                                 2: [batch(2, [("x", "1")])]}, clean_shutdown=True)  # fmt: skip
    return log_dir / "big-0", len(area)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_compact_takes_a_batch_within_its_max_decompressed_batch_bytes_and_fails_one_past_it(tmp_path, codec):
    directory, area_bytes = _large_batch_log(tmp_path, codec)
    configs = load_config(None, [], [], ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"])
    task = PartitionTask(
        str(tmp_path), "big", 0, LogDirState.read(tmp_path).for_partition(TopicPartition("big", 0))
    )
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    row = compact_partition(task, configs, JobOptions(now_ms=TS + 60_000, max_batch_bytes=area_bytes - 1))
    assert row["status"] == "failed", row
    assert (
        f"more than {area_bytes - 1} bytes" in row["reason"]
        and "--max-decompressed-batch-bytes" in row["reason"]
    )
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    row = compact_partition(task, configs, JobOptions(now_ms=TS + 60_000, max_batch_bytes=area_bytes))
    assert row["status"] == "cleaned", row


def test_dump_reads_a_batch_within_its_max_decompressed_batch_bytes_and_refuses_one_past_it(tmp_path):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    ok = invoke(dump, "--files", log, "--deep-iteration", "--max-decompressed-batch-bytes", area_bytes)
    assert ok.exit_code == 0 and "offset: 1 " in ok.output, ok.output
    refused = invoke(
        dump, "--files", log, "--deep-iteration", "--max-decompressed-batch-bytes", area_bytes - 1
    )
    assert refused.exit_code == 1
    assert f"{log} at position 0: batch at offset 0: zstd data decompresses to more than" in refused.stderr


# ---------------------------------------------------------------------------------------------- 0 records, jobs
def _no_records_over_bytes_log(log_dir, codec: int) -> tuple[object, int, int]:
    """A partition whose first segment holds, at some position, a batch of offset 1 that declares 0 records
    but holds a record (CRC valid); a second segment and an active one. Returns (dir, position, bytes)."""
    area = record_area([b"v"])
    body = with_library(codec, area) if codec else area
    first = batch(0, [("k", "old")])
    directory = make_log(log_dir, "zero", 0, {0: [first, raw_batch(1, 0, body, codec), batch(2, [("k", "new")])],
                                              3: [batch(3, [("k", "newer")])], 4: [batch(4, [("x", "1")])]},
                         clean_shutdown=True)  # fmt: skip
    return directory, len(first), len(body)


@pytest.mark.parametrize("first_dirty", [None, 3], ids=["in-the-map-pass", "in-the-clean-pass-only"])
@pytest.mark.parametrize("codec", [0, GZIP, LZ4, ZSTD], ids=["none", "gzip", "lz4", "zstd"])
def test_compact_refuses_a_batch_declaring_no_records_over_bytes_and_changes_nothing(
    tmp_path, codec, first_dirty
):
    from kafka_log_core.format import checkpoints

    directory, position, held = _no_records_over_bytes_log(tmp_path, codec)
    if first_dirty is not None:
        checkpoints.write_offset_checkpoint(
            tmp_path / "cleaner-offset-checkpoint", {TopicPartition("zero", 0): first_dirty}
        )
    configs = load_config(None, [], [], ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"])
    task = PartitionTask(
        str(tmp_path), "zero", 0, LogDirState.read(tmp_path).for_partition(TopicPartition("zero", 0))
    )
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    row = compact_partition(task, configs, JobOptions(now_ms=TS + 60_000))
    assert row["status"] == "failed", row
    assert (
        f"00000000000000000000.log at position {position}: batch at offset 1 declares 0 records but holds "
        f"{held} bytes" in row["reason"]
    ), row["reason"]
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before


def test_dump_deep_iteration_refuses_a_batch_declaring_no_records_over_bytes(tmp_path):
    directory, position, held = _no_records_over_bytes_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    shallow = invoke(dump, "--files", log)
    assert shallow.exit_code == 0 and "count: 0" in shallow.output, shallow.output
    refused = invoke(dump, "--files", log, "--deep-iteration")
    assert refused.exit_code == 1
    assert f"{log} at position {position}: batch at offset 1 declares 0 records but holds {held} bytes" in (
        refused.stderr
    )
