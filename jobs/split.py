"""Split cleaning on Spark: one partition's cleaning round cut into tasks (``kafka_log_core.rules.split_cleaning``).

The driver holds the partition's lock, makes the :class:`SplitPlan` (headers and indexes only: segment
and group lists, transaction-tracker snapshots, active producers, horizons) and broadcasts it. Then three
Spark jobs:

* pass 1, per segment: the segment's map rows (and lookups), cut by digest bucket;
* the combine, per digest bucket: the latest offset of every key over all segments, given back per group
  (keep lists, or map entries where pass 2 looks keys up);
* pass 2, per group: the group's ``.cleaned`` files.

A task runs a bin of pieces one after the other (``split_cleaning.balanced_bins``: bins of about equal
bytes, the largest first), two bins a core for the passes and one for the combine: a task's start-up is
paid per bin, not per piece.

The rows pass from one job to the next as files in the partition's scratch directory (the shared
filesystem the tasks read the segments from and write their ``.cleaned`` files to); through the driver
go the plan and where each bucket or group lies in those files (8 bytes per segment and bucket, per
bucket and group), broadcast to the next job's tasks; never a key digest. An error in a piece (its
message names the file and position) stops the round before the next job. The driver then swaps the
groups in and writes the checkpoint (``kafka_log_core.work.tasks``).
"""

from __future__ import annotations

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.rules.split_cleaning import (
    GroupOutput,
    SplitPlan,
    balanced_bins,
    combine_task,
    drop_pass1_files,
    pass1_task,
    pass2_task,
)


class SparkSplitRunner:
    """A ``split_cleaning.Runner`` that runs the pieces as Spark tasks."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext

    def __call__(self, sp: SplitPlan) -> list[GroupOutput]:
        shared: list = []  # broadcasts, let go at the end

        def broadcast(value):
            shared.append(self.sc.broadcast(value))
            return shared[-1]

        try:
            return self._run(self.sc, broadcast, sp)
        finally:
            for b in shared:
                b.unpersist()

    def _run(self, sc, broadcast, sp: SplitPlan) -> list[GroupOutput]:
        what = f"split cleaning {sp.directory}"
        cores = sc.defaultParallelism
        plan = broadcast(sp)
        bins = balanced_bins([job.size for job in sp.segments], TASKS_PER_CORE * cores)
        sc.setJobDescription(f"{what}: pass 1 over {len(sp.segments)} segments in {len(bins)} tasks")
        segments = broadcast(_checked(_run_bins(sc, bins, lambda i: _task(pass1_task, plan.value, i))))
        bins = balanced_bins([1] * sp.buckets, cores)  # pieces of equal, little work: one task per core
        sc.setJobDescription(f"{what}: combine by digest in {sp.buckets} buckets, {len(bins)} tasks")
        buckets = broadcast(
            _checked(_run_bins(sc, bins, lambda b: _task(combine_task, plan.value, b, segments.value)))
        )
        drop_pass1_files(sp)
        bins = balanced_bins([job.size for job in sp.groups], TASKS_PER_CORE * cores)
        sc.setJobDescription(f"{what}: pass 2 over {len(sp.groups)} groups in {len(bins)} tasks")
        outputs = _checked(_run_bins(sc, bins, lambda g: _task(pass2_task, plan.value, g, buckets.value)))
        return sorted(outputs, key=lambda o: o.index)


TASKS_PER_CORE = 2  # pass 1 and pass 2: tasks a core, each over a bin of pieces of about equal bytes


def _run_bins(sc, bins: list[list[int]], piece) -> list:
    """One Spark task per bin (Spark starts them in this order, the largest first), ``piece`` over each
    index of its bin in turn; the results of every piece."""
    return sc.parallelize(bins, len(bins)).flatMap(lambda indexes: [piece(i) for i in indexes]).collect()


def _task(fn, *args):
    """A piece's result, or the message of the error it met (it names the file and position): the
    driver reports it as the partition's failure, without a task traceback."""
    try:
        return fn(*args)
    except KafkaLogError as err:
        return _Failed(str(err))


class _Failed(str):
    """What :func:`_task` gives back for a piece that failed."""


def _checked(results: list) -> list:
    failed = [r for r in results if isinstance(r, _Failed)]
    if failed:
        raise KafkaLogError(str(failed[0]))
    return results
