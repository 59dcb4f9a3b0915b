"""`kafka-log-jobs offsets`: kafka-get-offsets' lines, answered from the indexes; checked by hand and
against a real broker's ListOffsets on the same directory."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from jobs.cli import main
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.tools.offsets import offset_for_time
from tests.logbuild import TS, batch, make_log


def _log(tmp_path):
    # offsets 0-1 at TS, TS+1; 2-3 at TS+50, TS+20 (max in the middle of the log); 4 at TS+30
    make_log(
        tmp_path,
        "t",
        0,
        {
            0: [batch(0, [("a", "1"), ("b", "1")], ts=TS)],
            2: [batch(2, [("c", "1")], ts=TS + 50), batch(3, [("d", "1")], ts=TS + 20)],
            4: [batch(4, [("e", "1")], ts=TS + 30)],
        },
        interval=1,
    )
    tp = TopicPartition("t", 0)
    return PartitionLog.open(tmp_path, tp, LogDirState.read(tmp_path).for_partition(tp))


@pytest.mark.parametrize(
    "when,expected",
    [
        (-1, 5),
        (-2, 0),
        (-3, 2),
        (TS, 0),
        (TS + 1, 1),
        (TS + 2, 2),
        (TS + 21, 2),
        (TS + 50, 2),
        (TS + 51, None),
    ],
)
def test_offset_for_time_follows_fetch_offset_by_timestamp(tmp_path, when, expected):
    assert offset_for_time(_log(tmp_path), when) == expected


def test_offsets_command_prints_topic_partition_offset_lines(tmp_path):
    _log(tmp_path)
    result = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), "--time", "-1"])
    assert result.exit_code == 0, result.output
    assert result.output == "t:0:5\n"
    bad = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), "--time", "-7"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_offsets_takes_kafka_get_offsets_names_and_tiered_specs(tmp_path):
    """kafka-get-offsets' --time names (GetOffsetShell.parseOffsetSpec) and the tiered specs of a log
    without remote storage: earliest-local is the log start offset, latest-tiered and
    earliest-pending-upload have no offset, so no line."""
    _log(tmp_path)
    expected = {
        "latest": "t:0:5\n", "earliest": "t:0:0\n", "max-timestamp": "t:0:2\n", "-4": "t:0:0\n",
        "earliest-local": "t:0:0\n", "-5": "", "latest-tiered": "", "-6": "", "earliest-pending-upload": "",
    }  # fmt: skip
    for spec, output in expected.items():
        result = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), "--time", spec])
        assert (result.exit_code, result.output) == (0, output), spec
    for bad in ("Latest", "1e3", " 5", "9223372036854775808"):
        refused = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), "--time", bad])
        assert refused.exit_code == 2 and "Traceback" not in refused.output, bad


def test_offsets_lines_are_sorted_as_text_and_a_partition_without_an_answer_has_none(tmp_path):
    # GetOffsetShell keeps its answers in a TreeMap ordered by TopicPartition.toString() ("t-10" before
    # "t-2") and leaves out a partition whose answer is ListOffsetsResponse.UNKNOWN_OFFSET.
    for partition in (2, 10, 1):
        make_log(tmp_path, "t", partition, {0: [batch(0, [("a", "1")], ts=TS + partition)]}, interval=1)
    runs = {
        "-1": "t:1:1\nt:10:1\nt:2:1\n",
        str(TS + 2): "t:10:0\nt:2:0\n",
        str(TS + 11): "",
    }
    for when, output in runs.items():
        result = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), "--time", when])
        assert (result.exit_code, result.output) == (0, output), when


def test_partitions_are_chosen_as_kafka_get_offsets_chooses_them(tmp_path):
    # GetOffsetShell: --topic is an IncludeList (commas mean "or"), --partitions a set of ids,
    # --topic-partitions TOPIC:N | N-M (M exclusive) | N- | -M rules, --exclude-internal-topics
    for topic, partition in (("a", 0), ("a", 1), ("a", 2), ("b", 0), ("__consumer_offsets", 0)):
        make_log(tmp_path, topic, partition, {0: [batch(0, [("k", "v")], ts=TS)]}, interval=1)

    def lines(*args: str) -> list[str]:
        result = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), *args])
        assert result.exit_code == 0, result.output
        return [line.rsplit(":", 1)[0] for line in result.output.splitlines()]

    assert lines() == ["__consumer_offsets:0", "a:0", "a:1", "a:2", "b:0"]
    assert lines("--exclude-internal-topics") == ["a:0", "a:1", "a:2", "b:0"]
    assert lines("--topic", "a, b", "--partitions", "0,2") == ["a:0", "a:2", "b:0"]
    assert lines("--topic-partitions", "a:1-,b") == ["a:1", "a:2", "b:0"]
    assert lines("--topic-partitions", ":-1") == ["__consumer_offsets:0", "a:0", "b:0"]
    assert lines("--topic-partitions", "a:1", "--exclude-internal-topics") == ["a:1"]
    # Integer.parseInt takes a sign, leading zeros past ten digits and Unicode digits; String.split drops
    # trailing empty parts (an empty rule in the middle is the rule ":", every partition of every topic)
    assert lines("--topic", "a", "--partitions", "+00000000002,\u0661,") == ["a:1", "a:2"]
    assert lines("--topic", "b", "--partitions", ",") == ["b:0"]
    assert lines("--topic-partitions", "a:00000000001,") == ["a:1"]
    assert lines("--topic-partitions", "b,,a:9") == ["__consumer_offsets:0", "a:0", "a:1", "a:2", "b:0"]
    for bad in (["--topic-partitions", "a", "--topic", "a"], ["--partitions", "x"], ["--topic", "("]):
        refused = CliRunner().invoke(main, ["offsets", "--log-dir", str(tmp_path), *bad])
        assert refused.exit_code == 2 and "Traceback" not in refused.output, bad


@pytest.mark.broker
def test_offsets_print_what_kafka_get_offsets_prints(kafka_broker, tmp_path):
    """The same lines as Kafka's own kafka-get-offsets (GetOffsetShell) against the running broker, for
    every --time spec and for timestamps before, inside and after the records: 12 partitions (text
    order puts 10 and 11 before 2), one of them empty, several segments each."""
    from tests.kafka_harness import create_topic, produce, run_get_offsets

    broker = kafka_broker()
    create_topic(broker.bootstrap, "times", 12, {"internal.segment.bytes": 4096})
    records = [
        (f"k{i}".encode(), b"v" * 50, (), TS + (i * 7919) % 1000, i % 11) for i in range(330)
    ]  # partition 11 stays empty
    produce(broker.bootstrap, "times", records)
    runs = [["--topic", "times", "--time", spec] for spec in ("-1", "-2", "-3", "-4", "-5")]
    runs += [["--topic", "times", "--time", spec] for spec in ("earliest", "max-timestamp", "latest-tiered")]
    runs += [["--topic", "times", "--time", str(t)] for t in (TS - 1, TS + 333, TS + 998, TS + 5000)]
    runs += [
        ["--topic", "times,other", "--partitions", "1,10,11", "--time", "-3"],
        ["--topic-partitions", "times:2-5,ti.*:10-", "--time", "-2"],
        ["--topic-partitions", ":-2", "--exclude-internal-topics"],
        ["--topic", "times", "--partitions", "+00000000002,1,", "--time", "-2"],
        ["--topic-partitions", "times:00000000003-0000000000005,", "--time", "-1"],
    ]
    theirs = {}
    for args in runs:
        proc = run_get_offsets(broker.bootstrap, *args)
        assert proc.returncode == 0, proc.stderr
        theirs[" ".join(args)] = (args, proc.stdout)
    broker.stop()
    assert "times:10:" in theirs["--topic times --time -1"][1]  # the cases are told apart
    assert theirs[f"--topic times --time {TS + 5000}"][1] == ""
    for name, (args, output) in theirs.items():
        result = CliRunner().invoke(main, ["offsets", "--log-dir", str(broker.log_dir), *args])
        assert (result.exit_code, result.output) == (0, output), name
