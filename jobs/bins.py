"""Partitions run in bins: a Spark task runs a bin of partitions one after the other.

A Spark task costs about 35 ms of CPU before our code runs (the scheduler in the JVM, the Python worker
reading its task and unpickling the job's function), and an idle partition's own work is under a
millisecond: one task per partition made a broker's 50,000 mostly idle partitions take half an hour.
So the partitions are dealt into bins, as split cleaning deals its pieces (``split_cleaning``):

* a partition weighs its bytes on disk plus :data:`IDLE_WEIGHT` (what the set-up of any partition costs,
  in bytes of work), and the partitions, heaviest first, go each into the lightest bin so far: bins of
  about equal weight, a partition larger than a bin's share alone in its own;
* there are at least :data:`BINS_PER_CORE` bins a core (the last bins to finish end close together),
  at most :data:`MAX_BIN_PARTITIONS` partitions and about :data:`MAX_BIN_WEIGHT` a bin (a second or so
  of work: the progress moves, and what one failed task takes with it stays small);
* the bin holding the largest partition starts first, and in a bin the largest partition first.

Each bin is a Spark job of one task, taken in that order by as many threads as Spark has cores, each
submitting its next bin as soon as its last one ends: the bins start in that order (two that start at
the same instant may swap), and when a task fails, even when its Python worker dies, only its job
fails, and its partitions get a failed row saying so; the other bins go on. The task's function
travels once, as a broadcast, not inside every task.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import uuid
from array import array
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.serializers import CloudPickleSerializer

from jobs import progress

IDLE_WEIGHT = 256 * 1024  # bytes of work a partition's set-up weighs, whatever its size (about 1 ms)
BINS_PER_CORE = 4
MAX_BIN_PARTITIONS = 1000
MAX_BIN_WEIGHT = 1024**3
MAX_THREADS = 256  # bins running at once: one a core (Spark's default parallelism), at most this many


def plan_bins(sizes: Sequence[int], cores: int) -> list[list[int]]:
    """The indexes of ``sizes`` (bytes of each partition) dealt into bins, in the order to start them:
    the bin holding the largest partition first, each bin's partitions largest first."""
    if not sizes:
        return []
    count = max(
        BINS_PER_CORE * max(cores, 1),
        math.ceil(len(sizes) / MAX_BIN_PARTITIONS),
        math.ceil((sum(sizes) + IDLE_WEIGHT * len(sizes)) / MAX_BIN_WEIGHT),
    )
    count = min(count, len(sizes))
    lightest = [(0, b) for b in range(count)]  # (weight so far, bin): a heap
    bins: list[list[int]] = [[] for _ in range(count)]
    # Heaviest first, equal sizes in index order (a stable sort, reversed): no key tuple per partition.
    for i in sorted(range(len(sizes)), key=sizes.__getitem__, reverse=True):
        weight, b = heapq.heappop(lightest)
        bins[b].append(i)
        heapq.heappush(lightest, (weight + sizes[i] + IDLE_WEIGHT, b))
    return sorted((b for b in bins if b), key=lambda b: (-sizes[b[0]], b[0]))


def run_bins(
    spark, items: Sequence, sizes: Sequence[int], fn: Callable[[Any], Any], failed: Callable[[Any, str], Any],
    fatal: Callable[[str], Exception | None], *, shown: progress.Progress | None = None, what: str = "job",
    keep: Callable[[Any, Any], Any] | None = None,
) -> list:  # fmt: skip
    """``fn`` over ``items`` (each of ``sizes`` bytes) in bins (:func:`plan_bins`); the results in the
    order of ``items``, each as ``keep(result, item)`` makes it when its bin comes back (the driver keeps
    them small, and may put its own ``item`` back in place of the copy that came back with the result). A
    bin whose Spark task failed gives ``failed(item, reason)`` for each of its items, unless
    ``fatal(message)`` says the failure stops the job (the executors cannot run our code at all): then that
    exception is raised once the bins already running end. ``shown`` (its labels in the order
    :func:`launch_order` gives) follows the partitions as their bins finish."""
    sc = spark.sparkContext
    bins = [array("q", b) for b in plan_bins(sizes, sc.defaultParallelism)]  # 8 bytes a partition
    command = sc.broadcast((uuid.uuid4().hex, CloudPickleSerializer().dumps(fn)))
    position = array("q", bytes(8 * len(items)))  # where each item is in launch order
    for p, i in enumerate(i for b in bins for i in b):
        position[i] = p
    results: list = [None] * len(items)

    def run(number: int, indexes: Sequence[int]) -> None:
        sc.setJobDescription(f"{what}: bin {number + 1} of {len(bins)}, {len(indexes)} partitions")
        payload = [items[i] for i in indexes]
        try:
            out = sc.parallelize([payload], 1).mapPartitions(_bin_task(command)).collect()
        except Exception as err:  # the bin's task failed, perhaps its worker died: its partitions only
            stop = fatal(str(err))
            if stop is not None:
                raise stop from None
            reason = (
                f"the Spark task of this partition's bin ({len(indexes)} partitions) failed: {_gist(err)}"
            )
            out = [failed(items[i], reason) for i in indexes]
        statuses = [_status(result) for result in out]
        for i, result in zip(indexes, out, strict=True):
            results[i] = result if keep is None else keep(result, items[i])
        if shown is not None:  # the bin's partitions are done: the progress counts them
            done = [(position[i], status) for i, status in zip(indexes, statuses, strict=True)]
            shown.update(done, progress.active_tasks(sc))

    watching = shown.watching(sc) if shown is not None else contextlib.nullcontext()
    pool = ThreadPoolExecutor(
        max(1, min(len(bins), sc.defaultParallelism, MAX_THREADS)), "kafka-log-jobs bin"
    )
    try:
        with watching:
            for future in [pool.submit(run, n, b) for n, b in enumerate(bins)]:
                future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        command.unpersist()
    return results


def launch_order(sizes: Sequence[int], cores: int) -> array:
    """The indexes of ``sizes`` in the order their partitions start (what :func:`run_bins` does)."""
    return array("q", (i for b in plan_bins(sizes, cores) for i in b))


def _gist(err: Exception) -> str:
    """The gist of a Spark task failure: the Python error's last line, or Spark's own first line."""
    text = str(err)
    python = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith((" ", "\t"))]
    worker = next((line for line in python if "Python worker exited unexpectedly" in line), None)
    return worker or (python[-1] if python else type(err).__name__)[:300]


def _bin_task(command) -> Callable:
    def task(payloads):
        fn = _function(command)
        for payload in payloads:  # one: the bin
            for item in payload:
                yield fn(item)

    return task


_functions: dict[str, Callable] = {}


def _function(command) -> Callable:
    """The job's function (broadcast with a token of its own), unpickled once per worker process."""
    token, pickled = command.value
    fn = _functions.get(token)
    if fn is None:
        fn = _functions[token] = CloudPickleSerializer().loads(pickled)
    return fn


def _status(result) -> str:
    row = getattr(result, "row", result)
    return str(row.get("status", "done")) if isinstance(row, Mapping) else "done"
