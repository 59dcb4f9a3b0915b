"""The driver of every job: the partitions listed, a task function mapped over them on the executors (the
largest partitions started first, the progress shown), the outcomes back, the driver's last steps, and
the result rows.

A task function takes a :class:`~kafka_log_core.log.listing.PartitionTask` and gives back a
:class:`~kafka_log_core.work.outcome.TaskOutcome` (its row, and what the driver does next for that
partition); the work of one partition is a function of :mod:`kafka_log_core.work`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import re
import socket
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from jobs import bins, progress
from jobs.context import list_tasks
from jobs.output import tell
from jobs.row_store import RowStore, SortKey, StoredRows
from kafka_log_core import storage
from kafka_log_core.format.filenames import LOG_SUFFIX
from kafka_log_core.log.listing import Listing, PartitionTask
from kafka_log_core.rules import recovery
from kafka_log_core.rules.recovery import RecoveredPartition
from kafka_log_core.work.outcome import Status, TaskOutcome
from kafka_log_core.work.rows import columns
from kafka_log_core.work.tasks import UNKNOWN_SETTINGS

TaskFn = Callable[[PartitionTask], TaskOutcome]


def by_partition(row: Mapping) -> tuple:
    return (row["log_dir"], row["topic"], row["partition"])


#: The result tables' orders: by log dir, topic and partition; the highest dirty ratio first.
BY_PARTITION = (SortKey("log_dir"), SortKey("topic"), SortKey("partition"))
FILTHIEST_FIRST = (SortKey("dirty_ratio", descending=True, missing=0.0), *BY_PARTITION)


def run_job(
    spark, log_dirs: Sequence[str], topic_regex: str | None, fn: TaskFn, row_type: type, *, writing: bool,
    title: str, listing: Listing | None = None, order: Sequence[SortKey] = BY_PARTITION,
    then: Callable[[list[TaskOutcome]], list[TaskOutcome]] | None = None,
) -> Sequence[Mapping[str, Any]]:  # fmt: skip
    """A job's run: list the partitions (unless the command already did, before starting Spark), map
    ``fn`` over them (:func:`run_tasks`), let ``then`` take the driver's further steps on the outcomes
    left for them (split cleaning), and make the result rows (:func:`result_rows`). The rows are kept as
    columns as they come back (:mod:`jobs.row_store`), with the log dir as the user wrote it; of each
    outcome the driver keeps only its row, unless ``then`` has something left to do for it."""
    if listing is None:
        listing = list_tasks(log_dirs, topic_regex, writing=writing)
    store = RowStore(columns(row_type))
    given = {os.path.abspath(d): os.fspath(d) for d in log_dirs}
    left: dict[int, TaskOutcome] = {}  # by row: the outcomes ``then`` takes further, with the driver's task

    def keep(outcome: TaskOutcome, task: PartitionTask) -> None:
        row = store.keep(outcome.row, log_dir=given.get(task.log_dir, task.log_dir))
        if then is not None and outcome.row.get("status") == Status.SPLIT:
            left[row] = TaskOutcome(task, outcome.row, outcome.recovered)

    run_tasks(spark, listing, fn, row_type, writing=writing, title=title, keep=keep)
    replaced: set[int] = set()
    if then is not None and left:
        for row, outcome in zip(left, then(list(left.values())), strict=True):
            replaced.add(row)
            keep(outcome, outcome.task)
    return result_rows(store, (r for r in range(len(store)) if r not in replaced), listing, row_type, order)


def run_tasks(
    spark, listing: Listing, fn: TaskFn, row_type: type, *, writing: bool, title: str,
    keep: Callable[[TaskOutcome, PartitionTask], None],
) -> None:  # fmt: skip
    """``fn`` over the listed partitions, with the listing's notes said first, each outcome given to
    ``keep`` as it comes back; for a job that writes, every log dir whose partitions this run all
    recovered is then marked cleanly shut down."""
    for note in listing.notes:
        tell(note)
    recovered: list[RecoveredPartition] = []

    def kept(outcome: TaskOutcome, task: PartitionTask) -> None:
        if outcome.recovered is not None:
            recovered.append(outcome.recovered)
        keep(outcome, task)

    run_distributed(spark, listing.tasks, fn, row_type, title=title, keep=kept)
    if writing:
        for note in recovery.finish_log_dirs(recovered):
            tell(note)


def result_rows(
    store: RowStore, rows: Iterable[int], listing: Listing, row_type: type,
    order: Sequence[SortKey] = BY_PARTITION,
) -> StoredRows:  # fmt: skip
    """The result table: the ``rows`` of ``store``, a failed ``row_type`` row for whatever could not even
    be listed, sorted by ``order``; one note per topic whose deciding settings are unknown."""
    unlisted = [
        store.keep(
            dataclasses.asdict(row_type(u.log_dir, u.topic, u.partition, status=u.status, reason=u.reason))
        )
        for u in listing.failed + listing.skipped
    ]
    table = StoredRows(store, store.ordered(itertools.chain(rows, unlisted), order))
    said = set()
    for row in table:  # one line per topic whose deciding settings are unknown
        if row["status"] != Status.FAILED or row["topic"] in said:
            continue
        reason = row.get("reason") or ""
        if reason.startswith(UNKNOWN_SETTINGS):
            said.add(row["topic"])
            tell(f"{row['log_dir']}: {reason}")
    return table


def partition_bytes(task: PartitionTask) -> int:
    """Bytes of a partition directory's ``.log`` files as the driver sees them (0 when it cannot be read):
    what its task reads, to size the Spark tasks and start the largest first. One ``stat`` per segment
    (the index and checkpoint files are small beside them)."""
    try:
        with storage.scandir(os.path.join(task.log_dir, task.tp.dir_name)) as entries:
            return sum(
                e.stat(follow_symlinks=False).st_size
                for e in entries
                if e.name.endswith(LOG_SUFFIX) and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return 0


def run_distributed(
    spark, tasks: Sequence[PartitionTask], fn: TaskFn, row_type: type | None = None, title: str | None = None,
    keep: Callable[[TaskOutcome, PartitionTask], Any] | None = None,
) -> list:  # fmt: skip
    """Map ``fn`` over the tasks in Spark tasks that each run a bin of partitions (:mod:`jobs.bins`: sized
    by bytes, the largest partitions started first); the outcomes come back in the order of ``tasks``
    (each as ``keep`` makes it, when given). With a ``title``, the progress is shown as the partitions
    finish (:mod:`jobs.progress`)."""
    if not tasks:
        return []
    sizes = array("q", (partition_bytes(t) for t in tasks))
    guarded = functools.partial(on_executor, fn=fn, row_type=row_type)
    shown = None
    if title is not None:
        order = bins.launch_order(sizes, spark.sparkContext.defaultParallelism)
        shown = progress.Progress(title, _Labels(tasks, order), array("q", (sizes[i] for i in order)))
    failed = functools.partial(failed_outcome, row_type=row_type)
    return bins.run_bins(
        spark, tasks, sizes, guarded, failed, environment_failure, shown=shown, what=title or "job", keep=keep
    )


class _Labels(Sequence[str]):
    """The partitions' names in launch order, each made when the progress shows it (not 50,000 at once)."""

    def __init__(self, tasks: Sequence[PartitionTask], order: Sequence[int]) -> None:
        self._tasks, self._order = tasks, order

    def __getitem__(self, i):  # an int: the progress never slices
        return self._tasks[self._order[i]].tp.dir_name

    def __len__(self) -> int:
        return len(self._order)


