"""Split cleaning on Spark: one partition's cleaning round cut into tasks (``kafka_log_core.rules.split_cleaning``).

The driver holds the partition's lock, makes the :class:`SplitPlan` (headers and indexes only: segment
and group lists, transaction-tracker snapshots, active producers, horizons) and broadcasts it. Then three
Spark jobs, each one task per piece:

* pass 1, one task per segment: the segment's map entries (and lookups), cut by digest bucket;
* the combine, one task per digest bucket: the latest offset of every key over all segments, given
  back per group (keep lists, or map entries where pass 2 looks keys up);
* pass 2, one task per group: the group's ``.cleaned`` files.

The rows pass from one job to the next as files in the partition's scratch directory (the shared
filesystem the tasks read the segments from and write their ``.cleaned`` files to); through the driver
go the plan and a few numbers per task (where each bucket or group lies in those files), never a key
digest. A pass-1 error stops the round before the combine. The driver then swaps the groups in and
writes the checkpoint (``kafka_log_core.work.tasks``).
"""

from __future__ import annotations

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.rules.split_cleaning import (
    GroupOutput,
    SegmentFiles,
    SplitPlan,
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
        sc = self.sc
        plan = sc.broadcast(sp)
        try:
            return self._run(sc, plan, sp)
        finally:
            plan.unpersist()

    def _run(self, sc, plan, sp: SplitPlan) -> list[GroupOutput]:
        n_segments, n_groups, n_buckets = len(sp.segments), len(sp.groups), sp.buckets
        what = f"split cleaning {sp.directory}"
        sc.setJobDescription(f"{what}: pass 1 over {n_segments} segments")
        segments = (
            sc.parallelize(range(n_segments), n_segments).map(lambda i: _pass1(plan.value, i)).collect()
        )
        failed = [s for s in segments if isinstance(s, str)]
        if failed:
            raise KafkaLogError(failed[0])
        sc.setJobDescription(f"{what}: combine by digest in {n_buckets} buckets")
        buckets = (
            sc.parallelize(range(n_buckets), n_buckets)
            .map(lambda b: combine_task(plan.value, b, segments))
            .collect()
        )
        drop_pass1_files(sp)
        sc.setJobDescription(f"{what}: pass 2 over {n_groups} groups")
        outputs = (
            sc.parallelize(range(n_groups), n_groups).map(lambda g: _pass2(plan.value, g, buckets)).collect()
        )
        failed = [o for o in outputs if isinstance(o, str)]
        if failed:
            raise KafkaLogError(failed[0])
        return sorted(outputs, key=lambda o: o.index)


def _pass1(sp: SplitPlan, i: int) -> SegmentFiles | str:
    try:
        return pass1_task(sp, i)
    except KafkaLogError as err:  # the message names the file and position: the driver reports it
        return str(err)


def _pass2(sp: SplitPlan, group: int, buckets) -> GroupOutput | str:
    try:
        return pass2_task(sp, group, buckets)
    except KafkaLogError as err:
        return str(err)
