"""The ``skew`` section of the benchmark: one big partition among small ones, on ``local[2]``.

``python -m bench.skew --work DIR [--quick] [--master local[2]] [--set KEY=VALUE ...]`` prints one JSON
object. The data: 15 partitions of 1x and one of 8x (the same workload otherwise), the big one last in
the listing order (``skew-15``), so that a driver that hands out tasks in listing order starts it last.
In one Spark session, after a warm-up job that starts every Python worker, the compact job runs on
fresh copies of:

* ``large``: the big partition alone;
* ``small``: the 15 small ones alone;
* ``mixed``: all 16, as the jobs schedule them (largest first);
* ``listing_order``: all 16, one task each in listing order (the big one last), for comparison.

The target: ``mixed`` finishes no later than ``large`` plus ``small`` (each measured alone on the same
cores): ratio ``mixed / (large + small) <= 1``. Started last, the big partition runs alone after the
small ones, which is about that sum; started first, the small ones run beside it. ``listing_order``
against the same bound, and ``mixed / listing_order``, are reported next to it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.generate import START_MS, KiB, MiB, Workload, generate

SMALL = 15
FACTOR = 8
TOPIC = "skew"
FULL_SMALL_BYTES = 16 * MiB
QUICK_SMALL_BYTES = 2 * MiB  # segment.bytes has a floor of 1 MiB: two segments, one cleanable


def workload(small_bytes: int) -> Workload:
    """The small partitions' workload (the large one is the same with ``FACTOR`` times the bytes)."""
    segment = max(small_bytes // 8, MiB)
    return Workload(partition_bytes=small_bytes, topic=TOPIC, segment_bytes=segment, tombstone_share=0.01)


def job_sets(w: Workload) -> list[str]:
    return ["cleanup.policy=compact", f"segment.bytes={w.segment_bytes}", "min.cleanable.dirty.ratio=0.01"]


def make_data(root: Path, w: Workload) -> Path:
    """``root/logs``: skew-0 .. skew-14 of ``w``, skew-15 of ``FACTOR`` times its bytes."""
    small_bytes = w.partition_bytes
    small = generate(root / "small", dataclasses.replace(w, partitions=SMALL, partition_bytes=small_bytes))
    large = generate(
        root / "large", dataclasses.replace(w, partitions=1, partition_bytes=FACTOR * small_bytes)
    )
    logs = root / "logs"
    logs.mkdir()
    for p in range(SMALL):
        shutil.move(Path(small.log_dir) / f"{TOPIC}-{p}", logs / f"{TOPIC}-{p}")
    shutil.move(Path(large.log_dir) / f"{TOPIC}-0", logs / f"{TOPIC}-{SMALL}")
    from kafka_log_core.log.log_dir import write_log_dir_checkpoints

    write_log_dir_checkpoints(logs, now_ms=START_MS, random_seed=w.seed)
    return logs


def _copy(source: Path, target: Path, partitions: list[int]) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for f in source.iterdir():
        if f.is_file():
            shutil.copyfile(f, target / f.name)
    for p in partitions:
        shutil.copytree(source / f"{TOPIC}-{p}", target / f"{TOPIC}-{p}")
    return target


def measure(work: Path, *, quick: bool, master: str, sets: list[str]) -> dict:
    from jobs import compact
    from jobs.context import job_options, list_tasks
    from jobs.runner import map_in_order, on_executor
    from jobs.spark import spark_session
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.rows import CompactRow
    from kafka_log_core.work.tasks import compact_task

    small_bytes = QUICK_SMALL_BYTES if quick else FULL_SMALL_BYTES
    w = workload(small_bytes)
    logs = make_data(work / "data", w)
    configs = load_config(None, [], [], [*job_sets(w), *sets])
    opts = job_options(None)
    spark = spark_session(master, "kafka-log-jobs bench skew")
    cores = spark.sparkContext.defaultParallelism
    everything = list(range(SMALL + 1))
    runs: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-skew-warm-") as tmp:
            compact.run(
                spark, [str(_copy(logs, Path(tmp) / "w", list(range(2 * cores))))], None, configs, opts
            )

        def listing_order(target: Path) -> list[dict]:
            """All tasks in listing order, one slice each: how the jobs scheduled before largest-first."""
            tasks = list_tasks([str(target)], None, writing=True).tasks
            fn = functools.partial(compact_task, configs=configs, opts=opts)
            guarded = functools.partial(on_executor, fn=fn, row_type=CompactRow)
            return [outcome.row for outcome in map_in_order(spark, tasks, guarded)]

        cases = [
            ("large", [SMALL], None),
            ("small", list(range(SMALL)), None),
            ("mixed", everything, None),
            ("listing_order", everything, listing_order),
        ]
        for name, partitions, runner in cases:
            target = _copy(logs, work / "run" / name, partitions)
            size = sum(p.stat().st_size for p in target.rglob("*.log"))
            started = time.perf_counter()
            if runner is None:
                rows = compact.run(spark, [str(target)], None, configs, opts)
            else:
                rows = runner(target)
            seconds = time.perf_counter() - started
            bad = [
                f"{r['topic']}-{r['partition']}: {r['status']} {r['reason']}"
                for r in rows
                if r["status"] != "cleaned"
            ]
            if bad:
                raise RuntimeError(f"skew {name}: {bad[:2]}")
            runs[name] = {
                "partitions": len(partitions),
                "seconds": seconds,
                "bytes": size,
                "records": sum(r["records_before"] for r in rows),
                "task_ms": {f"{r['topic']}-{r['partition']}": r["duration_ms"] for r in rows},
            }
            shutil.rmtree(target, ignore_errors=True)
    finally:
        spark.stop()
    large, small = runs["large"]["seconds"], runs["small"]["seconds"]
    bound = large + small
    return {
        "master": master,
        "cores": cores,
        "small_bytes": small_bytes,
        "large_bytes": FACTOR * small_bytes,
        "runs": runs,
        "bound_seconds": bound,
        "mixed_vs_bound": runs["mixed"]["seconds"] / bound,
        "listing_order_vs_bound": runs["listing_order"]["seconds"] / bound,
        "mixed_vs_listing_order": runs["mixed"]["seconds"] / runs["listing_order"]["seconds"],
    }


# ------------------------------------------------------------------------------------ in bench.run
def run_section(report, quick: bool, work: Path, sets: list[str] = ()) -> None:
    """Measure in a process of its own (as every section) and add rows, ratios and the section."""
    from bench.report import Row, section_result

    args = [*(["--quick"] if quick else []), *[a for s in sets for a in ("--set", s)]]
    result = section_result("skew", work, args)
    for name, run in result["runs"].items():
        report.rows.append(Row("skew", f"skew {result['master']}: {name}", run["bytes"], run["seconds"],
                               run["records"], cores=result["cores"], note=f"{run['partitions']} partitions"))  # fmt: skip
    report.sections["skew"] = {"status": "ok", **result}
    for key in ("mixed_vs_bound", "listing_order_vs_bound", "mixed_vs_listing_order"):
        report.ratios[f"skew_{key}"] = result[key]


def target(report):
    from bench.report import Target

    last = report.ratios.get("skew_listing_order_vs_bound")
    return Target(
        "skew: 1 x 8x + 15 x 1x <= large alone + small alone", report.ratios.get("skew_mixed_vs_bound"), 1.0, False,
        "x", "" if last is None else f"the same in listing order (the big one last): {last:.2f}",
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.skew", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="where the data and the copies go")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_SMALL_BYTES // KiB} KiB small partitions"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps(measure(work, quick=args.quick, master=args.master, sets=args.sets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
