"""The report as one self-contained HTML page: inline CSS and SVG drawn here, no script, nothing fetched.

Three charts and the table:

* **dirty ratio per partition** — filthiest first, with each partition's ``min.cleanable.dirty.ratio``
  as a tick (and one dashed line when every partition shares it); partitions the cleaner would pick
  are drawn in the warm colour;
* **reclaimable bytes per topic** — the compaction estimate (cleanable bytes × duplicate share)
  stacked with the bytes retention would delete;
* **segment age against retention** — per partition the age of the oldest segment (now − its largest
  timestamp, the age ``retention.ms`` is measured by) with ``retention.ms`` as a tick.

Bars carry ``class="bar"`` and a ``<title>`` tooltip; charts show at most ``max_bars`` rows and say
how many were left out.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kafka_log_core.work.outcome import Status

WIDTH, LABEL_W, VALUE_W, ROW_H, BAR_H, TOP, BOTTOM = 960, 230, 110, 22, 14, 28, 30
PLOT_W = WIDTH - LABEL_W - VALUE_W

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2933;margin:0;background:#f5f7fa}
main{max-width:1000px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 4px}
p.sub,p.note{color:#52606d;margin:2px 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}
.card{background:#fff;border-radius:8px;padding:10px 14px;box-shadow:0 1px 2px #0002;flex:1;min-width:96px}
.card b{display:block;font-size:19px}.card span{color:#52606d;font-size:12px}
svg.chart{background:#fff;border-radius:8px;box-shadow:0 1px 2px #0002}
svg text{font-size:12px;fill:#323f4b}svg .axis{fill:#7b8794;font-size:11px}
.grid{stroke:#e4e7eb}.threshold{stroke:#1f2933;stroke-width:2}.refline{stroke:#1f2933;stroke-dasharray:5 4}
.hot{fill:#e8590c}.cool{fill:#4c6ef5}.muted{fill:#adb5bd}.retain{fill:#c92a2a}.compact{fill:#f08c00}
.young{fill:#2f9e44}.old{fill:#c92a2a}
table{border-collapse:collapse;background:#fff;width:100%;font-size:12px;box-shadow:0 1px 2px #0002}
th,td{padding:4px 6px;border-bottom:1px solid #e4e7eb;text-align:left;vertical-align:top}td.n{text-align:right;white-space:nowrap}td.why{color:#52606d;font-size:11px}
tr.failed td{background:#fff5f5}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;border-radius:2px}
"""


@dataclass(frozen=True)
class Bar:
    label: str
    parts: tuple[tuple[float, str, str], ...]  # (value, css class, tooltip), stacked left to right
    value_text: str
    marker: float | None = None  # a tick at this value (a per-row threshold)
    marker_title: str = ""


@dataclass(frozen=True)
class Chart:
    chart_id: str
    bars: list[Bar]
    axis_max: float
    axis_text: Callable[[float], str]
    ref_line: tuple[float, str] | None = None  # one dashed line across all rows, with its caption
    omitted: int = 0
    legend: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (css class, text)


# ------------------------------------------------------------------------------------------ formatting
def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{_short(n)} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def human_ms(ms: float) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if abs(ms) >= size:
            return f"{_short(ms / size)} {unit}"
    return f"{ms:.0f} ms"


def _short(x: float) -> str:
    """One decimal below 10, none above; no trailing ``.0``."""
    text = f"{x:.0f}" if abs(x) >= 10 else f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def nice_max(value: float, unit: float = 1.0) -> float:
    """The smallest 1.2/1.6/2/4/8/12 × 10^k multiple of ``unit`` at or above ``value``: an axis end
    whose quarters are round numbers in that unit."""
    if value <= 0:
        return unit
    scaled = value / unit
    magnitude = 10 ** math.floor(math.log10(scaled))
    for step in (1.2, 1.6, 2, 4, 8):
        if step * magnitude >= scaled:
            return step * magnitude * unit
    return 12 * magnitude * unit


def bytes_axis(value: float) -> float:
    unit = 1.0
    while value >= 1024 * unit and unit < 1024**4:
        unit *= 1024
    return nice_max(value, unit)


