"""Segment file names and partition directory names, as the broker writes and loads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_core.errors import UsageError
from kafka_log_core.format.filenames import (
    TopicPartition,
    base_offset_of,
    is_valid_topic_name,
    list_partition_dirs,
    parse_partition_dir,
    parse_segment_file,
    segment_file,
    validate_topic_name,
)


@pytest.mark.parametrize(
    ("base", "suffix", "marker", "expected"),
    [
        (0, ".log", None, "00000000000000000000.log"),
        (1234, ".index", None, "00000000000000001234.index"),
        (1234, ".timeindex", ".cleaned", "00000000000000001234.timeindex.cleaned"),
        (88, ".txnindex", ".swap", "00000000000000000088.txnindex.swap"),
        (500, ".snapshot", ".deleted", "00000000000000000500.snapshot.deleted"),
        (2**63 - 1, ".log", None, "09223372036854775807.log"),
    ],
    ids=["zero", "index", "cleaned", "swap", "snapshot-deleted", "max-long"],
)
def test_segment_file_pads_the_offset_to_20_digits(tmp_path, base, suffix, marker, expected):
    assert segment_file(tmp_path, base, suffix, marker) == tmp_path / expected


@pytest.mark.parametrize(
    ("base", "suffix", "marker"),
    [(-1, ".log", None), (2**63, ".log", None), (0, ".lag", None), (0, ".log", ".tmp"), (0, "log", None)],
    ids=["negative", "overflow", "bad-suffix", "bad-marker", "suffix-without-dot"],
)
def test_segment_file_refuses_names_kafka_never_writes(tmp_path, base, suffix, marker):
    with pytest.raises(UsageError):
        segment_file(tmp_path, base, suffix, marker)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("00000000000000000000.log", (0, ".log", None)),
        ("00000000000000001234.index", (1234, ".index", None)),
        ("00000000000000001234.timeindex", (1234, ".timeindex", None)),
        ("00000000000000001234.txnindex", (1234, ".txnindex", None)),
        ("00000000000000000100.snapshot", (100, ".snapshot", None)),
        ("00000000000000000100.log.deleted", (100, ".log", ".deleted")),
        ("00000000000000000100.index.cleaned", (100, ".index", ".cleaned")),
        ("00000000000000000100.log.swap", (100, ".log", ".swap")),
        ("00000000000000000100.snapshot.deleted", (100, ".snapshot", ".deleted")),
        # The loader parses whatever digits precede the first dot (Long.parseLong), padded or not.
        ("5.log", (5, ".log", None)),
        ("09223372036854775807.log", (2**63 - 1, ".log", None)),
    ],
)
def test_parse_segment_file_splits_offset_suffix_and_marker(name, expected):
    assert parse_segment_file(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "leader-epoch-checkpoint",
        "partition.metadata",
        "00000000000000000000.log.tmp",
        "00000000000000000000.snapshot.tmp",
        "abc.log",
        ".log",
        "00000000000000000000",
        "00000000000000000000.log.swap.deleted",
        "00000000000000000000.checkpoint.deleted",
        "-0000000000000000001.log",
        "99999999999999999999.log",
        "00000000000000000000.LOG",
    ],
)
def test_parse_segment_file_returns_none_for_other_files(name):
    assert parse_segment_file(name) is None


@given(
    st.text(st.sampled_from("0123456789+-٣０a"), min_size=19, max_size=21),
    st.sampled_from([".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint", ".log.tmp"]),
    st.sampled_from(["", ".deleted", ".cleaned", ".swap"]),
)
def test_a_name_of_about_twenty_characters_is_a_segment_file_only_of_ascii_digits_in_a_long(
    digits, suffix, marker
):
    # the broker's names (20 digits) are read by a shortcut: the same answer as any other digit run
    plain = digits.isascii() and digits.isdigit()
    known = suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
    expected = (int(digits), suffix, marker or None) if plain and known and int(digits) < 2**63 else None
    assert parse_segment_file(digits + suffix + marker) == expected


@given(
    st.integers(0, 2**63 - 1),
    st.sampled_from([".log", ".index", ".timeindex", ".txnindex", ".snapshot"]),
    st.sampled_from([None, ".deleted", ".cleaned", ".swap"]),
)
def test_segment_file_names_parse_back_to_their_parts(base, suffix, marker):
    path = segment_file("/d", base, suffix, marker)
    assert len(path.name.split(".")[0]) == 20
    assert parse_segment_file(path.name) == (base, suffix, marker)


def test_base_offset_of_reads_the_file_name_and_refuses_other_names(tmp_path):
    assert base_offset_of(tmp_path / "00000000000000000042.timeindex") == 42
    with pytest.raises(UsageError, match="carries no base offset"):
        base_offset_of(tmp_path / "index")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", TopicPartition("orders", 0)),
        ("my-topic-12", TopicPartition("my-topic", 12)),
        ("a.b_c-d-3", TopicPartition("a.b_c-d", 3)),
        ("orders--1", TopicPartition("orders-", 1)),
        ("__consumer_offsets-49", TopicPartition("__consumer_offsets", 49)),
        ("t-2147483647", TopicPartition("t", 2147483647)),
    ],
)
def test_partition_dir_splits_at_the_last_dash(name, expected):
    assert parse_partition_dir(name) == expected
    assert expected.dir_name == name


@pytest.mark.parametrize(
    "name",
    [
        "orders-0.5c5a4a1dfb8f4d7a9d4f8f8b1f0c3e2a-delete",
        "orders-0.5c5a4a1dfb8f4d7a9d4f8f8b1f0c3e2a-future",
        "orders-0.5c5a4a1dfb8f4d7a9d4f8f8b1f0c3e2a-stray",
        "remote-log-index-cache",
        "__cluster_metadata-0",
        "lost+found",
        "orders-",
        "-1",
        "orders-x",
        "orders-+1",
        "orders-2147483648",
    ],
)
def test_partition_dir_skips_variants_caches_metadata_and_foreign_dirs(name):
    assert parse_partition_dir(name) is None


def test_list_partition_dirs_returns_live_partitions_sorted(tmp_path):
    for name in ["orders-10", "orders-2", "a-0", "orders-1.abc-delete", "__cluster_metadata-0", "junk"]:
        (tmp_path / name).mkdir()
    (tmp_path / "files-0").write_text("a file, not a directory")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    assert list_partition_dirs(tmp_path) == [
        (TopicPartition("a", 0), tmp_path / "a-0"),
        (TopicPartition("orders", 2), tmp_path / "orders-2"),
        (TopicPartition("orders", 10), tmp_path / "orders-10"),
    ]


def test_topic_partition_prints_as_its_directory_name():
    assert str(TopicPartition("orders", 3)) == "orders-3"
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 9), TopicPartition("a", 1)]) == [
        TopicPartition("a", 1),
        TopicPartition("a", 9),
        TopicPartition("b", 0),
    ]


@pytest.mark.parametrize(
    ("topic", "valid"),
    [
        ("orders", True),
        ("a.b_c-D9", True),
        ("a" * 249, True),
        ("a" * 250, False),
        ("", False),
        (".", False),
        ("..", False),
        ("...", True),
        ("a b", False),
        ("a/b", False),
        ("caf\u00e9", False),
    ],
)
def test_topic_name_validity_follows_kafka(topic, valid):
    assert is_valid_topic_name(topic) is valid
    if valid:
        validate_topic_name(topic)
    else:
        with pytest.raises(UsageError):
            validate_topic_name(topic)
