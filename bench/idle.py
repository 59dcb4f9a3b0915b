"""An idle partition's own CPU in one process, without Spark: what a Python worker spends per partition.

``python -m bench.idle --work DIR [--partitions 10000] [--jobs retain,report,compact] [--profile OUT]``
writes a log dir of idle partitions (:mod:`bench.fleet`, none dirty) once, then runs each job's task
function on every partition as a Spark worker runs it (:func:`jobs.runner.on_executor`, the task pickled
in and its outcome pickled back; the checkpoint files this process keeps forgotten first, as in a fresh
worker), on a fresh copy for a job that writes. Prints one JSON object: per job and kind of partition
(empty, clean-delete, clean-compact), CPU microseconds per partition and every row's status. With
``--profile``, each job's run is also written as a cProfile file ``OUT.<job>`` (a second run: the
profiler's own cost is not in the figures).

The sweep of :mod:`bench.partitions` measures the whole process tree; this is the part of it that is the
partition's own work, for finding where it goes.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pickle
import shutil
import sys
import time
from pathlib import Path

from bench.fleet import NOW_MS, Fleet, generate
from bench.partitions import copy_tree
from jobs.context import ConfigSources, job_options, list_tasks, load_configs
from jobs.runner import on_executor
from kafka_log_core.log import checkpoint_files
from kafka_log_core.work.report import report_task
from kafka_log_core.work.rows import CompactRow, ReportRow, RetainRow
from kafka_log_core.work.tasks import compact_task, retain_task

JOBS = {"retain": (retain_task, RetainRow), "report": (report_task, ReportRow),
        "compact": (compact_task, CompactRow)}  # fmt: skip


def fleet(work: Path, partitions: int) -> Path:
    root = work / f"idle-{partitions}"
    if not (root / "manifest.json").exists():
        m = generate(root, Fleet(partitions, 0.0))
        (root / "manifest.json").write_text(json.dumps(m.to_json()))
    return root


def kinds(root: Path) -> dict[str, str]:
    """Each partition directory's kind, from its contents (the fleet's templates differ by segments)."""
    out = {}
    for d in (root / "logs").iterdir():
        if d.is_dir():
            logs = sum(1 for p in d.iterdir() if p.suffix == ".log")
            out[d.name] = "empty" if logs == 1 else "clean"
    return out


WARM_UP = 5  # partitions of each topic policy run first, not measured: the kernels' first use


def warm_up(tasks, task_fn, row_type, cs) -> None:
    """The kernels' first use (a cost of each worker process, not of a partition) paid before measuring."""
    done: dict[bool, int] = {}
    for task in tasks:
        compact = cs.settings(task.topic).config.compact
        if done.get(compact, 0) < WARM_UP:
            done[compact] = done.get(compact, 0) + 1
            on_executor(task, task_fn, row_type)


def run(job: str, root: Path, work: Path, profile: str | None) -> dict:
    fn, row_type = JOBS[job]
    target = root
    if job != "report":
        target = work / f"idle-copy-{job}"
        shutil.rmtree(target, ignore_errors=True)
        copy_tree(root, target)
    logs = str(target / "logs")
    listing = list_tasks([logs], None, writing=job != "report")
    configs = load_configs([logs], ConfigSources(conf_dir=str(target / "conf")))
    opts = job_options(NOW_MS, dry_run=False)
    task_fn = functools.partial(fn, configs=configs, opts=opts)
    cs = next(iter(configs.values()))
    payloads = [pickle.dumps(t) for t in listing.tasks]
    warm_up(listing.tasks, task_fn, row_type, cs)
    checkpoint_files.forget()
    statuses: dict[str, int] = {}
    cpu: dict[str, float] = {}
    count: dict[str, int] = {}
    kind_of = kinds(target)
    profiler = cProfile.Profile() if profile else None
    started = time.process_time()
    for payload in payloads:
        t0 = time.process_time()
        if profiler:
            profiler.enable()
        task = pickle.loads(payload)
        outcome = on_executor(task, task_fn, row_type)
        pickle.dumps(outcome)
        if profiler:
            profiler.disable()
        spent = time.process_time() - t0
        name = task.tp.dir_name
        kind = kind_of[name]
        if kind == "clean":
            kind += "-compact" if cs.settings(task.topic).config.compact else "-delete"
        cpu[kind] = cpu.get(kind, 0.0) + spent
        count[kind] = count.get(kind, 0) + 1
        status = str(outcome.row["status"])
        statuses[status] = statuses.get(status, 0) + 1
    total = time.process_time() - started
    if profiler:
        profiler.dump_stats(f"{profile}.{job}")
    if target != root:
        shutil.rmtree(target, ignore_errors=True)
    return {
        "partitions": len(payloads),
        "us_per_partition": 1e6 * total / len(payloads),
        "us_by_kind": {k: round(1e6 * cpu[k] / count[k], 1) for k in sorted(cpu)},
        "partitions_by_kind": count,
        "statuses": statuses,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--jobs", default="retain,report,compact")
    parser.add_argument("--profile", default=None, help="write cProfile files OUT.<job> (a second run)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    root = fleet(work, args.partitions)
    out = {}
    for job in args.jobs.split(","):
        out[job] = run(job, root, work, None)
        print(f"{job}: {json.dumps(out[job])}", file=sys.stderr, flush=True)
        if args.profile:
            run(job, root, work, args.profile)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
