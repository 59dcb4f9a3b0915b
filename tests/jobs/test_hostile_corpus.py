"""The hostile-input corpus (issue #24): each case is generated here in a temporary log dir, the real
``kafka-log-jobs`` command runs on it in a child process under ``RLIMIT_AS`` and a wall-clock bound
(:mod:`tests.hostile`), and the case pins what a user must get: the exit status, one line naming the file
and the position or what is wrong, no Python traceback and no Java stack on stderr, no hang, and -- where
the job refuses -- every file of the partition exactly as it was (size, mtime, SHA-256).

Commands that start no JVM (``dump``, ``offsets``, a usage error found before Spark starts) run once per
case. The Spark jobs run once per group of cases: one log dir holds a partition per case (and a healthy
one that must be processed as usual), the job runs over it once, and each case checks its own row.

A case whose fix belongs to another engineer is marked ``xfail(strict=True, reason="owner: ...")``: the
owner removes the mark when the fix lands.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.hostile import (
    LIMIT_PLAIN,
    LIMIT_SPARK,
    TIMEOUT_PLAIN_S,
    TIMEOUT_SPARK_S,
    GiB,
    Run,
    gzip_zeros,
    kafka_log_jobs,
    kafka_python_batch,
    lz4_zeros,
    raw_batch,
    run_limited,
    tree_state,
    zstd_zeros,
)

TS = 1_700_000_000_000
NOW = TS + 3_600_000
SEG0 = "00000000000000000000"
CLUSTER_ID = "J8qXyFz5T2uY8Vq5dA7bWw"
DIRECTORY_ID = "d8A3mJxNR1mQpW4ZbS9c1A"


# ------------------------------------------------------------------------------------------- layouts
def log_dir(root: Path, name: str = "logs", *, clean: bool = True, meta: str | None = None) -> Path:
    """A log dir as a stopped broker leaves it: meta.properties (KRaft, v1), .lock, empty checkpoints and,
    when ``clean``, ``.kafka_cleanshutdown``. Written by hand, not by the code under test."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    text = meta or f"version=1\nnode.id=1\ncluster.id={CLUSTER_ID}\ndirectory.id={DIRECTORY_ID}\n"
    (d / "meta.properties").write_text(text)
    (d / ".lock").touch()
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint"):  # fmt: skip
        (d / name).write_text("0\n0\n")
    if clean:
        (d / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    return d


def segment(directory: Path, base: int, batches: list[bytes]) -> Path:
    """A segment's .log and empty .index / .timeindex (what a broker leaves for a segment smaller than
    index.interval.bytes: no entry; the time index then dates the segment by the file's mtime)."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{base:020d}"
    (directory / f"{name}.log").write_bytes(b"".join(batches))
    (directory / f"{name}.index").touch()
    (directory / f"{name}.timeindex").touch()
    return directory / f"{name}.log"


def records(first: int, count: int, keys: int = 3) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % ((first + i) % keys), b"v%d" % (first + i)) for i in range(count)]


def healthy(d: Path) -> None:
    """Two segments of repeated keys: compact cleans them."""
    segment(d, 0, [kafka_python_batch(0, records(0, 4), ts=TS), kafka_python_batch(4, records(4, 4), ts=TS)])
    segment(d, 8, [kafka_python_batch(8, records(8, 2), ts=TS)])


def fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that occupies no disk blocks (all of it a hole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def bomb_batch(codec: int, area: bytes) -> bytes:
    """One compressed batch claiming one record, whose record area inflates to gigabytes of zeros."""
    return raw_batch(0, 0, 1, area, codec=codec, ts=TS)


def count_lie_batch() -> bytes:
    """An uncompressed batch of one real record whose header claims 2^31-1 records (CRC correct)."""
    real = kafka_python_batch(0, [(b"k", b"v")], ts=TS)
    return raw_batch(0, 0, 2**31 - 1, real[61:], ts=TS)


# ----------------------------------------------------------------------------- one command per case
@dataclass(frozen=True)
class Solo:
    """A command run once on its own log dir: ``build`` lays it out under the root and returns the command's
    arguments; ``line`` must match exactly one line of stderr; ``exit`` is the status."""

    build: Callable[[Path], list[str]]
    exit: int
    line: str
    owner: str | None = None
    unchanged: bool = True


def _dump(path: Path, *flags: str) -> list[str]:
    return ["dump", "--files", str(path), *flags]


def _fifo_log_dump(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    fifo(d / f"{SEG0}.log")
    return _dump(d / f"{SEG0}.log", "--deep-iteration")


def _fifo_index_dump(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 2), ts=TS)])
    (d / f"{SEG0}.index").unlink()
    fifo(d / f"{SEG0}.index")
    return _dump(d / f"{SEG0}.index")


def _directory_log_dump(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    (d / "00000000000000000050.log").mkdir(parents=True)
    return _dump(d / "00000000000000000050.log")


def _offsets(root: Path, *flags: str) -> list[str]:
    return ["offsets", "--log-dir", str(root / "logs"), *flags]


def _fifo_log_offsets(root: Path) -> list[str]:
    healthy(log_dir(root) / "good-0")
    fifo(root / "logs" / "orders-0" / f"{SEG0}.log")
    return _offsets(root, "--time", "-1")


def _directory_log_offsets(root: Path) -> list[str]:
    healthy(log_dir(root) / "good-0")
    d = root / "logs" / "orders-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 2), ts=TS)])
    (d / "00000000000000000050.log").mkdir()
    return _offsets(root, "--time", "-1")


def _sparse_index_offsets(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 4), ts=TS)])
    sparse(d / f"{SEG0}.index", 2 * GiB)
    return _offsets(root, "--time", str(TS + 1))


def _sparse_index_dump(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 4), ts=TS)])
    sparse(d / f"{SEG0}.index", 2 * GiB)
    return _dump(d / f"{SEG0}.index")


def _sparse_time_index_offsets(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 4), ts=TS)])
    sparse(d / f"{SEG0}.timeindex", 2 * GiB - 4)
    return _offsets(root, "--time", str(TS + 1))


def _bomb_dump(codec: int, area: Callable[[], bytes]) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        d = log_dir(root) / "orders-0"
        log = segment(d, 0, [bomb_batch(codec, area())])
        return _dump(log, "--deep-iteration")

    return build


def _count_lie_dump(root: Path) -> list[str]:
    d = log_dir(root) / "orders-0"
    return _dump(segment(d, 0, [count_lie_batch()]), "--deep-iteration")


FIVE_THOUSAND_DIGITS = "9" * 5000


def _huge_setting_flag(root: Path) -> list[str]:
    healthy(log_dir(root) / "orders-0")
    return ["retain", "--log-dir", str(root / "logs"), "--set", f"retention.ms={FIVE_THOUSAND_DIGITS}",
            "--now-ms", str(NOW)]  # fmt: skip


def _huge_setting_topic_file(root: Path) -> list[str]:
    healthy(log_dir(root) / "orders-0")
    conf = root / "conf"
    (conf / "topics").mkdir(parents=True)
    (conf / "topics" / "orders.properties").write_text(f"retention.ms={FIVE_THOUSAND_DIGITS}\n")
    return ["retain", "--log-dir", str(root / "logs"), "--conf-dir", str(conf), "--now-ms", str(NOW)]


def _fifo_checkpoint_offsets(root: Path) -> list[str]:
    healthy(log_dir(root) / "orders-0")
    (root / "logs" / "replication-offset-checkpoint").unlink()
    fifo(root / "logs" / "replication-offset-checkpoint")
    return _offsets(root, "--time", "-1")


def _meta_properties_offsets(text: str) -> Callable[[Path], list[str]]:
    def build(root: Path) -> list[str]:
        healthy(log_dir(root, meta=text) / "orders-0")
        return _offsets(root, "--time", "-1")

    return build


SOLO = {
    "dump: a FIFO named like a .log": Solo(_fifo_log_dump, 1, rf"{SEG0}\.log.*not a regular file \(a FIFO\)"),
    "dump: a FIFO named like a .index": Solo(
        _fifo_index_dump, 1, rf"{SEG0}\.index.*not a regular file \(a FIFO\)"
    ),
    "dump: a directory named like a .log": Solo(
        _directory_log_dump, 1, r"00000000000000000050\.log.*not a regular file \(a directory\)"
    ),
    "offsets: a FIFO named like a .log": Solo(
        _fifo_log_offsets, 1, rf"orders-0/{SEG0}\.log.*not a regular file \(a FIFO\)"
    ),
    "offsets: a directory named like a .log": Solo(
        _directory_log_offsets, 1, r"orders-0/00000000000000000050\.log.*not a regular file \(a directory\)"
    ),
    "offsets --time: a 2 GiB sparse .index": Solo(
        _sparse_index_offsets, 1, rf"orders-0/{SEG0}\.index.*2147483648 bytes"
    ),
    "offsets --time: a 2 GiB sparse .timeindex": Solo(
        _sparse_time_index_offsets, 1, rf"orders-0/{SEG0}\.timeindex.*2147483644 bytes"
    ),
    "dump: a 2 GiB sparse .index": Solo(_sparse_index_dump, 1, rf"{SEG0}\.index.*2147483648 bytes"),
    "dump: a zstd batch of 2 GiB of zeros": Solo(
        _bomb_dump(4, lambda: zstd_zeros(2 * GiB)),
        1,
        rf"{SEG0}\.log at position 0: .*decompresses to more than",
    ),
    "dump: a gzip batch of 2 GiB of zeros": Solo(
        _bomb_dump(1, lambda: gzip_zeros(2 * GiB)),
        1,
        rf"{SEG0}\.log at position 0: .*decompresses to more than",
    ),
    "dump: an lz4 batch of 2 GiB of zeros": Solo(
        _bomb_dump(3, lambda: lz4_zeros(2 * GiB)),
        1,
        rf"{SEG0}\.log at position 0: .*decompresses to more than",
    ),
    "dump: a batch header claiming 2^31-1 records": Solo(
        _count_lie_dump, 1, rf"{SEG0}\.log at position 0: .*claims 2147483647 records"
    ),
    "offsets: a FIFO named like a log-dir checkpoint": Solo(
        _fifo_checkpoint_offsets, 1, r"replication-offset-checkpoint: not a regular file \(a FIFO\)"
    ),
    "offsets: meta.properties version=99": Solo(
        _meta_properties_offsets(f"version=99\nnode.id=1\ncluster.id={CLUSTER_ID}\n"),
        1,
        r"meta\.properties: version: expected 0 or 1, found '99'",
    ),  # fmt: skip
    "offsets: meta.properties node.id=abc": Solo(
        _meta_properties_offsets(f"version=1\nnode.id=abc\ncluster.id={CLUSTER_ID}\n"),
        1,
        r"meta\.properties: node\.id: expected an int32, found 'abc'",
    ),  # fmt: skip
    "retain --set retention.ms=<5000 digits>": Solo(_huge_setting_flag, 2, r"retention\.ms.*long"),
    "retain: retention.ms=<5000 digits> in a topic file": Solo(
        _huge_setting_topic_file, 2, r"retention\.ms.*orders\.properties.*long"
    ),
}


def case_param(*values: object, name: str, owner: str | None):
    """A case as a test parameter: expected to fail (strictly) while its ``owner`` has not landed the fix."""
    return pytest.param(
        *values, id=name, marks=[pytest.mark.xfail(strict=True, reason=owner)] if owner else []
    )


def check_run(run: Run, *, exit: int) -> None:
    """What every command must do whatever the input: end on its own, within its memory, with the
    expected status and without a stack on stderr."""
    assert not run.timed_out, f"no end within {run.wall_s:.0f} s (a hang)\n{run.describe()}"
    assert not run.stack_traces(), f"stack traces on stderr: {run.stack_traces()[:5]}\n{run.describe()}"
    assert "MemoryError" not in run.stderr, f"out of its {run.memory_limit >> 20} MiB\n{run.describe()}"
    assert run.returncode == exit, run.describe()


def one_line(run: Run, pattern: str) -> str:
    matching = [line for line in run.lines() if re.search(pattern, line)]
    assert len(matching) == 1, f"expected one line matching {pattern!r}\n{run.describe()}"
    return matching[0]


@pytest.mark.parametrize(
    "case", [case_param(case, name=name, owner=case.owner) for name, case in SOLO.items()]
)
def test_hostile_input_to_a_command_gets_one_line_and_changes_nothing(tmp_path, case: Solo):
    args = case.build(tmp_path)
    before = tree_state(tmp_path)
    run = run_limited(kafka_log_jobs(*args), memory=LIMIT_PLAIN, timeout_s=TIMEOUT_PLAIN_S, cwd=tmp_path)
    check_run(run, exit=case.exit)
    one_line(run, case.line)
    if case.unchanged:
        assert tree_state(tmp_path) == before


# ------------------------------------------------------------------------- Spark jobs, one run a group
@dataclass(frozen=True)
class InLogDir:
    """A partition (or a directory beside them) laid out in a shared log dir; ``status`` and ``reason``
    (a regex) are what the job's row for ``row`` (topic, partition) must say."""

    build: Callable[[Path], None]
    row: tuple[str, int]
    status: str
    reason: str
    unchanged: tuple[str, ...]  # directories (relative to the log dir) that must be left as they were
    owner: str | None = None


def _fifo_partition(ld: Path) -> None:
    fifo(ld / "fifo-0" / f"{SEG0}.log")


def _directory_log_partition(ld: Path) -> None:
    d = ld / "dirlog-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 4), ts=TS)])
    (d / "00000000000000000050.log").mkdir()


def _backwards_partition(ld: Path) -> None:
    """Offsets going backwards inside a segment: a batch at 5..8, then one at 2..3."""
    segment(
        ld / "backwards-0",
        0,
        [kafka_python_batch(5, records(5, 4), ts=TS), kafka_python_batch(2, records(2, 2), ts=TS)],
    )
    segment(ld / "backwards-0", 9, [kafka_python_batch(9, records(9, 2), ts=TS)])  # the active segment


def _overlapping_batches_partition(ld: Path) -> None:
    """Batches overlapping inside a sealed segment: 0..3, then 2..5."""
    segment(
        ld / "overlap-0",
        0,
        [kafka_python_batch(0, records(0, 4), ts=TS), kafka_python_batch(2, records(2, 4), ts=TS)],
    )
    segment(ld / "overlap-0", 6, [kafka_python_batch(6, records(6, 2), ts=TS)])  # the active segment


def _overlapping_segments_partition(ld: Path) -> None:
    """Segment 0 holds 0..7, the next is named 4 (and holds 4..5)."""
    d = ld / "overseg-0"
    segment(d, 0, [kafka_python_batch(0, records(0, 8), ts=TS)])
    segment(d, 4, [kafka_python_batch(4, records(4, 2), ts=TS)])


def _last_offset_delta_lie_partition(ld: Path) -> None:
    """A sealed batch of 4 records whose lastOffsetDelta says 1 (offsets 0..1), CRC correct."""
    area = kafka_python_batch(0, records(0, 4), ts=TS)[61:]
    segment(ld / "deltalie-0", 0, [raw_batch(0, 1, 4, area, ts=TS)])
    segment(ld / "deltalie-0", 4, [kafka_python_batch(4, records(4, 2), ts=TS)])  # the active segment


def _symlink_alias(ld: Path) -> None:
    os.symlink("good-0", ld / "x-0")


def _dot_dot_topic(ld: Path) -> None:
    healthy(ld / "..-0")


def _illegal_topic(ld: Path) -> None:
    healthy(ld / "bad$name-0")


def _too_long_topic(ld: Path) -> None:
    healthy(ld / (("t" * 250) + "-0"))


HOSTILE_RUN = {
    "compact: a FIFO named like a .log": InLogDir(
        _fifo_partition,
        ("fifo", 0),
        "failed",
        rf"fifo-0/{SEG0}\.log.*not a regular file \(a FIFO\)",
        ("fifo-0",),
    ),
    "compact: a directory named like a .log": InLogDir(
        _directory_log_partition,
        ("dirlog", 0),
        "failed",
        r"dirlog-0/00000000000000000050\.log.*not a regular file \(a directory\)",
        ("dirlog-0",),
    ),  # fmt: skip
    "compact: offsets going backwards in a segment": InLogDir(
        _backwards_partition,
        ("backwards", 0),
        "failed",
        rf"backwards-0/{SEG0}\.log at position \d+: .*backwards or overlapping",
        ("backwards-0",),
    ),  # fmt: skip
    "compact: batches overlapping in a segment": InLogDir(
        _overlapping_batches_partition,
        ("overlap", 0),
        "failed",
        rf"overlap-0/{SEG0}\.log at position \d+: .*backwards or overlapping",
        ("overlap-0",),
    ),  # fmt: skip
    "compact: segments overlapping": InLogDir(
        _overlapping_segments_partition,
        ("overseg", 0),
        "failed",
        rf"overseg-0/{SEG0}\.log.*next segment",
        ("overseg-0",),
    ),  # fmt: skip
    "compact: a lastOffsetDelta that cannot number the records": InLogDir(
        _last_offset_delta_lie_partition,
        ("deltalie", 0),
        "failed",
        rf"deltalie-0/{SEG0}\.log at position 0: .*holds 4 records, more than its offsets 0\.\.1 can number",
        ("deltalie-0",),
    ),  # fmt: skip
    "compact: a symlink x-0 -> good-0 in the log dir": InLogDir(
        _symlink_alias, ("x", 0), "skipped", r"x-0.*alias.*good-0", ()
    ),
    "compact: a topic directory named ..-0": InLogDir(
        _dot_dot_topic, ("..", 0), "skipped", r"topic name", ("..-0",)
    ),
    "compact: a topic directory with an illegal character": InLogDir(
        _illegal_topic, ("bad$name", 0), "skipped", r"topic name", ("bad$name-0",)
    ),
    "compact: a topic directory name of 250 characters": InLogDir(
        _too_long_topic, ("t" * 250, 0), "skipped", r"topic name", ("t" * 250 + "-0",)
    ),
}


@dataclass
class GroupRun:
    """One job run over a log dir holding every case of a group: its run, rows and what was on disk."""

    run: Run
    rows: dict[tuple[str, int], dict]
    before: dict[str, dict[str, str]]
    after: dict[str, dict[str, str]]
    log_dir: Path
    checkpoints: dict[str, str] = field(default_factory=dict)


def run_group(root: Path, cases: dict[str, InLogDir], args: list[str], *, clean: bool = True,
              memory: int = LIMIT_SPARK) -> GroupRun:  # fmt: skip
    ld = log_dir(root, clean=clean)
    healthy(ld / "good-0")
    for case in cases.values():
        case.build(ld)
    watched = {d for case in cases.values() for d in case.unchanged}
    before = {d: tree_state(ld / d) for d in watched}
    run = run_limited(
        kafka_log_jobs(*args, "--log-dir", ld, "--output", "json"), memory=memory, timeout_s=TIMEOUT_SPARK_S,
        cwd=root,
    )  # fmt: skip
    try:
        rows = {(r["topic"], r["partition"]): r for r in json.loads(run.stdout or "[]")}
    except json.JSONDecodeError:
        rows = {}
    after = {d: tree_state(ld / d) for d in watched}
    ckpts = {p.name: p.read_text() for p in ld.glob("*-checkpoint")}
    return GroupRun(run, rows, before, after, ld, ckpts)


def check_case(group: GroupRun, case: InLogDir, exit: int) -> None:
    check_run(group.run, exit=exit)
    row = group.rows.get(case.row)
    assert row is not None, f"no row for {case.row}: {sorted(group.rows)}\n{group.run.describe()}"
    assert row["status"] == case.status, row
    assert re.search(case.reason, row["reason"] or ""), row["reason"]
    assert "\n" not in (row["reason"] or "")
    for d in case.unchanged:
        assert group.after[d] == group.before[d], f"{d} changed"


# ------------------------------------------------------------------- bombs and count lies in compact
def _bomb_partition(topic: str, codec: int, area: Callable[[], bytes]) -> Callable[[Path], None]:
    def build(ld: Path) -> None:
        segment(
            ld / f"{topic}-0", 0, [bomb_batch(codec, area()), kafka_python_batch(1, records(1, 2), ts=TS)]
        )
        segment(ld / f"{topic}-0", 3, [kafka_python_batch(3, records(3, 1), ts=TS)])

    return build


def _count_lie_partition(ld: Path) -> None:
    segment(ld / "countlie-0", 0, [count_lie_batch(), kafka_python_batch(1, records(1, 2), ts=TS)])
    segment(ld / "countlie-0", 3, [kafka_python_batch(3, records(3, 1), ts=TS)])


_POSITION_0 = r"{}-0/" + SEG0 + r"\.log at position 0"
CODECS_RUN = {
    f"compact: a {name} batch of 2 GiB of zeros": InLogDir(
        _bomb_partition(name, codec, area),
        (name, 0),
        "failed",
        _POSITION_0.format(name) + ": .*decompresses to more than",
        (f"{name}-0",),
    )  # fmt: skip
    for name, codec, area in (
        ("zstd", 4, lambda: zstd_zeros(2 * GiB)),
        ("gzip", 1, lambda: gzip_zeros(2 * GiB)),
        ("lz4", 3, lambda: lz4_zeros(2 * GiB)),
    )
}
CODECS_RUN["compact: a batch header claiming 2^31-1 records"] = InLogDir(
    _count_lie_partition, ("countlie", 0), "failed",
    _POSITION_0.format("countlie") + ": .*(claims|holds) 2147483647 records", ("countlie-0",),
)  # fmt: skip


# ------------------------------------------------------ an unclean dir with a flipped bit mid-log
def _flipped_bit_in_a_sealed_middle_segment(ld: Path) -> None:
    """Four sealed segments of 200 records and an active one, no clean shutdown, recovery point 0: a bit
    flipped in the second segment. Kafka's loader would truncate there and delete the segments after it."""
    d = ld / "bitrot-0"
    for s in range(4):
        base = s * 200
        batches = [
            kafka_python_batch(base + 20 * b, records(base + 20 * b, 20, keys=1000), ts=TS) for b in range(10)
        ]
        if s == 1:  # a bit of a record's value in the fifth batch (inside what its CRC covers)
            fifth = bytearray(batches[4])
            fifth[61 + 40] ^= 0x10
            batches[4] = bytes(fifth)
        segment(d, base, batches)
    segment(d, 800, [kafka_python_batch(800, records(800, 5, keys=1000), ts=TS)])


RECOVERY_RUN = {
    "compact: a flipped bit in a sealed middle segment of an unclean dir": InLogDir(
        _flipped_bit_in_a_sealed_middle_segment,
        ("bitrot", 0),
        "failed",
        r"bitrot-0/00000000000000000200\.log at position \d+",
        ("bitrot-0",),
    ),  # fmt: skip
}


# ------------------------------------------------------------- export never skips or duplicates silently
def _torn_sealed_segment(ld: Path) -> None:
    d = ld / "torn-0"
    log = segment(
        d, 0, [kafka_python_batch(0, records(0, 4), ts=TS), kafka_python_batch(4, records(4, 4), ts=TS)]
    )
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 9])
    segment(d, 8, [kafka_python_batch(8, records(8, 2), ts=TS)])


