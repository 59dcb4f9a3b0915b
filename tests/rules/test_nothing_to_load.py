"""The loader's cheap answer for most partitions (``recovery.nothing_to_load``): when it says a partition
directory needs nothing, the full plan (``recovery.plan_recovery``) finds nothing to recover or change."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.log_dir import LogDirState
from kafka_log_core.rules import recovery
from kafka_log_core.settings.config import load_config
from tests.logbuild import TS, batch, make_log

TP = TopicPartition("t", 0)
SEG = "{:020d}"
# What may be wrong with a segment of the partition, one change each (None: nothing).
CHANGES = [None, "no .index", "no .timeindex", "a .txnindex", "a symlinked .index", "a .txnindex.deleted"]


def _partition(log_dir: Path, changes: tuple[str | None, str | None], clean_shutdown: bool) -> Path:
    make_log(log_dir, "t", 0, {0: [batch(0, [("a", "1"), ("b", "2")])], 2: [batch(2, [("a", "3")], ts=TS + 5)]},
             clean_shutdown=clean_shutdown)  # fmt: skip
    d = log_dir / "t-0"
    for base, change in zip((0, 2), changes, strict=True):
        stem = d / SEG.format(base)
        if change == "no .index":
            os.unlink(f"{stem}.index")
        elif change == "no .timeindex":
            os.unlink(f"{stem}.timeindex")
        elif change == "a .txnindex":
            Path(f"{stem}.txnindex").write_bytes(b"")
        elif change == "a symlinked .index":
            os.rename(f"{stem}.index", log_dir / "elsewhere.index")
            os.symlink(log_dir / "elsewhere.index", f"{stem}.index")
        elif change == "a .txnindex.deleted":
            Path(f"{stem}.txnindex.deleted").write_bytes(b"")
    return d


@pytest.mark.parametrize("clean_shutdown", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("changes", list(itertools.product(CHANGES, repeat=2)), ids=str)
def test_nothing_to_load_only_where_the_full_plan_finds_nothing(tmp_path, changes, clean_shutdown):
    d = _partition(tmp_path, changes, clean_shutdown)
    ckpt = LogDirState.read(tmp_path).for_partition(TP)
    cfg = load_config(None, [], [], ["cleanup.policy=delete"]).for_topic("t")
    plan = recovery.plan_recovery(d, TP, ckpt, cfg, now_ms=TS + 1000, producer_id_expiration_ms=86_400_000)
    nothing = not plan.ran and not plan.changes_anything
    if recovery.nothing_to_load(d, ckpt):
        assert nothing
    # the cheap answer is given for every partition a clean shutdown left as a broker leaves it
    plain = all(c in (None, "a .txnindex.deleted") for c in changes)
    assert recovery.nothing_to_load(d, ckpt) == (clean_shutdown and plain)


@pytest.mark.parametrize(
    ("snapshots", "log_start", "deleted"),
    [
        ((2, 3), None, ()),  # a broker's: one at the roll, one at the log end
        ((3,), None, ()),
        ((0, 2, 3), None, (0,)),  # at the log start offset (the first base)
        ((2, 3), 2, (2,)),  # at or below the log-start checkpoint (DeleteRecords)
        ((1, 2, 3), None, (1,)),  # stray: not at a segment base, not the newest
        ((1, 2), None, (1,)),  # the newest stray, but below the last base
        ((2, 7), None, ()),  # the newest stray beyond the last base stays (only a rebuild looks at it)
    ],
    ids=str,
)
def test_a_clean_load_deletes_the_snapshots_kafkas_loader_deletes(tmp_path, snapshots, log_start, deleted):
    """LogLoader.load after a clean shutdown: removeStraySnapshots, then rebuildProducerState's
    truncateAndReload from the log start offset (max of its checkpoint and the first base)."""
    from kafka_log_core.format import checkpoints
    from kafka_log_core.format.producer_snapshot import encode_producer_snapshot

    d = _partition(tmp_path, (None, None), clean_shutdown=True)
    for offset in snapshots:
        (d / f"{SEG.format(offset)}.snapshot").write_bytes(encode_producer_snapshot([]))
    if log_start is not None:
        checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {TP: log_start})
    ckpt = LogDirState.read(tmp_path).for_partition(TP)
    cfg = load_config(None, [], [], ["cleanup.policy=delete"]).for_topic("t")
    plan = recovery.plan_recovery(d, TP, ckpt, cfg, now_ms=TS + 1000, producer_id_expiration_ms=86_400_000)
    assert not plan.ran and plan.snapshots_deleted == deleted and not plan.snapshots_written
    assert recovery.nothing_to_load(d, ckpt) == (not deleted)
    recovery.apply_recovery(plan)
    left = sorted(int(p.name[:20]) for p in d.glob("*.snapshot"))
    assert left == [o for o in snapshots if o not in deleted]
