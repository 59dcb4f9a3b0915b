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


@pytest.mark.broker
def test_offsets_agree_with_a_real_brokers_list_offsets(kafka_broker, tmp_path):
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import OffsetSpec

    from tests.kafka_harness import _admin, create_topic, produce

    broker = kafka_broker()
    create_topic(broker.bootstrap, "times", 1, {"internal.segment.bytes": 4096})
    stamps = [TS + (i * 7919) % 1000 for i in range(120)]
    produce(
        broker.bootstrap, "times", [(f"k{i}".encode(), b"v" * 50, (), ts, 0) for i, ts in enumerate(stamps)]
    )
    probes = [TS - 1, TS + 1, TS + 333, TS + 998, TS + 999, TS + 5000]
    admin = _admin(broker.bootstrap)
    specs = {"-1": OffsetSpec.latest(), "-2": OffsetSpec.earliest(), "-3": OffsetSpec.max_timestamp()}
    specs.update({str(t): OffsetSpec.for_timestamp(t) for t in probes})
    theirs = {}
    for name, spec in specs.items():
        fut = admin.list_offsets({CTP("times", 0): spec}, request_timeout=30)
        theirs[name] = next(iter(fut.values())).result(30).offset
    broker.stop()
    for name, offset in theirs.items():
        result = CliRunner().invoke(
            main, ["offsets", "--log-dir", str(broker.log_dir), "--topic", "times", "--time", name]
        )
        assert result.exit_code == 0, result.output
        ours = result.output.strip().split(":")[-1]
        assert (int(ours) if ours else -1) == offset, f"--time {name}"
