"""Split cleaning on Spark: one partition's cleaning round cut into tasks (``kafka_log_core.rules.split_cleaning``).

The driver holds the partition's lock, makes the :class:`SplitPlan` (headers and indexes only: segment
and group lists, transaction-tracker snapshots, active producers, horizons) and broadcasts it. Then three
Spark jobs:

* pass 1, one task per segment, the largest first: the segment's map rows (and lookups), cut by digest
  bucket;
* the combine, one task per core, each over a run of digest buckets: the latest offset of every key over
  all segments, given back per group (keep lists, or map entries where pass 2 looks keys up);
* pass 2, one task per group, the largest first: the group's ``.cleaned`` files.

The rows pass from one job to the next as files in the partition's scratch directory (the shared
filesystem the tasks read the segments from and write their ``.cleaned`` files to); through the driver
go the plan and a few numbers per task (where each bucket or group lies in those files), never a key
digest. An error in a piece (its message names the file and position) stops the round before the next
job. The driver then swaps the groups in and
writes the checkpoint (``kafka_log_core.work.tasks``).
"""

from __future__ import annotations

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.rules.split_cleaning import (
    GroupOutput,
    SplitPlan,
    combine_task,
    drop_pass1_files,
    largest_first,
    pass1_task,
    pass2_task,
    spread,
)


class SparkSplitRunner:
    """A ``split_cleaning.Runner`` that runs the pieces as Spark tasks."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext

    def __call__(self, sp: SplitPlan) -> list[GroupOutput]:
        sc = self.sc
        plan = sc.broadcast(sp)
        try:
            return self._run(sc, plan, sp)
        finally:
            plan.unpersist()

    def _run(self, sc, plan, sp: SplitPlan) -> list[GroupOutput]:
        what = f"split cleaning {sp.directory}"
        # Spark starts a stage's tasks in partition order: the largest segments and groups first
        order = largest_first([job.size for job in sp.segments])
        sc.setJobDescription(f"{what}: pass 1 over {len(order)} segments")
        segments = _checked(
            sc.parallelize(order, len(order)).map(lambda i: _task(pass1_task, plan.value, i)).collect()
        )
        # equal pieces of little work each: one task per core takes a run of buckets
        runs = spread(sp.buckets, sc.defaultParallelism)
        sc.setJobDescription(f"{what}: combine by digest in {sp.buckets} buckets")
        buckets = _checked(
            sc.parallelize(runs, len(runs))
            .flatMap(lambda run: [_task(combine_task, plan.value, b, segments) for b in run])
            .collect()
        )
        drop_pass1_files(sp)
        order = largest_first([job.size for job in sp.groups])
        sc.setJobDescription(f"{what}: pass 2 over {len(order)} groups")
        outputs = _checked(
            sc.parallelize(order, len(order))
            .map(lambda g: _task(pass2_task, plan.value, g, buckets))
            .collect()
        )
        return sorted(outputs, key=lambda o: o.index)


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
