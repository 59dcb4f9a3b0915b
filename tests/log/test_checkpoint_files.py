"""The offset checkpoint files kept in memory (``log/checkpoint_files``): what it gives and writes is what
the strict parser reads and the formatter writes, whatever another process did to the file in between."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_core.errors import CorruptCheckpointError
from kafka_log_core.format.checkpoints import (
    format_offset_checkpoint,
    parse_offset_checkpoint,
    write_offset_checkpoint,
)
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log import checkpoint_files

TOPICS = ["a", "ab", "b", "orders", "orders.v2", "__consumer_offsets"]
partitions = st.builds(TopicPartition, st.sampled_from(TOPICS), st.integers(0, 12))
offsets = st.integers(0, 2**63 - 1) | st.integers(0, 2000)
# one step: (who, partition, offset or None to remove); "other" rewrites the file as another process does
steps = st.lists(st.tuples(st.sampled_from(["ours", "other"]), partitions, st.none() | offsets), max_size=25)


def sorted_file(entries: dict[TopicPartition, int]) -> bytes:
    return format_offset_checkpoint(dict(sorted(entries.items())))


@settings(max_examples=150, deadline=None)
@given(initial=st.dictionaries(partitions, offsets, max_size=30), steps=steps)
def test_entries_and_writes_equal_the_strict_parser_and_the_formatter(tmp_path_factory, initial, steps):
    path = tmp_path_factory.mktemp("ckpt") / "cleaner-offset-checkpoint"
    write_offset_checkpoint(path, dict(sorted(initial.items())))
    expected = dict(initial)
    assert dict(checkpoint_files.entries(path)) == expected
    for who, tp, offset in steps:
        if offset is None:
            expected.pop(tp, None)
        else:
            expected[tp] = offset
        if who == "ours":
            checkpoint_files.update(path, {tp: offset})
            assert path.read_bytes() == sorted_file(expected)
        else:  # a sorted rewrite by another process: a new file under the same name
            write_offset_checkpoint(path, dict(sorted(expected.items())))
        assert dict(checkpoint_files.entries(path)) == parse_offset_checkpoint(path.read_bytes()) == expected
        assert checkpoint_files.entry(path, tp) == expected.get(tp)


def test_a_file_in_the_brokers_order_is_read_whole_and_rewritten_sorted(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(b"0\n3\norders 2 7\n__consumer_offsets 0 12\norders 10 3\n")  # a HashMap's order
    assert dict(checkpoint_files.entries(path)) == {
        TopicPartition("orders", 2): 7,
        TopicPartition("__consumer_offsets", 0): 12,
        TopicPartition("orders", 10): 3,
    }
    assert checkpoint_files.update(path, {TopicPartition("orders", 2): 8})
    assert path.read_bytes() == b"0\n3\n__consumer_offsets 0 12\norders 2 8\norders 10 3\n"


@pytest.mark.parametrize(
    "text",
    [
        b"0\n2\norders  0 5\norders 1 6\n",  # two spaces: Java splits on runs of whitespace
        b"0\n2\r\norders 0 +5\r\norders 1 6\r\n",  # CRLF and a sign
        b"0\n3\norders 0 5\norders 1 6\norders 0 9\n",  # listed twice: the last one counts
        b"0\n02\norders 0 5\norders 1 6\n",  # a count with a leading zero
    ],
)
def test_a_change_to_a_file_not_in_our_form_is_read_as_the_strict_parser_reads_it(tmp_path, text):
    path = tmp_path / "log-start-offset-checkpoint"
    write_offset_checkpoint(path, {TopicPartition("orders", 0): 1, TopicPartition("orders", 1): 6})
    assert checkpoint_files.entry(path, TopicPartition("orders", 0)) == 1
    os.unlink(path)  # another process writes the new version in place of the old one
    path.write_bytes(text)
    assert dict(checkpoint_files.entries(path)) == parse_offset_checkpoint(text)


def test_a_corrupt_new_version_is_refused_naming_the_file_and_position(tmp_path):
    path = tmp_path / "cleaner-offset-checkpoint"
    write_offset_checkpoint(path, {TopicPartition("orders", p): 10 * p for p in range(5)})
    checkpoint_files.entries(path)
    good = path.read_bytes()
    bad = good.replace(b"orders 3 30", b"orders 3 3x")
    os.unlink(path)
    path.write_bytes(bad)
    with pytest.raises(CorruptCheckpointError, match=rf"{path}.*position {bad.index(b'orders 3')}"):
        checkpoint_files.entries(path)


def test_a_missing_file_has_no_entries_and_is_created_only_when_asked(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    tp = TopicPartition("orders", 0)
    assert checkpoint_files.entries(path) == {}
    assert not checkpoint_files.update(path, {tp: None})
    assert not path.exists()
    assert checkpoint_files.update(path, {tp: None}, create=True)
    assert path.read_bytes() == b"0\n0\n"
    assert checkpoint_files.update(path, {tp: 4})
    assert path.read_bytes() == b"0\n1\norders 0 4\n"
