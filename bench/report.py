"""The benchmark's results: measurement rows, targets with their verdicts, the terminal table, the chart.

MB = 10^6 bytes, GB = 10^9 bytes. A target says MET, MISSED by how much, or NOT MEASURED (its section
was skipped or failed); ``bound_by`` is what limits a missed one, shown under it in the table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench import chart
from bench.generate import KiB, MiB

SECTIONS = (
    "raw",
    "scan",
    "compaction",
    "memory",
    "spark",
    "kafka",
    "skew",
    "sweep",
    "split",
    "partitions",
    "tables",
)


# ---------------------------------------------------------------------------------------------- sections
def section_result(module: str, work: Path, args: list[str]) -> dict:
    """Run a section's module in a process of its own (``python -m bench.<module> --work WORK ARGS``) and
    return the JSON object it printed last; a failure raises with the tail of its output."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", f"bench.{module}", "--work", str(work / module), *args]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-20:])
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{tail}")
    return json.loads(lines[-1])


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


# ---------------------------------------------------------------------------------------------- targets
def evaluate_targets(report: Report) -> None:
    r = report.ratios
    scan = _scan_bound(report)
    compaction = _compaction_bound(report)
    report.targets = [
        Target("decode: scan >= 20x kafka-python (per CPU-s)", r.get("scan_vs_kafka_python"), 20, True, "x", scan),
        Target("decode: scan >= 1 GB/s per core (per CPU-s)", r.get("scan_gb_per_s_per_core"), 1.0, True, "GB/s", scan),
        Target("decode: scan >= 50% of a CRC32C pass (per CPU-s)", r.get("scan_vs_crc32c_pass"), 0.5, True, "share",
               "CRC32C is hardware-assisted; the scan walks varints and hashes every key. " + scan),
        Target("compaction >= 300 MB/s per core (per CPU-s)", r.get("compaction_mb_per_s_per_core"), 300, True,
               "MB/s", compaction),
        Target("compaction >= 2x Kafka's cleaner (per CPU-s)", r.get("compaction_vs_kafka_cleaner"), 2.0, True, "x",
               compaction),
        Target("map <= 24 bytes per distinct key", r.get("map_bytes_per_distinct_key"), 24.0, False, "B/key",
               "24 B per slot, but at most load factor 0.9 of the slots hold keys: 24/0.9 = 26.7 (as Kafka)"),
        Target("peak RSS within 2x of the map (default map)", r.get("peak_rss_vs_map_default_config"), 2.0, False,
               "x", "the Python+numpy+numba baseline, plus whole .log files held in memory (about two segments)"),
        Target("spark: local[2] >= 1.6x local[1] (8 partitions)", r.get("spark_local2_vs_local1_at_max_partitions"),
               1.6, True, "x", "2 cores shared by the driver JVM, the Python workers and everything else"),
        Target("linear: 4x input keeps >= 80% of 1x (per CPU-s)", r.get("linearity_throughput_largest_vs_1x"), 0.8,
               True, "share", ""),
        Target("1 GiB dedupe buffer costs <= 1.1x the default (CPU)", r.get("dedupe_1gib_vs_default_cpu"), 1.1,
               False, "x", "the map's slots are allocated for the work, not the configured buffer"),
        *_sweep_targets(report),
        Target("sweep: the records Kafka keeps, on every shape", r.get("sweep_shapes_keeping_other_records_than_kafka"),
               0, False, "shapes", "see the notes"),
    ]  # fmt: skip


def _scan_bound(report: Report) -> str:
    parts = report.sections.get("scan", {}).get("parts_cpu_us_per_batch")
    if not parts:
        return ""
    return "CPU us per batch: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())


def compressed_shape(result: dict) -> bool:
    """Whether a sweep shape's batches are compressed (by its workload's codecs)."""
    return any(codec != "none" for codec in result["workload"]["codecs"])


def _sweep_targets(report: Report) -> list[Target]:
    """The sweep's targets, each by three figures: the median of the rounds' ratios (a round cleans a shape on
    each side seconds apart, bench.run._paired_ratios), the ratio of each side's median clean, and that of
    each side's median over its quiet cleans (bench.run._quiet_ratios). The slowest shape (by the ratio of
    the medians, as ``_sweep_bound`` picks it) is named beside that figure per CPU-second."""
    r = report.ratios
    targets = []
    for kind, least, compressed in (("uncompressed", 3.0, False), ("compressed", 2.5, True)):
        for measure, suffix in (("per CPU-s", ""), ("wall time of the work", "_wall")):
            for figure, paired in (
                ("median of the rounds' ratios", "_paired"),
                ("ratio of the medians", ""),
                ("ratio of the medians of quiet cleans, --sweep-canary", "_quiet"),
            ):
                bound = _sweep_bound(report, compressed=compressed) if not suffix and not paired else ""
                targets.append(Target(f"sweep: >= {least:g}x Kafka's cleaner on every {kind} shape ({measure}, "
                                      f"{figure})", r.get(f"sweep_min_vs_kafka_{kind}{suffix}{paired}"), least,
                                      True, "x", bound))  # fmt: skip
    return targets


