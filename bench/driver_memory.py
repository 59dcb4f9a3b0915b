"""The driver's memory, step by step: what a job's Python driver holds per partition (issue #25).

``python -m bench.driver_memory --log-dir DIR --conf-dir DIR --job report [--master local[2]]`` runs one
job's driver steps in this process (the listing, the settings, the run over Spark -- sizes, bins, progress,
the rows kept as their bins come back -- the rows sorted, and their JSON written to ``/dev/null``) and
prints one JSON object: after each step, what Python holds (``tracemalloc``: current, and the peak while
the step ran) and the process's resident memory (``VmRSS``, and its high-water mark ``VmHWM``). Run it at
two partition counts of :mod:`bench.fleet` and divide the growth by the partitions added. ``--top N`` adds
the N lines of our code holding the most after the run (what the rows and tasks are made of).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tracemalloc

from bench.fleet import NOW_MS

JOBS = ("report", "compact", "retain")


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(line.split()[1]) * 1024
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.driver_memory", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--conf-dir", required=True)
    parser.add_argument("--job", choices=JOBS, default="report")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--top", type=int, default=0, help="lines of our code holding the most after the run")
    parser.add_argument("--no-trace", action="store_true", help="resident memory only (tracemalloc off)")
    args = parser.parse_args(argv)

    import importlib

    from jobs.context import ConfigSources, job_options, list_tasks, load_configs
    from jobs.output import Output
    from jobs.spark import start_spark

    job = importlib.import_module(f"jobs.{args.job}")
    steps: list[dict] = []

    def step(name: str) -> None:
        current, peak = tracemalloc.get_traced_memory() if not args.no_trace else (0, 0)
        steps.append({"step": name, "traced": current, "traced_peak": peak, **_status()})
        if not args.no_trace:
            tracemalloc.reset_peak()

    spark = start_spark(args.master, f"driver-memory {args.job}")()
    if not args.no_trace:
        tracemalloc.start(1)
    step("spark started")
    listing = list_tasks([args.log_dir], None, writing=args.job != "report")
    step("listing")
    configs = load_configs([args.log_dir], ConfigSources(conf_dir=args.conf_dir))
    step("settings")
    opts = job_options(NOW_MS, dry_run=args.job == "report")
    before = tracemalloc.take_snapshot() if args.top else None
    rows = job.run(spark, [args.log_dir], None, configs, opts, listing=listing)
    step("run (rows kept and sorted)")
    top = []
    if before is not None:
        after = tracemalloc.take_snapshot()
        for stat in after.compare_to(before, "lineno")[: args.top]:
            frame = stat.traceback[0]
            top.append({"line": f"{frame.filename.split('/')[-2:]}:{frame.lineno}", "bytes": stat.size_diff,
                        "count": stat.count_diff})  # fmt: skip
    with open(os.devnull, "w") as devnull:
        saved, sys.stdout = sys.stdout, devnull
        try:
            Output("json").emit(rows, job.SCHEMA, args.job)
        finally:
            sys.stdout = saved
    step("JSON written")
    partitions = len(rows)
    del rows, listing
    step("rows and listing dropped")
    spark.sparkContext.stop()
    print(json.dumps({"job": args.job, "partitions": partitions, "steps": steps, "top": top}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
