"""Offset checkpoints, leader-epoch-checkpoint, partition.metadata and meta.properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_core.errors import CorruptCheckpointError
from kafka_log_core.format.checkpoints import (
    EpochEntry,
    MetaProperties,
    PartitionMetadata,
    assign,
    iter_offset_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    truncate_from_end,
    truncate_from_start,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
    write_partition_metadata,
)
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.properties import parse_java_properties

# Spec example E10, copied by hand from kafka-log-format.md §14.
E10 = b"0\n2\norders 0 1532\norders 3 88\n"
TOPIC_ID = "vNbXQpJPQK2a1hPL7ZnJyw"  # 16 random bytes, base64url without padding


def test_e10_reads_as_two_partitions():
    assert parse_offset_checkpoint(E10) == {
        TopicPartition("orders", 0): 1532,
        TopicPartition("orders", 3): 88,
    }


def test_write_produces_e10_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_bytes(b"0\n1\nstale 0 1\n")
    write_offset_checkpoint(path, {TopicPartition("orders", 0): 1532, TopicPartition("orders", 3): 88})
    assert path.read_bytes() == E10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cleaner-offset-checkpoint"]
    assert read_offset_checkpoint(path) == parse_offset_checkpoint(E10)


ACCEPTED_CASES = [
    (b"", {}),
    (b"0\n", {}),
    (b"0", {}),
    (b"0\n0\n", {}),
    (b"0\r\n1\r\nt 1 5\r\n", {TopicPartition("t", 1): 5}),
    (b"0\n1\nt\t 1   5 \t\n", {TopicPartition("t", 1): 5}),
    (b"0\n1\nt 1 5", {TopicPartition("t", 1): 5}),
    (b"+0\n+1\nt +1 -5\n", {TopicPartition("t", 1): -5}),
    (b"0\n2\nt 1 5\nt 1 7\n", {TopicPartition("t", 1): 7}),
    (b"0\n1\nweird:topic 0 9223372036854775807\n", {TopicPartition("weird:topic", 0): 2**63 - 1}),
]
ACCEPTED_IDS = [
    "empty",
    "version-only",
    "version-no-newline",
    "zero-entries",
    "crlf",
    "runs-of-blanks",
    "no-final-newline",
    "signs",
    "duplicate-keeps-last",
    "max-long",
]


@pytest.mark.parametrize(("data", "expected"), ACCEPTED_CASES, ids=ACCEPTED_IDS)
def test_offset_checkpoint_grammar_accepts(data, expected):
    assert parse_offset_checkpoint(data) == expected


REFUSED_CASES = [
    (b"1\n0\n", "line 1: expected version 0, found version 1"),
    (b" 0\n0\n", "line 1: expected the version number, found ' 0'"),
    (b"zero\n", "line 1: expected the version number"),
    (b"0\nx\n", "line 2: expected the entry count, found 'x'"),
    (b"0\n-1\n", "line 2: expected the entry count, found '-1'"),
    (b"0\n2\nt 0 1\n", "expected 2 .* lines after the count line, found 1"),
    (b"0\n1\nt 0 1\nt 1 1\n", "expected 1 .* lines after the count line, found 2"),
    (b"0\n1\nt 0\n", "line 3: expected '<topic> <partition:int32> <offset:int64>', found 't 0'"),
    (b"0\n1\nt 0 1 2\n", "line 3: expected .*found 't 0 1 2'"),
    (b"0\n1\n t 0 1\n", "line 3: expected .*found ' t 0 1'"),
    (b"0\n1\n\n", "line 3: expected"),
    (b"0\n1\nt x 1\n", "line 3: expected"),
    (b"0\n1\nt 2147483648 1\n", "line 3: expected"),
    (b"0\n1\nt 0 1_000\n", "line 3: expected"),
    (b"0\n1\nt 0 9223372036854775808\n", "line 3: expected"),
    (b"0\n1\nt\xff 0 1\n", "line 3: expected UTF-8 text, found byte 0xff"),
]
REFUSED_IDS = [
    "version-1",
    "version-blank",
    "version-text",
    "count-text",
    "count-negative",
    "too-few",
    "too-many",
    "two-fields",
    "four-fields",
    "leading-blank",
    "empty-line",
    "partition-text",
    "partition-overflow",
    "underscore",
    "offset-overflow",
    "not-utf8",
]


@pytest.mark.parametrize(("data", "match"), REFUSED_CASES, ids=REFUSED_IDS)
def test_offset_checkpoint_grammar_rejects(tmp_path, data, match):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path} at position ") + r"\d+: " + match):
        read_offset_checkpoint(path)


def _last_of_each(entries) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, partition): offset for topic, partition, offset in entries}


@pytest.mark.parametrize("data", [data for data, _ in ACCEPTED_CASES], ids=ACCEPTED_IDS)
def test_iterating_a_checkpoint_gives_the_entries_the_parser_reads(data):
    assert _last_of_each(iter_offset_checkpoint(data)) == parse_offset_checkpoint(data)


@pytest.mark.parametrize(("data", "match"), REFUSED_CASES, ids=REFUSED_IDS)
def test_iterating_a_checkpoint_refuses_it_as_the_parser_does(tmp_path, data, match):
    path = tmp_path / "recovery-point-offset-checkpoint"
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path} at position ") + r"\d+: " + match):
        list(iter_offset_checkpoint(data, path))


def test_a_broker_written_checkpoint_is_iterated_in_file_order_with_both_entries_of_a_partition():
    data = b"0\n4\norders 3 88\n__consumer_offsets 0 -1\norders 0 1532\norders 3 90\n"
    assert list(iter_offset_checkpoint(data)) == [
        ("orders", 3, 88), ("__consumer_offsets", 0, -1), ("orders", 0, 1532), ("orders", 3, 90),
    ]  # fmt: skip


@given(st.lists(st.sampled_from([b"0", b"1", b"2", b"t", b"a.b-c_d", b" ", b"\t", b"\n", b"\r", b"-", b"+",
                                 b"9223372036854775807", b"2147483648", b"00", b"\xff"]), max_size=30))  # fmt: skip
def test_any_bytes_iterate_as_they_parse(pieces):
    data = b"0\n" + b"".join(pieces)
    try:
        expected = parse_offset_checkpoint(data)
    except CorruptCheckpointError as err:
        with pytest.raises(CorruptCheckpointError, match=re.escape(str(err))):
            list(iter_offset_checkpoint(data))
        return
    assert _last_of_each(iter_offset_checkpoint(data)) == expected


def test_error_position_is_the_start_of_the_bad_line(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(b"0\n2\nt 0 1\nt 0\n")
    with pytest.raises(CorruptCheckpointError) as info:
        read_offset_checkpoint(path)
    assert info.value.position == 10 and info.value.path == str(path)


def test_missing_checkpoint_has_no_entries(tmp_path):
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {}


def test_unwritable_topic_is_refused_before_the_old_file_is_touched(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(E10)
    with pytest.raises(CorruptCheckpointError, match="cannot be written"):
        write_offset_checkpoint(path, {TopicPartition("has space", 0): 1})
    assert path.read_bytes() == E10
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


@given(
    st.dictionaries(
        st.builds(
            TopicPartition, st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 2**31 - 1)
        ),
        st.integers(-(2**63), 2**63 - 1),
        max_size=20,
    )
)
def test_offset_checkpoint_round_trip(offsets):
    from kafka_log_core.format.checkpoints import format_offset_checkpoint

    assert parse_offset_checkpoint(format_offset_checkpoint(offsets)) == offsets


# ---------------------------------------------------------------- leader epochs


def test_leader_epoch_checkpoint_round_trip(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    entries = [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(7, 5000)]
    write_leader_epoch_checkpoint(path, entries)
    assert path.read_bytes() == b"0\n3\n0 0\n3 120\n7 5000\n"
    assert read_leader_epoch_checkpoint(path) == entries


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([(1, 0), (2, 5), (4, 9)], [(1, 0), (2, 5), (4, 9)]),
        ([(3, 10), (3, 20)], [(3, 10)]),  # same epoch, later start: ignored
        ([(3, 20), (3, 10)], [(3, 10)]),  # same epoch, earlier start: replaces
        ([(1, 0), (2, 5), (3, 5)], [(1, 0), (3, 5)]),  # equal start offset drops the earlier epoch
        ([(1, 0), (4, 10), (2, 20)], [(1, 0), (2, 20)]),  # lower epoch drops every later-epoch entry
        ([(1, 0), (4, 10), (5, 30), (6, 8)], [(1, 0), (6, 8)]),  # lower start offset drops them too
    ],
)
def test_leader_epoch_lines_are_reassigned_in_order(lines, expected):
    data = f"0\n{len(lines)}\n" + "".join(f"{epoch} {start}\n" for epoch, start in lines)
    assert parse_leader_epoch_checkpoint(data.encode()) == [EpochEntry(*e) for e in expected]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"0\n1\n-1 5\n", "line 3: expected a non-negative epoch and start offset, found -1 5"),
        (b"0\n1\n1 -5\n", "line 3: expected a non-negative"),
        (b"0\n1\n1 5 6\n", "line 3: expected '<epoch:int32> <start_offset:int64>', found '1 5 6'"),
        (b"0\n1\n2147483648 5\n", "line 3: expected '<epoch:int32>"),
        (b"1\n0\n", "line 1: expected version 0"),
    ],
)
def test_leader_epoch_checkpoint_rejects(tmp_path, data, match):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path} at position ") + r"\d+: " + match):
        read_leader_epoch_checkpoint(path)


def test_assign_refuses_negative_entries():
    with pytest.raises(CorruptCheckpointError):
        assign([], EpochEntry(-1, 0))


EPOCHS = [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 20)]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (0, [(1, 0), (2, 10), (3, 20)]),
        (5, [(1, 5), (2, 10), (3, 20)]),
        (10, [(2, 10), (3, 20)]),
        (15, [(2, 15), (3, 20)]),
        (25, [(3, 25)]),
    ],
)
def test_truncate_from_start_moves_the_last_dropped_epoch_to_the_new_start(start, expected):
    assert truncate_from_start(EPOCHS, start) == [EpochEntry(*e) for e in expected]


def test_truncate_from_start_keeps_a_cache_that_starts_later():
    assert truncate_from_start([EpochEntry(4, 50)], 10) == [EpochEntry(4, 50)]


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (-1, [(1, 0), (2, 10), (3, 20)]),
        (0, []),
        (10, [(1, 0)]),
        (20, [(1, 0), (2, 10)]),
        (21, [(1, 0), (2, 10), (3, 20)]),
    ],
)
def test_truncate_from_end_drops_entries_starting_at_or_after_the_end(end, expected):
    assert truncate_from_end(EPOCHS, end) == [EpochEntry(*e) for e in expected]


@pytest.mark.parametrize(
    "entries",
    [[EpochEntry(2, 0), EpochEntry(1, 5)], [EpochEntry(1, 5), EpochEntry(2, 5)], [EpochEntry(-1, 0)]],
    ids=["epoch-decreases", "start-repeats", "negative"],
)
def test_write_leader_epochs_refuses_what_the_broker_would_reassign(tmp_path, entries):
    with pytest.raises(CorruptCheckpointError):
        write_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint", entries)


# ---------------------------------------------------------------- partition.metadata


def test_partition_metadata_round_trip_without_trailing_newline(tmp_path):
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, TOPIC_ID)
    assert path.read_bytes() == f"version: 0\ntopic_id: {TOPIC_ID}".encode()
    assert read_partition_metadata(path) == PartitionMetadata(0, TOPIC_ID)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (f"version: 0\ntopic_id: {TOPIC_ID}\n", PartitionMetadata(0, TOPIC_ID)),
        (f"version:\t0\ntopic_id:  {TOPIC_ID}==", PartitionMetadata(0, TOPIC_ID)),
        (f"version: 3\ntopic_id: {TOPIC_ID}\nextra line\n", PartitionMetadata(3, TOPIC_ID)),
    ],
    ids=["newline", "tab-and-padding", "newer-version"],
)
def test_partition_metadata_accepts(data, expected):
    assert parse_partition_metadata(data.encode()) == expected


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("", "line 1: expected 'version: <value>', found None"),
        ("version:0\n", "line 1: expected 'version: <value>'"),
        ("Version: 0\n", "line 1: expected 'version: <value>'"),
        ("version: 0\n", "line 2: expected 'topic_id: <value>', found None"),
        ("version: -1\ntopic_id: " + TOPIC_ID, "line 1: expected a version >= 0"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "line 2: the all-zero topic id"),
        ("version: 0\ntopic_id: not-a-uuid", "line 2: expected a topic id"),
        ("version: 0\ntopic_id: " + TOPIC_ID + " ", "line 2: expected a topic id"),
        ("version: 0\ntopic_id: " + TOPIC_ID + "A", "line 2: expected a topic id"),
    ],
    ids=[
        "empty",
        "no-blank",
        "key-case",
        "no-topic-line",
        "negative-version",
        "zero-id",
        "bad-id",
        "trailing-blank",
        "too-long",
    ],
)
def test_partition_metadata_rejects(tmp_path, data, match):
    path = tmp_path / "partition.metadata"
    path.write_text(data)
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path} at position ") + r"\d+: " + match):
        read_partition_metadata(path)


# ---------------------------------------------------------------- meta.properties


def test_meta_properties_v1_as_written_by_a_kraft_broker(tmp_path):
    path = tmp_path / "meta.properties"
    path.write_text(
        "#\n#Tue Nov 05 10:00:00 UTC 2024\nnode.id=1\ndirectory.id="
        + TOPIC_ID
        + "\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    )
    assert read_meta_properties(path) == MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qk", 1, TOPIC_ID)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("broker.id=7\n", MetaProperties(0, None, 7, None)),
        ("version=0\ncluster.id=abc\n", MetaProperties(0, "abc", None, None)),
        ("version = 1 \nnode.id:3\ncluster.id abc\n", MetaProperties(1, "abc", 3, None)),
    ],
)
def test_meta_properties_versions(text, expected):
    assert parse_meta_properties(text.encode("latin-1")) == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("version=2\nnode.id=1\n", "version: expected 0 or 1, found '2'"),
        ("version=1\ncluster.id=x\n", "node.id: expected an int32"),
        ("version=1\nnode.id=1\n", "cluster.id: required in version 1"),
        ("broker.id=1 \n", "broker.id: expected an int32, found '1 '"),
        ("broker.id=1\ndirectory.id=zz\n", "directory.id: expected a uuid"),
        ("key=\\u12G4\n", "malformed"),
    ],
)
def test_meta_properties_rejects(tmp_path, text, match):
    path = tmp_path / "meta.properties"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path}: ") + match):
        read_meta_properties(path)


def test_java_properties_syntax():
    text = (
        "# comment\n! also a comment\n   \n"
        "a=1\n  b : 2\nc 3\nd\n"
        "e=long \\\n    value\n"
        "f=tab\\tand\\u0041\n"
        "g\\ key=x\n"
        "h=ends with backslash\\\\\n"
        "i==j\n"
        "a=override\n"
    )
    assert parse_java_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "long value",
        "f": "tab\tandA",
        "g key": "x",
        "h": "ends with backslash\\",
        "i": "=j",
    }