def ms_axis(value: float) -> float:
    unit = next((u for u in (86_400_000, 3_600_000, 60_000, 1000) if value >= u), 1)
    return nice_max(value, unit)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


# ------------------------------------------------------------------------------------------ drawing
def draw(chart: Chart) -> str:
    """One horizontal bar chart as an inline ``<svg>``."""
    rows = max(len(chart.bars), 1)
    height = TOP + rows * ROW_H + BOTTOM
    x0 = LABEL_W

    def x(v: float) -> float:
        return x0 + PLOT_W * max(0.0, min(v, chart.axis_max)) / chart.axis_max

    out = [
        f'<svg class="chart" id="{chart.chart_id}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img">'
    ]
    for i in range(5):  # grid and axis labels
        v = chart.axis_max * i / 4
        out.append(
            f'<line class="grid" x1="{x(v):.1f}" y1="{TOP - 6}" x2="{x(v):.1f}" y2="{height - BOTTOM}"/>'
        )
        out.append(
            f'<text class="axis" x="{x(v):.1f}" y="{height - BOTTOM + 16}" text-anchor="middle">'
            f"{_e(chart.axis_text(v))}</text>"
        )
    if not chart.bars:
        out.append(f'<text x="{x0}" y="{TOP + 15}">nothing to show</text>')
    for i, bar in enumerate(chart.bars):
        y = TOP + i * ROW_H
        out.append(
            f'<text x="{x0 - 8}" y="{y + BAR_H - 3}" text-anchor="end">{_e(_clip(bar.label, 34))}</text>'
        )
        left = 0.0
        for value, css, tip in bar.parts:
            if value <= 0:
                continue
            w = max(x(left + value) - x(left), 1.0)
            out.append(
                f'<rect class="bar {css}" x="{x(left):.1f}" y="{y}" width="{w:.1f}" height="{BAR_H}" rx="2">'
                f"<title>{_e(tip)}</title></rect>"
            )
            left += value
        end = max(x(left), x0) + 6
        out.append(f'<text x="{end:.1f}" y="{y + BAR_H - 3}">{_e(bar.value_text)}</text>')
        if bar.marker is not None:
            mx = x(bar.marker)
            out.append(
                f'<line class="threshold" x1="{mx:.1f}" y1="{y - 2}" x2="{mx:.1f}" y2="{y + BAR_H + 2}">'
                f"<title>{_e(bar.marker_title)}</title></line>"
            )
    if chart.ref_line is not None:
        value, caption = chart.ref_line
        out.append(
            f'<line class="refline" x1="{x(value):.1f}" y1="{TOP - 8}" x2="{x(value):.1f}" y2="{height - BOTTOM}"/>'
        )
        out.append(f'<text x="{x(value) + 4:.1f}" y="{TOP - 12}">{_e(caption)}</text>')
    out.append("</svg>")
    legend = "".join(
        f'<span class="{c}" style="background:currentColor"></span>{_e(t)}' for c, t in chart.legend
    )
    note = f'<p class="note">{chart.omitted} more not shown.</p>' if chart.omitted else ""
    return "".join(out) + (f'<p class="legend note">{legend}</p>' if legend else "") + note


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_LEGEND_COLOURS = {"hot": "#e8590c", "cool": "#4c6ef5", "muted": "#adb5bd", "retain": "#c92a2a",
                   "compact": "#f08c00", "young": "#2f9e44", "old": "#c92a2a"}  # fmt: skip


# ------------------------------------------------------------------------------------------ the charts
def _name(r: dict) -> str:
    return f"{r['topic']}-{r['partition']}"


