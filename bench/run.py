"""``make bench``: one run, the same generated data, every number next to what it is compared with.

``python -m bench.run [--quick] [--skip kafka,spark,...] [--results-dir DIR] [--work-dir DIR] [--keep]``

Sections (each measured in its own process by ``bench.probe``, so peak memory is per measurement):

* ``raw``: the machine's limits on the scan segment: plain sequential read, one CRC32C pass.
* ``scan``: the compiled scan every cleaner pass makes (CRC32C, records walked, keys hashed) and
  kafka-python's ``MemoryRecords`` touching every key, on the same segment.
* ``compaction``: ``compact_partition`` on one partition of 1x, 2x and 4x the base size (per core, and
  linearity), with a phase breakdown of the 1x run.
* ``memory``: the dedupe map sized to just hold the keys of partitions with few / some / many distinct
  keys: map bytes per distinct key, peak RSS against the map.
* ``spark``: the compact job (``jobs.compact.run``) on ``local[1]`` and ``local[2]`` over 1, 2, 4, 8
  partitions.
* ``kafka``: Kafka's own log cleaner on a copy of the 1x partition (``bench.kafka_cleaner``); skipped with
  a note when java or mvn is missing.
* ``skew``: the compact job on ``local[2]`` over one 8x partition and 15 of 1x, against the big one alone
  plus the small ones alone (``bench.skew``).
* ``split``: one big partition cleaned in split tasks against one task, and 10x the keys of the buffer in
  one split run against ``--rounds all`` (``bench.split``).
* ``partitions``: what a partition with nothing to do costs: the jobs over 100 to 50,000 broker-like
  partitions (1 % dirty) against their dirty ones alone, 4,000 with 100 dirty against the 100 alone, the
  sample log dir's report against a bare Spark session (``bench.partitions``).
* ``tables``: ``export`` as tables (``bench.tables``): rows per second per core of the records as Parquet,
  bytes and Avro-typed, and the incremental export of the latest view into Iceberg after 1 % new records
  against a full one.
* ``sweep``: the batch shapes users run: 1, 10, 100 and 1000 records per batch, uncompressed, lz4,
  zstd, snappy and gzip, and a ``__consumer_offsets``-like partition (many group keys, one record per
  batch, tombstones). Each is cleaned ``--sweep-repeat`` times (5) by each side, alternately, each time on
  a fresh copy of the same bytes: by ``compact_partition`` (a process of its own, warmed up first) and by
  Kafka's cleaner (one broker for all shapes and rounds, warmed up first: ``kafka_cleaner.CleanerBroker``).
  Each side's figure is the median of its runs: CPU per byte of its cleaner thread against ours, the wall
  time of the work (Kafka's from the rate its cleaner prints), and the records each kept (digests, first
  round). Kafka's half is left out with ``--skip kafka``.
  With it: the key digest's cost (MD5 lanes against MurmurHash3), and the 1x partition cleaned with a
  1 GiB dedupe buffer against the default one.

Output: a table on standard output (progress on standard error), ``<results-dir>/<UTC time>.json`` and
a PNG chart next to it. MB = 10^6 bytes, GB = 10^9 bytes (Kafka's own "MB" is MiB and is converted).
The exit status is 1 when a section failed (skipped sections are not failures).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import gate, skew
from bench import partitions as partitions_section
from bench import split as split_section
from bench import tables as tables_section
from bench.generate import GiB, Manifest, MiB, PartitionManifest, Workload, generate
from bench.kept import kept_records
from bench.noise import wide_canary_ms
from bench.report import SECTIONS, Report, Row, compressed_shape, draw_chart, evaluate_targets, format_table

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor, Kafka's default (the sets below keep it)
MAP_ENTRY_BYTES = 24


class BenchError(RuntimeError):
    """A measurement did not run; the message carries the command and the tail of its output."""


@dataclass(frozen=True)
class Plan:
    base: Workload  # the 1x partition: scan segment, compaction, Kafka's cleaner
    sizes: tuple[int, ...] = (1, 2, 4)
    spark_partition_bytes: int = 32 * MiB
    spark_counts: tuple[int, ...] = (1, 2, 4, 8)
    spark_masters: tuple[str, ...] = ("local[1]", "local[2]")
    memory_duplicate_shares: tuple[float, ...] = (0.9, 0.5, 0.1)
    memory_partition_bytes: int = 64 * MiB
    repeat: int = 3
    kafka_python_repeat: int = 1
    sweep_partition_bytes: int = 24 * MiB  # record bytes per shape
    sweep_segment_bytes: int = 16 * MiB
    sweep_records_per_batch: tuple[int, ...] = (1, 10, 100, 1000)
    sweep_codecs: tuple[str, ...] = ("none", "lz4", "zstd", "snappy", "gzip")
    sweep_consumer_offsets_keys: int = 20_000
    sweep_warmup_bytes: int = 4 * MiB
    sweep_repeat: int = 5  # each shape cleaned this many times by each side, alternately; medians
    # the wide canary (bench.noise) timed just before and after each clean of either side, kept beside each
    # run in the JSON: which cleans ran on a core whose sibling was busy (docs/benchmark.md, session 9); a
    # clean whose canary reads slow is redone on a fresh copy (bench.gate)
    sweep_canary: bool = False
    # with the gate: fresh copies of each shape on Kafka's side beyond one per round, for its redone cleans
    sweep_kafka_spares_per_round: int = 2
    # with the gate: the rounds' time (broker start aside) within which cleans are redone, shared out evenly: a
    # round past its share of it keeps every clean's first try, so a long slow phase cannot stretch a sweep
    # past a 12-minute slot (5 rounds: ~85 s a round without redoes, ~70 s to start the broker, ~70 s to stop)
    sweep_gate_seconds: float = 360.0


FULL = Plan(
    base=Workload(
        partition_bytes=128 * MiB,
        segment_bytes=64 * MiB,
        key_bytes=16,
        value_bytes=100,
        duplicate_share=0.5,
        tombstone_share=0.01,
    )
)
QUICK = Plan(
    base=Workload(partition_bytes=4 * MiB, segment_bytes=1 * MiB, tombstone_share=0.01),
    spark_partition_bytes=2 * MiB,
    spark_counts=(1, 2),
    memory_duplicate_shares=(0.9, 0.1),
    memory_partition_bytes=2 * MiB,
    repeat=1,
    sweep_partition_bytes=2 * MiB,
    sweep_segment_bytes=MiB,
    sweep_records_per_batch=(1, 100),
    sweep_codecs=("none", "lz4"),
    sweep_consumer_offsets_keys=500,
    sweep_warmup_bytes=256 * 1024,
    sweep_repeat=1,
)


# ---------------------------------------------------------------------------------------------- helpers
def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def probe(kind: str, path: Path | str, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "bench.probe", kind, str(path), *extra]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-25:])
        raise BenchError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{tail}")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise BenchError(f"{' '.join(cmd)} printed no JSON result:\n{proc.stdout[-2000:]}")


def machine_info() -> dict:
    info = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }
    for module in ("numba", "numpy", "kafka", "pyspark"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # an optional baseline missing must not stop the run
            info[module] = None
    try:
        info["mem_total_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    info["code"] = code_version()
    return info


def code_version() -> dict:
    """The commit measured, and which files of the measured code differ from it (a shared checkout)."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.rstrip("\n") if proc.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "kafka_log_core", "jobs", "spark_udfs")
    return {
        "commit": git("rev-parse", "HEAD") or None,
        "uncommitted": [line[3:] for line in changed.splitlines()],
    }


