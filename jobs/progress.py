"""What the driver shows while the executors work: partitions done / total, bytes, elapsed time and the
partitions being worked on.

How the driver learns it: a bin's partitions count as done when the bin's results come back to the driver
(:mod:`jobs.bins` calls :meth:`Progress.update`); where one Spark task runs one partition
(:func:`jobs.runner.map_in_order`), each task adds ``(slice, status)`` to an accumulator when its partition is
done. Spark merges a task's accumulator updates into the driver as soon as the task finishes, in whatever
order tasks finish, so the display follows the work while ``collect()`` still returns the rows in slice
order (the largest-first schedule and the row order are untouched). Which partitions are being worked on
is inferred: Spark launches a stage's tasks in slice order, so the running ones are the earliest slices
not done yet, as many as the stage has active tasks (:class:`pyspark.StatusTracker`).

Where it goes (:func:`mode`): on a terminal, a live bar on standard error (rich); on a pipe or a file (CI),
one line per partition as it finishes; nothing when standard error is merged into a standard output that
is not a terminal (spark-submit runs the Python driver that way), so that a JSON result stays clean.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import click
from pyspark.accumulators import AccumulatorParam

POLL_SECONDS = 0.2


class DoneList(AccumulatorParam):
    """An accumulator of ``(slice, status)`` pairs, in the order the driver learns them."""

    def zero(self, value):
        return []

    def addInPlace(self, value1, value2):
        value1.extend(value2)
        return value1


def merged_streams() -> bool:
    """Standard error goes where a standard output that is not a terminal goes (spark-submit's driver)."""
    try:
        out, err = os.fstat(1), os.fstat(2)
        return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino) and not os.isatty(1)
    except OSError:
        return False


def mode() -> str:
    """``terminal`` (a live bar), ``lines`` (one line per partition) or ``none``."""
    if merged_streams():
        return "none"
    return "terminal" if sys.stderr.isatty() else "lines"


def human(n: int) -> str:
    from rich.filesize import decimal

    return decimal(n)


class Progress:
    """The progress of one job over ``labels`` (partition names in launch order) of ``sizes`` bytes."""

    def __init__(self, title: str, labels: Sequence[str], sizes: Sequence[int], how: str | None = None):
        self.title = title
        self.labels = labels  # any sequence: a broker's 50,000 names need not be made before they are shown
        self.sizes = sizes
        self.total_bytes = sum(sizes)
        self.how = mode() if how is None else how
        self.done = bytearray(len(labels))  # 1 where the slice is done: a byte a partition on the driver
        self.done_count = 0
        self.done_bytes = 0
        self.started = time.monotonic()
        self._bar: Any = None  # a rich Progress on a terminal
        self._bar_task: Any = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ what is known
    def running(self, active: int) -> list[str]:
        """The partitions being worked on: the first ``active`` slices not done (launched in slice order)."""
        out: list[str] = []
        i = self.done.find(0)
        while 0 <= i and len(out) < active:
            out.append(self.labels[i])
            i = self.done.find(0, i + 1)
        return out

    def bytes_done(self) -> int:
        return self.done_bytes

    def update(self, finished: Sequence[tuple[int, str]], active: int = 0) -> None:
        """Record newly finished slices and redraw (terminal) or print their lines (pipe); from any thread."""
        with self._lock:
            self._update(finished, active)

    def _update(self, finished: Sequence[tuple[int, str]], active: int) -> None:
        lines = []
        for i, status in finished:
            if self.done[i]:
                continue  # a task retried after it had reported
            self.done[i] = 1
            self.done_count += 1
            self.done_bytes += self.sizes[i]
            if self.how == "lines":
                elapsed = time.monotonic() - self.started
                lines.append(
                    f"{self.title} [{self.done_count}/{len(self.labels)}] {self.labels[i]}: {status} "
                    f"({human(self.sizes[i])}, {elapsed:.1f} s)"
                )
        if lines:  # a bin's lines in one write
            click.echo("\n".join(lines), err=True)
        if self._bar is not None:
            current = self.running(active)
            shown = ", ".join(current[:3]) + (f" +{len(current) - 3}" if len(current) > 3 else "")
            self._bar.update(
                self._bar_task,
                completed=self.done_count,
                bytes=f"{human(self.bytes_done())}/{human(self.total_bytes)}",
                current=shown,
            )

    # ------------------------------------------------------------------ watching a Spark job
    @contextlib.contextmanager
    def watching(self, spark_context, accumulator=None) -> Iterator[None]:
        """Follow ``accumulator`` (a :class:`DoneList`) while the body runs the Spark job; without one, the
        body calls :meth:`update` itself and this only redraws the bar."""
        if self.how == "none":
            yield
            return
        if self.how == "terminal":
            self._start_bar()
        stop = threading.Event()

        def poll() -> None:
            seen = 0
            while not stop.wait(POLL_SECONDS):
                finished = list(accumulator.value) if accumulator is not None else []
                self.update(finished[seen:], active_tasks(spark_context))
                seen = max(seen, len(finished))

        thread = threading.Thread(target=poll, name="kafka-log-jobs progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if accumulator is not None:
                self.update(list(accumulator.value))
            if self._bar is not None:
                self._bar.stop()

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bar
        from rich.table import Column

        self._bar = Bar(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("partitions"),
            TextColumn("{task.fields[bytes]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[current]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=Console(stderr=True),
        )
        self._bar_task = self._bar.add_task(
            self.title, total=len(self.labels), bytes=f"0 B/{human(self.total_bytes)}", current=""
        )
        self._bar.start()


def active_tasks(spark_context) -> int:
    """Tasks running now in the active stages (the job's one stage)."""
    tracker = spark_context.statusTracker()
    active = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None:
            active += info.numActiveTasks
    return active
