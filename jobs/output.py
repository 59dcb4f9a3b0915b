"""A job's result table (one row per partition) and where it goes: standard output as a table or the bare
JSON array, ``--report-path`` as JSON or Parquet, and notes for the user on standard error.

The table's columns and types come from the job's row dataclass (:mod:`kafka_log_core.work.rows`):
:func:`row_schema` makes the Spark schema, :func:`arrow_schema` the Arrow one for Parquet.
"""

from __future__ import annotations

import sys
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from jobs import progress
from jobs.row_store import write_json
from kafka_log_core.work.outcome import Status
from kafka_log_core.work.rows import INT32, columns

_SPARK_TYPES = {int: LongType(), float: DoubleType(), bool: BooleanType(), str: StringType()}
MAX_CELL = 80  # wider cells (reasons, settings) are wrapped onto more lines, never cut


def spark_field(name: str, hint: Any) -> StructField:
    """One result column from a row field's type (:mod:`kafka_log_core.work.rows`): ``X | None`` nullable,
    ``int`` a long, ``Int32`` an integer, ``float`` a double, ``bool`` a boolean, ``str`` a string."""
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        nullable = True
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Annotated:
        base, *marks = typing.get_args(hint)
        if base is int and INT32 in marks:
            return StructField(name, IntegerType(), nullable)
        hint = base
    if hint not in _SPARK_TYPES:
        raise TypeError(f"result column {name}: no Spark type for {hint!r}")
    return StructField(name, _SPARK_TYPES[hint], nullable)


def row_schema(row_type: type) -> StructType:
    """A job's result table as a Spark schema, from its row dataclass: its columns in field order."""
    hints = typing.get_type_hints(row_type, include_extras=True)
    return StructType([spark_field(name, hints[name]) for name in columns(row_type)])


def arrow_schema(schema: StructType):
    """The Spark result schema as an Arrow schema (nullable integers stay integers in Parquet)."""
    import pyarrow as pa

    types = {"string": pa.string(), "integer": pa.int32(), "long": pa.int64(), "double": pa.float64(),
             "boolean": pa.bool_()}  # fmt: skip
    return pa.schema([pa.field(f.name, types[f.dataType.typeName()], f.nullable) for f in schema.fields])


def write_parquet(rows: Sequence[Mapping], schema: StructType, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows], schema=arrow_schema(schema)), path)


def tell(line: str) -> None:
    """A note for the user on stderr -- unless stderr is merged into a stdout that is not a terminal
    (spark-submit runs the driver that way), where it would corrupt the JSON result; the result rows carry
    the same facts."""
    if not progress.merged_streams():
        click.echo(line, err=True)


def exit_status(rows: Sequence[Mapping]) -> int:
    """1 when a partition failed, else 0."""
    return 1 if any(r.get("status") == Status.FAILED for r in rows) else 0


@dataclass(frozen=True)
class Output:
    """Where a job's result goes (``--output``, ``--report-path``), the same for every job."""

    fmt: str | None = None  # table or json; None: table on a terminal, else json
    report_path: str | None = None

    def resolved(self, fmt: str | None = None) -> str:
        """The format on standard output: ``fmt`` or ``--output``, else table on a terminal, else json."""
        return fmt or self.fmt or ("table" if sys.stdout.isatty() else "json")

    def emit(self, rows: Sequence[Mapping], schema: StructType, title: str, *, dry_run: bool = False) -> None:
        """Print the result table (stdout: only the JSON array with json, written a row at a time; the
        closing summary of a run whose recovery truncated records then goes to stderr) and write
        ``--report-path``."""
        shown = [f.name for f in schema.fields]
        full = _Shown(rows, shown)
        if self.resolved() == "json":
            write_json(full, sys.stdout, default=str)
            truncated = truncation_summary(rows, dry_run)  # two columns read, not every row's dict
            if truncated:
                tell(truncated)
        else:
            click.echo(format_table(list(full), shown, title, dry_run=dry_run))
        self.write_report(full, schema)

    def write_report(self, rows: Sequence[Mapping], schema: StructType) -> None:
        """The result table at ``--report-path``: Parquet for a ``.parquet`` name, else JSON."""
        if not self.report_path:
            return
        if self.report_path.endswith(".parquet"):
            write_parquet(rows, schema, self.report_path)
        else:
            with open(self.report_path, "w", encoding="utf-8") as f:
                write_json(rows, f, default=str, indent=1)

    def write(self, text: str, out: str | None = None) -> None:
        """``text`` to the file ``out``, or to standard output."""
        if out:
            Path(out).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)


class _Shown(Sequence):
    """``rows`` seen through the ``columns`` shown (each row a dict made when it is read)."""

    def __init__(self, rows: Sequence[Mapping], columns: Sequence[str]) -> None:
        self.rows, self.columns = rows, columns

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return {c: self.rows[i].get(c) for c in self.columns}


def truncation_summary(rows: Sequence[Mapping], dry_run: bool) -> str:
    """What recovery truncated over the run ("" when nothing): every run that truncated records says so."""
    hit = [r for r in rows if (r.get("truncated_bytes") or 0) > 0]
    if not hit:
        return ""
    records = sum(r.get("truncated_records") or 0 for r in hit)
    size = sum(r["truncated_bytes"] for r in hit)
    verb = "would truncate" if dry_run else "truncated"
    return (
        f"recovery {verb} {records} record{'' if records == 1 else 's'} ({size} bytes) in {len(hit)} "
        f"partition{'' if len(hit) == 1 else 's'}"
    )


def format_table(rows: list[dict], columns: Sequence[str], title: str, *, dry_run: bool = False) -> str:
    shown = (
        [c for c in columns if c != "log_dir"]
        if len({r.get("log_dir") for r in rows}) <= 1
        else list(columns)
    )
    cells = [[_cell(r.get(c)) for c in shown] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(shown)]
    widths = [min(w, MAX_CELL) for w in widths]
    line = "  ".join(c.ljust(w) for c, w in zip(shown, widths, strict=True))
    out = [title, line.rstrip(), "  ".join("-" * w for w in widths)]
    for x in cells:
        wrapped = [wrap_cell(v, w) for v, w in zip(x, widths, strict=True)]
        for k in range(max(len(c) for c in wrapped)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(wrapped, widths, strict=True)]
            out.append("  ".join(parts).rstrip())
    counts: dict[str, int] = {}
    for r in rows:
        status = str(r.get("status", "?"))
        counts[status] = counts.get(status, 0) + 1
    closing = f"{len(rows)} partitions: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    truncated = truncation_summary(rows, dry_run)
    out.append(closing + (f"; {truncated}" if truncated else ""))
    return "\n".join(out)


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width`` characters, at spaces where it can (paths are split where
    they must, never at their hyphens), losing nothing."""
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