def copy_log_dir(source: Path, target: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


def job_sets(w: Workload, dedupe_bytes: int | None = None) -> list[str]:
    """The configuration both cleaners run with (``--set`` for ours, topic/broker config for Kafka's)."""
    sets = ["cleanup.policy=compact", f"segment.bytes={w.segment_bytes}", "min.cleanable.dirty.ratio=0.01"]
    if dedupe_bytes is not None:
        sets.append(f"log.cleaner.dedupe.buffer.size={dedupe_bytes}")
    return [a for s in sets for a in ("--set", s)]


def map_bytes_for(keys: int) -> int:
    """The smallest dedupe buffer whose map holds ``keys`` keys in one round (Kafka's sizing rule),
    never below the broker's minimum of more than 1 MiB."""
    slots = math.ceil(keys / LOAD_FACTOR) + 1
    return max(slots * MAP_ENTRY_BYTES, MiB + MAP_ENTRY_BYTES)


def rate(result: dict, cpu: bool, size_key: str = "bytes") -> float:
    """Bytes per second of a probe result: per CPU-second (``cpu``) or per wall-clock second."""
    return result[size_key] / result["cpu_seconds" if cpu else "seconds"]


def first_segment(partition_dir: Path) -> Path:
    return sorted(partition_dir.glob("*.log"))[0]


def partition_dirs(m: Manifest) -> list[Path]:
    return [Path(m.log_dir) / f"{p.topic}-{p.partition}" for p in m.partitions]


# ---------------------------------------------------------------------------------------------- sections
def run_raw_and_scan(report: Report, plan: Plan, data: Manifest, skip: set[str]) -> None:
    segment = first_segment(partition_dirs(data)[0])
    size = segment.stat().st_size
    rep = ["--repeat", str(plan.repeat)]
    results = {}
    if "raw" not in skip:
        try:
            log(f"raw limits on {segment.name} ({size / 1e6:.1f} MB)")
            read, crc = probe("read", segment, *rep), probe("crc", segment, *rep)
            report.rows.append(Row("raw", "sequential read (page cache)", read["bytes"], read["seconds"],
                                   cpu_seconds=read["cpu_seconds"], peak_rss=read["peak_rss"], baseline_rss=read["baseline_rss"]))  # fmt: skip
            report.rows.append(Row("raw", "CRC32C pass (crc32c.crc32c)", crc["bytes"], crc["seconds"],
                                   cpu_seconds=crc["cpu_seconds"], peak_rss=crc["peak_rss"], baseline_rss=crc["baseline_rss"]))  # fmt: skip
            results["read"], results["crc"] = read, crc
            report.sections["raw"] = {"status": "ok", "segment_bytes": size, "read": read, "crc": crc}
        except Exception as err:
            report.section_error("raw", err)
    else:
        report.sections["raw"] = {"status": "skipped"}
    if "scan" not in skip:
        try:
            log("scan: ours (compiled segment scan) and kafka-python on the same segment")
            ours = probe("scan", segment, *rep)
            kp = probe("kafka-python", segment, "--repeat", str(plan.kafka_python_repeat))
            report.rows.append(Row("scan", "scan: CRC + walk + MD5, compiled (ours)", ours["bytes"], ours["seconds"],
                                   ours["records"], cpu_seconds=ours["cpu_seconds"], peak_rss=ours["peak_rss"], baseline_rss=ours["baseline_rss"]))  # fmt: skip
            report.rows.append(Row("scan", "decode: kafka-python, every key", kp["bytes"], kp["seconds"],
                                   kp["records"], cpu_seconds=kp["cpu_seconds"], peak_rss=kp["peak_rss"], baseline_rss=kp["baseline_rss"],
                                   note="no CRC check"))  # fmt: skip
            if ours["records"] != kp["records"]:
                report.notes.append(
                    f"scan: record counts differ: ours {ours['records']}, kafka-python {kp['records']}"
                )
            results["scan"], results["kp"] = ours, kp
            report.sections["scan"] = {
                "status": "ok",
                "segment": segment.name,
                "ours": ours,
                "kafka_python": kp,
            }
            digest = probe("digest", segment, *rep)
            report.sections["scan"]["digest"] = digest
            report.ratios["md5_ns_per_key"] = digest["md5_ns_per_key"]
            report.ratios["murmur3_ns_per_key"] = digest["murmur3_ns_per_key"]
        except Exception as err:
            report.section_error("scan", err)
    else:
        report.sections["scan"] = {"status": "skipped"}
    if "scan" in results:
        scan_ratios(report, results)


def scan_ratios(report: Report, results: dict) -> None:
    """Per CPU-second (what a core does), with the wall-clock ratios beside them."""
    ours = results["scan"]
    for suffix, cpu in (("", True), ("_wall", False)):
        if "kp" in results:
            report.ratios["scan_vs_kafka_python" + suffix] = rate(ours, cpu) / rate(results["kp"], cpu)
        if "crc" in results:
            report.ratios["scan_vs_crc32c_pass" + suffix] = rate(ours, cpu) / rate(results["crc"], cpu)
            report.ratios["scan_vs_sequential_read" + suffix] = rate(ours, cpu) / rate(results["read"], cpu)
        report.ratios["scan_gb_per_s_per_core" + suffix] = rate(ours, cpu) / 1e9
    parts = ours["parts_cpu_seconds"]
    report.sections["scan"]["parts_cpu_us_per_batch"] = {
        k: v / ours["batches"] * 1e6 for k, v in parts.items()
    }


def run_compaction(report: Report, plan: Plan, datasets: dict[int, Manifest], work: Path) -> None:
    runs = {}
    for factor, data in datasets.items():
        target = copy_log_dir(Path(data.log_dir), work / f"compact-{factor}x")
        log(f"compaction {factor}x: compact_partition on {data.cleanable_bytes / 1e6:.0f} MB")
        extra = ["--phases"] if factor == 1 else []
        result = probe("compact", target, *job_sets(plan.base), *extra)
        shutil.rmtree(target, ignore_errors=True)
        row = result["rows"][0]
        if row["status"] != "cleaned":
            raise BenchError(f"compaction {factor}x: partition {row['status']}: {row['reason']}")
        runs[factor] = {"input_bytes": data.cleanable_bytes, **result}
        report.rows.append(Row("compaction", f"compaction {factor}x: compact_partition", data.cleanable_bytes,
                               result["seconds"], row["records_before"], cpu_seconds=result["cpu_seconds"], peak_rss=result["peak_rss"],
                               baseline_rss=result["baseline_rss"],
                               note=f"map {result['map_bytes'] / MiB:.0f} MiB"))  # fmt: skip
    one = runs[min(runs)]
    # The 1 GiB buffer against the default one: alternately, each the best of plan.repeat runs, so the
    # machine's load at one moment does not decide the ratio.
    log(f"compaction 1x: a 1 GiB dedupe buffer and the default one, alternately, best of {plan.repeat}")
    tries: dict[int | None, list[dict]] = {GiB: [], None: []}
    for _ in range(plan.repeat):
        for buffer_bytes, results in tries.items():
            target = copy_log_dir(Path(datasets[min(datasets)].log_dir), work / "compact-1x-buffers")
            results.append(probe("compact", target, *job_sets(plan.base, buffer_bytes)))
            shutil.rmtree(target, ignore_errors=True)
    big = min(tries[GiB], key=lambda r: r["cpu_seconds"])
    default = min(tries[None], key=lambda r: r["cpu_seconds"])
    if big["rows"][0]["records_after"] != one["rows"][0]["records_after"]:
        report.notes.append(
            f"compaction: 1 GiB dedupe buffer kept {big['rows'][0]['records_after']} records, the default "
            f"{one['rows'][0]['records_after']}"
        )
    report.rows.append(Row("compaction", "compaction 1x: 1 GiB dedupe buffer", one["input_bytes"], big["seconds"],
                           big["rows"][0]["records_before"], cpu_seconds=big["cpu_seconds"], peak_rss=big["peak_rss"],
                           baseline_rss=big["baseline_rss"], note="log.cleaner.dedupe.buffer.size=1 GiB"))  # fmt: skip
    report.ratios["dedupe_1gib_vs_default_cpu"] = big["cpu_seconds"] / default["cpu_seconds"]
    report.ratios["dedupe_1gib_vs_default_peak_rss"] = big["peak_rss"] / default["peak_rss"]
    phases = dict(one.get("phases_cpu_seconds", {}))
    if phases:
        phases["pass2_rewrite_and_swap (total - parts)"] = one["cpu_seconds"] - sum(phases.values())
    report.sections["compaction"] = {
        "status": "ok", "runs": runs, "phases_cpu_seconds_1x": phases, "dedupe_1gib": big,
        "dedupe_default_best": default,
        "dedupe_cpu_seconds_tries": {"1GiB": [r["cpu_seconds"] for r in tries[GiB]],
                                     "default": [r["cpu_seconds"] for r in tries[None]]},
        "same_records_with_1gib_buffer": big["rows"][0]["records_after"] == one["rows"][0]["records_after"],
    }  # fmt: skip
    for suffix, cpu in (("", True), ("_wall", False)):
        mbps = {f: rate(r, cpu, "input_bytes") / 1e6 for f, r in runs.items()}
        report.ratios["compaction_mb_per_s_per_core" + suffix] = mbps[min(mbps)]
        if len(mbps) > 1:
            report.ratios["linearity_throughput_largest_vs_1x" + suffix] = mbps[max(mbps)] / mbps[min(mbps)]
    one_map = one["map_bytes"]
    report.ratios["peak_rss_vs_map_default_config"] = one["peak_rss"] / one_map
    report.ratios["peak_rss_above_baseline_vs_map_default_config"] = (
        one["peak_rss"] - one["baseline_rss"]
    ) / one_map


def run_memory(report: Report, plan: Plan, datasets: dict[float, Manifest], work: Path) -> None:
    runs = []
    for share, data in datasets.items():
        keys = data.partitions[0].distinct_keys
        map_bytes = map_bytes_for(keys)
        target = copy_log_dir(Path(data.log_dir), work / f"memory-{share}")
        log(f"memory: {keys} distinct keys, dedupe buffer {map_bytes} bytes")
        result = probe("compact", target, *job_sets(plan.base, map_bytes))
        shutil.rmtree(target, ignore_errors=True)
        row = result["rows"][0]
        if row["status"] != "cleaned" or "offset map full" in (row.get("reason") or ""):
            raise BenchError(f"memory run with {keys} keys: {row['status']}: {row['reason']}")
        runs.append(
            {
                "duplicate_share": share,
                "distinct_keys": keys,
                "records": data.partitions[0].records,
                "input_bytes": data.cleanable_bytes,
                "map_bytes": result["map_bytes"],
                "map_slots": result["map_slots"],
                "map_bytes_per_distinct_key": result["map_bytes"] / keys,
                "map_utilization": row["map_utilization"],
                "baseline_rss": result["baseline_rss"],
                "peak_rss": result["peak_rss"],
                "peak_rss_vs_map": result["peak_rss"] / result["map_bytes"],
                "seconds": result["seconds"],
            }
        )
        report.rows.append(Row("memory", f"compaction, map for {keys} keys", data.cleanable_bytes, result["seconds"],
                               row["records_before"], cpu_seconds=result["cpu_seconds"], peak_rss=result["peak_rss"], baseline_rss=result["baseline_rss"],
                               note=f"map {result['map_bytes'] / MiB:.1f} MiB"))  # fmt: skip
    largest = max(runs, key=lambda r: r["distinct_keys"])
    report.sections["memory"] = {"status": "ok", "runs": runs, "bytes_per_map_slot": MAP_ENTRY_BYTES}
    report.ratios["map_bytes_per_distinct_key"] = largest["map_bytes_per_distinct_key"]
    report.ratios["peak_rss_vs_map_sized_to_keys"] = largest["peak_rss_vs_map"]


def run_spark(report: Report, plan: Plan, data: Manifest, work: Path) -> None:
    counts = ",".join(str(c) for c in plan.spark_counts)
    per_partition = [p.cleanable_bytes for p in data.partitions]
    sessions = []
    for master in plan.spark_masters:
        log(
            f"spark {master}: compact job over {counts} partitions of {plan.spark_partition_bytes / MiB:.0f} MiB"
        )
        result = probe("spark", data.log_dir, "--master", master, "--counts", counts,
                       "--work", str(work / "spark"), *job_sets(plan.base))  # fmt: skip
        for run in result["runs"]:
            if run["failed"] or run["statuses"] != ["cleaned"]:
                raise BenchError(
                    f"spark {master} {run['partitions']} partitions: {run['statuses']} {run['failed'][:1]}"
                )
            run["input_bytes"] = sum(per_partition[: run["partitions"]])
            report.rows.append(Row("spark", f"spark {master}, {run['partitions']} partitions", run["input_bytes"],
                                   run["seconds"], run["records"], cores=result["cores"], peak_rss=run["peak_rss"],
                                   baseline_rss=run["baseline_rss"], note="driver RSS"))  # fmt: skip
        sessions.append(result)
    report.sections["spark"] = {"status": "ok", "sessions": sessions}
    by_master = {s["master"]: {r["partitions"]: r for r in s["runs"]} for s in sessions}
    one, two = by_master.get("local[1]"), by_master.get("local[2]")
    if one and two:
        n = max(plan.spark_counts)
        speedup = (two[n]["input_bytes"] / two[n]["seconds"]) / (one[n]["input_bytes"] / one[n]["seconds"])
        report.ratios["spark_local2_vs_local1_at_max_partitions"] = speedup
        report.ratios["spark_parallel_efficiency_2_cores"] = speedup / 2
        m1 = one[n]["input_bytes"] / one[n]["seconds"] / 1e6
        report.ratios["spark_local1_mb_per_s_per_core"] = m1


def run_kafka(report: Report, plan: Plan, data: Manifest, work: Path) -> None:
    from bench import kafka_cleaner

    try:
        from tests import kafka_harness  # noqa: F401 - the real-broker harness, a test helper of this repo
    except ModuleNotFoundError as err:
        report.sections["kafka"] = {"status": "skipped", "reason": f"broker harness not importable: {err}"}
        report.notes.append(f"kafka: SKIPPED: tests/kafka_harness.py not importable ({err})")
        return
    missing = kafka_cleaner.missing_tools()
    if missing:
        report.sections["kafka"] = {"status": "skipped", "reason": f"{' and '.join(missing)} not on PATH"}
        report.notes.append(f"kafka: SKIPPED: Kafka's cleaner needs {' and '.join(missing)} (Java 17, Maven)")
        return
    p = data.partitions[0]
    log(
        f"kafka: broker's log cleaner on a copy of {p.topic}-{p.partition} ({p.cleanable_bytes / 1e6:.0f} MB)"
    )
    result = kafka_cleaner.measure(
        partition_dirs(data)[0],
        p.topic,
        p.partition,
        segment_bytes=plan.base.segment_bytes,
        dedupe_buffer_bytes=128 * MiB,  # Kafka's default, and ours (the compaction runs use the default)
        work_dir=work / "kafka",
    )
    report.sections["kafka"] = {"status": "ok", **result}
    report.rows.append(Row("kafka", "Kafka log cleaner (1 thread)", result["bytes"], result["seconds"],
                           result["start_messages"], cpu_seconds=result["cleaner_thread_cpu_seconds"], peak_rss=result["broker_peak_rss"],
                           note=f"Kafka {result['kafka_version']}, whole broker RSS"))  # fmt: skip
    ours = report.sections.get("compaction", {}).get("runs", {}).get(1)
    if ours:
        if result["cleaner_thread_cpu_seconds"]:
            kafka_cpu = result["bytes"] / result["cleaner_thread_cpu_seconds"]
            report.ratios["compaction_vs_kafka_cleaner"] = rate(ours, True, "input_bytes") / kafka_cpu
        report.ratios["compaction_vs_kafka_cleaner_wall"] = (
            rate(ours, False, "input_bytes") / result["bytes_per_second"]
        )
        same = ours["rows"][0]["records_after"] == result["end_messages"]
        report.sections["kafka"]["same_records_retained_as_ours"] = same
        if not same:
            report.notes.append(
                f"kafka: Kafka kept {result['end_messages']} records, we kept {ours['rows'][0]['records_after']}"
            )


def sweep_workloads(plan: Plan) -> dict[str, Workload]:
    """The shapes of the sweep, by name; each is one partition of ``sweep_partition_bytes``."""
    base = Workload(
        partition_bytes=plan.sweep_partition_bytes, segment_bytes=plan.sweep_segment_bytes, key_bytes=16,
        value_bytes=100, duplicate_share=0.5, tombstone_share=0.01,
    )  # fmt: skip
    shapes = {}
    for codec in plan.sweep_codecs:
        for n in plan.sweep_records_per_batch:
            shapes[f"{n} rec/batch {codec}"] = dataclasses.replace(
                base, codecs=(codec,), batch_bytes=n * base.record_bytes
            )
    # __consumer_offsets: group/topic/partition keys of ~50 bytes, small commit values, one record per
    # batch (the coordinator appends each commit alone), expired groups as tombstones.
    offsets = dataclasses.replace(
        base, key_bytes=48, value_bytes=40, distinct_keys=plan.sweep_consumer_offsets_keys, tombstone_share=0.05,
        batch_bytes=1,
    )  # fmt: skip
    shapes["__consumer_offsets-like"] = offsets
    return shapes


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").lower()


def sweep_data(plan: Plan, work: Path) -> dict[str, Manifest]:
    """The sweep's shapes generated under ``work`` before anything is measured; a shape generated there
    earlier for the same workload (its manifest beside it, ``--work-dir`` with ``--keep``) is reused, so the
    data can be made before a quiet slot and measured in it."""
    out = {}
    for name, w in sweep_workloads(plan).items():
        where = work / "data" / "sweep" / _slug(name)
        saved = where.with_suffix(".json")
        if saved.exists() and where.is_dir():
            m = json.loads(saved.read_text())
            if m["workload"] == json.loads(json.dumps(dataclasses.asdict(w))):
                parts = [PartitionManifest(**part) for part in m.pop("partitions")]
                out[name] = Manifest(**m, partitions=parts)
                continue
        out[name] = generate(where, w)
        saved.write_text(json.dumps(out[name].to_json()))
    return out


def _lower_median(values: list[float]) -> float:
    """The median of ``values`` (the lower middle one of an even count)."""
    return sorted(values)[(len(values) - 1) // 2]


def _median_run(runs: list[dict], key: str) -> dict:
    """The run whose ``key`` is the median (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r[key] if r[key] is not None else math.inf)
    return ordered[(len(ordered) - 1) // 2]


def _ours_once(name: str, w: Workload, m: Manifest, work: Path, digest: bool, canary: bool,
               gate_floor: float | None = None, tries: int = 1) -> list[dict]:  # fmt: skip
    """Our clean of a fresh copy of the shape in a probe of its own; with ``gate_floor`` gated in the probe
    (``bench.gate``: the redone tries on fresh copies in the same process). Every try, the kept one last."""
    target = copy_log_dir(Path(m.log_dir), work / "run" / "sweep")
    extra = ("--canary",) if canary else ()
    if gate_floor is not None:
        extra += ("--gate-floor", repr(gate_floor), "--tries", str(tries))
    ours = probe("compact", target, *job_sets(w), "--phases", "--warm-copy", m.log_dir, *extra)
    kept_dir = Path(ours["log_dir"])
    if digest:
        ours["kept"] = kept_records(kept_dir / partition_dirs(m)[0].name)
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(kept_dir, ignore_errors=True)
    tries_made = [*ours.pop("discarded_tries", []), ours]
    for run in tries_made:
        row = run["rows"][0]
        if row["status"] != "cleaned":
            raise BenchError(f"sweep {name}: partition {row['status']}: {row['reason']}")
    return tries_made


def _kafka_once(kafka, topic: str, m: Manifest, digest: bool, canary: bool) -> dict:
    before = wide_canary_ms() if canary else None
    k = kafka.clean(topic, m.cleanable_bytes, digest=digest)
    if before is not None:
        k["canary_ms"] = [before, wide_canary_ms()]
    return k


def run_sweep(report: Report, plan: Plan, work: Path, skip: set[str]) -> None:
    """Each shape cleaned ``plan.sweep_repeat`` times by each side, alternately (ours, then Kafka's, shape
    by shape, round by round), each time on a fresh copy of the same bytes; each side's figure is the
    median of its runs (CPU and wall time apart), so a moment of the machine's load moves one run of each
    side, not the ratio; and each round's ratio is taken too, with their median (``_paired_ratios``), which
    keeps out phases of the machine longer than a round. The records kept are compared (digests) on the
    first round. With ``plan.sweep_canary`` every clean of either side is gated on the wide canary
    (``bench.gate``): one that read slow is redone on a fresh copy (Kafka's: a spare topic of the shape),
    the last try kept; the discarded tries stay in the JSON beside the kept ones."""
    shapes = sweep_workloads(plan)
    data = sweep_data(plan, work)
    calibration: list[float] = []
    floor = math.inf
    if plan.sweep_canary:
        wide_canary_ms()  # compiled (or loaded from numba's cache) before anything is measured
        calibration = gate.calibrate(wide_canary_ms)
        floor = min(calibration)
        log(f"sweep: canary floor {floor:.2f} ms at the start ({len(calibration)} readings)")
    ours_runs: dict[str, list[dict]] = {name: [] for name in shapes}
    kafka_runs: dict[str, list[dict]] = {name: [] for name in shapes}
    discarded: dict[str, dict[str, list[dict]]] = {name: {"ours": [], "kafka": []} for name in shapes}
    with _sweep_kafka(report, plan, data, work, skip) as kafka:
        # each side may redo a shape's cleans as often as Kafka's side has spare copies of it
        spares = {name: _kafka_spares(plan, name) for name in shapes}
        ours_redoes_left = {name: _spare_count(plan) for name in shapes}
        # the budget's clock starts after the first probe, whose warm-up compiles numba's kernels when the caches
        # are fresh (~110 s, which used to take the first two rounds' share of it)
        started: float | None = None
        budget = plan.sweep_gate_seconds / plan.sweep_repeat
        for turn in range(plan.sweep_repeat):
            for name, w in shapes.items():
                m = data[name]
                log(f"sweep {name} ({turn + 1}/{plan.sweep_repeat}): {m.partitions[0].batches} batches, "
                    f"{m.cleanable_bytes / 1e6:.0f} MB")  # fmt: skip

                # the gate's redoes while the round is within its share of the sweep's time budget
                in_time = started is None or time.monotonic() < started + budget * (turn + 1)
                extra = gate.EXTRA_TRIES if in_time else 0
                gate_floor = floor if plan.sweep_canary else None
                o_extra = min(extra, ours_redoes_left[name])
                attempts = _ours_once(name, w, m, work, turn == 0, plan.sweep_canary, gate_floor, 1 + o_extra)
                ours_redoes_left[name] -= len(attempts) - 1
                started = time.monotonic() if started is None else started
                if plan.sweep_canary:
                    floor = min(floor, attempts[-1]["gate_floor_ms"])
                sides = [("ours", attempts, ours_runs, o_extra)]
                if kafka is not None:

                    def theirs(i: int, name=name, m=m, turn=turn) -> dict:
                        topic = _kafka_topic(name, turn) if i == 0 else spares[name].pop(0)
                        return _kafka_once(kafka, topic, m, turn == 0, plan.sweep_canary)

                    if plan.sweep_canary:
                        k_extra = min(extra, len(spares[name]))
                        tried, floor = gate.gated(theirs, 1 + k_extra, floor, read=wide_canary_ms)
                    else:
                        k_extra, tried = 0, [theirs(0)]
                    sides.append(("kafka", tried, kafka_runs, k_extra))
                for side, tried, kept, allowed in sides:
                    kept[name].append(tried[-1])
                    discarded[name][side] += tried[:-1]
                    for a in tried:
                        a["round"] = turn
                    if plan.sweep_canary and allowed < gate.EXTRA_TRIES:
                        tried[-1]["redoes_allowed"] = allowed  # out of time, or the shape's redoes used up
                    if len(tried) > 1:
                        log(f"sweep {name}: {side} redone {len(tried) - 1}x (canaries "
                            f"{[[round(ms, 1) for ms in a['canary_ms']] for a in tried]}, floor {floor:.2f} ms)")  # fmt: skip
                if kafka is not None:
                    log(f"kafka: {name}: {kafka_runs[name][-1]['cleaner_thread_cpu_seconds'] or 0:.3f} CPU-s, ours "
                        f"{ours_runs[name][-1]['cpu_seconds']:.3f}")  # fmt: skip
    if kafka is not None:
        report.sections["sweep_kafka_broker"] = kafka.info
    results = {name: _sweep_result(report, name, shapes[name], data[name], ours_runs[name], kafka_runs[name])
               for name in shapes}  # fmt: skip
    report.sections["sweep"] = {"status": "ok", "repeat": plan.sweep_repeat, "shapes": results}
    if plan.sweep_canary:
        for name, r in results.items():
            _gate_result(r, discarded[name], spares[name] if kafka is not None else None)
        report.sections["sweep"]["gate"] = {
            "quiet_canary": gate.QUIET_CANARY, "extra_tries": gate.EXTRA_TRIES, "calibration_ms": calibration,
            "floor_ms_at_start": min(calibration), "kafka_spares_per_shape": _spare_count(plan) if kafka is not None else 0,
            "redo_seconds": plan.sweep_gate_seconds, "patience_seconds": gate.PATIENCE_S,
        }  # fmt: skip
        report.sections["sweep"]["canary_floor_ms"] = _quiet_ratios(results, floor)
    compared = {n: r for n, r in results.items() if "ours_vs_kafka" in r}
    if compared:
        for measure, key in (
            ("", "ours_vs_kafka"),
            ("_wall", "ours_vs_kafka_wall"),
            ("_paired", "ours_vs_kafka_paired"),
            ("_wall_paired", "ours_vs_kafka_wall_paired"),
            ("_quiet", "ours_vs_kafka_quiet"),
            ("_wall_quiet", "ours_vs_kafka_wall_quiet"),
        ):
            for kind, packed in (("uncompressed", False), ("compressed", True)):
                ratios = [r[key] for r in compared.values() if key in r and compressed_shape(r) == packed]
                if ratios:
                    report.ratios[f"sweep_min_vs_kafka_{kind}{measure}"] = min(ratios)
        report.ratios["sweep_shapes_keeping_other_records_than_kafka"] = sum(
            not r["same_records_kept"] for r in compared.values()
        )


def _gate_result(r: dict, discarded: dict[str, list[dict]], spares_left: list[str] | None) -> None:
    """The gate's account of one shape: each side's discarded tries (their times and canaries), how many of
    its cleans were redone, and how many never read quiet (kept all the same, the last try)."""
    r["discarded_runs"] = {side: [_run_figures(run) for run in runs] for side, runs in discarded.items()}
    for side in ("ours", "kafka"):
        kept = r.get(f"{side}_runs", [])
        r.setdefault("redone_cleans", {})[side] = sum(run.get("try", 0) > 0 for run in kept)
        r.setdefault("extra_tries", {})[side] = sum(run.get("try", 0) for run in kept)
        r.setdefault("cleans_never_quiet", {})[side] = sum(not run.get("quiet_try", True) for run in kept)
        r.setdefault("cleans_with_fewer_redoes", {})[side] = sum("redoes_allowed" in run for run in kept)
    if spares_left is not None:
        r["kafka_spares_left"] = len(spares_left)


def _sweep_result(report: Report, name: str, w: Workload, m: Manifest, ours_runs: list[dict],
                  kafka_runs: list[dict]) -> dict:  # fmt: skip
    """One shape's figures: each side's median run (CPU and wall apart), every run's figures beside it."""
    ours = {**_median_run(ours_runs, "cpu_seconds"), "seconds": _median_run(ours_runs, "seconds")["seconds"]}
    ours["kept"] = ours_runs[0]["kept"]
    ours["phases_cpu_seconds"] = {
        k: _lower_median([r["phases_cpu_seconds"][k] for r in ours_runs])
        for k in ours_runs[0].get("phases_cpu_seconds", {})
    }
    p = m.partitions[0]
    r = {
        "workload": dataclasses.asdict(w), "input_bytes": m.cleanable_bytes, "batches": p.batches,
        "records": p.records, "records_per_batch": p.records / p.batches, "cleanable_records": p.cleanable_records,
        "ours": ours, "ours_mb_per_cpu_s": m.cleanable_bytes / ours["cpu_seconds"] / 1e6,
        "ours_runs": [_run_figures(o) for o in ours_runs],
    }  # fmt: skip
    row = ours["rows"][0]
    report.rows.append(Row("sweep", f"sweep {name}: ours", m.cleanable_bytes, ours["seconds"], row["records_before"],
                           cpu_seconds=ours["cpu_seconds"], peak_rss=ours["peak_rss"],
                           baseline_rss=ours["baseline_rss"]))  # fmt: skip
    kept_after = {o["rows"][0]["records_after"] for o in ours_runs} | {k["end_messages"] for k in kafka_runs}
    if len(kept_after) > 1:
        report.notes.append(f"sweep {name}: the runs kept different record counts: {sorted(kept_after)}")
    if not kafka_runs:
        return r
    k = dict(_median_run(kafka_runs, "cleaner_thread_cpu_seconds"))
    k["kept"] = kafka_runs[0]["kept"]
    walls = [_kafka_wall(run) for run in kafka_runs]
    kafka_wall = _lower_median(walls)
    r["kafka"] = k
    r["kafka_runs"] = [_run_figures(run) for run in kafka_runs]
    if k["cleaner_thread_cpu_seconds"]:
        r["kafka_mb_per_cpu_s"] = r["input_bytes"] / k["cleaner_thread_cpu_seconds"] / 1e6
        r["ours_vs_kafka"] = r["ours_mb_per_cpu_s"] / r["kafka_mb_per_cpu_s"]
    if kafka_wall:  # wall time of the work: Kafka's cleaner as it prints it, ours as measured
        r["ours_vs_kafka_wall"] = kafka_wall / ours["seconds"]
    r.update(_paired_ratios(ours_runs, kafka_runs, walls))
    # the same records: the counts both cleaners report, and the records themselves (bench.kept)
    r["same_records_kept"] = (
        len(kept_after) == 1
        and ours["kept"]["records"] == k["kept"]["records"]
        and ours["kept"]["digest"] == k["kept"]["digest"]
    )
    if not r["same_records_kept"]:
        report.notes.append(
            f"sweep {name}: Kafka kept {k['end_messages']} records ({k['kept']['records']} in its files, "
            f"digest {k['kept']['digest'][:12]}), we kept {row['records_after']} "
            f"({ours['kept']['records']}, digest {ours['kept']['digest'][:12]})"
        )
    report.rows.append(Row("sweep", f"sweep {name}: Kafka", r["input_bytes"], kafka_wall or 1e-9,
                           k["start_messages"], cpu_seconds=k["cleaner_thread_cpu_seconds"],
                           note="cleaner thread CPU; seconds from the rate Kafka prints"))  # fmt: skip
    return r


def _paired_ratios(ours_runs: list[dict], kafka_runs: list[dict], kafka_walls: list[float]) -> dict:
    """Each round's ratio (Kafka's clean over ours of the same shape, seconds apart), and their median (the
    lower middle one of an even count): ``ours_vs_kafka_paired`` per CPU-second, ``..._wall_paired`` in wall
    time. The machine's speed moves in phases of seconds to minutes (another guest on our physical core:
    docs/benchmark.md, "Session 9: the slow group of cleans"); a phase that slows one side's clean of a round
    slows the other's beside it, so a round's ratio keeps less of it than the ratio of each side's median."""
    pairs = {"cpu": [], "wall": []}
    for o, k, wall in zip(ours_runs, kafka_runs, kafka_walls, strict=True):
        if k["cleaner_thread_cpu_seconds"]:
            pairs["cpu"].append(k["cleaner_thread_cpu_seconds"] / o["cpu_seconds"])
        if wall:
            pairs["wall"].append(wall / o["seconds"])
    out: dict = {"round_ratios": pairs}
    for measure, key in (("cpu", "ours_vs_kafka_paired"), ("wall", "ours_vs_kafka_wall_paired")):
        if pairs[measure]:
            out[key] = _lower_median(pairs[measure])
    return out


def _quiet_ratios(results: dict[str, dict], floor: float) -> float:
    """With the canary taken (``--sweep-canary``): each side's median over its quiet cleans only (the wide
    canary before and after the clean within ``gate.QUIET_CANARY`` of ``floor``, the fastest reading of the
    whole sweep, so the core had no busy sibling: docs/benchmark.md, "Session 9: the slow group of cleans"),
    and their ratio, ``ours_vs_kafka_quiet`` (per CPU-second) and ``ours_vs_kafka_wall_quiet``, beside the
    shape's other figures; a side with no quiet clean of a shape gives none. Only kept cleans count (the
    gate's discarded tries do not), judged again against the final floor. Returns the floor (ms)."""

    def is_quiet(run: dict) -> bool:
        return not gate.is_slow(run.get("canary_ms", [math.inf]), floor)

    def quiet(runs: list[dict], key: str) -> float | None:
        kept = [run[key] for run in runs if run.get(key) and is_quiet(run)]
        return _lower_median(kept) if kept else None

    for r in results.values():
        ours, kafka = r.get("ours_runs", []), r.get("kafka_runs", [])
        r["quiet_cleans"] = {
            side: sum(map(is_quiet, runs)) for side, runs in (("ours", ours), ("kafka", kafka))
        }
        for measure, key in (("cpu_seconds", "ours_vs_kafka_quiet"), ("seconds", "ours_vs_kafka_wall_quiet")):
            mine, theirs = quiet(ours, measure), quiet(kafka, measure)
            if mine and theirs:
                r[key] = theirs / mine
    return floor


_GATE_MARKS = ("canary_ms", "round", "try", "discarded", "quiet_try", "redoes_allowed", "waited_s")


def _run_figures(run: dict) -> dict:
    """A clean's figures as the JSON keeps them beside the shape: CPU and wall seconds (Kafka's: the cleaner
    thread's CPU, and the time it prints), the canary and the gate's marks where the sweep took them."""
    if "cleaner_thread_cpu_seconds" in run:
        figures = {
            "cpu_seconds": run["cleaner_thread_cpu_seconds"],
            "seconds": _kafka_wall(run),
            "topic": run["topic"],
        }
    else:
        figures = {"cpu_seconds": run["cpu_seconds"], "seconds": run["seconds"],
                   "first_clean_cpu_seconds": run.get("warm_copy_cpu_seconds")}  # fmt: skip
    return {**figures, **{k: run[k] for k in _GATE_MARKS if k in run}}


def _kafka_wall(run: dict) -> float:
    """Kafka's wall time of the work: as its cleaner prints it (to three figures from the rate it prints)."""
    return run.get("seconds_from_rate") or run["seconds_printed"]


def _spare_count(plan: Plan) -> int:
    return plan.sweep_kafka_spares_per_round * plan.sweep_repeat if plan.sweep_canary else 0


def _kafka_spares(plan: Plan, name: str) -> list[str]:
    """The topics holding fresh copies of a shape for Kafka's redone cleans (none without the gate)."""
    return [f"sweep-{_slug(name)}-spare-{i}" for i in range(_spare_count(plan))]


def _kafka_topic(name: str, turn: int) -> str:
    return f"sweep-{_slug(name)}-{turn}"


@contextlib.contextmanager
def _sweep_kafka(report: Report, plan: Plan, data: dict[str, Manifest], work: Path, skip: set[str]):
    """A broker holding a copy of every shape per round (``kafka_cleaner.CleanerBroker``), or None when
    Kafka's side is left out."""
    from bench import kafka_cleaner

    if "kafka" in skip:
        report.notes.append("sweep: Kafka's cleaner left out (--skip kafka)")
        yield None
        return
    try:
        from tests import kafka_harness  # noqa: F401 - the real-broker harness, a test helper of this repo
    except ModuleNotFoundError as err:
        report.notes.append(f"sweep: Kafka's cleaner SKIPPED: tests/kafka_harness.py not importable ({err})")
        yield None
        return
    missing = kafka_cleaner.missing_tools()
    if missing:
        report.notes.append(
            f"sweep: Kafka's cleaner SKIPPED: it needs {' and '.join(missing)} (Java 17, Maven)"
        )
        yield None
        return
    warm = dataclasses.replace(
        plan.base, partition_bytes=plan.sweep_warmup_bytes, segment_bytes=plan.sweep_segment_bytes,
        codecs=tuple(plan.sweep_codecs), batch_bytes=10 * plan.base.record_bytes,
    )  # fmt: skip
    warmup = generate(work / "data" / "sweep-warmup", warm)
    topics = {
        _kafka_topic(name, turn): partition_dirs(m)[0]
        for turn in range(plan.sweep_repeat)
        for name, m in data.items()
    }
    topics.update(
        {spare: partition_dirs(m)[0] for name, m in data.items() for spare in _kafka_spares(plan, name)}
    )
    log(f"sweep: Kafka's cleaner on {len(data)} shapes x {plan.sweep_repeat} (and {_spare_count(plan)} spare "
        f"copies of each), one broker")  # fmt: skip
    with kafka_cleaner.CleanerBroker(
        topics, partition_dirs(warmup)[0], segment_bytes=plan.sweep_segment_bytes, dedupe_buffer_bytes=128 * MiB,
        work_dir=work / "run" / "sweep-kafka", log=log,
    ) as broker:  # fmt: skip
        yield broker


# ---------------------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> int:
    plan = QUICK if args.quick else FULL
    if args.sweep_repeat:
        plan = dataclasses.replace(plan, sweep_repeat=args.sweep_repeat)
    if args.sweep_canary:
        plan = dataclasses.replace(plan, sweep_canary=True)
    skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
    unknown = skip - set(SECTIONS)
    if unknown:
        raise SystemExit(f"--skip: unknown sections {sorted(unknown)} (known: {', '.join(SECTIONS)})")
    # the sweep alone still runs Kafka's side of it (which --skip kafka leaves out)
    sweep_skip = skip - {"kafka"} if args.sweep_only else skip
    if args.sweep_only:
        skip = set(SECTIONS) - {"sweep"}
    started = datetime.now(UTC)
    report = Report(args.quick, started, machine_info(), dataclasses.asdict(plan.base))
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kafka-log-jobs-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        log(f"work dir {work}")
        datasets: dict[int, Manifest] = {}
        for factor in () if args.sweep_only else plan.sizes if "compaction" not in skip else (1,):
            w = dataclasses.replace(plan.base, partition_bytes=plan.base.partition_bytes * factor)
            log(f"generating {factor}x: {w.partition_bytes / MiB:.0f} MiB")
            datasets[factor] = generate(work / "data" / f"size-{factor}x", w)
        report.sections["generate"] = {f"{f}x": m.to_json() for f, m in datasets.items()}
        try:
            if datasets:
                run_raw_and_scan(report, plan, datasets[1], skip)
            else:
                report.sections["raw"] = report.sections["scan"] = {
                    "status": "skipped",
                    "reason": "--sweep-only",
                }
        except Exception as err:
            report.section_error("scan", err)
        sections = [
            ("compaction", lambda: run_compaction(report, plan, datasets, work / "run")),
            ("memory", lambda: run_memory(report, plan, _memory_data(plan, work), work / "run")),
            ("spark", lambda: run_spark(report, plan, _spark_data(plan, work), work / "run")),
            ("kafka", lambda: run_kafka(report, plan, datasets[1], work / "run")),
            ("skew", lambda: skew.run_section(report, args.quick, work / "run")),
            ("split", lambda: split_section.run_section(report, args.quick, work / "run")),
            ("partitions", lambda: partitions_section.run_section(report, args.quick, work / "run")),
            ("tables", lambda: tables_section.run_section(report, args.quick, work / "run")),
            ("sweep", lambda: run_sweep(report, plan, work, sweep_skip)),
        ]
        for name, body in sections:
            if name in skip:
                report.sections[name] = {
                    "status": "skipped",
                    "reason": "--sweep-only" if args.sweep_only else "--skip",
                }
                continue
            try:
                body()
            except Exception as err:
                report.section_error(name, err)
                log(f"{name} FAILED: {err}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report.machine["load_average_at_end"] = os.getloadavg()
    report.machine["bench_seconds"] = time.monotonic() - t0
    if report.machine["load_average_at_start"][0] > (report.machine["cpus"] or 1) * 0.5:
        report.notes.append(
            f"the machine was busy (load average {report.machine['load_average_at_start'][0]:.1f} on "
            f"{report.machine['cpus']} cores at start): absolute numbers are low, ratios measured side by side"
        )
    evaluate_targets(report)
    report.targets.append(skew.target(report))
    report.targets.append(split_section.target(report))
    report.targets += partitions_section.targets(report)
    report.targets.append(tables_section.target(report))
    results = Path(args.results_dir) if args.results_dir else RESULTS
    results.mkdir(parents=True, exist_ok=True)
    stem = results / started.strftime("%Y%m%dT%H%M%SZ")
    data = report.to_json()
    data["files"] = {"json": str(stem.with_suffix(".json")), "png": str(stem.with_suffix(".png"))}
    try:
        draw_chart(report, stem.with_suffix(".png"))
    except Exception as err:  # the numbers matter more than the picture
        data["files"]["png"] = None
        report.notes.append(f"chart not drawn: {err}")
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(format_table(report))
    print(
        f"\nresults: {data['files']['json']}  chart: {data['files']['png']}  ({report.machine['bench_seconds']:.0f} s)"
    )
    failed = [n for n, s in report.sections.items() if isinstance(s, dict) and s.get("status") == "failed"]
    return 1 if failed else 0


def _memory_data(plan: Plan, work: Path) -> dict[float, Manifest]:
    out = {}
    for share in plan.memory_duplicate_shares:
        w = dataclasses.replace(plan.base, partition_bytes=plan.memory_partition_bytes, duplicate_share=share)
        log(f"generating memory data: {share:.0%} duplicates")
        out[share] = generate(work / "data" / f"keys-{share}", w)
    return out


def _spark_data(plan: Plan, work: Path) -> Manifest:
    w = dataclasses.replace(
        plan.base, partitions=max(plan.spark_counts), partition_bytes=plan.spark_partition_bytes
    )
    log(f"generating spark data: {w.partitions} x {w.partition_bytes / MiB:.0f} MiB")
    return generate(work / "data" / "spark", w)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny data: a smoke run of every section")
    parser.add_argument(
        "--skip", default="", help=f"comma-separated sections to leave out: {', '.join(SECTIONS)}"
    )
    parser.add_argument("--results-dir", default=None, help=f"where the JSON and PNG go (default {RESULTS})")
    parser.add_argument("--work-dir", default=None, help="where generated data goes (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument(
        "--sweep-repeat",
        type=int,
        default=None,
        help="times each side cleans each sweep shape (medians taken)",
    )
    parser.add_argument(
        "--sweep-canary",
        action="store_true",
        help="time bench.noise's wide canary before and after each sweep clean of either side (in the JSON)",
    )
    parser.add_argument(
        "--sweep-only",
        action="store_true",
        help="the batch-shape sweep alone, ours and Kafka's side (no other section, no other data generated)",
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