def _length_past_the_end(ld: Path) -> None:
    d = ld / "pastend-0"
    log = segment(
        d, 0, [kafka_python_batch(0, records(0, 4), ts=TS), kafka_python_batch(4, records(4, 4), ts=TS)]
    )
    data = bytearray(log.read_bytes())
    second = struct.unpack_from(">i", data, 8)[0] + 12
    struct.pack_into(">i", data, second + 8, 1_000_000)
    log.write_bytes(bytes(data))
    segment(d, 8, [kafka_python_batch(8, records(8, 2), ts=TS)])


def _backwards_export(ld: Path) -> None:
    segment(
        ld / "backwards-0",
        0,
        [kafka_python_batch(5, records(5, 4), ts=TS), kafka_python_batch(2, records(2, 2), ts=TS)],
    )
    segment(ld / "backwards-0", 9, [kafka_python_batch(9, records(9, 2), ts=TS)])  # the active segment
    segment(ld / "backwards-0", 9, [kafka_python_batch(9, records(9, 1), ts=TS)])


EXPORT_RUN = {
    "export: a torn sealed segment": InLogDir(
        _torn_sealed_segment,
        ("torn", 0),
        "failed",
        rf"torn-0/{SEG0}\.log.*position",
        ("torn-0",),
    ),
    "export: a batch length past the end of a sealed segment": InLogDir(
        _length_past_the_end,
        ("pastend", 0),
        "failed",
        rf"pastend-0/{SEG0}\.log.*position",
        ("pastend-0",),
    ),  # fmt: skip
    "export: offsets going backwards": InLogDir(
        _backwards_export,
        ("backwards", 0),
        "failed",
        rf"backwards-0/{SEG0}\.log.*position",
        ("backwards-0",),
    ),  # fmt: skip
}