def failed_outcome(task: PartitionTask, reason: str, row_type: type | None = None) -> TaskOutcome:
    """A failed result for ``task`` (a row of ``row_type``, when given)."""
    row = dict(log_dir=task.log_dir, topic=task.topic, partition=task.partition, status=Status.FAILED,
               reason=reason, duration_ms=0)  # fmt: skip
    return TaskOutcome(task, row if row_type is None else dataclasses.asdict(row_type(**row)))


def environment_failure(message: str) -> click.ClickException | None:
    """The one line a job stops with when a Spark task failed before our code ran, because of the
    executors' Python (None for any other failure)."""
    hint = _environment_hint(message)
    if hint is None:
        return None
    return click.ClickException(
        f"{hint}: ship the job's environment built from this checkout (`make dist`, then spark-submit "
        "--archives dist/kafka-log-jobs-env.tar.gz#environment --conf "
        "spark.pyspark.python=./environment/bin/python; see docs/cluster.md)"
    )


def map_in_order(spark, tasks: Sequence, fn: Callable, shown: progress.Progress | None = None) -> list:
    """``fn`` over ``tasks`` with one slice (one Spark task) each: Spark launches a stage's tasks in
    partition order, so ``tasks[0]`` starts first. Results come back in the same order. ``shown`` follows
    the tasks as they finish."""
    sc = spark.sparkContext
    done = sc.accumulator([], progress.DoneList()) if shown is not None else None
    rdd = sc.parallelize(list(enumerate(tasks)), numSlices=len(tasks))
    watching = shown.watching(sc, done) if shown is not None else contextlib.nullcontext()
    with watching:
        try:
            return rdd.map(functools.partial(_reporting, fn=fn, done=done)).collect()
        except Exception as err:
            stop = environment_failure(str(err))
            if stop is None:
                raise
            raise stop from None


def _reporting(item: tuple[int, object], fn: Callable, done) -> object:
    """What a Spark task runs: ``fn`` on its task, then its slice and status added to ``done``."""
    i, task = item
    result = fn(task)
    if done is not None:
        status = result.row.get("status", "done") if isinstance(result, TaskOutcome) else "done"
        done.add([(i, str(status))])
    return result


def _environment_hint(message: str) -> str | None:
    """One line for a Spark task that failed before our code ran, because of the executors' Python."""
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", message)
    if missing:
        return f"the executors' Python cannot import {missing.group(1)!r}"
    stale = re.search(r"AttributeError: Can't get attribute '([^']+)' on <module '([^']+)'", message)
    if stale:
        return (
            f"the executors' {stale.group(2)} has no {stale.group(1)!r}: they run another version of the jobs"
        )
    return None


def on_executor(task: PartitionTask, fn: TaskFn, row_type: type | None = None) -> TaskOutcome:
    """What a Spark task runs: ``fn`` on the partition, or a failed row (of ``row_type``, when given) naming
    this host and the directory when this executor does not see it (log dirs must be at the same path on
    every node)."""
    if storage.is_dir(os.path.join(task.log_dir, task.tp.dir_name)):
        return fn(task)
    missing = task.directory if storage.is_dir(task.log_dir) else Path(task.log_dir)
    reason = (
        f"{missing}: no such directory on executor host {socket.gethostname()} (the driver listed it: "
        "every node must see the log dirs at the same path, on a shared filesystem)"
    )
    return failed_outcome(task, reason, row_type)
