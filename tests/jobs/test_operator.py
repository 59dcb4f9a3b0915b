"""Operator safety and ergonomics, each case a reproduction of what a user did (issue #14): a read-only
backup, two jobs at once on one log dir, wrong paths and regexes, whole failure reasons, dry-run estimates,
spark-submit from the virtualenv, quiet start-up, and the progress shown on the way."""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import compact, context, output, progress, report, retain
from jobs.cli import main
from kafka_log_core.format.checkpoints import read_offset_checkpoint
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.log_dir import update_checkpoints, write_log_dir_checkpoints
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition
from tests.clirun import invoke
from tests.logbuild import TS, batch, make_log, mark_clean_shutdown, read_records

NOW = TS + 3_600_000
DAY = 86_400_000
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHECKPOINTS = ("cleaner-offset-checkpoint", "log-start-offset-checkpoint", "recovery-point-offset-checkpoint")


def _orders(log_dir: Path, partitions: int = 1) -> None:
    """A compacted topic: by hand, segments 0 and 4 are cleanable (6 records, 5 keyed: a and b are each
    superseded once), segment 6 is the active one."""
    for p in range(partitions):
        make_log(
            log_dir,
            "orders",
            p,
            {
                0: [batch(0, [("a", "1"), ("b", "1")]), batch(2, [("a", "2"), (None, "x")])],
                4: [batch(4, [("b", None), ("c", "1")])],
                6: [batch(6, [("a", "3")])],
            },
        )


def _clicks(log_dir: Path) -> None:
    """A delete topic: segment 0 is 10 days old, segment 1 new."""
    make_log(
        log_dir,
        "clicks",
        0,
        {0: [batch(0, [("k", "old")], ts=NOW - 10 * DAY)], 1: [batch(1, [("k", "new")], ts=NOW - 1000)]},
    )


