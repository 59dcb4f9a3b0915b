"""Smoke tests of the benchmark (``python -m bench.run``, what ``make bench`` runs) on tiny data.

No timing assertions: only that a run finishes, writes its JSON and chart, and that what it reports is
well formed. The generator's output is checked with kafka-python's decoder, which nobody here wrote.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafka_log_core.format.filenames import TopicPartition

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_bench(tmp_path: Path, *args: str) -> dict:
    cmd = [sys.executable, "-m", "bench.run", "--quick", "--results-dir", str(tmp_path / "results"),
           "--work-dir", str(tmp_path / "work"), *args]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    written = sorted((tmp_path / "results").glob("*.json"))
    assert len(written) == 1
    report = json.loads(written[0].read_text())
    assert "targets" in proc.stdout and "ratios" in proc.stdout  # the terminal table
    return report


def assert_positive_ratios(report: dict, names: list[str]) -> None:
    for name in names:
        value = report["ratios"][name]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (name, value)


def test_quick_run_reports_decode_compaction_and_memory(tmp_path):
    report = run_bench(tmp_path, "--skip", "spark,kafka,skew,split,partitions,tables")
    assert {"schema", "timestamp", "quick", "machine", "workload", "measurements", "sections", "ratios",
            "targets", "notes", "files"} <= set(report)  # fmt: skip
    assert report["quick"] is True
    for name in ("raw", "scan", "compaction", "memory", "sweep"):
        assert report["sections"][name]["status"] == "ok", report["sections"][name]
    for name in ("spark", "kafka", "skew", "split", "partitions", "tables"):
        assert report["sections"][name]["status"] == "skipped"
    assert_positive_ratios(
        report,
        [
            "scan_vs_kafka_python",
            "scan_vs_crc32c_pass",
            "scan_gb_per_s_per_core",
            "compaction_mb_per_s_per_core",
            "linearity_throughput_largest_vs_1x",
            "map_bytes_per_distinct_key",
            "peak_rss_vs_map_default_config",
        ],
    )
    # Both decoders saw the same records of the same segment.
    scan = report["sections"]["scan"]
    assert scan["ours"]["records"] == scan["kafka_python"]["records"] > 0
    # Every measurement row has its throughput and a peak memory.
    for row in report["measurements"]:
        assert row["seconds"] > 0 and row["bytes"] > 0 and row["mb_per_s"] > 0, row
        assert row["peak_rss"] is None or row["peak_rss"] > 0
    # The batch-shape sweep ran our side of every shape; each read what its generator says the segments
    # below the active one hold (the active segment's batch is never cleaned, nor counted, as in Kafka).
    shapes = report["sections"]["sweep"]["shapes"]
    assert {"1 rec/batch none", "100 rec/batch lz4", "__consumer_offsets-like"} <= set(shapes)
    for shape in shapes.values():
        row = shape["ours"]["rows"][0]
        assert row["status"] == "cleaned"
        assert (
            0 < row["records_after"] <= row["records_before"] == shape["cleanable_records"] < shape["records"]
        )
        assert (
            shape["ours"]["kept"]["records"]
            == row["records_after"] + shape["records"] - shape["cleanable_records"]
        )
        # each measured run followed an untimed clean of a copy of the same shape in its process
        assert len(shape["ours_runs"]) == report["sections"]["sweep"]["repeat"] == 1
        assert all(run["first_clean_cpu_seconds"] > 0 for run in shape["ours_runs"])
    assert report["ratios"]["dedupe_1gib_vs_default_cpu"] > 0
    assert report["sections"]["compaction"]["same_records_with_1gib_buffer"] is True
    targets = {t["name"]: t for t in report["targets"]}
    # 23 in evaluate_targets (12 of them the sweep's: each target by the median of the rounds' ratios, by the
    # ratio of the medians and by that of the quiet cleans), the skew and the split sections' own, 5 of
    # partitions, 1 of tables
    assert len(targets) == 31
    for t in targets.values():
        assert t["comparison"] in (">=", "<=")
        assert t["verdict"].startswith(("MET", "MISSED", "NOT MEASURED"))
        assert (t["met"] is None) == (t["measured"] is None)
    kafka_target = targets["compaction >= 2x Kafka's cleaner (per CPU-s)"]
    assert kafka_target["verdict"] == "NOT MEASURED"  # the kafka section was skipped
    png = Path(report["files"]["png"])
    assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.fixture(scope="module")
def spark_sections(tmp_path_factory) -> dict:
    """One quick run of the two sections that start Spark sessions, ``spark`` and ``skew`` (each test
    below checks its own); the batch-shape sweep is checked by the run of the first test."""
    skip = "raw,scan,compaction,memory,kafka,split,partitions,tables,sweep"
    return run_bench(tmp_path_factory.mktemp("spark-sections"), "--skip", skip)


@pytest.mark.slow
def test_quick_run_reports_spark_scaling(spark_sections):
    report = spark_sections
    sessions = {s["master"]: s for s in report["sections"]["spark"]["sessions"]}
    assert set(sessions) == {"local[1]", "local[2]"}
    assert sessions["local[1]"]["cores"] == 1 and sessions["local[2]"]["cores"] == 2
    for session in sessions.values():
        assert [r["partitions"] for r in session["runs"]] == [1, 2]
        assert all(r["statuses"] == ["cleaned"] for r in session["runs"])
    assert_positive_ratios(
        report, ["spark_local2_vs_local1_at_max_partitions", "spark_local1_mb_per_s_per_core"]
    )


@pytest.mark.slow
def test_quick_run_reports_skew_side_by_side(spark_sections):
    report = spark_sections
    skew = report["sections"]["skew"]
    assert skew["status"] == "ok" and skew["cores"] == 2
    runs = skew["runs"]
    assert {n: r["partitions"] for n, r in runs.items()} == {
        "large": 1,
        "small": 15,
        "mixed": 16,
        "listing_order": 16,
    }
    assert skew["large_bytes"] == 8 * skew["small_bytes"]
    assert (
        runs["mixed"]["bytes"]
        == runs["listing_order"]["bytes"]
        == runs["large"]["bytes"] + runs["small"]["bytes"]
    )
    assert runs["mixed"]["records"] == runs["large"]["records"] + runs["small"]["records"]
    assert set(runs["mixed"]["task_ms"]) == {f"skew-{p}" for p in range(16)}
    assert_positive_ratios(
        report, ["skew_mixed_vs_bound", "skew_listing_order_vs_bound", "skew_mixed_vs_listing_order"]
    )
    target = next(t for t in report["targets"] if t["name"].startswith("skew:"))
    assert target["measured"] == report["ratios"]["skew_mixed_vs_bound"] and target["comparison"] == "<="


def test_generator_output_decodes_with_kafka_python(tmp_path):
    from kafka.record.memory_records import MemoryRecords

    from bench.generate import KiB, MiB, Workload, generate

    w = Workload(
        partitions=2, partition_bytes=MiB, segment_bytes=256 * KiB, distinct_keys=500, tombstone_share=0.1,
        codecs=("none", "gzip", "lz4", "zstd", "snappy"), txn_share=0.2, abort_share=0.5, seed=7,
    )  # fmt: skip
    manifest = generate(tmp_path / "logs", w)
    for part in manifest.partitions:
        directory = tmp_path / "logs" / f"{part.topic}-{part.partition}"
        logs = sorted(directory.glob("*.log"))
        assert len(logs) == part.segments > 2
        offsets, keys, tombstones, data_batches, bytes_seen = [], Counter(), 0, 0, 0
        for path in logs:
            data = path.read_bytes()
            bytes_seen += len(data)
            records = MemoryRecords(data)
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc()
                for record in batch:
                    offsets.append(record.offset)
                    if not batch.is_control_batch:
                        keys[record.key] += 1
                        tombstones += record.value is None
                data_batches += not batch.is_control_batch
        assert offsets == list(range(part.log_end_offset))  # dense: no gaps, in order
        assert len(keys) == part.distinct_keys == 500
        assert all(len(k) == w.key_bytes for k in keys)
        assert sum(keys.values()) == part.records
        assert tombstones == part.tombstones > 0
        assert data_batches == part.batches
        assert bytes_seen == part.bytes
        assert part.aborted_txns > 0 and part.control_batches > part.aborted_txns
        assert list(directory.glob("*.txnindex"))


def test_generator_is_deterministic(tmp_path):
    from bench.generate import KiB, Workload, generate

    w = Workload(partition_bytes=200 * KiB, segment_bytes=64 * KiB, tombstone_share=0.05, txn_share=0.3)
    generate(tmp_path / "a", w)
    generate(tmp_path / "b", w)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_fleet_partitions_are_what_the_jobs_see(tmp_path):
    """bench.fleet's log dir, read by the report's own core: every partition idle but the dirty ones,
    which both compaction and retention have work on."""
    from bench.fleet import NOW_MS, Fleet, generate
    from kafka_log_core.log.log_dir import LogDirState
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.report import report_partition
    from kafka_log_core.work.tasks import JobOptions, PartitionTask

    m = generate(tmp_path, Fleet(100, dirty_share=0.03))
    logs = tmp_path / "logs"
    configs = load_config(tmp_path / "conf")
    state = LogDirState.read(logs)
    rows = []
    for directory in sorted(p for p in logs.iterdir() if p.is_dir()):
        topic, _, partition = directory.name.rpartition("-")
        tp_state = state.for_partition(TopicPartition(topic, int(partition)))
        task = PartitionTask(str(logs), topic, int(partition), tp_state)
        rows.append(report_partition(task, configs, JobOptions(now_ms=NOW_MS)))
    assert len(rows) == 100 and {r["status"] for r in rows} == {"ok"}
    dirty = {f"{r['topic']}-{r['partition']}" for r in rows if r["would_compact"]}
    expiring = {f"{r['topic']}-{r['partition']}" for r in rows if r["retention_segments"]}
    assert dirty == expiring == set(m.dirty_partitions) and len(dirty) == 3
    empty = [r for r in rows if r["total_bytes"] == 0]
    assert len(empty) == m.kinds["empty"] and all(r["segments"] == 1 for r in empty)
    assert all(r["cleanup_policy_source"] != "unknown" for r in rows)
    compacted = [r for r in rows if "compact" in r["cleanup_policy"] and r["total_bytes"]]
    assert any(not r["would_compact"] and r["cleanable_bytes"] == 0 for r in compacted)  # cleaned ones


@pytest.mark.slow
def test_partitions_section_measures_each_job_against_its_dirty_partitions(tmp_path):
    cmd = [sys.executable, "-m", "bench.partitions", "--work", str(tmp_path), "--counts", "30,60",
           "--jobs", "report,retain", "--only", "sweep"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = json.loads(proc.stdout.splitlines()[-1])["sweep"]
    assert sweep["counts"] == [30, 60]
    for runs in sweep["jobs"].values():
        for n in ("30", "60"):
            assert runs[n]["all"]["partitions"] == int(n)
            assert runs[n]["dirty_alone"]["partitions"] == 1
            assert runs[n]["all"]["cpu_seconds"] > 0 and runs[n]["partitions_per_second"] > 0
        assert "driver_bytes_per_partition" in runs
    assert sweep["jobs"]["retain"]["60"]["all"]["statuses"] == {"skipped": 59, "deleted": 1}


def test_noise_cleans_fresh_copies_alternating_variants_and_leaves_the_source_as_it_was(tmp_path):
    from bench.generate import KiB, Workload, generate

    source = tmp_path / "shape"
    generate(source, Workload(partition_bytes=300 * KiB, segment_bytes=64 * KiB, tombstone_share=0.05))
    before = {p: p.read_bytes() for p in source.rglob("*") if p.is_file()}
    out = tmp_path / "noise.json"
    cmd = [sys.executable, "-m", "bench.noise", str(source), "--cleans", "3", "--segment-bytes", str(1024 * KiB),
           "--variants", "plain,synced", "--phases", "--json", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {p: p.read_bytes() for p in source.rglob("*") if p.is_file()} == before
    cleans = json.loads(out.read_text())
    assert [c["variant"] for c in cleans] == ["plain", "synced", "plain"]
    for c in cleans:
        assert c["cpu_ms"] > 0 and c["user_ms"] >= 0 and c["minflt"] >= 0 and c["pass1_ms"] > 0, c
        assert len(c["canaries_before_after"]) == 2 and all(
            ms > 0 for pair in c["canaries_before_after"] for ms in pair
        )


def test_compact_probe_times_the_canary_before_and_after_the_clean_when_asked(tmp_path):
    from bench.generate import KiB, MiB, Workload, generate

    generate(tmp_path / "shape", Workload(partition_bytes=300 * KiB, segment_bytes=64 * KiB))
    sets = ["--set", "cleanup.policy=compact", "--set", f"segment.bytes={MiB}"]
    results = []
    for extra in ((), ("--canary",)):
        cmd = [sys.executable, "-m", "bench.probe", "compact", str(tmp_path / "shape"), *sets, *extra]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results.append(json.loads(proc.stdout.splitlines()[-1]))
    assert "canary_ms" not in results[0]
    assert len(results[1]["canary_ms"]) == 2 and all(ms > 0 for ms in results[1]["canary_ms"])


@pytest.mark.slow
def test_sweep_gated_on_the_canary_keeps_every_try_and_marks_the_redone_and_never_quiet_cleans(tmp_path):
    skip = "raw,scan,compaction,memory,spark,kafka,skew,split,partitions,tables"
    report = run_bench(tmp_path, "--skip", skip, "--sweep-canary", "--sweep-repeat", "2")
    sweep = report["sections"]["sweep"]
    assert sweep["status"] == "ok" and sweep["repeat"] == 2
    g = sweep["gate"]
    assert g["quiet_canary"] == 1.3 and g["extra_tries"] == 3 and g["kafka_spares_per_shape"] == 0
    assert len(g["calibration_ms"]) > 0 and g["floor_ms_at_start"] == min(g["calibration_ms"])
    assert 0 < sweep["canary_floor_ms"] <= g["floor_ms_at_start"]
    for shape in sweep["shapes"].values():
        kept, discarded = shape["ours_runs"], shape["discarded_runs"]["ours"]
        assert [run["round"] for run in kept] == [0, 1] and shape["discarded_runs"]["kafka"] == []
        for run in kept:
            assert "discarded" not in run and isinstance(run["quiet_try"], bool) and 0 <= run["try"] <= 3
            assert len(run["canary_ms"]) == 2 and run["cpu_seconds"] > 0 and run["seconds"] > 0
        for run in discarded:  # a discarded try keeps its times and canaries
            assert run["discarded"] is True and run["cpu_seconds"] > 0 and len(run["canary_ms"]) == 2
            assert max(run["canary_ms"]) > 1.3 * sweep["canary_floor_ms"]
        assert shape["redone_cleans"]["ours"] == sum(run["try"] > 0 for run in kept)
        assert shape["extra_tries"]["ours"] == len(discarded) == sum(run["try"] for run in kept)
        assert shape["cleans_never_quiet"]["ours"] == sum(not run["quiet_try"] for run in kept)
        assert shape["quiet_cleans"]["kafka"] == 0 and "ours_vs_kafka_quiet" not in shape


@pytest.mark.broker
@pytest.mark.slow
def test_sweep_only_gates_kafkas_cleans_too_redoing_them_on_spare_copies_of_the_shape(tmp_path):
    report = run_bench(tmp_path, "--sweep-only", "--sweep-canary")
    sections = report["sections"]
    assert {n for n, s in sections.items() if s.get("status") == "skipped"} >= {
        "raw",
        "scan",
        "compaction",
        "kafka",
    }
    assert all(s["reason"] == "--sweep-only" for s in sections.values() if s.get("status") == "skipped")
    sweep = sections["sweep"]
    spares = sweep["gate"]["kafka_spares_per_shape"]
    assert spares == 2 * sweep["repeat"] == 2
    for name, shape in sweep["shapes"].items():
        assert shape["same_records_kept"] is True, name
        (kept,) = shape["kafka_runs"]
        tries = shape["discarded_runs"]["kafka"] + [kept]
        # the first try on the round's own copy, each redo on the next spare copy of the shape
        assert [t["topic"].rsplit("-", 2)[-2:] for t in tries][1:] == [
            ["spare", str(i)] for i in range(kept["try"])
        ]
        assert tries[0]["topic"].endswith("-0") and [t["try"] for t in tries] == list(range(len(tries)))
        assert shape["extra_tries"]["kafka"] + shape["kafka_spares_left"] == spares
        assert all(t["cpu_seconds"] > 0 and len(t["canary_ms"]) == 2 for t in tries)
    assert "ours_vs_kafka_paired" in next(iter(sweep["shapes"].values()))
    assert report["sections"]["sweep_kafka_broker"]["kafka_version"]
