"""Split cleaning on Spark: one partition's cleaning round cut into tasks (``kafka_log_core.split_cleaning``).

The driver holds the partition's lock, makes the :class:`SplitPlan` (headers and indexes only: segment
and group lists, transaction-tracker snapshots, active producers, horizons) and broadcasts it. Then:

* stage 1, one task per segment: pass 1 -> (map entries, lookup digests), each cut into digest
  buckets; kept in the executors (persisted), errors collected to the driver;
* shuffle by digest bucket, one task per bucket: the latest offset of every key over all segments,
  joined with the digests each group looks up -> (group, entries of its keys);
* shuffle by group, one task per group: pass 2 writes the group's ``.cleaned`` files.

Only the plan and one small result per group pass through the driver; no process holds the whole map.
The driver then swaps the groups in and writes the checkpoint (``kafka_log_core.tasks``).
"""

from __future__ import annotations

from pyspark import StorageLevel

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.rules.split_cleaning import (
    EMPTY_ENTRIES,
    GroupOutput,
    SplitPlan,
    bucket_rows,
    clean_group,
    combine_bucket,
    group_entries,
    segment_digests,
)

_MAP, _LOOKUP = 0, 1


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
        n_segments, n_groups, buckets = len(sp.segments), len(sp.groups), sp.buckets
        sc.setJobDescription(f"split cleaning {sp.directory}: pass 1 over {n_segments} segments")
        pass1 = (
            sc.parallelize(range(n_segments), n_segments)
            .map(lambda i: _pass1(plan.value, i))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            errors = pass1.filter(lambda r: isinstance(r, str)).collect()
            if errors:
                raise KafkaLogError(errors[0])
            sc.setJobDescription(
                f"split cleaning {sp.directory}: combine by digest, pass 2 over {n_groups} groups"
            )
            seeds = sc.parallelize([(g, EMPTY_ENTRIES) for g in range(n_groups)], 1)
            outputs = (
                pass1.flatMap(lambda parts: parts)
                .groupByKey(buckets)  # by digest bucket
                .flatMap(lambda kv: _combine(kv[1]))
                .union(seeds)  # every group runs, even one without keys
                .groupByKey(n_groups, partitionFunc=lambda g: g)
                .map(lambda kv: _pass2(plan.value, kv[0], list(kv[1])))
                .collect()
            )
        finally:
            pass1.unpersist()
        failed = [o for o in outputs if isinstance(o, str)]
        if failed:
            raise KafkaLogError(failed[0])
        return sorted(outputs, key=lambda o: o.index)


def _pass1(sp: SplitPlan, i: int):
    job = sp.segments[i]
    try:
        entries, lookups = segment_digests(sp, job)
    except KafkaLogError as err:  # the message names the file and position: the driver reports it
        return str(err)
    return [(b, (_MAP, job.base, rows)) for b, rows in bucket_rows(entries, sp.buckets)] + [
        (b, (_LOOKUP, job.group, rows)) for b, rows in bucket_rows(lookups, sp.buckets)
    ]


def _combine(parts):
    entries, lookups = [], []
    for kind, where, rows in parts:  # where: the segment's base (map entries) or the group (lookups)
        if kind == _MAP:
            entries.append((where, rows))
        else:
            lookups.append((where, rows))
    return combine_bucket(entries, lookups)


def _pass2(sp: SplitPlan, group: int, parts: list):
    try:
        return clean_group(sp, sp.groups[group], group_entries([p for p in parts if len(p)]))
    except KafkaLogError as err:
        return str(err)
