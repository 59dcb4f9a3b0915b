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
