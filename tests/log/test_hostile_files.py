"""What a segment's files must be before anything reads them (issue #24 points 3, 4 and 5): regular files,
indexes no longer than Kafka can map or than their log could need, and batch offsets a broker could have
appended. Segments are written by kafka-python; damage is applied to its bytes."""

from __future__ import annotations

import os
import socket
import struct

import pytest

from kafka_log_core.errors import CorruptIndexError, CorruptRecordError, NotRegularFileError
from kafka_log_core.format.filenames import TopicPartition, scan_partition_dirs
from kafka_log_core.log.partition_log import PartitionCheckpoints, PartitionLog
from kafka_log_core.log.segment import Segment, check_batch_offsets
from tests.hostile import GiB, kafka_python_batch, raw_batch

TS = 1_700_000_000_000
SEG0 = "00000000000000000000"


def _segment(d, base, batches):
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{base:020d}.log").write_bytes(b"".join(batches))
    (d / f"{base:020d}.index").touch()
    (d / f"{base:020d}.timeindex").touch()
    return Segment.open(d, base)


def _records(first, count):
    return [(b"k%d" % ((first + i) % 3), b"v%d" % (first + i)) for i in range(count)]


def _open(d):
    return PartitionLog.open(d.parent, TopicPartition("t", 0), PartitionCheckpoints(clean_shutdown=True))


# ------------------------------------------------------------------------------------ regular files
@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "dangling symlink"])
def test_a_log_file_name_on_something_else_than_a_regular_file_is_refused_without_opening_it(tmp_path, kind):
    d = tmp_path / "t-0"
    _segment(d, 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    odd = d / "00000000000000000002.log"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "directory":
        odd.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(odd))
        server.close()
    else:
        os.symlink("nowhere.log", odd)
    with pytest.raises(NotRegularFileError, match=r"00000000000000000002\.log: not a regular file"):
        _open(d)