def _gate_counts(r: dict) -> str:
    """A sweep shape's cleans redone by the canary's gate and those never quiet, ours and Kafka's (bench.gate)."""
    if "redone_cleans" not in r:
        return "-"
    redone, never = r["redone_cleans"], r["cleans_never_quiet"]
    return f"{redone['ours']}+{redone['kafka']}, {never['ours']}+{never['kafka']}"


def _sweep_bound(report: Report, *, compressed: bool) -> str:
    """The slowest shape against Kafka, and where our CPU went on it."""
    shapes = report.sections.get("sweep", {}).get("shapes", {})
    worst = None
    for name, r in shapes.items():
        if compressed_shape(r) == compressed and "ours_vs_kafka" in r:
            if worst is None or r["ours_vs_kafka"] < shapes[worst]["ours_vs_kafka"]:
                worst = name
    if worst is None:
        return ""
    ours = shapes[worst]["ours"]
    phases = ours.get("phases_cpu_seconds", {})
    parts = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
    return (
        f"slowest: {worst} ({ours['cpu_seconds']:.2f} CPU-s in all; {parts}; the rest is pass 2 and the swap)"
    )


def _compaction_bound(report: Report) -> str:
    phases = report.sections.get("compaction", {}).get("phases_cpu_seconds_1x")
    if not phases:
        return ""
    return "CPU s of the 1x run: " + ", ".join(
        f"{k.split(' ')[0]} {v:.2f}" for k, v in phases.items() if v >= 0.01
    )


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
    digest = scan.get("digest")
    if digest:
        lines.append(
            f"key digest on {digest['keys']:,} keys of {digest['key_bytes_mean']:.0f} B: MD5 in lanes (the map's, as the "
            f"broker's) {digest['md5_ns_per_key']:.1f} ns/key, MurmurHash3 x64 128 {digest['murmur3_ns_per_key']:.1f} ns/key"
        )
    phases = report.sections.get("compaction", {}).get("phases_cpu_seconds_1x")
    if phases:
        lines.append("compaction 1x, CPU s: " + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    sweep = report.sections.get("sweep", {})
    if sweep.get("status") == "ok":
        lines += [
            "",
            f"{'batch-shape sweep':28} {'rec/batch':>9} {'input MB':>9} {'ours MB/CPU-s':>14} {'Kafka MB/CPU-s':>15} "
            f"{'ours/Kafka':>10} {'paired':>7} {'quiet':>7} {'kept (ours, Kafka)':>22} {'redone, never quiet':>20}",
        ]
        for name, r in sweep["shapes"].items():
            kafka = r.get("kafka", {})
            km = r.get("kafka_mb_per_cpu_s")
            ratio = r.get("ours_vs_kafka")
            paired = r.get("ours_vs_kafka_paired")
            quiet = r.get("ours_vs_kafka_quiet")
            kept = f"{r['ours']['rows'][0]['records_after']:,}, {kafka['end_messages']:,}" if kafka else "-"
            lines.append(
                f"  {name:26} {r['records_per_batch']:9.0f} {r['input_bytes'] / 1e6:9.1f} {r['ours_mb_per_cpu_s']:14,.0f} "
                f"{('-' if km is None else f'{km:,.0f}'):>15} {('-' if ratio is None else f'{ratio:.2f}x'):>10} "
                f"{('-' if paired is None else f'{paired:.2f}x'):>7} "
                f"{('-' if quiet is None else f'{quiet:.2f}x'):>7} {kept:>22} {_gate_counts(r):>20}"
            )
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
    sweep_bars = [
        chart.Bar(row.name.replace("sweep ", ""), row.mb_per_cpu_s or 0.0, f"{row.mb_per_cpu_s or 0:,.0f} MB/s",
                  chart.KAFKA if row.name.endswith("Kafka") else chart.OURS)
        for row in report.rows
        if row.section == "sweep"
    ]  # fmt: skip
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
    if sweep_bars:
        panels.append(chart.Panel("batch-shape sweep: MB per CPU-second, ours and Kafka's cleaner (log scale)",
                                  sweep_bars, log_scale=True))  # fmt: skip
    if target_bars:
        panels.append(chart.Panel("targets: share reached (line = target, full bar = 2x)", target_bars,
                                  max_value=2.0, marker=1.0))  # fmt: skip
    chart.write_png(path, f"kafka-log-jobs bench {report.started:%Y-%m-%d %H:%M} UTC", panels)
