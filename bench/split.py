"""The ``split`` section of the benchmark: one big partition cleaned across the cores (issue 18).

``python -m bench.split --work DIR [--quick] [--master local[2]] [--only speed|keys] [--tries N]`` prints one
JSON object. In one Spark session, after a warm-up of both paths on a small copy, on fresh copies of the data
(written out before each timed run):

* ``speed``: one partition (4 GiB; 64 MiB with ``--quick``), a dedupe buffer holding every key:
  ``single`` = the compact job as before (one task), ``split`` = ``--split-above 0`` (pass 1 per
  segment, the combine by digest, pass 2 per group, as Spark tasks). Target: split / single <= 0.55.
  The cleaned files must be byte-identical. With ``--tries N`` the two modes run in turn N times and the
  fastest of each counts (a noisy machine weighs on both).
* ``keys``: one partition with 10 times the keys the dedupe buffer holds (the default 128 MiB buffer,
  about 5 M keys; with ``--quick`` the smallest buffer the broker accepts, about 39 K keys): one split
  run against ``--rounds all`` in the bounded buffer, wall time side by side. The records a consumer
  reads after both must be equal (the files may differ: the rounds regroup segments). No transactions
  here: Kafka's pass 1 collects aborted transactions from the log start offset, so a producer whose
  aborted transaction ended before a round's first dirty offset has its later committed data left out
  of that round's map -- a later round never removes what such a record supersedes, where one round
  over every key does (the same in Kafka with a small and a large buffer).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench.generate import START_MS, GiB, MiB, Workload, generate, parse_size

TOPIC = "split"
BIG_BUFFER = f"log.cleaner.dedupe.buffer.size={2**31 - 1}"
DEFAULT_BUFFER_KEYS = int(134217728 // 24 * 0.9)
QUICK_BUFFER = 1048600  # the broker's floor is 1 MiB per cleaner thread
QUICK_BUFFER_KEYS = int(QUICK_BUFFER // 24 * 0.9)
FULL_TRIES = 3  # turns of the two modes in the full run's speed part (the fastest of each counts)


def _sets(w: Workload) -> list[str]:
    return ["cleanup.policy=compact", f"segment.bytes={w.segment_bytes}", "min.cleanable.dirty.ratio=0.01"]


def _data(root: Path, w: Workload) -> Path:
    from kafka_log_core.log.log_dir import write_log_dir_checkpoints

    generate(root, w)
    write_log_dir_checkpoints(root, now_ms=START_MS, random_seed=w.seed)
    return root


def _copy(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, copy_function=shutil.copy2)
    return target


def _files(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted((d / f"{TOPIC}-0").iterdir()):
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _records_digest(d: Path) -> tuple[int, str]:
    """(records, digest of every (offset, key, value)) a consumer reads, aborted data aside."""
    from kafka_log_core.format import log_file

    h = hashlib.sha256()
    n = 0
    for path in sorted((d / f"{TOPIC}-0").glob("*.log")):
        for b in log_file.iter_file_batches(path, strict=True):
            if b.is_control:
                continue
            for r in b.records():
                h.update(b"%d|%r|%r;" % (r.offset, r.key, r.value))
                n += 1
    return n, h.hexdigest()


def measure(work: Path, *, quick: bool, master: str, size: int | None = None,
            parts: tuple[str, ...] = ("speed", "keys"), tries: int = 1) -> dict:  # fmt: skip
    from jobs.spark import spark_session

    size = size or (64 * MiB if quick else 4 * GiB)
    speed_w = Workload(partition_bytes=size, topic=TOPIC, segment_bytes=max(MiB, size // 16), tombstone_share=0.01,
                       codecs=("none", "lz4"), value_bytes=60)  # fmt: skip
    buffer_keys = QUICK_BUFFER_KEYS if quick else DEFAULT_BUFFER_KEYS
    keys = 10 * buffer_keys
    keys_w = Workload(partition_bytes=keys * 2 * 40, topic=TOPIC, segment_bytes=max(MiB, keys * 80 // 8),
                      distinct_keys=keys, value_bytes=8, tombstone_share=0.01)  # fmt: skip
    spark = spark_session(master, "kafka-log-jobs bench split")
    cores = spark.sparkContext.defaultParallelism
    result: dict = {"master": master, "cores": cores}
    try:
        if "speed" in parts:
            result["speed"] = _speed(spark, work, speed_w, tries)
        if "keys" in parts:
            result["keys"] = _keys(spark, work, keys_w, quick, keys, buffer_keys)
    finally:
        spark.stop()
    return result


def _timed_compact(spark, source: Path, target: Path, configs, opts) -> tuple[float, dict]:
    """The compact job on a fresh copy of ``source`` at ``target``: (wall seconds, its row). The copy is
    written out first, so its write-back weighs on no run."""
    from jobs import compact

    _copy(source, target)
    os.sync()
    started = time.perf_counter()
    rows = compact.run(spark, [str(target)], None, configs, opts)
    return time.perf_counter() - started, rows[0]


def _speed(spark, work: Path, speed_w: Workload, tries: int) -> dict:
    from jobs import compact
    from jobs.context import job_options
    from kafka_log_core.settings.config import load_config

    big = load_config(None, [], [], [*_sets(speed_w), BIG_BUFFER])
    warm_w = dataclasses.replace(speed_w, partition_bytes=min(speed_w.partition_bytes, 64 * MiB),
                                 segment_bytes=max(MiB, min(speed_w.partition_bytes, 64 * MiB) // 16))  # fmt: skip
    warm_src = _data(work / "data" / "warm", warm_w)
    for split_above in (None, 0):  # warm-up of both paths: Python workers started, kernels loaded
        warm = _copy(warm_src, work / "run" / "warm")
        compact.run(spark, [str(warm)], None, big, job_options(START_MS, split_above=split_above))
        shutil.rmtree(warm)
    shutil.rmtree(warm_src)
    speed_src = _data(work / "data" / "speed", speed_w)
    runs: dict[str, dict] = {}
    files = {}
    for _ in range(tries):  # the two modes in turn: a noisy neighbour weighs on both
        for name, split_above in (("single", None), ("split", 0)):
            target = work / "run" / name
            seconds, row = _timed_compact(
                spark, speed_src, target, big, job_options(START_MS, split_above=split_above)
            )
            run = runs.setdefault(
                name, {"tries": [], "status": row["status"], "records": row["records_before"]}
            )
            run["tries"].append(seconds)
            run["seconds"] = min(run["tries"])
            files[name] = _files(target)
            shutil.rmtree(target)
    size = sum(p.stat().st_size for p in speed_src.rglob("*.log"))
    shutil.rmtree(speed_src)
    pairs = [
        split / single for single, split in zip(runs["single"]["tries"], runs["split"]["tries"], strict=True)
    ]
    return {
        "bytes": size,
        "runs": runs,
        "identical_files": files["single"] == files["split"],
        "split_vs_single": runs["split"]["seconds"] / runs["single"]["seconds"],
        "pairs": pairs,  # split / single of each turn: the spread a noisy machine gives
    }


def _keys(spark, work: Path, keys_w: Workload, quick: bool, keys: int, buffer_keys: int) -> dict:
    from jobs.context import job_options
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import ALL_ROUNDS

    keys_src = _data(work / "data" / "keys", keys_w)
    bounded = [*_sets(keys_w), *([f"log.cleaner.dedupe.buffer.size={QUICK_BUFFER}"] if quick else [])]
    configs = load_config(None, [], [], bounded)
    runs = {}
    digests = {}
    for name, opts in (
        ("split", job_options(START_MS, split_above=0)),
        ("rounds_all", job_options(START_MS, rounds=ALL_ROUNDS)),
    ):
        target = work / "run" / name
        seconds, row = _timed_compact(spark, keys_src, target, configs, opts)
        runs[name] = {"seconds": seconds, "status": row["status"], "reason": row["reason"][-60:]}
        digests[name] = _records_digest(target)
        shutil.rmtree(target)
    size = sum(p.stat().st_size for p in keys_src.rglob("*.log"))
    shutil.rmtree(keys_src)
    return {
        "distinct_keys": keys,
        "buffer_keys": buffer_keys,
        "bytes": size,
        "runs": runs,
        "records_after": digests["split"][0],
        "equal_records": digests["split"] == digests["rounds_all"],
        "split_vs_rounds_all": runs["split"]["seconds"] / runs["rounds_all"]["seconds"],
    }


# ------------------------------------------------------------------------------------ in bench.run
def run_section(report, quick: bool, work: Path) -> None:
    """Measure in a process of its own (as every section) and add rows, ratios and the section."""
    from bench.report import Row, section_result

    result = section_result("split", work, ["--quick"] if quick else ["--tries", str(FULL_TRIES)])
    for part in ("speed", "keys"):
        for name, run in result[part]["runs"].items():
            report.rows.append(Row("split", f"split {part}: {name}", result[part]["bytes"], run["seconds"], None,
                                   cores=result["cores"]))  # fmt: skip
    report.sections["split"] = {"status": "ok", **result}
    report.ratios["split_vs_single"] = result["speed"]["split_vs_single"]
    report.ratios["split_vs_rounds_all"] = result["keys"]["split_vs_rounds_all"]


def target(report):
    from bench.report import Target

    section = report.sections.get("split", {})
    same = section.get("speed", {}).get("identical_files")
    pairs = ", ".join(f"{r:.2f}" for r in section.get("speed", {}).get("pairs", []))
    equal = section.get("keys", {}).get("equal_records")
    return Target(
        "split: one partition on local[2] <= 0.55 x one task", report.ratios.get("split_vs_single"), 0.55, False,
        "x", f"fastest of each; each turn: {pairs}; identical files: {same}; 10x keys: split vs --rounds all "
        f"{report.ratios.get('split_vs_rounds_all')}, equal records: {equal}",
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.split", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="where the data and the copies go")
    parser.add_argument("--quick", action="store_true", help="64 MiB, and a 1 MiB buffer for the keys case")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--size", type=parse_size, default=None, help="the speed partition's size (e.g. 512MiB)"
    )
    parser.add_argument("--only", choices=("speed", "keys"), default=None, help="measure one part only")
    parser.add_argument(
        "--tries", type=int, default=1, help="runs of each mode in the speed part (the fastest counts)"
    )
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    parts = (args.only,) if args.only else ("speed", "keys")
    print(
        json.dumps(
            measure(work, quick=args.quick, master=args.master, size=args.size, parts=parts, tries=args.tries)
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
