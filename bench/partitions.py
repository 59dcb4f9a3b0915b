"""The ``partitions`` section of the benchmark: what a partition with nothing to do costs (issue #25).

``python -m bench.partitions --work DIR [--quick] [--counts 100,1000] [--jobs report,retain] [--only sweep]``
prints one JSON object. Every command runs as a user runs it (``kafka-log-jobs <job> --log-dir ...
--conf-dir ... --now-ms ... --master local[2]``, a Spark of its own) and is measured from outside
(:mod:`bench.measure`: wall time, the CPU of its whole process tree, the Python driver's peak memory),
with the load average at its start beside each figure: the machine is shared.

* ``sweep``: log dirs of 100, 1,000, 10,000 and 50,000 broker-like partitions (:mod:`bench.fleet`: most
  empty or clean, 1 % dirty), and beside each a log dir of its dirty partitions alone. Each job runs on a
  fresh copy of both. Partitions per second: N / wall. CPU per idle partition: (CPU on N - CPU on the
  dirty ones alone) / the idle partitions, so Spark's start-up and the dirty partitions' work cancel out.
  The driver's memory per partition: the growth of its peak between the two largest N.
* ``broker``: ``compact`` on 4,000 partitions of which 100 are dirty, against ``compact`` on the 100 alone
  (wall time; the target is at most 1.2x).
* ``sample``: ``report`` on the sample log dir of ``make run`` against a bare Spark session (local[2], UI
  off) and one trivial Python job, taking turns, the best of three each (the target: within 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import measure
from bench.fleet import NOW_MS, Fleet, generate

REPO = Path(__file__).resolve().parent.parent
JOBS = ("report", "compact", "retain")
COUNTS = (100, 1_000, 10_000, 50_000)
QUICK_COUNTS = (100, 300)
BROKER = (4_000, 100)  # partitions, dirty ones
QUICK_BROKER = (400, 10)
SAMPLE_TURNS = 3
MASTER = "local[2]"
TIMEOUT_S = 3600
BARE_SPARK = (
    "from pyspark.sql import SparkSession\n"
    f"s = SparkSession.builder.master({MASTER!r}).config('spark.ui.enabled', 'false').getOrCreate()\n"
    "s.sparkContext.setLogLevel('ERROR')\n"
    "assert s.sparkContext.parallelize([1], 1).map(lambda x: x + 1).collect() == [2]\n"
    "s.stop()\n"
)


def log(message: str) -> None:
    print(f"[bench partitions {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _command(job: str, root: Path) -> list[str]:
    cli = Path(sys.executable).with_name("kafka-log-jobs")
    return [str(cli), job, "--log-dir", str(root / "logs"), "--conf-dir", str(root / "conf"),
            "--now-ms", str(NOW_MS), "--master", MASTER, "--output", "json"]  # fmt: skip


def run_job(job: str, root: Path, work: Path) -> dict:
    """``job`` on ``root`` (on a fresh copy for a job that writes), measured; its rows checked."""
    target = root
    if job != "report":
        target = work / f"copy-{job}"
        shutil.rmtree(target, ignore_errors=True)
        copy_tree(root, target)
    result = measure.run(_command(job, target), cwd=REPO, timeout=TIMEOUT_S)
    if target != root:
        shutil.rmtree(target, ignore_errors=True)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise RuntimeError(f"{job} on {root} exited with {result.returncode}:\n{tail}")
    rows = json.loads(result.stdout)
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return {
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
        "cpu_by_process": result.cpu_by_process,
        "driver_peak_rss": result.driver_peak_rss,
        "partitions": len(rows),
        "statuses": statuses,
        "load_average": result.load_average,
    }


def copy_tree(source: Path, target: Path) -> None:
    """A copy of ``source`` at ``target`` (symlinks as symlinks, times kept): ``cp -a`` where there is one
    (50,000 partition directories in seconds, where ``shutil.copytree`` took minutes)."""
    cp = shutil.which("cp")
    if cp is None:
        shutil.copytree(source, target, symlinks=True)
        return
    subprocess.run([cp, "-a", os.fspath(source), os.fspath(target)], check=True)


def fleet_dirs(work: Path, n: int, dirty_share: float) -> tuple[Path, Path, Fleet]:
    """The log dir of ``n`` partitions and the log dir of its dirty ones alone (generated once)."""
    fleet = Fleet(n, dirty_share)
    full, alone = work / f"fleet-{n}", work / f"fleet-{n}-dirty"
    if not (full / "manifest.json").exists():
        log(f"generating {n} partitions ({fleet.dirty} dirty)")
        m = generate(full, fleet)
        (full / "manifest.json").write_text(json.dumps(m.to_json()))
    if not (alone / "manifest.json").exists():
        m = generate(alone, Fleet(max(fleet.dirty, 1), 1.0))
        (alone / "manifest.json").write_text(json.dumps(m.to_json()))
    return full, alone, fleet


def sweep(work: Path, counts: tuple[int, ...], jobs: tuple[str, ...]) -> dict:
    out: dict = {"counts": list(counts), "jobs": {job: {} for job in jobs}}
    for n in counts:
        full, alone, fleet = fleet_dirs(work, n, 0.01)
        for job in jobs:
            log(f"{job}: {n} partitions, then their {max(fleet.dirty, 1)} dirty ones alone")
            on_all, on_dirty = run_job(job, full, work), run_job(job, alone, work)
            idle = n - fleet.dirty
            out["jobs"][job][str(n)] = measured = {
                "all": on_all,
                "dirty_alone": on_dirty,
                "partitions_per_second": n / on_all["seconds"],
                "cpu_ms_per_idle_partition": 1000 * (on_all["cpu_seconds"] - on_dirty["cpu_seconds"]) / idle,
            }
            log(f"{job} {n}: " + json.dumps(measured))  # a long sweep cut short keeps what it measured
        shutil.rmtree(full, ignore_errors=True)
        shutil.rmtree(alone, ignore_errors=True)
    if len(counts) >= 2:
        low, high = str(counts[-2]), str(counts[-1])
        for job in jobs:
            runs = out["jobs"][job]
            growth = runs[high]["all"]["driver_peak_rss"] - runs[low]["all"]["driver_peak_rss"]
            runs["driver_bytes_per_partition"] = growth / (counts[-1] - counts[-2])
    return out


def broker_like(work: Path, partitions: int, dirty: int) -> dict:
    full, alone, _ = fleet_dirs(work, partitions, dirty / partitions)
    log(f"compact: {partitions} partitions with {dirty} dirty, and the {dirty} alone")
    on_all, on_dirty = run_job("compact", full, work), run_job("compact", alone, work)
    log(f"broker-like: {json.dumps({'all': on_all, 'dirty_alone': on_dirty})}")
    shutil.rmtree(full, ignore_errors=True)
    shutil.rmtree(alone, ignore_errors=True)
    return {"partitions": partitions, "dirty": dirty, "all": on_all, "dirty_alone": on_dirty,
            "wall_ratio": on_all["seconds"] / on_dirty["seconds"]}  # fmt: skip


def sample(work: Path) -> dict:
    root = work / "sample"
    shutil.rmtree(root, ignore_errors=True)
    cmd = [sys.executable, "-m", "kafka_log_core.simulator.sample", "--out", str(root / "logs"), "--fresh",
           "--now-ms", str(NOW_MS), "--conf-dir", str(root / "conf")]  # fmt: skip
    measure.run(cmd, cwd=REPO)
    bare, report = [], []
    for turn in range(SAMPLE_TURNS):
        log(f"sample: bare Spark and report, turn {turn + 1} of {SAMPLE_TURNS}")
        spark_only = measure.run([sys.executable, "-c", BARE_SPARK], cwd=REPO, timeout=TIMEOUT_S)
        if spark_only.returncode != 0:
            raise RuntimeError(f"bare Spark exited with {spark_only.returncode}: {spark_only.stderr[-500:]}")
        bare.append({"seconds": spark_only.seconds, "cpu_seconds": spark_only.cpu_seconds,
                     "load_average": spark_only.load_average})  # fmt: skip
        ours = run_job("report", root, work)
        report.append({k: ours[k] for k in ("seconds", "cpu_seconds", "load_average", "partitions")})
    best_bare, best_report = min(r["seconds"] for r in bare), min(r["seconds"] for r in report)
    shutil.rmtree(root, ignore_errors=True)
    return {"bare_spark": bare, "report": report, "difference_seconds": best_report - best_bare}


def measure_all(work: Path, *, quick: bool, counts: tuple[int, ...] | None = None,
                jobs: tuple[str, ...] = JOBS, only: tuple[str, ...] = ("sweep", "broker", "sample")) -> dict:  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"master": MASTER}
    if "sweep" in only:
        out["sweep"] = sweep(work, counts or (QUICK_COUNTS if quick else COUNTS), jobs)
    if "broker" in only:
        out["broker"] = broker_like(work, *(QUICK_BROKER if quick else BROKER))
    if "sample" in only:
        out["sample"] = sample(work)
    return out


# ------------------------------------------------------------------------------------ in bench.run
def run_section(report, quick: bool, work: Path) -> None:
    """Measure in a process of its own and add the section, its ratios and its targets' figures."""
    from bench.report import section_result

    result = section_result("partitions", work, ["--quick"] if quick else [])
    report.sections["partitions"] = {"status": "ok", **result}
    report.ratios.update(ratios(result))