def dirty_ratio_chart(rows: Sequence[dict], max_bars: int) -> Chart:
    ok = sorted((r for r in rows if r.get("dirty_ratio") is not None), key=lambda r: -r["dirty_ratio"])
    thresholds = {r.get("min_cleanable_dirty_ratio") for r in ok}
    shared = thresholds.pop() if len(thresholds) == 1 else None
    bars = []
    for r in ok[:max_bars]:
        css = (
            "hot"
            if r.get("would_compact")
            else ("cool" if "compact" in (r.get("cleanup_policy") or "") else "muted")
        )
        tip = f"{_name(r)}: dirty ratio {r['dirty_ratio']:.4f} — {r.get('compact_reason') or ''}"
        t = r.get("min_cleanable_dirty_ratio")
        bars.append(
            Bar(_name(r), ((r["dirty_ratio"], css, tip),), f"{r['dirty_ratio']:.3f}",
                t if shared is None else None, f"min.cleanable.dirty.ratio {t}")
        )  # fmt: skip
    return Chart(
        "dirty-ratio", bars, 1.0, lambda v: f"{v:.2f}",
        (shared, f"min.cleanable.dirty.ratio {shared:g}") if shared is not None else None,
        max(len(ok) - max_bars, 0),
        (("hot", "would be compacted"), ("cool", "compacted topic, below the threshold"), ("muted", "not compacted")),
    )  # fmt: skip


