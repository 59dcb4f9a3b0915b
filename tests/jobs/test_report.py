"""The report job: its figures against hand computations and against what compact and retain then do,
its output formats, that it changes nothing, and its HTML page drawn by a real browser."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numba
import numpy as np
import pyarrow.parquet as pq
import pytest

from jobs import compact, html_report, report, retain
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition
from tests.clirun import invoke
from tests.logbuild import TS, batch, make_log

pytestmark = pytest.mark.spark
DAY = 86_400_000
NOW = TS + 3 * DAY


def _report(log_dir, *args: str) -> list[dict]:
    result = invoke(report.command, "--log-dir", log_dir, "--now-ms", NOW, "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _sizes(partition_dir: Path) -> dict[int, int]:
    return {int(p.name[:20]): p.stat().st_size for p in sorted(partition_dir.glob("*.log"))}


def _generated_log(
    log_dir: Path, seed: int, topic: str = "orders", partition: int = 0, clean_shutdown: bool = False
) -> list[tuple]:
    """6 segments x 4 batches x 25 records, all codecs, keys from a pool of 40, ~10% null keys, ~10%
    tombstones. Returns (offset, key) of every record written."""
    rng = random.Random(seed)
    written, segments, offset = [], {}, 0
    for _ in range(6):
        base, batches = offset, []
        for b in range(4):
            kvs = []
            for i in range(25):
                key = None if rng.random() < 0.1 else f"k{rng.randrange(40)}"
                value = None if key is not None and rng.random() < 0.1 else f"value-{offset + i}"
                kvs.append((key, value))
                written.append((offset + i, key))
            batches.append(batch(offset, kvs, codec=(b + partition) % 5))
            offset += 25
        segments[base] = batches
    make_log(log_dir, topic, partition, segments, clean_shutdown=clean_shutdown)
    return written


# ------------------------------------------------------------------------------------------ the figures
def test_dirty_ratio_and_duplicate_share_against_hand_counts_and_the_compact_job(spark, tmp_path):
    written = {p: _generated_log(tmp_path, seed=p, partition=p) for p in range(2)}
    # partition 0 was cleaned up to offset 200 before; partition 1 never
    checkpoints.write_offset_checkpoint(
        tmp_path / "cleaner-offset-checkpoint", {TopicPartition("orders", 0): 200}
    )
    rows = _report(tmp_path, "--set", "cleanup.policy=compact")
    assert [r["partition"] for r in rows] == [1, 0]  # filthiest first
    for row in rows:
        p = row["partition"]
        sizes = _sizes(tmp_path / f"orders-{p}")
        first_dirty, active = (200 if p == 0 else 0), max(sizes)
        clean = sum(n for base, n in sizes.items() if base < first_dirty)
        cleanable = sum(n for base, n in sizes.items() if first_dirty <= base < active)
        assert (row["clean_bytes"], row["cleanable_bytes"]) == (clean, cleanable)
        assert row["dirty_ratio"] == cleanable / (clean + cleanable)
        assert (row["first_dirty_offset"], row["first_uncleanable_offset"]) == (first_dirty, active)
        keyed = [k for o, k in written[p] if first_dirty <= o < active and k is not None]
        assert row["duplicate_share"] == (len(keyed) - len(set(keyed))) / len(keyed)
        assert row["would_compact"] is True and row["status"] == "ok"
        assert row["total_bytes"] == sum(sizes.values()) and row["segments"] == 6
    # the compaction job, run for real on the same input, acts on the same ratio
    result = invoke(
        compact.command, "--log-dir", tmp_path, "--set", "cleanup.policy=compact", "--now-ms", NOW,
        "--output", "json",
    )  # fmt: skip
    compacted = {r["partition"]: r for r in json.loads(result.stdout)}
    for row in rows:
        assert compacted[row["partition"]]["dirty_ratio"] == row["dirty_ratio"]
        assert compacted[row["partition"]]["status"] == "cleaned"


def test_duplicate_share_covers_what_one_round_would_clean_when_the_map_fills(spark, tmp_path):
    written = _generated_log(tmp_path, seed=7)
    factor = 0.0005  # 1 MiB + 24 bytes of map -> 43691 slots -> 21 keys
    dedupe = 1024 * 1024 + 24
    capacity = int((dedupe // 24) * factor)
    (row,) = _report(
        tmp_path, "--set", "cleanup.policy=compact", "--set", f"log.cleaner.dedupe.buffer.size={dedupe}",
        "--set", f"log.cleaner.io.buffer.load.factor={factor}",
    )  # fmt: skip
    seen: set[str] = set()
    puts = 0
    for offset, key in written:  # Kafka's rule: a full map stops the pass at the next keyed record
        if key is None or offset >= 500:
            continue
        if len(seen) >= capacity:
            break
        seen.add(key)
        puts += 1
    assert row["duplicate_share"] == (puts - len(seen)) / puts
    assert f"offset map ({capacity} keys" in row["reason"]


def test_retention_columns_match_hand_count_and_the_retain_job(spark, tmp_path):
    make_log(
        tmp_path, "clicks", 0,
        {0: [batch(0, [("a", "x" * 80)] * 3, ts=NOW - 3 * DAY)], 3: [batch(3, [("b", "y" * 40)], ts=NOW - 2 * DAY)],
         4: [batch(4, [("c", "z")], ts=NOW - 1000)]},
    )  # fmt: skip
    sizes = _sizes(tmp_path / "clicks-0")
    args = ["--set", "retention.ms=86400000", "--set", "cleanup.policy=delete", "--set", "retention.bytes=-1"]
    (row,) = _report(tmp_path, *args)
    assert (row["retention_segments"], row["retention_bytes"]) == (2, sizes[0] + sizes[3])
    assert row["retention_log_start_offset"] == 4
    assert row["retention_reason"].startswith("2 segments by retention.ms")
    assert row["oldest_segment_age_ms"] == 3 * DAY - 2  # largest timestamp of segment 0: ts + 2
    assert row["reclaimable_bytes"] == sizes[0] + sizes[3]
    assert row["dirty_ratio"] is None and "does not include compact" in row["compact_reason"]
    dry = invoke(
        retain.command, "--log-dir", tmp_path, "--now-ms", NOW, "--output", "json", "--dry-run", *args
    )
    (planned,) = json.loads(dry.stdout)
    assert (planned["segments_deleted"], planned["bytes_deleted"]) == (2, row["retention_bytes"])
    # a retention the retain job would refuse is reported, not failed
    (guarded,) = _report(tmp_path, "--set", "retention.ms=60000", "--assume-broker-defaults")
    assert guarded["status"] == "ok" and "refuses this without --force" in guarded["retention_reason"]


def test_the_report_changes_nothing_and_names_what_the_loader_would_do(spark, tmp_path):
    _generated_log(tmp_path, seed=3)
    d = tmp_path / "orders-0"
    (d / "00000000000000000100.log.cleaned").write_bytes(b"")
    (d / "00000000000000000000.index.deleted").write_bytes(b"x")
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.iterdir()}
    top_before = sorted(p.name for p in tmp_path.iterdir())
    (row,) = _report(tmp_path, "--set", "cleanup.policy=compact")
    assert row["status"] == "ok"
    assert "would resolve leftovers" in row["reason"] and "00000000000000000100.log.cleaned" in row["reason"]
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in d.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == top_before  # no checkpoint written


def test_a_corrupt_partition_is_one_failed_row(spark, tmp_path):
    _generated_log(tmp_path, seed=1, partition=0, clean_shutdown=True)
    _generated_log(tmp_path, seed=2, partition=1, clean_shutdown=True)
    seg = tmp_path / "orders-1" / "00000000000000000100.log"
    data = bytearray(seg.read_bytes())
    data[8:12] = (5).to_bytes(4, "big")  # a batch length below the minimum entry size
    seg.write_bytes(bytes(data))
    result = invoke(report.command, "--log-dir", tmp_path, "--now-ms", NOW, "--format", "json",
                     "--set", "cleanup.policy=compact")  # fmt: skip
    assert result.exit_code == 1
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    assert rows[0]["status"] == "ok"
    assert rows[1]["status"] == "failed"
    assert "orders-1/00000000000000000100.log at position 0" in rows[1]["reason"]


# ------------------------------------------------------------------------------------------ output formats
def test_output_formats_carry_the_same_rows(spark, tmp_path):
    logs = tmp_path / "logs"
    _generated_log(logs, seed=11, partition=0)
    make_log(logs, "clicks", 0, {0: [batch(0, [("a", "1")], ts=NOW - 9 * DAY)], 1: [batch(1, [("b", "2")])]})
    common = ["--log-dir", logs, "--now-ms", NOW, "--topic-config", "orders:cleanup.policy=compact",
              "--topic-config", "clicks:retention.ms=604800000"]  # fmt: skip
    result = invoke(report.command, *common, "--format", "json")
    rows = json.loads(result.stdout)  # the bare array and nothing else
    assert result.stdout.lstrip().startswith("[") and result.stdout.rstrip().endswith("]")
    assert [list(r) for r in rows] == [report.COLUMNS] * 2
    assert [(r["topic"], r["cleanup_policy"]) for r in rows] == [("orders", "compact"), ("clicks", "delete")]

    invoke(report.command, *common, "--out", tmp_path / "r.csv")
    parsed = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert [r["topic"] for r in parsed] == ["orders", "clicks"]
    assert float(parsed[0]["dirty_ratio"]) == rows[0]["dirty_ratio"] and parsed[1]["dirty_ratio"] == ""
    assert parsed[0]["would_compact"] == "true"

    invoke(report.command, *common, "--format", "parquet", "--out", tmp_path / "r.parquet")

    def timeless(rs):  # every run times itself
        return [{k: v for k, v in r.items() if k != "duration_ms"} for r in rs]

    assert timeless(pq.read_table(tmp_path / "r.parquet").to_pylist()) == timeless(rows)

    table = invoke(report.command, *common, "--format", "table").stdout
    lines = table.splitlines()
    assert lines[1].split()[:3] == ["topic", "part", "policy"]
    firsts = [line.split()[0] for line in lines[3:-2] if not line.startswith(" ")]  # long reasons wrap
    assert firsts == ["orders", "clicks"]
    total = sum(r["total_bytes"] for r in rows)
    assert lines[-1].split()[:3] == ["TOTAL", "2", "8"]  # partitions, segments
    assert html_report.human_bytes(total) in lines[-1]
    assert invoke(report.command, *common, "--format", "parquet").exit_code == 2  # needs --out


def test_html_page_draws_one_bar_per_partition_and_marks_thresholds():
    rows = [
        dict(topic="a", partition=0, cleanup_policy="compact", dirty_ratio=0.8, min_cleanable_dirty_ratio=0.5,
             would_compact=True, status="ok", cleanable_bytes=1000, duplicate_share=0.5, retention_bytes=0,
             oldest_segment_age_ms=2 * DAY, retention_ms=7 * DAY, total_bytes=2000, clean_bytes=250),
        dict(topic="a", partition=1, cleanup_policy="compact,delete", dirty_ratio=0.2, min_cleanable_dirty_ratio=0.5,
             would_compact=False, status="ok", cleanable_bytes=100, duplicate_share=0.0, retention_bytes=0,
             oldest_segment_age_ms=DAY, retention_ms=7 * DAY, total_bytes=500, clean_bytes=400),
        dict(topic="b", partition=0, cleanup_policy="delete", dirty_ratio=None, status="ok",
             retention_bytes=4096, oldest_segment_age_ms=9 * DAY, retention_ms=7 * DAY, total_bytes=9000),
    ]  # fmt: skip
    page = html_report.render(rows, now_ms=NOW)
    svgs = _bars(page)
    assert [b["title"].split(":")[0] for b in svgs["dirty-ratio"]] == ["a-0", "a-1"]
    widths = [float(b["width"]) for b in svgs["dirty-ratio"]]
    assert widths == pytest.approx([0.8 * html_report.PLOT_W, 0.2 * html_report.PLOT_W], abs=0.1)
    assert [b["class"] for b in svgs["dirty-ratio"]] == ["bar hot", "bar cool"]
    assert "min.cleanable.dirty.ratio 0.5" in page and 'class="refline"' in page
    assert [b["class"] for b in svgs["reclaimable"]] == ["bar retain", "bar compact"]  # b: 4 KiB, a: 500 B
    ages = svgs["segment-age"]  # oldest against its retention.ms first; compact-only has no time limit
    assert [(b["title"].split(":")[0], b["class"]) for b in ages] == [
        ("b-0", "bar old"),
        ("a-1", "bar young"),
        ("a-0", "bar muted"),
    ]
    assert "<script" not in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


class _BarParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.charts: dict[str, list[dict]] = {}
        self.current: str | None = None
        self.in_bar = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.current = a.get("id")
            self.charts[self.current] = []
        elif tag == "rect" and "bar" in (a.get("class") or "").split():
            self.charts[self.current].append(dict(a, title=""))
            self.in_bar = True

    def handle_endtag(self, tag):
        if tag == "rect":
            self.in_bar = False

    def handle_data(self, data):
        if self.in_bar:
            self.charts[self.current][-1]["title"] += data


def _bars(page: str) -> dict[str, list[dict]]:
    parser = _BarParser()
    parser.feed(page)
    return parser.charts


# ------------------------------------------------------------------------------------------ headless Chromium
@numba.njit(cache=True)
def _unfilter(raw: np.ndarray, channels: int) -> np.ndarray:
    """Undo the PNG scanline filters (None, Sub, Up, Average, Paeth) row by row."""
    height, stride = raw.shape[0], raw.shape[1] - 1
    out = np.zeros((height, stride), dtype=np.uint8)
    for y in range(height):
        kind = raw[y, 0]
        for x in range(stride):
            a = np.int32(out[y, x - channels]) if x >= channels else 0
            b = np.int32(out[y - 1, x]) if y > 0 else 0
            c = np.int32(out[y - 1, x - channels]) if x >= channels and y > 0 else 0
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            out[y, x] = (np.int32(raw[y, x + 1]) + pred) & 0xFF
    return out


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into an (h, w, 3) array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
    return _unfilter(raw, channels).reshape(height, width, channels)[:, :, :3]


def _colour_count(pixels: np.ndarray, hex_colour: str) -> int:
    target = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(pixels.astype(np.int16) - target).max(axis=2) <= 3).sum())


def test_html_report_renders_in_headless_chromium(spark, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip(
            "headless Chromium not on PATH: `apt-get install -y chromium` (Debian/Ubuntu) to run this test"
        )
    logs = tmp_path / "logs"
    _generated_log(logs, seed=5, partition=0)
    _generated_log(logs, seed=6, partition=1)
    make_log(
        logs,
        "clicks",
        0,
        {0: [batch(0, [("a", "x" * 500)] * 4, ts=NOW - 9 * DAY)], 4: [batch(4, [("b", "2")])]},
    )
    page = tmp_path / "report.html"
    result = invoke(report.command, "--log-dir", logs, "--now-ms", NOW, "--out", page,
                     "--topic-config", "orders:cleanup.policy=compact,delete",
                     "--topic-config", "clicks:retention.ms=604800000")  # fmt: skip
    assert result.exit_code == 0, result.output
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,2200"]  # fmt: skip
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180, check=True
    ).stdout
    charts = _bars(dom)
    assert set(charts) == {"dirty-ratio", "reclaimable", "segment-age"}
    assert len(charts["dirty-ratio"]) == 2 and len(charts["segment-age"]) == 3
    assert len(charts["reclaimable"]) == 2  # orders: compaction estimate, clicks: retention
    assert all(float(b["width"]) > 0 for bars in charts.values() for b in bars)
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180, check=True
    )
    pixels = _png_pixels(shot)
    assert pixels.shape[1] == 1100
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50, "the screenshot is blank"
    for colour in ("#e8590c", "#c92a2a", "#f08c00"):  # compacting bars, retention, compaction estimate
        assert _colour_count(pixels, colour) > 200, f"no {colour} bars in {shot}"
    assert os.path.getsize(shot) > 10_000
