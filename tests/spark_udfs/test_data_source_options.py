"""The ``kafka-log`` options and the read plan, without Spark: Spark's Kafka option formats and refusals,
and splits cut at offset-index entries (checked against the index files, read here with ``struct``)."""

from __future__ import annotations

import json
import os
import struct

import pytest

from kafka_log_core.errors import UsageError
from kafka_log_core.format.filenames import TopicPartition
from spark_udfs import planning, rows
from spark_udfs.options import EARLIEST, LATEST, ReadOptions
from tests.logbuild import TS, batch, make_log, marker

PATH = {"path": "/nowhere"}


def test_defaults_are_sparks_kafka_source_defaults():
    o = ReadOptions.parse(PATH)
    assert (o.level, o.isolation, o.include_headers, o.fail_on_data_loss) == (
        "records", "read_uncommitted", False, True,
    )  # fmt: skip
    assert (o.starting.default, o.ending.default, o.selection.kind) == (EARLIEST, LATEST, "all")
    assert o.max_bytes_per_split == 128 * 1024 * 1024
    latest = ReadOptions.parse({**PATH, "level": "latest"})
    assert latest.isolation == "read_committed"  # a rebuilt state ignores aborted transactions
    assert ReadOptions.parse({**PATH, "LEVEL": "Latest", "Kafka.Isolation.Level": "READ_UNCOMMITTED"}).isolation == (
        "read_uncommitted"
    )  # fmt: skip


def test_spark_json_formats():
    o = ReadOptions.parse({
        **PATH, "assign": '{"a":[0,2],"b":[1]}',
        "startingOffsets": '{"a":{"0":23,"2":-2}}', "endingOffsets": '{"a":{"0":-1,"2":40}}',
    })  # fmt: skip
    a0, a2, b1 = TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)
    assert o.selection.partitions == {a0, a2, b1}
    assert [o.starting.for_partition(tp) for tp in (a0, a2, b1)] == [
        ("offset", 23),
        ("offset", -2),
        ("offset", -2),
    ]
    assert [o.ending.for_partition(tp) for tp in (a0, a2, b1)] == [
        ("offset", -1),
        ("offset", 40),
        ("offset", -1),
    ]
    by_ts = ReadOptions.parse(
        {**PATH, "startingOffsetsByTimestamp": '{"a":{"0":5}}', "startingOffsets": "earliest"}
    )
    assert by_ts.starting.for_partition(a0) == ("timestamp", 5)
    assert by_ts.starting.for_partition(a2) == ("offset", EARLIEST)
    glob = ReadOptions.parse(
        {**PATH, "startingTimestamp": "7", "startingOffsetsByTimestamp": '{"a":{"0":5}}'}
    )
    assert glob.starting.for_partition(a0) == ("timestamp", 7)  # the global timestamp comes first
    paths = ReadOptions.parse({"paths": '["/d1","/d2"]'})
    assert paths.paths == ("/d1", "/d2")
    pattern = ReadOptions.parse({**PATH, "subscribePattern": "orders.*"})
    assert pattern.selection.admits(TopicPartition("orders-eu", 0))
    assert not pattern.selection.admits(TopicPartition("x-orders", 0))  # a full match
    everything = ReadOptions.parse({**PATH, "subscribePattern": ".*"})
    assert not everything.selection.admits(TopicPartition("__consumer_offsets", 0))  # as Kafka's consumer
    internal = ReadOptions.parse({**PATH, "subscribePattern": ".*", "kafka.exclude.internal.topics": "false"})
    assert internal.selection.admits(TopicPartition("__consumer_offsets", 0))
    assert ReadOptions.parse(PATH).selection.admits(TopicPartition("__consumer_offsets", 0))  # no option: all


