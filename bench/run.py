"""``make bench``: one run, the same generated data, every number next to what it is compared with.

``python -m bench.run [--quick] [--skip kafka,spark,...] [--results-dir DIR] [--work-dir DIR] [--keep]``

Sections (each measured in its own process by ``bench.probe``, so peak memory is per measurement):

* ``raw``: the machine's limits on the scan segment: plain sequential read, one CRC32C pass.
* ``scan``: our decode with key extraction (``record_table`` + CRC verify over all batches) and
  kafka-python's ``MemoryRecords`` touching every key, on the same segment.
* ``compaction``: ``compact_partition`` on one partition of 1x, 2x and 4x the base size (per core, and
  linearity), with a phase breakdown of the 1x run.
* ``memory``: the dedupe map sized to just hold the keys of partitions with few / some / many distinct
  keys: map bytes per distinct key, peak RSS against the map.
* ``spark``: the compact job (``jobs.compact.run``) on ``local[1]`` and ``local[2]`` over 1, 2, 4, 8
  partitions.
* ``kafka``: Kafka's own log cleaner on a copy of the 1x partition (``bench.kafka_cleaner``); skipped with
  a note when java or mvn is missing.

Output: a table on standard output (progress on standard error), ``<results-dir>/<UTC time>.json`` and
a PNG chart next to it. MB = 10^6 bytes, GB = 10^9 bytes (Kafka's own "MB" is MiB and is converted).
The exit status is 1 when a section failed (skipped sections are not failures).
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench import chart
from bench.generate import KiB, Manifest, MiB, Workload, generate

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
SECTIONS = ("raw", "scan", "compaction", "memory", "spark", "kafka")
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
)


# ---------------------------------------------------------------------------------------------- results
@dataclass
class Row:
    """One throughput measurement for the table."""

    section: str
    name: str
    bytes: float
    seconds: float  # wall
    records: int | None = None
    cores: int = 1
    cpu_seconds: float | None = None  # CPU time of the measured thread(s), when known
    peak_rss: int | None = None
    baseline_rss: int | None = None
    note: str = ""

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def mb_per_s_per_core(self) -> float:
        return self.mb_per_s / self.cores

    @property
    def mb_per_cpu_s(self) -> float | None:
        return self.bytes / self.cpu_seconds / 1e6 if self.cpu_seconds else None

    @property
    def records_per_s(self) -> float | None:
        return self.records / self.seconds if self.records is not None and self.seconds > 0 else None

    def to_json(self) -> dict:
        return {
            **dataclasses.asdict(self),
            "mb_per_s": self.mb_per_s,
            "mb_per_s_per_core": self.mb_per_s_per_core,
            "mb_per_cpu_s": self.mb_per_cpu_s,
            "records_per_s": self.records_per_s,
        }


@dataclass(frozen=True)
class Target:
    name: str
    measured: float | None
    target: float
    higher_is_better: bool
    unit: str
    bound_by: str = ""

    @property
    def met(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured >= self.target if self.higher_is_better else self.measured <= self.target

    def verdict(self) -> str:
        if self.measured is None:
            return "NOT MEASURED"
        if self.met:
            return "MET"
        if self.higher_is_better:
            short = 1 - self.measured / self.target
            if self.measured <= 0:
                return "MISSED"
            need = self.target / self.measured
            return (
                f"MISSED by {short:.0%} (needs {need:.2f}x)"
                if need < 1.1
                else f"MISSED by {short:.0%} (needs {need:.1f}x)"
            )
        return f"MISSED by {self.measured / self.target - 1:.0%} over"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "measured": self.measured,
            "target": self.target,
            "comparison": ">=" if self.higher_is_better else "<=",
            "unit": self.unit,
            "met": self.met,
            "verdict": self.verdict(),
            "bound_by": self.bound_by,
        }


@dataclass
class Report:
    quick: bool
    started: datetime
    machine: dict
    workload: dict
    rows: list[Row] = field(default_factory=list)
    sections: dict = field(default_factory=dict)
    ratios: dict = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def section_error(self, name: str, err: BaseException) -> None:
        self.sections[name] = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
        self.notes.append(
            f"{name}: FAILED: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        )

    def to_json(self) -> dict:
        return {
            "schema": 1,
            "timestamp": self.started.isoformat(),
            "quick": self.quick,
            "machine": self.machine,
            "workload": self.workload,
            "measurements": [r.to_json() for r in self.rows],
            "sections": self.sections,
            "ratios": self.ratios,
            "targets": [t.to_json() for t in self.targets],
            "notes": self.notes,
        }


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
            log("scan: ours (record_table + CRC) and kafka-python on the same segment")
            ours = probe("scan", segment, *rep)
            kp = probe("kafka-python", segment, "--repeat", str(plan.kafka_python_repeat))
            report.rows.append(Row("scan", "scan: record_table + CRC (ours)", ours["bytes"], ours["seconds"],
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
    per_batch = {k: v / ours["batches"] * 1e6 for k, v in parts.items()}
    per_batch["record_table_glue"] = (
        per_batch["record_table"] - per_batch["walk_records"] - per_batch["hash_keys"]
    )
    report.sections["scan"]["parts_cpu_us_per_batch"] = per_batch


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
    phases = dict(one.get("phases_cpu_seconds", {}))
    if phases:
        phases["pass2_rewrite_and_swap (total - parts)"] = one["cpu_seconds"] - sum(phases.values())
    report.sections["compaction"] = {"status": "ok", "runs": runs, "phases_cpu_seconds_1x": phases}
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


# ---------------------------------------------------------------------------------------------- targets
def evaluate_targets(report: Report) -> None:
    r = report.ratios
    report.targets = [
        Target("decode: scan >= 20x kafka-python (per CPU-s)", r.get("scan_vs_kafka_python"), 20, True, "x",
               "kafka-python builds a Python object per record"),
        Target("decode: scan >= 1 GB/s per core (per CPU-s)", r.get("scan_gb_per_s_per_core"), 1.0, True, "GB/s",
               "per-batch Python work in scan.record_table + two kernel calls (see 'scan: CPU time per batch')"),
        Target("decode: scan >= 50% of a CRC32C pass (per CPU-s)", r.get("scan_vs_crc32c_pass"), 0.5, True, "share",
               "CRC32C is hardware-assisted (~10 GB/s); the scan walks varints record by record"),
        Target("compaction >= 300 MB/s per core (per CPU-s)", r.get("compaction_mb_per_s_per_core"), 300, True,
               "MB/s", "two passes of per-batch Python (record_table twice, CRC twice, rebuild) - see phases"),
        Target("compaction >= 2x Kafka's cleaner (per CPU-s)", r.get("compaction_vs_kafka_cleaner"), 2.0, True, "x",
               "the per-batch costs above"),
        Target("map <= 24 bytes per distinct key", r.get("map_bytes_per_distinct_key"), 24.0, False, "B/key",
               "24 B per slot, but at most load factor 0.9 of the slots hold keys: 24/0.9 = 26.7 (as Kafka)"),
        Target("peak RSS within 2x of the map (default map)", r.get("peak_rss_vs_map_default_config"), 2.0, False,
               "x", "interpreter+numba baseline, and pass 1 keeps every dirty segment's bytes in memory"),
        Target("spark: local[2] >= 1.6x local[1] (8 partitions)", r.get("spark_local2_vs_local1_at_max_partitions"),
               1.6, True, "x", "2 cores shared by the driver JVM, the Python workers and everything else"),
        Target("linear: 4x input keeps >= 80% of 1x (per CPU-s)", r.get("linearity_throughput_largest_vs_1x"), 0.8,
               True, "share", "pass 1 keeps every dirty segment in memory: more input, more page faults"),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------- output
def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:,.0f}"


def format_table(report: Report) -> str:
    w = report.workload
    lines = [
        f"kafka-log-jobs benchmark {report.started:%Y-%m-%d %H:%M:%S} UTC{'  (--quick)' if report.quick else ''}",
        f"machine: {report.machine['cpus']} cores, load average at start "
        f"{report.machine['load_average_at_start'][0]:.1f}, end {report.machine.get('load_average_at_end', (0,))[0]:.1f}",
        f"code: {(report.machine['code']['commit'] or '?')[:12]}"
        + (
            f" + uncommitted {', '.join(report.machine['code']['uncommitted'])}"
            if report.machine["code"]["uncommitted"]
            else ""
        ),
        f"data: {w['partition_bytes'] / MiB:.0f} MiB partition (1x), {w['segment_bytes'] / MiB:.0f} MiB segments, "
        f"{w['key_bytes']} B keys, {w['value_bytes']} B values, {w['duplicate_share']:.0%} duplicates, "
        f"{w['tombstone_share']:.0%} tombstones, {','.join(w['codecs'])}, {w['batch_bytes'] // KiB} KiB batches",
        "",
    ]
    header = (
        f"{'measurement':44} {'input MB':>9} {'seconds':>8} {'MB/s':>8} {'MB/s/core':>9} {'MB/CPU-s':>9} "
        f"{'records/s':>11} {'peak RSS MB':>11} {'(+base)':>8}  note"
    )
    lines += [header, "-" * len(header)]
    for row in report.rows:
        rps = row.records_per_s
        extra = (
            f"+{_mb(row.peak_rss - row.baseline_rss)}"
            if row.peak_rss is not None and row.baseline_rss is not None
            else ""
        )
        cpu = "-" if row.mb_per_cpu_s is None else f"{row.mb_per_cpu_s:,.0f}"
        lines.append(
            f"{row.name[:44]:44} {row.bytes / 1e6:9,.1f} {row.seconds:8.3f} {row.mb_per_s:8,.0f} "
            f"{row.mb_per_s_per_core:9,.0f} {cpu:>9} {('-' if rps is None else f'{rps:,.0f}'):>11} "
            f"{_mb(row.peak_rss):>11} {extra:>8}  {row.note}"
        )
    scan = report.sections.get("scan", {})
    if "parts_cpu_us_per_batch" in scan:
        parts = scan["parts_cpu_us_per_batch"]
        ours = scan["ours"]
        lines += [
            "",
            f"scan: CPU time per batch ({ours['records'] / ours['batches']:.0f} records, "
            f"{ours['bytes'] / ours['batches'] / KiB:.1f} KiB), us: "
            + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()),
        ]
    phases = report.sections.get("compaction", {}).get("phases_cpu_seconds_1x")
    if phases:
        lines.append("compaction 1x, CPU s: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    mem = report.sections.get("memory", {})
    if mem.get("status") == "ok":
        lines += [
            "",
            f"{'memory vs distinct keys':44} {'keys':>9} {'map MiB':>8} {'B/key':>8} {'peak MB':>9} {'peak/map':>9}",
        ]
        for m in mem["runs"]:
            lines.append(
                f"{'  duplicates ' + format(m['duplicate_share'], '.0%'):44} {m['distinct_keys']:9,} "
                f"{m['map_bytes'] / MiB:8.1f} {m['map_bytes_per_distinct_key']:8.1f} {_mb(m['peak_rss']):>9} "
                f"{m['peak_rss_vs_map']:9.1f}"
            )
    lines += ["", "ratios"]
    for key, value in report.ratios.items():
        lines.append(f"  {key:52} {value:10.3f}")
    lines += ["", "targets"]
    for t in report.targets:
        measured = "-" if t.measured is None else f"{t.measured:.3g} {t.unit}"
        cmp = ">=" if t.higher_is_better else "<="
        lines.append(f"  [{t.verdict()}] {t.name}: measured {measured} (target {cmp} {t.target:g} {t.unit})")
        if t.met is False and t.bound_by:
            lines.append(f"      bound: {t.bound_by}")
    for name in SECTIONS:
        s = report.sections.get(name, {})
        if s.get("status") == "skipped":
            lines.append(f"  [SKIPPED] {name}: {s.get('reason', 'by --skip')}")
    if report.notes:
        lines += ["", "notes"] + [f"  - {n}" for n in report.notes]
    return "\n".join(lines)


def draw_chart(report: Report, path: Path) -> None:
    colors = {"raw": chart.LIMIT, "scan": chart.OURS, "compaction": chart.OURS, "kafka": chart.KAFKA}
    per_core = []
    for row in report.rows:
        if row.section in ("raw", "scan", "compaction", "kafka"):
            color = chart.BASELINE if "kafka-python" in row.name else colors[row.section]
            value = row.mb_per_cpu_s or row.mb_per_s_per_core
            per_core.append(chart.Bar(row.name, value, f"{value:,.0f} MB/s", color))
    spark_bars = [
        chart.Bar(row.name.replace("spark ", ""), row.mb_per_s, f"{row.mb_per_s:,.0f} MB/s total", chart.OURS)
        for row in report.rows
        if row.section == "spark"
    ]
    target_bars = [  # how far each target is reached: measured/target (or target/measured), capped at 2
        chart.Bar(
            t.name,
            (t.measured / t.target if t.higher_is_better else t.target / t.measured) if t.measured else 0.0,
            t.verdict().replace(" (needs", ", needs").rstrip(")"),
            chart.LIMIT if t.met else chart.KAFKA,
        )
        for t in report.targets
        if t.measured is not None
    ]
    panels = [chart.Panel("throughput per core, MB per CPU-second (log scale)", per_core, log_scale=True)]
    if spark_bars:
        panels.append(chart.Panel("spark compact job, MB/s of input", spark_bars))
    if target_bars:
        panels.append(chart.Panel("targets: share reached (line = target, full bar = 2x)", target_bars,
                                  max_value=2.0, marker=1.0))  # fmt: skip
    chart.write_png(path, f"kafka-log-jobs bench {report.started:%Y-%m-%d %H:%M} UTC", panels)


# ---------------------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> int:
    plan = QUICK if args.quick else FULL
    skip = {s.strip() for s in (args.skip or "").split(",") if s.strip()}
    unknown = skip - set(SECTIONS)
    if unknown:
        raise SystemExit(f"--skip: unknown sections {sorted(unknown)} (known: {', '.join(SECTIONS)})")
    started = datetime.now(UTC)
    report = Report(args.quick, started, machine_info(), dataclasses.asdict(plan.base))
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kafka-log-jobs-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        log(f"work dir {work}")
        datasets: dict[int, Manifest] = {}
        for factor in plan.sizes if "compaction" not in skip else (1,):
            w = dataclasses.replace(plan.base, partition_bytes=plan.base.partition_bytes * factor)
            log(f"generating {factor}x: {w.partition_bytes / MiB:.0f} MiB")
            datasets[factor] = generate(work / "data" / f"size-{factor}x", w)
        report.sections["generate"] = {f"{f}x": m.to_json() for f, m in datasets.items()}
        try:
            run_raw_and_scan(report, plan, datasets[1], skip)
        except Exception as err:
            report.section_error("scan", err)
        sections = [
            ("compaction", lambda: run_compaction(report, plan, datasets, work / "run")),
            ("memory", lambda: run_memory(report, plan, _memory_data(plan, work), work / "run")),
            ("spark", lambda: run_spark(report, plan, _spark_data(plan, work), work / "run")),
            ("kafka", lambda: run_kafka(report, plan, datasets[1], work / "run")),
        ]
        for name, body in sections:
            if name in skip:
                report.sections[name] = {"status": "skipped", "reason": "--skip"}
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
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