def _tree(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (relative name -> digest of its bytes); the .lock file aside."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


SETTINGS = ["--topic-config", "orders:cleanup.policy=compact", "--topic-config", "clicks:cleanup.policy=delete",
            "--topic-config", "clicks:retention.ms=86400000"]  # fmt: skip


# ------------------------------------------------------------------------ 1. a read-only log dir
@contextlib.contextmanager
def _read_only(source: Path, tmp_path: Path):
    """``source`` seen read-only, as a backup mounted ``ro``: a read-only bind mount (root ignores file
    permissions, a read-only mount it cannot). Without the right to mount, a non-root user gets the
    directory with its write permissions removed; root without it cannot be shown a read-only dir."""
    target = tmp_path / "mnt"
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(source), str(target)], capture_output=True)
    if mounted.returncode == 0:
        try:
            yield target, "is on a read-only file system"
        finally:
            # Lazy: this process keeps its read-only descriptor of .lock (locks hold one per log dir).
            subprocess.run(["umount", "-l", str(target)], check=True)
        return
    if os.geteuid() == 0:
        pytest.skip(
            f"cannot mount read-only here ({mounted.stderr.decode().strip()}) and root ignores permissions"
        )
    for p in [source, *source.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        yield source, "is not writable by this user"
    finally:
        for p in [source, *source.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


@pytest.fixture
def backup(tmp_path):
    source = tmp_path / "logs"
    _orders(source)
    _clicks(source)
    write_log_dir_checkpoints(source, now_ms=NOW, random_seed=1)  # also creates .lock, as a broker does
    with _read_only(source, tmp_path) as (log_dir, why):
        yield log_dir, why


def test_dry_runs_work_on_a_read_only_log_dir_and_writing_jobs_refuse_it_in_one_line(spark, backup):
    log_dir, why = backup
    before = _tree(log_dir)
    args = ["--log-dir", log_dir, "--now-ms", NOW, *SETTINGS]
    reported = invoke(report.command, *args, "--format", "json")
    assert reported.exit_code == 0, reported.output
    rows = {r["topic"]: r for r in json.loads(reported.stdout)}
    assert rows["orders"]["would_compact"] and rows["clicks"]["retention_segments"] == 1
    planned = invoke(compact.command, *args, "--dry-run", "--output", "json")
    assert planned.exit_code == 0, planned.output
    assert {r["topic"]: r["status"] for r in json.loads(planned.stdout)}["orders"] == "would clean"
    trimmed = invoke(retain.command, *args, "--dry-run", "--output", "json")
    assert trimmed.exit_code == 0, trimmed.output
    assert {r["topic"]: r["status"] for r in json.loads(trimmed.stdout)}["clicks"] == "would delete"
    for job in (compact.command, retain.command):
        refused = CliRunner().invoke(job, [str(a) for a in args])
        assert refused.exit_code == 1
        assert refused.output.splitlines() == [
            f"Error: {log_dir} {why}: a job that writes cannot run on it (--dry-run and report only read)"
        ]
    assert _tree(log_dir) == before


def test_a_task_that_writes_on_a_read_only_log_dir_fails_in_one_line(backup):
    """An executor that sees the log dir read-only (the driver saw it writable): one failed row."""
    log_dir, why = backup
    tp = TopicPartition("orders", 0)
    task = PartitionTask(str(log_dir), "orders", 0, LogDirState.read(log_dir).for_partition(tp))
    row = compact_partition(
        task, load_config(None, [], [], ["cleanup.policy=compact"]), JobOptions(now_ms=NOW)
    )
    assert row["status"] == "failed"
    assert (
        row["reason"]
        == f"{log_dir} {why}: a job that writes cannot run on it (--dry-run and report only read)"
    )


# ------------------------------------------------------------------------ 2. two jobs at once
def _task(log_dir: Path, topic: str, partition: int) -> PartitionTask:
    tp = TopicPartition(topic, partition)
    return PartitionTask(str(log_dir), topic, partition, LogDirState.read(log_dir).for_partition(tp))


def test_a_plan_is_made_from_the_checkpoints_on_disk_under_the_lock_not_from_the_listing(tmp_path):
    """Job B listed the log dir (and its cleaner checkpoint) before job A cleaned the partition: B must
    not clean it again from its stale plan, and the result is byte for byte one run's."""
    once, twice = tmp_path / "once", tmp_path / "twice"
    _orders(once)
    _orders(twice)
    configs = load_config(None, [], [], ["cleanup.policy=compact"])
    assert compact_partition(_task(once, "orders", 0), configs, JobOptions(now_ms=NOW))["status"] == "cleaned"

    stale = context.list_tasks([str(twice)], None, writing=True).tasks[0]  # B's listing
    assert stale.checkpoints.cleaner_offset is None
    assert (
        compact_partition(_task(twice, "orders", 0), configs, JobOptions(now_ms=NOW))["status"] == "cleaned"
    )
    row = compact_partition(stale, configs, JobOptions(now_ms=NOW))  # B's task, after A
    assert row["status"] == "skipped", row
    assert row["first_dirty_offset"] == 6 and row["dirty_ratio"] == 0.0  # what A left: clean up to 6
    assert _tree(twice) == _tree(once)


def _compact_in_thread(log_dir: Path, busy_timeout_s: float) -> tuple[threading.Thread, list]:
    seen: list = []
    worker = threading.Thread(target=lambda: seen.append(compact_partition(
        _task(log_dir, "orders", 0), load_config(None, [], [], ["cleanup.policy=compact"]),
        JobOptions(now_ms=NOW, busy_timeout_s=busy_timeout_s))))  # fmt: skip
    worker.start()
    return worker, seen


def test_a_partition_another_thread_writes_is_busy_too(tmp_path):
    """POSIX locks do not exclude the threads of one process: the lock module does."""
    from kafka_log_core.log import locks

    _orders(tmp_path)
    with locks.partition_lock(tmp_path, TopicPartition("orders", 0)):
        worker, seen = _compact_in_thread(tmp_path, busy_timeout_s=0)
        worker.join()
    assert seen[0]["status"] == "skipped" and "being written by another" in seen[0]["reason"]
    assert read_records(tmp_path / "orders-0")[0] == (0, b"a", b"1")


def test_a_thread_waits_for_the_partition_another_thread_writes(tmp_path):
    """Within --busy-timeout, a task waits for the thread that holds its partition, then cleans it."""
    from kafka_log_core.log import locks

    _orders(tmp_path)
    with locks.partition_lock(tmp_path, TopicPartition("orders", 0)):
        worker, seen = _compact_in_thread(tmp_path, busy_timeout_s=600)
        worker.join(timeout=0.5)
        assert worker.is_alive() and not seen  # still waiting while the partition is held
    worker.join()
    assert seen[0]["status"] == "cleaned", seen
    assert read_records(tmp_path / "orders-0")[0] != (0, b"a", b"1")  # the overwritten record is gone


@pytest.mark.parametrize("job", ["compact", "retain"])
def test_a_negative_busy_timeout_is_a_usage_error(tmp_path, job):
    done = invoke(main, job, "--log-dir", tmp_path, "--busy-timeout", "-1")
    assert done.exit_code == 2 and "--busy-timeout" in done.output, done.output


def _update_many(log_dir: str, worker: int, partitions: int, rounds: int, start) -> None:
    start.wait()
    for r in range(rounds):
        for p in range(partitions):
            update_checkpoints(
                log_dir, TopicPartition(f"w{worker}", p), {"cleaner-offset-checkpoint": r * 1000 + p}
            )


def test_checkpoint_updates_from_many_processes_and_threads_lose_nothing(tmp_path):
    """Read-modify-write under the checkpoint lock: 4 processes and 3 threads each rewrite their own
    entries of one file at the same instant, 20 rounds; every last value is there."""
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n0\n")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_update_many, args=(str(tmp_path), w, 6, 20, start)) for w in range(4)]
    for proc in procs:
        proc.start()
    gate = threading.Event()
    threads = [
        threading.Thread(target=_update_many, args=(str(tmp_path), w, 6, 20, gate)) for w in range(4, 7)
    ]
    for thread in threads:
        thread.start()
    start.set()
    gate.set()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    for thread in threads:
        thread.join()
    entries = read_offset_checkpoint(tmp_path / "cleaner-offset-checkpoint")
    assert entries == {TopicPartition(f"w{w}", p): 19_000 + p for w in range(7) for p in range(6)}


KEYS, EVENTS, SPLIT = 10, 10, 250  # partitions of each topic; the log start offset the retain jobs set


def _busy_log_dir(log_dir: Path) -> None:
    """Many partitions: ``keys`` (compacted, 4 segments of overwritten keys) and ``events`` (delete,
    2 segments 10 days old, 2 new); recovery points at 0 so that retention raises them."""
    for p in range(KEYS):
        segments = {}
        for s in range(4):
            base = s * 100
            segments[base] = [batch(base + 10 * b, [(f"k{(b * 10 + i) % 37}", f"v{s}-{b}-{i}") for i in range(10)])
                              for b in range(10)]  # fmt: skip
        make_log(log_dir, "keys", p, segments)
    for p in range(EVENTS):
        segments = {}
        for s in range(4):
            base, ts = s * 100, NOW - (10 * DAY if s < 2 else 1000)
            segments[base] = [batch(base + 10 * b, [(None, f"e{s}-{b}-{i}") for i in range(10)], ts=ts)
                              for b in range(10)]  # fmt: skip
        make_log(log_dir, "events", p, segments)
    tps = [TopicPartition(t, p) for t, n in (("keys", KEYS), ("events", EVENTS)) for p in range(n)]
    write_log_dir_checkpoints(log_dir, recovery_points={tp: 0 for tp in tps}, now_ms=NOW, random_seed=1)


BUSY_SETTINGS = ["--topic-config", "keys:cleanup.policy=compact", "--topic-config", "events:cleanup.policy=delete",
                 "--topic-config", "events:retention.ms=86400000", "--now-ms", str(NOW)]  # fmt: skip
LOG_START = [a for p in range(EVENTS) for a in ("--log-start-offset", f"events:{p}={SPLIT}")]


def _job_args(job: str, log_dir: Path) -> list[str]:
    return [job, "--log-dir", str(log_dir), *BUSY_SETTINGS, *(LOG_START if job == "retain" else []),
            "--output", "json"]  # fmt: skip


def _ours(line: str, log_dir: Path, job: str) -> bool:
    """A line a job prints itself: a note about the log dir, or a progress line."""
    return line.startswith(f"{log_dir}: ") or line.startswith(f"{job} [")


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [("compact", "retain"), ("compact", "retain", "compact", "retain")],
                         ids=["2 jobs", "4 jobs"])  # fmt: skip
def test_jobs_started_together_on_one_log_dir_end_as_a_sequential_run(spark, tmp_path, jobs):
    """Real job processes started at the same instant on one log dir with many partitions, compact and
    retain mixed: the same bytes as one compact then one retain, every checkpoint entry there, each
    partition written by one job at a time (one that finds it held waits its turn). On the way, each job's
    stderr holds only its own lines (notes and one progress line per partition), Spark's start-up and log
    included -- but for the one given --verbose."""
    sequential, concurrent = tmp_path / "sequential", tmp_path / "concurrent"
    _busy_log_dir(sequential)
    shutil.copytree(sequential, concurrent)
    for job in ("compact", "retain"):
        done = invoke(main, *_job_args(job, sequential))
        assert done.exit_code == 0, done.output
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    verbose = [i == 3 for i in range(len(jobs))]
    procs = [subprocess.Popen([str(BIN / "kafka-log-jobs"), *_job_args(job, concurrent), "--master", "local[1]",
                               *(["--verbose"] if loud else [])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for job, loud in zip(jobs, verbose, strict=True)]  # fmt: skip
    outcomes = [(proc.communicate(timeout=900), proc.returncode) for proc in procs]
    for (out, err), code in outcomes:
        assert code == 0, err[-3000:]
        assert not [row for row in json.loads(out) if "being written by another" in (row["reason"] or "")]
    for job, loud, ((_out, err), _code) in zip(jobs, verbose, outcomes, strict=True):
        lines = err.splitlines()
        others = [line for line in lines if not _ours(line, concurrent, job)]
        assert sum(line.startswith(f"{job} [") for line in lines) == KEYS + EVENTS  # one per partition
        if loud:  # Spark's own start-up lines and warnings
            assert any("log level" in line or " WARN " in line for line in others), err
        else:
            assert others == [], err
    assert _tree(concurrent) == _tree(sequential)  # every segment, index, snapshot and checkpoint file
    for name in CHECKPOINTS:
        entries = read_offset_checkpoint(concurrent / name)
        assert entries == read_offset_checkpoint(sequential / name)
    assert set(read_offset_checkpoint(concurrent / "cleaner-offset-checkpoint")) == {
        TopicPartition("keys", p) for p in range(KEYS)
    }
    assert read_offset_checkpoint(concurrent / "log-start-offset-checkpoint") == {
        TopicPartition("events", p): SPLIT for p in range(EVENTS)
    }
    # Each partition was written by exactly one of the jobs; the others skipped it.
    rows = [(r["topic"], r["partition"], r["status"]) for (out, _), _ in outcomes for r in json.loads(out)]
    for topic, status, count in (("keys", "cleaned", KEYS), ("events", "deleted", EVENTS)):
        assert sorted(p for t, p, s in rows if t == topic and s == status) == list(range(count)), (
            topic,
            rows,
        )
        assert {s for t, _, s in rows if t == topic} <= {status, "skipped"}


# ------------------------------------------------------------------------ 3, 4. wrong paths, bad regexes
@pytest.mark.parametrize("job", [compact.command, retain.command, report.command])
def test_a_log_dir_without_partitions_is_a_usage_error_with_a_hint(tmp_path, job):
    logs = tmp_path / "broker" / "logs"
    _orders(logs)
    (tmp_path / "empty").mkdir()
    cases = {
        logs / "orders-0": f"it looks like a partition directory: pass its parent, --log-dir {logs}",
        tmp_path / "broker": f"it looks like a directory of log dirs: pass them, --log-dir {logs}",
        tmp_path / "empty": "it is empty",
    }
    for log_dir, hint in cases.items():
        result = CliRunner().invoke(job, ["--log-dir", str(log_dir)])
        assert result.exit_code == 2, result.output
        assert f"Error: no partition directories (<topic>-<partition>) under {log_dir}" in result.output
        assert hint in result.output and "Traceback" not in result.output


def test_a_topic_regex_that_matches_nothing_names_the_topics_there(tmp_path):
    _orders(tmp_path)
    _clicks(tmp_path)
    for regex, extra in (
        ("nosuchtopic", ""),
        ("order", " (it matches only part of orders: add .* for the rest)"),
    ):
        result = CliRunner().invoke(compact.command, ["--log-dir", str(tmp_path), "--topic", regex])
        assert result.exit_code == 2
        assert result.output.splitlines()[-1] == (
            f"Error: no topic under {tmp_path} matches --topic '{regex}': the regex must match the whole topic "
            f"name; topics here: clicks, orders{extra}"
        )


def test_among_several_log_dirs_an_empty_one_is_a_note_and_the_others_go_on(tmp_path):
    _orders(tmp_path / "a")
    (tmp_path / "b").mkdir()
    listing = context.list_tasks([str(tmp_path / "a"), str(tmp_path / "b")], None, writing=False)
    assert [t.tp for t in listing.tasks] == [TopicPartition("orders", 0)]
    assert listing.notes == [
        f"no partition directories (<topic>-<partition>) under {tmp_path / 'b'}: it is empty"
    ]


@pytest.mark.parametrize("job", ["compact", "retain", "report", "offsets"])
def test_a_topic_that_is_not_a_regex_is_a_usage_error(tmp_path, job):
    _orders(tmp_path)
    result = CliRunner().invoke(main, [job, "--log-dir", str(tmp_path), "--topic", "orders["])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: Invalid value for '--topic': 'orders[' is not a regular expression: "
        "unterminated character set at position 6"
    )


# ------------------------------------------------------------------------ 5. whole reasons
def _column(lines: list[str], header: str) -> tuple[int, int]:
    """Start and width of a column of the plain table (header line, then the dashes)."""
    names, dashes = lines[1], lines[2]
    start = names.index(header)
    return start, len(dashes[start:].split(" ", 1)[0])


def test_a_failure_reason_is_whole_in_the_table(spark, tmp_path):
    _orders(tmp_path, partitions=2)
    mark_clean_shutdown(tmp_path)  # a corrupt batch of a cleanly stopped broker: an error, not a torn tail
    segment = tmp_path / "orders-1" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[40] ^= 0xFF
    segment.write_bytes(bytes(data))
    args = ["--log-dir", tmp_path, "--set", "cleanup.policy=compact", "--now-ms", NOW]
    (failed,) = [r for r in json.loads(invoke(compact.command, *args, "--dry-run", "--output", "json").stdout)
                 if r["status"] == "failed"]  # fmt: skip
    assert len(failed["reason"]) > output.MAX_CELL  # cut at 80 before
    assert f"{segment} at position 0: CRC32C mismatch" in failed["reason"]
    lines = invoke(compact.command, *args, "--dry-run", "--output", "table").stdout.splitlines()
    start, width = _column(lines, "reason")
    first = next(i for i, line in enumerate(lines) if " failed " in line)
    parts = [lines[first][start : start + width].strip()]
    for line in lines[first + 1 :]:
        if line[:start].strip():  # the next row
            break
        parts.append(line[start : start + width].strip())
    assert "".join(parts).replace(" ", "") == failed["reason"].replace(" ", "")

    shown = invoke(report.command, *args, "--format", "table").stdout.splitlines()
    why = shown[1].index("why")  # the last column: wrapped onto lines of its own
    first = next(i for i, line in enumerate(shown) if line.startswith("orders") and " failed " in line)
    text = [shown[first][why:]]
    for line in shown[first + 1 :]:
        if line[:why].strip():
            break
        text.append(line[why:])
    assert "".join(failed["reason"].split()) in "".join("".join(text).split())


# ------------------------------------------------------------------------ 6. dry-run estimates
def test_compact_dry_run_shows_the_records_and_bytes_the_report_estimates(spark, tmp_path):
    _orders(tmp_path)
    sizes = {p.name: p.stat().st_size for p in (tmp_path / "orders-0").glob("*.log")}
    args = ["--log-dir", tmp_path, "--set", "cleanup.policy=compact", "--now-ms", NOW]
    (row,) = json.loads(invoke(compact.command, *args, "--dry-run", "--output", "json").stdout)
    (reported,) = json.loads(invoke(report.command, *args, "--format", "json").stdout)
    # By hand: segments 0 and 4 are cleanable; 6 records there, 5 keyed, a and b superseded once each.
    cleanable = sizes["00000000000000000000.log"] + sizes["00000000000000000004.log"]
    assert (row["status"], row["records_before"], row["records_after"]) == ("would clean", 6, 4)
    assert row["bytes_before"] - row["bytes_after"] == int(cleanable * 2 / 5)
    assert reported["duplicate_share"] == 2 / 5
    assert (
        row["bytes_before"] - row["bytes_after"]
        == reported["reclaimable_bytes"] - reported["retention_bytes"]
    )
    assert "estimate: 2 of 6 records and" in row["reason"]


# ------------------------------------------------------------------------ progress
def test_progress_lines_follow_the_partitions_as_they_finish(spark, tmp_path):
    _orders(tmp_path, partitions=3)
    result = invoke(compact.command, "--log-dir", tmp_path, "--set", "cleanup.policy=compact", "--now-ms", NOW,
                    "--output", "json")  # fmt: skip
    lines = [line for line in result.stderr.splitlines() if line.startswith("compact [")]
    assert sorted(re.sub(r"^compact \[\d/3\] ", "", line).split(" (")[0] for line in lines) == [
        "orders-0: cleaned", "orders-1: cleaned", "orders-2: cleaned"]  # fmt: skip
    assert [line.split("]")[0] for line in lines] == ["compact [1/3", "compact [2/3", "compact [3/3"]


def test_progress_says_which_partitions_run_from_the_launch_order():
    shown = progress.Progress(
        "compact", ["big-0", "mid-0", "small-0", "small-1"], [400, 300, 20, 10], how="none"
    )
    shown.update([(1, "cleaned")], active=2)
    assert shown.running(2) == ["big-0", "small-0"]  # slices 0 and 2: launched in order, 1 done
    assert shown.bytes_done() == 300
