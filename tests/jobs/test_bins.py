"""Partitions run in bins (``jobs/bins``): small partitions share a Spark task, the largest start first, and
a task that fails -- even when its Python worker dies -- fails only its own partitions."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs import bins, progress

GiB = 1024**3


@given(st.lists(st.integers(0, 4 * GiB), max_size=300), st.integers(1, 16))
def test_every_partition_is_in_exactly_one_bin_and_each_bin_starts_with_its_largest(sizes, cores):
    planned = bins.plan_bins(sizes, cores)
    assert sorted(i for b in planned for i in b) == list(range(len(sizes)))
    for b in planned:
        assert [sizes[i] for i in b] == sorted((sizes[i] for i in b), reverse=True)
    firsts = [sizes[b[0]] for b in planned]
    assert firsts == sorted(firsts, reverse=True)  # the bin holding the largest partition starts first
    if sizes:
        assert sizes[planned[0][0]] == max(sizes)


@given(st.lists(st.integers(0, 64 * 1024**2), min_size=1, max_size=400), st.integers(1, 8))
def test_bins_weigh_about_the_same(sizes, cores):
    """Each partition went to the lightest bin so far: no bin outweighs another by more than one
    partition's weight (bytes plus the set-up every partition costs)."""
    planned = bins.plan_bins(sizes, cores)
    weights = [sum(sizes[i] + bins.IDLE_WEIGHT for i in b) for b in planned]
    heaviest_one = max(sizes) + bins.IDLE_WEIGHT
    assert max(weights) - min(weights) <= heaviest_one


def test_idle_partitions_share_tasks_and_a_big_one_runs_alone():
    sizes = [0] * 50_000 + [8 * GiB]
    planned = bins.plan_bins(sizes, cores=2)
    assert planned[0] == [50_000]  # the 8 GiB partition, alone, first
    counts = [len(b) for b in planned[1:]]
    assert len(planned) >= 2 * bins.BINS_PER_CORE
    assert max(counts) <= bins.MAX_BIN_PARTITIONS
    assert sum(counts) == 50_000


def test_a_handful_of_partitions_still_spread_over_every_core():
    assert len(bins.plan_bins([10, 20, 30], cores=2)) == 3
    assert len(bins.plan_bins([10] * 100, cores=2)) == 2 * bins.BINS_PER_CORE


def _crash_on(item):
    """A task function whose Python worker dies on item "crash" (no exception: the process is gone)."""
    if item == "crash":
        os._exit(3)
    return {"item": item, "status": "ok"}


@pytest.mark.spark
def test_a_worker_that_dies_fails_only_the_partitions_of_its_bin(spark):
    items = [f"p{i}" for i in range(60)] + ["crash"]
    sizes = [1000 * i for i in range(60)] + [5000]
    results = bins.run_bins(
        spark, items, sizes, _crash_on, lambda item, reason: {"item": item, "status": "failed", "reason": reason},
        lambda message: None,
    )  # fmt: skip
    crashed = next(b for b in bins.plan_bins(sizes, spark.sparkContext.defaultParallelism) if 60 in b)
    assert [r["item"] for r in results] == items  # in the order given
    failed = {i for i, r in enumerate(results) if r["status"] == "failed"}
    assert failed == set(crashed)
    assert len(failed) < len(items) / 4
    assert "Python worker exited unexpectedly" in results[60]["reason"]
    assert f"({len(crashed)} partitions) failed" in results[60]["reason"]


@pytest.mark.spark
def test_a_failure_of_the_executors_environment_stops_the_job(spark):
    class Stop(Exception):
        pass

    def fatal(message: str):
        return Stop(message) if "ZeroDivisionError" in message else None

    with pytest.raises(Stop):
        bins.run_bins(spark, [1, 0, 2], [1, 2, 3], lambda x: {"v": 1 / x}, lambda item, reason: None, fatal)


@pytest.mark.spark
def test_progress_counts_each_partition_once_as_its_bin_ends_even_a_crashed_bins(spark):
    items = [f"p{i}" for i in range(60)] + ["crash"]
    sizes = [1000 * i for i in range(60)] + [5000]
    order = bins.launch_order(sizes, spark.sparkContext.defaultParallelism)
    shown = progress.Progress("job", [items[i] for i in order], [sizes[i] for i in order], how="none")
    kept: dict[int, dict] = {}
    returned = bins.run_bins(
        spark, items, sizes, _crash_on, lambda item, reason: {"item": item, "status": "failed"},
        lambda message: None, shown=shown, keep=lambda result, i: kept.setdefault(i, result),
    )  # fmt: skip
    assert shown.done_count == len(items) and all(shown.done)
    assert shown.bytes_done() == sum(sizes)
    # each result given to keep once, with its item's index, and nothing held besides
    assert returned == [] and sorted(kept) == list(range(len(items)))
    assert all(kept[i]["item"] == item for i, item in enumerate(items))