def test_a_fifo_swapped_in_for_an_index_is_refused_when_it_is_opened(tmp_path):
    d = tmp_path / "t-0"
    segment = _segment(d, 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    os.unlink(segment.index_path)
    os.mkfifo(segment.index_path)  # after the listing: the open itself must not block
    with pytest.raises(NotRegularFileError, match=r"\.index: not a regular file \(a FIFO\)"):
        segment.offset_index  # noqa: B018


# ------------------------------------------------------------------------------------------ indexes
def test_an_index_longer_than_kafka_can_map_is_refused_unread(tmp_path):
    segment = _segment(tmp_path / "t-0", 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    with open(segment.index_path, "wb") as f:
        f.truncate(2 * GiB)  # sparse: nothing to read, 2^31 bytes to map
    with pytest.raises(CorruptIndexError, match="2147483648 bytes, longer than the 2147483647 bytes"):
        segment.offset_index  # noqa: B018


@pytest.mark.parametrize("suffix,entry", [(".index", 8), (".timeindex", 12), (".txnindex", 34)])
def test_an_index_longer_than_its_log_could_need_is_refused_with_both_sizes(tmp_path, suffix, entry):
    segment = _segment(tmp_path / "t-0", 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    batches = segment.size // 26  # a batch is at least 26 bytes on disk: one entry each at most
    path = segment.log_path.with_suffix(suffix)
    path.write_bytes(bytes(entry * (batches + 1)))
    with pytest.raises(
        CorruptIndexError, match=rf"{(batches + 1) * entry} bytes .* log of {segment.size} bytes"
    ):
        getattr(
            segment,
            {".index": "offset_index", ".timeindex": "time_index", ".txnindex": "aborted_txns"}[suffix],
        )


def test_an_index_as_long_as_its_log_could_need_is_read(tmp_path):
    segment = _segment(tmp_path / "t-0", 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    entries = segment.size // 26
    segment.index_path.write_bytes(struct.pack(">ii", 1, 0) * entries)
    assert len(segment.offset_index) == entries


# ------------------------------------------------------------------------------------ batch offsets
def test_a_cleaned_batch_whose_last_record_is_gone_keeps_its_last_offset_delta_and_is_accepted(tmp_path):
    """After compaction a batch keeps its lastOffsetDelta while its last record may be gone (the cleaner
    keeps the original batch's last offset): two records, offsets 0 and 1, last offset delta 4."""
    kept = kafka_python_batch(0, [(b"a", b"1"), (b"b", b"2")], ts=TS)
    batch = raw_batch(0, 4, 2, kept[61:], ts=TS)
    segment = _segment(tmp_path / "t-0", 0, [batch, kafka_python_batch(5, _records(5, 2), ts=TS)])
    assert check_batch_offsets(segment) == 6


@pytest.mark.parametrize(
    "second_base,expected",
    [
        (2, "backwards or overlapping"),
        (3, "backwards or overlapping"),
        (-1, "below the segment's base offset 0"),
    ],
)
def test_a_batch_whose_offsets_go_back_is_refused_with_its_position(tmp_path, second_base, expected):
    first = kafka_python_batch(0, _records(0, 4), ts=TS)
    segment = _segment(tmp_path / "t-0", 0, [first, kafka_python_batch(second_base, _records(4, 2), ts=TS)])
    with pytest.raises(CorruptRecordError, match=rf"{SEG0}\.log at position {len(first)}: .*{expected}"):
        check_batch_offsets(segment)


def test_segments_whose_offsets_overlap_are_refused_at_the_first_batch_of_the_later_one(tmp_path):
    d = tmp_path / "t-0"
    _segment(d, 0, [kafka_python_batch(0, _records(0, 6), ts=TS)])
    _segment(d, 4, [kafka_python_batch(4, _records(4, 2), ts=TS)])
    log = _open(d)
    with pytest.raises(
        CorruptRecordError, match=r"00000000000000000004\.log at position 0: .*ends at offset 5"
    ):
        log.check_batch_offsets(10)


@pytest.mark.parametrize("delta,count", [(-1, 1), (1, 3)])
def test_a_last_offset_delta_that_cannot_number_the_records_is_refused(tmp_path, delta, count):
    real = kafka_python_batch(0, [(b"a", b"1")], ts=TS)
    segment = _segment(tmp_path / "t-0", 0, [raw_batch(0, delta, count, real[61:], ts=TS)])
    with pytest.raises(
        CorruptRecordError, match=rf"{SEG0}\.log at position 0: .*(negative lastOffsetDelta|more than)"
    ):
        check_batch_offsets(segment)


# ------------------------------------------------------------------- one partition, one directory
def _partition(log_dir, name):
    d = log_dir / name
    _segment(d, 0, [kafka_python_batch(0, _records(0, 2), ts=TS)])
    return d


def test_a_symlink_to_a_partition_directory_is_an_alias_skipped_with_the_name_it_is_worked_on_as(tmp_path):
    _partition(tmp_path, "orders-0")
    os.symlink("orders-0", tmp_path / "x-0")
    scanned = scan_partition_dirs(tmp_path)
    assert [tp for tp, _ in scanned.found] == [TopicPartition("orders", 0)]
    assert [s.tp for s in scanned.skipped] == [TopicPartition("x", 0)]
    assert "a symlink to orders-0, the same directory as orders-0: an alias" in scanned.skipped[0].reason


def test_the_real_directory_is_kept_whatever_the_alias_is_named(tmp_path):
    _partition(tmp_path, "zz-0")
    os.symlink("zz-0", tmp_path / "aa-0")  # sorts first by name, still the alias
    assert [tp.topic for tp, _ in scan_partition_dirs(tmp_path).found] == ["zz"]


@pytest.mark.parametrize(
    "name,problem",
    [("..-0", "'..' is not a legal topic name"), ("bad$name-0", "contains ['$']"),
     ("t" * 250 + "-0", "250 characters, the maximum is 249")],
)  # fmt: skip
def test_a_directory_of_a_topic_kafka_would_not_create_is_skipped_with_the_reason(tmp_path, name, problem):
    _partition(tmp_path, name)
    _partition(tmp_path, "good-0")
    scanned = scan_partition_dirs(tmp_path)
    assert [tp.topic for tp, _ in scanned.found] == ["good"]
    assert len(scanned.skipped) == 1 and problem in scanned.skipped[0].reason


def test_a_partition_under_two_names_has_one_lock(tmp_path):
    """Two names of one directory are one partition to the locks: the second name is busy."""
    from kafka_log_core.errors import PartitionBusyError
    from kafka_log_core.log import locks

    _partition(tmp_path, "orders-0")
    os.symlink("orders-0", tmp_path / "x-0")
    (tmp_path / ".lock").touch()
    with locks.partition_lock(tmp_path, TopicPartition("orders", 0)):
        with pytest.raises(PartitionBusyError):
            with locks.partition_lock(tmp_path, TopicPartition("x", 0)):
                pass
    with locks.partition_lock(tmp_path, TopicPartition("x", 0)):
        pass