# ------------------------------------------------------------------------ the groups and their runs
@dataclass(frozen=True)
class Group:
    """A job run once over a log dir holding its ``cases`` and a healthy partition, which must end with
    ``healthy`` (processed as usual beside the hostile ones)."""

    cases: dict[str, InLogDir]
    args: Callable[[Path], list[object]]  # the job's arguments, from the group's root directory
    healthy: str
    clean: bool = True


_COMPACT = ["compact", "--set", "cleanup.policy=compact", "--now-ms", NOW]
GROUPS = {
    "compact": Group(HOSTILE_RUN, lambda root: _COMPACT, "cleaned"),
    "compact, bombs and count lies": Group(
        CODECS_RUN, lambda root: [*_COMPACT, "--master", "local[1]"], "cleaned"
    ),
    "compact, an unclean dir": Group(RECOVERY_RUN, lambda root: _COMPACT, "cleaned", clean=False),
    "export": Group(
        EXPORT_RUN, lambda root: ["export", "--view", "records", "--out", root / "table"], "exported"
    ),
}


@pytest.fixture(scope="module")
def group_run(tmp_path_factory) -> Callable[[str], GroupRun]:
    """Each group's run, made when a test first needs it and shared by its cases."""
    runs: dict[str, GroupRun] = {}

    def get(name: str) -> GroupRun:
        if name not in runs:
            group = GROUPS[name]
            root = tmp_path_factory.mktemp("hostile-group")
            runs[name] = run_group(root, group.cases, [str(a) for a in group.args(root)], clean=group.clean)
        return runs[name]

    return get


@pytest.mark.spark
@pytest.mark.parametrize(
    "group,case",
    [
        case_param(name, case, name=case_name, owner=case.owner)
        for name, group in GROUPS.items()
        for case_name, case in group.cases.items()
    ],
)  # fmt: skip
def test_a_spark_job_fails_or_skips_a_hostile_partition_with_one_line_and_does_the_rest(
    group_run, group, case
):
    run = group_run(group)
    check_case(run, case, exit=1)
    healthy_row = run.rows.get(("good", 0))
    assert healthy_row is not None and healthy_row["status"] == GROUPS[group].healthy, healthy_row


@pytest.mark.spark
def test_an_alias_of_a_partition_gets_no_checkpoint_entry_and_the_partition_is_cleaned_once(group_run):
    run = group_run("compact")
    cleaner = run.checkpoints["cleaner-offset-checkpoint"].split("\n")
    topics = {line.split(" ")[0] for line in cleaner[2:] if line}
    assert "x" not in topics and "good" in topics, cleaner
    assert run.rows[("good", 0)]["records_after"] == 3, run.rows[("good", 0)]  # k0, k1, k2: cleaned once
