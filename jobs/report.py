"""Dry-run report: per partition, what compaction and retention would do. Changes nothing.

spark-submit jobs/report.py --log-dir /data/kafka-logs [--format table|json|csv|parquet|html] [--out PATH]
kafka-log-jobs report --log-dir /data/kafka-logs [options]

Rows come from ``kafka_log_core.work.report.report_partition``, partitions sharing Spark tasks in bins,
sorted filthiest (highest dirty ratio) first. JSON on standard output is the bare array of rows.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from jobs import html_report, options, output, runner
from jobs.context import JobContext
from jobs.html_report import human_bytes
from jobs.output import row_schema, wrap_cell, write_parquet
from jobs.row_store import write_json
from kafka_log_core.work.outcome import Status
from kafka_log_core.work.report import report_task
from kafka_log_core.work.rows import ReportRow

SCHEMA = row_schema(ReportRow)
COLUMNS = [f.name for f in SCHEMA.fields]
FORMATS = ("table", "json", "csv", "parquet", "html")


def run(
    spark, log_dirs, topic_regex, configs, opts, *, count_duplicates: bool = True, listing=None
) -> list[dict]:
    """Report every selected partition; rows come back filthiest first."""
    fn = functools.partial(report_task, configs=configs, opts=opts, count_duplicates=count_duplicates)
    return runner.run_job(
        spark, log_dirs, topic_regex, fn, ReportRow, writing=False, order=runner.FILTHIEST_FIRST,
        listing=listing, title="report",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ output
def to_json(rows: Sequence[Mapping]) -> str:
    out = io.StringIO()
    write_json(rows, out)
    return out.getvalue()


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow(
            ["" if r[c] is None else str(r[c]).lower() if isinstance(r[c], bool) else r[c] for c in COLUMNS]
        )
    return out.getvalue()


_TABLE: list[tuple[str, str | None, Callable[[Any], str] | None]] = [  # header, column, cell
    ("topic", "topic", str),
    ("part", "partition", str),
    ("policy", "cleanup_policy", str),
    ("segs", "segments", str),
    ("size", "total_bytes", human_bytes),
    ("cleanable", "cleanable_bytes", human_bytes),
    ("dirty", "dirty_ratio", lambda v: f"{v:.3f}"),
    ("min", "min_cleanable_dirty_ratio", lambda v: f"{v:g}"),
    ("compact?", "would_compact", lambda v: "yes" if v else "no"),
    ("dup", "duplicate_share", lambda v: f"{v:.1%}"),
    ("ret segs", "retention_segments", str),
    ("ret size", "retention_bytes", human_bytes),
    ("reclaimable", "reclaimable_bytes", human_bytes),
    ("offsets", None, None),
    ("status", "status", str),
    ("why", None, None),
]
_RIGHT = {"part", "segs", "size", "cleanable", "dirty", "min", "dup", "ret segs", "ret size", "reclaimable"}


def _why(r: dict) -> str:
    parts = [r.get("compact_reason"), r.get("retention_reason") if r.get("retention_segments") else None]
    parts.append(r.get("reason"))
    return "; ".join(p for p in parts if p)


def _cells(r: dict) -> list[str]:
    out = []
    for header, column, fmt in _TABLE:
        if header == "offsets":
            lso, leo = r.get("log_start_offset"), r.get("log_end_offset")
            out.append("-" if lso is None else f"{lso}..{leo}")
        elif header == "why":
            out.append(_why(r))
        elif column is not None and fmt is not None:
            value = r.get(column)
            out.append("-" if value is None else fmt(value))
    return out


def totals(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("status") != Status.FAILED]
    clean = sum(r.get("clean_bytes") or 0 for r in ok)
    cleanable = sum(r.get("cleanable_bytes") or 0 for r in ok)
    return {
        "partitions": len(rows),
        "failed": len(rows) - len(ok),
        "segments": sum(r.get("segments") or 0 for r in ok),
        "total_bytes": sum(r.get("total_bytes") or 0 for r in ok),
        "cleanable_bytes": cleanable,
        "dirty_ratio": cleanable / (clean + cleanable) if clean + cleanable else 0.0,
        "would_compact": sum(1 for r in ok if r.get("would_compact")),
        "retention_segments": sum(r.get("retention_segments") or 0 for r in ok),
        "retention_bytes": sum(r.get("retention_bytes") or 0 for r in ok),
        "reclaimable_bytes": sum(r.get("reclaimable_bytes") or 0 for r in ok),
    }


def format_report_table(rows: list[dict], title: str, max_why: int = 90) -> str:
    headers = [h for h, _, _ in _TABLE]
    body = [_cells(r) for r in rows]
    t = totals(rows)
    total = ["TOTAL", f"{t['partitions']}", "", str(t["segments"]), human_bytes(t["total_bytes"]),
             human_bytes(t["cleanable_bytes"]), f"{t['dirty_ratio']:.3f}", "", f"{t['would_compact']} yes", "",
             str(t["retention_segments"]), human_bytes(t["retention_bytes"]), human_bytes(t["reclaimable_bytes"]),
             "", f"{t['failed']} failed" if t["failed"] else "", ""]  # fmt: skip
    # The "why" column is wrapped onto more lines past max_why characters, never cut.
    whys = [wrap_cell(line[-1], max_why) for line in body]
    for line, why in zip(body, whys, strict=True):
        line[-1] = why[0]
    widths = [max(len(x[i]) for x in [headers, total, *body]) for i in range(len(headers))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if h in _RIGHT else c.ljust(w) for c, w, h in zip(cells, widths, headers, strict=True)
        ).rstrip()

    def row_lines(cells: list[str], why: list[str]) -> list[str]:
        return [fmt(cells)] + [fmt([""] * (len(headers) - 1) + [more]) for more in why[1:]]

    rule = "  ".join("-" * w for w in widths)
    dirs = sorted({r["log_dir"] for r in rows})
    lines = [
        title + (f" — {', '.join(dirs)}" if dirs else ""),
        fmt(headers),
        rule,
        *(text for cells, why in zip(body, whys, strict=True) for text in row_lines(cells, why)),
        rule,
        fmt(total),
    ]
    return "\n".join(lines)


_SUFFIXES = {
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".html": "html",
    ".htm": "html",
    ".txt": "table",
}


def format_of(path: str | None) -> str | None:
    """The format an --out file name asks for (``report.html`` -> html), if any."""
    return _SUFFIXES.get(Path(path).suffix.lower()) if path else None


def render(rows: list[dict], fmt: str, now_ms: int, title: str) -> str:
    """The report as text in ``fmt`` (json, csv, html or table)."""
    if fmt == "json":
        return to_json(rows)
    if fmt == "csv":
        return to_csv(rows)
    if fmt == "html":
        return html_report.render(rows, now_ms=now_ms, title=title)
    return format_report_table(rows, title) + "\n"


@click.command("report")
@options.job_context(*options.JOB, options.READ)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="table (default on a terminal), json (default otherwise: the bare array), csv, parquet, html.",
)
@click.option(
    "--out", type=click.Path(dir_okay=False), default=None, help="Write the report to PATH instead of stdout."
)
@click.option(
    "--no-duplicate-share", is_flag=True, help="Skip counting duplicates (reads only batch headers)."
)
def command(job: JobContext, fmt: str | None, out: str | None, no_duplicate_share: bool) -> None:
    """Show what compaction and retention would do, per partition, without changing anything."""
    fmt = fmt or job.output.fmt or format_of(out) or job.output.resolved()
    if fmt == "parquet" and not out:
        raise click.UsageError("--format parquet needs --out PATH")
    spark_started = job.start_spark("report")  # Spark's core, while the job lists and reads settings
    listing = job.listing(writing=False)  # mistakes said at once
    configs = job.configs()
    opts = job.options(dry_run=True)
    spark = spark_started()
    rows = run(
        spark,
        job.log_dirs,
        job.topic_regex,
        configs,
        opts,
        count_duplicates=not no_duplicate_share,
        listing=listing,
    )
    if fmt == "parquet":
        write_parquet(rows, SCHEMA, out)
    elif fmt == "json":  # a row at a time: 50,000 rows are not held as one string
        with open(out, "w", encoding="utf-8") if out else contextlib.nullcontext(sys.stdout) as f:
            write_json(rows, f)
    else:
        job.output.write(render(rows, fmt, opts.now_ms, "kafka-log-jobs report (dry run)"), out)
    job.output.write_report(rows, SCHEMA)
    sys.exit(output.exit_status(rows))


if __name__ == "__main__":
    command()
