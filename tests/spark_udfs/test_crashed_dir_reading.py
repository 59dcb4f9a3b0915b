"""Issue 24 ("Also" 2): a crashed broker's log dir is read as the broker's loader would leave it, with
nothing written -- the high watermark a restarted sole replica sets, crash tails cut -- and under the
jobs' non-destructive default: valid data past an invalid batch fails the read (failOnDataLoss) instead of
being dropped as the loader's rule drops it. The end-to-end pin against a real broker killed with SIGKILL
is tests/broker/test_broker_crashed_read.py.

Expected rows come from what each test wrote (kafka-python batches), never from the reader.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from jobs.cli import main
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition
from tests.clirun import invoke
from tests.metadata_build import (
    feature_level,
    partition_record,
    topic_record,
    write_meta_properties,
    write_metadata_log,
)
from tests.spark_udfs.test_data_source import SAMPLE, _read, _write, kp_batch

pytestmark = pytest.mark.spark
TOPIC_ID = "KB9btG56TIKDzbjC1Rj0pA"
TWO = SAMPLE[:2]


@pytest.fixture(scope="module")
def kafka_log(spark):
    import spark_udfs

    spark_udfs.register(spark)
    return spark


def _hashes(log_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(log_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file()
    }


def _crashed(log_dir: Path, *, replicas: list[int] | None) -> None:
    """t-0: offsets 0-9 in two segments, no .kafka_cleanshutdown, the high watermark checkpoint at 4 (the
    broker was killed between two checkpoint writes); with ``replicas``, a metadata log saying so, this
    broker being node 1."""
    _write(
        log_dir,
        "t",
        0,
        {0: [kp_batch(0, TWO), kp_batch(2, TWO)], 4: [kp_batch(4, TWO), kp_batch(6, TWO), kp_batch(8, TWO)]},
    )
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    checkpoints.write_offset_checkpoint(
        log_dir / "replication-offset-checkpoint", {TopicPartition("t", 0): 4}
    )
    if replicas is not None:
        write_meta_properties(log_dir, node_id=1)
        records = [feature_level("metadata.version", 21), topic_record("t", TOPIC_ID),
                   partition_record(TOPIC_ID, 0, replicas, replicas, replicas[0])]  # fmt: skip
        write_metadata_log(log_dir / "__cluster_metadata-0", {0: [records]})
        checkpoints.write_partition_metadata(log_dir / "t-0" / "partition.metadata", TOPIC_ID)


def _offsets(df) -> list[int]:
    return sorted(r.offset for r in df.select("offset").collect())


def test_a_sole_replica_is_read_to_its_recovered_log_end_not_the_stale_checkpoint(kafka_log, tmp_path):
    _crashed(tmp_path, replicas=[1])
    before = _hashes(tmp_path)
    assert _offsets(_read(kafka_log, tmp_path)) == list(range(10))
    out = tmp_path.parent / f"{tmp_path.name}-table"
    result = invoke(
        main, "export", "--log-dir", tmp_path, "--view", "records", "--out", out, "--output", "json"
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert (row["status"], row["rows"], row["last_offset"]) == ("exported", 10, 9)
    assert "read as the broker's log loader would leave it" in row["reason"]
    assert (
        "high watermark 4 -> 10, the recovered log end offset (broker 1 is the only replica" in row["reason"]
    )
    assert _hashes(tmp_path) == before  # nothing written


def test_with_other_replicas_the_checkpoint_stands_and_the_row_says_why(kafka_log, tmp_path):
    _crashed(tmp_path, replicas=[1, 2])
    assert _offsets(_read(kafka_log, tmp_path)) == [0, 1, 2, 3]
    out = tmp_path.parent / f"{tmp_path.name}-table"
    result = invoke(
        main, "export", "--log-dir", tmp_path, "--view", "records", "--out", out, "--output", "json"
    )
    (row,) = json.loads(result.stdout)
    assert (row["status"], row["rows"]) == ("exported", 4)
    assert "high watermark 4 from replication-offset-checkpoint kept (replicas [1, 2]" in row["reason"]
    assert _offsets(_read(kafka_log, tmp_path, end="log_end")) == list(range(10))


def test_a_crash_tail_is_cut_as_the_loader_cuts_it(kafka_log, tmp_path):
    """A torn last batch and zeros after it (a preallocated segment): the loader truncates them, nothing
    valid follows, so this is read as a broker would serve it -- without failing, nothing written."""
    _crashed(tmp_path, replicas=[1])
    active = tmp_path / "t-0" / f"{4:020d}.log"
    torn = kp_batch(10, TWO)[0]
    active.write_bytes(active.read_bytes() + torn[:50] + bytes(4096))
    before = _hashes(tmp_path)
    assert _offsets(_read(kafka_log, tmp_path)) == list(range(10))
    assert _hashes(tmp_path) == before


def test_bit_rot_fails_the_read_by_default_and_is_read_around_without_fail_on_data_loss(kafka_log, tmp_path):
    """The loader would truncate segment 0 at its first batch and drop segment 4: valid records a broker
    with a replica would fetch again. Offline the read fails with one line, or reads around the bad batch."""
    _crashed(tmp_path, replicas=[1])
    first = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[70] ^= 0x01  # inside the first batch's records
    first.write_bytes(bytes(data))
    before = _hashes(tmp_path)
    with pytest.raises(
        Exception, match="cannot be read as a broker restarted on this log dir would serve it"
    ) as err:
        _read(kafka_log, tmp_path).collect()
    assert f"{first} at position 0: CRC32C mismatch" in str(err.value)
    assert "the broker's recovery would delete 8 valid records in 4 batches" in str(err.value)
    # read as the files are: the bad batch skipped, up to the (stale) checkpointed high watermark
    assert _offsets(_read(kafka_log, tmp_path, failOnDataLoss="false")) == [2, 3]
    assert _offsets(_read(kafka_log, tmp_path, failOnDataLoss="false", end="log_end")) == list(range(2, 10))
    assert _hashes(tmp_path) == before


def test_a_crashed_partitions_recovery_is_planned_once_per_job_on_the_driver(tmp_path):
    """An export looks at a partition three times on its driver (its state now, the check, the write's
    plan): one Clusters per job opens it as loaded once; another job plans it again, the same way."""
    from spark_udfs import loaded, planning
    from spark_udfs.options import ReadOptions

    _crashed(tmp_path, replicas=[1])
    (source,) = planning.find_partitions(ReadOptions.parse({"paths": json.dumps([str(tmp_path)])}))
    clusters = loaded.Clusters([tmp_path])
    first = loaded.open_as_loaded(source, True, clusters)
    assert "read as the broker's log loader would leave it" in (first.note or "")
    assert loaded.open_as_loaded(source, True, clusters) is first
    other = loaded.open_as_loaded(source, True, loaded.Clusters([tmp_path]))
    assert other is not first and (other.note, other.log.high_watermark) == (
        first.note,
        first.log.high_watermark,
    )