def reclaimable_chart(rows: Sequence[dict], max_bars: int) -> Chart:
    per_topic: dict[str, list[float]] = {}
    for r in rows:
        if r.get("status") == Status.FAILED:
            continue
        compaction = (r.get("cleanable_bytes") or 0) * (r.get("duplicate_share") or 0.0)
        sums = per_topic.setdefault(r["topic"], [0.0, 0.0])
        sums[0] += compaction
        sums[1] += r.get("retention_bytes") or 0
    ranked = sorted(per_topic.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    top = max((c + d for _, (c, d) in ranked), default=0.0)
    bars = [
        Bar(topic, ((c, "compact", f"{topic}: compaction ≈ {human_bytes(c)}"),
                    (d, "retain", f"{topic}: retention deletes {human_bytes(d)}")),
            human_bytes(c + d))
        for topic, (c, d) in ranked[:max_bars]
    ]  # fmt: skip
    return Chart(
        "reclaimable", bars, bytes_axis(top), human_bytes, None, max(len(ranked) - max_bars, 0),
        (("compact", "compaction estimate (cleanable × duplicate share)"), ("retain", "retention")),
    )  # fmt: skip


def segment_age_chart(rows: Sequence[dict], max_bars: int) -> Chart:
    def limit(r: dict) -> int | None:
        ms = r.get("retention_ms")
        return ms if "delete" in (r.get("cleanup_policy") or "") and ms is not None and ms >= 0 else None

    aged = [r for r in rows if r.get("oldest_segment_age_ms") is not None]
    aged.sort(key=lambda r: -(r["oldest_segment_age_ms"] / limit(r) if limit(r) else 0.0))
    shown = aged[:max_bars]
    top = max([r["oldest_segment_age_ms"] for r in shown] + [limit(r) or 0 for r in shown] + [1])
    bars = []
    for r in shown:
        age, lim = r["oldest_segment_age_ms"], limit(r)
        css = "muted" if lim is None else ("old" if age > lim else "young")
        rule = "no time retention" if lim is None else f"retention.ms {r['retention_ms']} ({human_ms(lim)})"
        bars.append(
            Bar(_name(r), ((max(age, 0), css, f"{_name(r)}: oldest segment {human_ms(age)} old; {rule}"),),
                human_ms(age) + ("" if lim is None else f" / {human_ms(lim)}"), lim, rule)
        )  # fmt: skip
    return Chart(
        "segment-age", bars, ms_axis(top), human_ms, None, max(len(aged) - max_bars, 0),
        (("old", "older than retention.ms"), ("young", "within retention.ms"), ("muted", "no time retention")),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ the page
_TABLE = (
    ("topic", "topic"), ("partition", "partition"), ("policy", "cleanup_policy"), ("segments", "segments"),
    ("size", "total_bytes"), ("cleanable", "cleanable_bytes"), ("dirty ratio", "dirty_ratio"),
    ("compact?", "would_compact"), ("duplicates", "duplicate_share"), ("retention deletes", "retention_bytes"),
    ("log start..end", None), ("status", "status"), ("why", None),
)  # fmt: skip
_NUMERIC = {
    "partition",
    "segments",
    "total_bytes",
    "cleanable_bytes",
    "dirty_ratio",
    "duplicate_share",
    "retention_bytes",
}


def _cell(r: dict, column: str | None, header: str) -> str:
    if header == "log start..end":
        return "" if r.get("log_start_offset") is None else f"{r['log_start_offset']}..{r['log_end_offset']}"
    if header == "why":
        return "; ".join(
            p for p in (r.get("compact_reason"), r.get("retention_reason"), r.get("reason")) if p
        )
    v = r.get(column)
    if v is None:
        return ""
    if column in ("total_bytes", "cleanable_bytes", "retention_bytes"):
        return human_bytes(v)
    if column == "dirty_ratio":
        return f"{v:.4f}"
    if column == "duplicate_share":
        return f"{v:.1%}"
    if column == "would_compact":
        return "yes" if v else "no"
    return str(v)


def _table(rows: Sequence[dict]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h, _ in _TABLE)
    body = []
    for r in rows:
        cells = "".join(
            f"<td{' class=n' if c in _NUMERIC else ' class=why' if h == 'why' else ''}>{_e(_cell(r, c, h))}</td>"
            for h, c in _TABLE
        )
        body.append(f"<tr{' class=failed' if r.get('status') == Status.FAILED else ''}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cards(rows: Sequence[dict]) -> str:
    ok = [r for r in rows if r.get("status") != Status.FAILED]
    clean = sum(r.get("clean_bytes") or 0 for r in ok)
    cleanable = sum(r.get("cleanable_bytes") or 0 for r in ok)
    cards = [
        (str(len(rows)), "partitions"),
        (human_bytes(sum(r.get("total_bytes") or 0 for r in ok)), "on disk"),
        (f"{cleanable / (clean + cleanable) if clean + cleanable else 0:.3f}", "overall dirty ratio"),
        (str(sum(1 for r in ok if r.get("would_compact"))), "would be compacted"),
        (human_bytes(sum(r.get("retention_bytes") or 0 for r in ok)), "retention would delete"),
        (human_bytes(sum(r.get("reclaimable_bytes") or 0 for r in ok)), "reclaimable (estimate)"),
        (str(len(rows) - len(ok)), "failed"),
    ]
    return (
        '<div class="cards">'
        + "".join(f"<div class=card><b>{_e(v)}</b><span>{_e(t)}</span></div>" for v, t in cards)
        + "</div>"
    )


def render(
    rows: Sequence[dict], *, now_ms: int, title: str = "kafka-log-jobs report", max_bars: int = 60
) -> str:
    """The whole page for the report ``rows`` (the report job's columns)."""
    when = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    dirs = ", ".join(sorted({str(r.get("log_dir")) for r in rows})) or "no log dir"
    css = CSS + "".join(f".legend .{c}{{color:{v}}}" for c, v in _LEGEND_COLOURS.items())
    sections = [
        ("Dirty ratio per partition",
         "Cleanable bytes / (clean + cleanable bytes), as the log cleaner computes it. The cleaner picks a "
         "partition above its min.cleanable.dirty.ratio (the black mark), or past max.compaction.lag.ms.",
         draw(dirty_ratio_chart(rows, max_bars))),
        ("Reclaimable bytes per topic",
         "Compaction estimate = cleanable bytes × counted duplicate share of the dirty section; plus the bytes of "
         "the segments retention would delete.",
         draw(reclaimable_chart(rows, max_bars))),
        ("Segment age against retention",
         "Age of each partition's oldest segment (now − its largest timestamp), with retention.ms as the mark.",
         draw(segment_age_chart(rows, max_bars))),
    ]  # fmt: skip
    body = "".join(f"<h2>{_e(h)}</h2><p class=sub>{_e(s)}</p>{chart}" for h, s, chart in sections)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><title>{_e(title)}</title>"
        f"<style>{css}</style></head><body><main>"
        f"<h1>{_e(title)}</h1><p class=sub>{_e(dirs)} · as of {_e(when)} · a dry run: nothing was changed</p>"
        f"{_cards(rows)}{body}<h2>All partitions</h2>{_table(rows)}</main></body></html>\n"
    )