def ratios(result: dict) -> dict:
    out: dict = {}
    sweep_ = result.get("sweep")
    if sweep_:
        largest = str(sweep_["counts"][-1])
        jobs = sweep_["jobs"]
        out["partitions_cpu_ms_per_idle_partition_worst"] = max(
            j[largest]["cpu_ms_per_idle_partition"] for j in jobs.values()
        )
        out["partitions_largest_count"] = sweep_["counts"][-1]
        out["partitions_wall_seconds_largest_worst"] = max(
            j[largest]["all"]["seconds"] for j in jobs.values()
        )
        per = [j["driver_bytes_per_partition"] for j in jobs.values() if "driver_bytes_per_partition" in j]
        if per:
            out["partitions_driver_bytes_per_partition_worst"] = max(per)
    if "broker" in result:
        out["partitions_broker_like_vs_dirty_alone"] = result["broker"]["wall_ratio"]
    if "sample" in result:
        out["partitions_sample_report_minus_bare_spark_s"] = result["sample"]["difference_seconds"]
    return out


def targets(report) -> list:
    from bench.report import Target

    r = report.ratios
    n = r.get("partitions_largest_count")
    return [
        Target("partitions: an idle partition <= 1 ms of CPU end to end (worst job)",
               r.get("partitions_cpu_ms_per_idle_partition_worst"), 1.0, False, "ms", f"at {n} partitions"),
        Target(f"partitions: {n} partitions <= 60 s wall with Spark's start (slowest job)",
               r.get("partitions_wall_seconds_largest_worst"), 60.0, False, "s", "2 cores shared with other work"),
        Target("partitions: driver memory <= 500 B more per partition (worst job)",
               r.get("partitions_driver_bytes_per_partition_worst"), 500.0, False, "B", ""),
        Target("partitions: 4,000 with 100 dirty <= 1.2x the 100 alone (compact, wall)",
               r.get("partitions_broker_like_vs_dirty_alone"), 1.2, False, "x", ""),
        Target("partitions: sample report <= bare Spark + a trivial job + 2 s",
               r.get("partitions_sample_report_minus_bare_spark_s"), 2.0, False, "s", ""),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="where the log dirs and their copies go")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_COUNTS} partitions, {QUICK_BROKER}")
    parser.add_argument("--counts", default=None, help="comma-separated partition counts of the sweep")
    parser.add_argument("--jobs", default=",".join(JOBS))
    parser.add_argument(
        "--only", default="sweep,broker,sample", help="comma-separated: sweep, broker, sample"
    )
    args = parser.parse_args(argv)
    counts = tuple(int(c) for c in args.counts.split(",")) if args.counts else None
    result = measure_all(Path(args.work), quick=args.quick, counts=counts, jobs=tuple(args.jobs.split(",")),
                         only=tuple(args.only.split(",")))  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