REFUSED = {
    "no path": ({}, "give one or more log dirs"),
    "two strategies": ({**PATH, "subscribe": "a", "assign": '{"a":[0]}'}, "only one of the options"),
    "starting latest": ({**PATH, "startingOffsets": "latest"}, "cannot start at latest"),
    "ending earliest": ({**PATH, "endingOffsets": "EARLIEST"}, "cannot end at earliest"),
    "starting -1": ({**PATH, "startingOffsets": '{"a":{"0":-1}}'}, "a-0 cannot be -1"),
    "ending -2": ({**PATH, "endingOffsets": '{"a":{"0":-2}}'}, "a-0 cannot be -2"),
    "bad JSON": ({**PATH, "startingOffsets": "{a:1}"}, "is not a JSON object"),
    "bad partition": ({**PATH, "endingOffsets": '{"a":{"x":1}}'}, "expected"),
    "bad assign": ({**PATH, "assign": '{"a":"0"}'}, "option assign"),
    "empty subscribe": ({**PATH, "subscribe": " , "}, "names no topic"),
    "bad pattern": ({**PATH, "subscribePattern": "("}, "not a regular expression"),
    "bad level": ({**PATH, "level": "rows"}, "option level='rows'"),
    "bad isolation": ({**PATH, "kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
    "bad boolean": ({**PATH, "includeHeaders": "yes"}, "includeheaders='yes'"),
    "bad timestamp": ({**PATH, "startingTimestamp": "yesterday"}, "expected a timestamp in ms"),
    "bad split": ({**PATH, "maxBytesPerSplit": "0"}, "must be positive"),
    "zero limit": (
        {**PATH, "maxDecompressedBatchBytes": "0"},
        "maxdecompressedbatchbytes='0': must be positive",
    ),
    "negative limit": ({**PATH, "maxDecompressedBatchBytes": "-1"}, "must be positive"),
    "limit not a number": (
        {**PATH, "maxDecompressedBatchBytes": "64MiB"},
        "'64MiB': expected a whole number",
    ),
    "bad strategy": ({**PATH, "startingOffsetsByTimestampStrategy": "earliest"}, "error, latest"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_bad_options_are_refused_with_one_line_naming_them(case):
    options, message = REFUSED[case]
    with pytest.raises(UsageError, match=message) as err:
        ReadOptions.parse(options)
    assert "\n" not in str(err.value) and str(err.value).startswith("kafka-log: ")


# ------------------------------------------------------------------------------------------ planning
def _index_positions(path) -> list[int]:
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, n)[1] for n in range(0, len(data), 8)]


def _big_log(log_dir):
    """orders-0: two segments of 40 batches x 4 records, an index entry at every batch but the first. A
    cleanly shut down log dir: the files are read as written (not as a loader's recovery rebuilds them)."""
    segments = {}
    for base in (0, 160):
        segments[base] = [
            batch(base + 4 * b, [(f"k{b % 7}", "v" * 50)] * 4, ts=TS + base + b) for b in range(40)
        ]
    make_log(log_dir, "orders", 0, segments, interval=1, clean_shutdown=True)
    make_log(log_dir, "orders", 1, {0: [batch(0, [("a", "1")]), marker(1, True, 5)]})


def test_splits_cut_at_index_entries_and_cover_every_batch_once(tmp_path):
    _big_log(tmp_path)
    options = ReadOptions.parse({"path": str(tmp_path), "maxBytesPerSplit": "1000", "subscribe": "orders"})
    splits = planning.plan(options)
    big = [s for s in splits if s.source.partition == 0]
    assert len(big) > 10 and len([s for s in splits if s.source.partition == 1]) == 1
    for base in (0, 160):
        log = tmp_path / "orders-0" / f"{base:020d}.log"
        chunks = sorted((c.start, c.stop) for s in big for c in s.chunks if c.base_offset == base)
        cuts = [a for a, _ in chunks[1:]]
        assert chunks[0][0] == 0 and chunks[-1][1] == log.stat().st_size
        assert all(b == a for (_, b), (a, _) in zip(chunks, chunks[1:], strict=False))  # contiguous
        assert set(cuts) <= set(_index_positions(log.with_suffix(".index")))  # cuts at index entries
    for s in big:
        assert sum(c.length for c in s.chunks) <= 1000 or len(s.chunks) == 1
    offsets = [r[4] for s in big for r in rows.record_rows(s, options)]
    assert offsets == list(range(320))  # every record once, in order


def test_a_read_from_an_offset_starts_at_its_index_floor_and_stops_past_its_end(tmp_path):
    _big_log(tmp_path)
    options = ReadOptions.parse({
        "path": str(tmp_path), "assign": '{"orders":[0]}',
        "startingOffsets": '{"orders":{"0":41}}', "endingOffsets": '{"orders":{"0":178}}',
    })  # fmt: skip
    (split,) = planning.plan(options)
    first, last = split.chunks[0], split.chunks[-1]
    positions = _index_positions(tmp_path / "orders-0" / f"{0:020d}.index")
    assert first.start == positions[8]  # the floor entry: offset 39, batch 9 (36..39), read and skipped
    assert last.base_offset == 160 and last.stop < last.size  # the tail past offset 177 is not read
    assert [r[4] for r in rows.record_rows(split, options)] == list(range(41, 178))


def test_a_partition_directory_under_several_names_is_read_once(tmp_path):
    """Issue #24 point 2: a log dir given twice, a partition directory beside its log dir, a symlink in a
    second log dir to a partition of the first: one directory, one partition, read under its first name."""
    _big_log(tmp_path / "d1")
    make_log(tmp_path / "d2", "refunds", 0, {0: [batch(0, [("r", "1")])]})
    os.symlink(tmp_path / "d1" / "orders-0", tmp_path / "d2" / "x-0")
    os.symlink(tmp_path / "d1", tmp_path / "same")
    paths = [tmp_path / "d1", tmp_path / "same", tmp_path / "d1" / "orders-1", tmp_path / "d2"]
    found = planning.find_partitions(ReadOptions.parse({"paths": json.dumps([str(p) for p in paths])}))
    assert [(s.topic, s.partition, s.log_dir) for s in found] == [
        ("orders", 0, str(tmp_path / "d1")), ("orders", 1, str(tmp_path / "d1")),
        ("refunds", 0, str(tmp_path / "d2")),
    ]  # fmt: skip


def test_partitions_across_log_dirs_and_refusals(tmp_path):
    _big_log(tmp_path / "d1")
    make_log(tmp_path / "d2", "refunds", 0, {0: [batch(0, [("r", "1")])]})
    found = planning.find_partitions(ReadOptions.parse({"path": f"{tmp_path / 'd1'},{tmp_path / 'd2'}"}))
    assert [(s.topic, s.partition, s.log_dir) for s in found] == [
        ("orders", 0, str(tmp_path / "d1")), ("orders", 1, str(tmp_path / "d1")),
        ("refunds", 0, str(tmp_path / "d2")),
    ]  # fmt: skip
    make_log(tmp_path / "d2", "orders", 1, {0: [batch(0, [("a", "1")])]})
    with pytest.raises(UsageError, match="orders-1 is in two log dirs"):
        planning.find_partitions(ReadOptions.parse({"paths": f'["{tmp_path / "d1"}", "{tmp_path / "d2"}"]'}))
    with pytest.raises(UsageError, match="assign names orders-7, in none of the log dirs"):
        planning.find_partitions(
            ReadOptions.parse({"path": str(tmp_path / "d1"), "assign": '{"orders":[7]}'})
        )
    with pytest.raises(UsageError, match="name refunds-0, which are not read"):
        planning.find_partitions(
            ReadOptions.parse({"path": str(tmp_path / "d1"), "startingOffsets": '{"refunds":{"0":1}}'})
        )
    with pytest.raises(UsageError, match="is not a directory"):
        planning.find_partitions(ReadOptions.parse({"path": str(tmp_path / "nothing")}))
    starting_late = {
        "path": str(tmp_path / "d1"),
        "assign": '{"orders":[1]}',
        "startingOffsets": '{"orders":{"1":9}}',
    }
    with pytest.raises(UsageError, match="orders-1 would start at offset 9, after its latest offset 2"):
        planning.plan(ReadOptions.parse(starting_late))


def test_min_partitions_makes_smaller_splits(tmp_path):
    """Spark's minPartitions: about that many splits in all, cut at index entries as always."""
    _big_log(tmp_path)
    options = ReadOptions.parse({"path": str(tmp_path), "minPartitions": "12"})
    splits = planning.plan(options)
    assert 12 <= len(splits) <= 16
    assert [r[4] for s in splits if s.source.partition == 0 for r in rows.record_rows(s, options)] == list(
        range(320)
    )
    assert len(planning.plan(ReadOptions.parse({"path": str(tmp_path)}))) == 2  # one per partition
    latest = ReadOptions.parse({"path": str(tmp_path), "minPartitions": "12", "level": "latest"})
    assert len(planning.plan(latest)) == 2  # the latest view never splits a partition
