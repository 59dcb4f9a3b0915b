"""A property-based fuzz over mutated real segments (issue #24, "Show"): a partition written by kafka-python
(an independent codec; every codec, tombstones, several segments) is damaged the ways disks, copies and
hostile users damage logs -- bit flips, truncations, a batch length or record count that lies, a
``lastOffsetDelta`` or base offset that lies, a compressed batch that inflates to gigabytes -- and the
compact job's partition function runs on it in a forked child under ``RLIMIT_AS`` and a wall-clock bound.

Every run must either refuse (a failed row whose one-line reason names a file of the partition, and
every file of the partition as it was) or clean, keeping what a consumer reads: every record left was in
the input, and each key's last record (when not a tombstone) is still there, both as kafka-python decodes
the damaged input. Never an internal error, a hang, or memory past the bound.

``FUZZ_EXAMPLES`` sets the number of examples (default 40, deterministic; ``make soak`` runs more).
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import struct
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition
from tests.hostile import MiB, kafka_python_batch, raw_batch, tree_state, zstd_zeros

TS = 1_700_000_000_000
NOW = TS + 3_600_000
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
BUDGET = 1 << 30  # address space a child may add to what the forked process already maps
TIMEOUT_S = 60.0
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
TOPIC = "fuzz"


# ------------------------------------------------------------------------------------------ the input
@dataclass(frozen=True)
class Layout:
    """Segments as lists of batches (bytes), written by kafka-python."""

    segments: tuple[tuple[bytes, ...], ...]


@st.composite
def layouts(draw) -> Layout:
    segments = []
    offset = 0
    for _ in range(draw(st.integers(2, 3))):
        batches = []
        for _ in range(draw(st.integers(1, 3))):
            count = draw(st.integers(1, 5))
            codec = draw(st.sampled_from(CODECS))
            records = [
                (
                    b"k%d" % draw(st.integers(0, 4)),
                    draw(st.sampled_from([b"v%d" % (offset + i), b"x" * 50, None])),
                )
                for i in range(count)
            ]
            batches.append(kafka_python_batch(offset, records, codec=codec, ts=TS + offset))
            offset += count
        segments.append(tuple(batches))
    return Layout(tuple(segments))


def bases(layout: Layout) -> list[int]:
    """Each segment's base offset (the offset of its first record)."""
    found, offset = [], 0
    for batches in layout.segments:
        found.append(offset)
        offset += sum(_count(b) for b in batches)
    return found


def write_partition(log_dir: Path, layout: Layout, names: list[int] | None = None) -> Path:
    """The log dir of a cleanly stopped broker with one partition (empty indexes: legal, no entry); the
    segments named by ``names`` (default: their base offsets)."""
    log_dir.mkdir(parents=True)
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint"):  # fmt: skip
        (log_dir / name).write_text("0\n0\n")
    d = log_dir / f"{TOPIC}-0"
    d.mkdir()
    for base, batches in zip(names or bases(layout), layout.segments, strict=True):
        name = f"{base:020d}"
        (d / f"{name}.log").write_bytes(b"".join(batches))
        (d / f"{name}.index").touch()
        (d / f"{name}.timeindex").touch()
    return d


def _count(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 57)[0]


# -------------------------------------------------------------------------------------- the damage
def _with_crc(batch: bytearray) -> bytes:
    import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def flip(data: bytes, at: int, bit: int) -> bytes:
    out = bytearray(data)
    out[at % len(out)] ^= 1 << bit
    return bytes(out)


def set_field(batch: bytes, fmt: str, at: int, value: int, *, recrc: bool) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    return _with_crc(out) if recrc else bytes(out)


def bomb(base: int, size: int) -> bytes:
    return raw_batch(base, 0, 1, zstd_zeros(size), codec=4, ts=TS)


LIES = st.sampled_from([-1, 0, 1, 2, 13, 61, 1000, 2**31 - 1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1)


FRAMING = ("flip", "truncate", "length", "delta", "base", "rewind")  # bytes, framing and offsets
INFLATING = ("count", "bomb")  # what sizes an allocation: a record count, a compressed area


@st.composite
def damages(draw, layout: Layout, kinds: tuple[str, ...]) -> tuple[str, int, object]:
    """One damage of one of ``kinds`` to one segment: (kind, segment index, how). Batch-level damage keeps
    the other batches as they are; a field lie inside the CRC gets a correct CRC (only the lie is wrong)."""
    seg = draw(st.integers(0, len(layout.segments) - 1))
    batch = draw(st.integers(0, len(layout.segments[seg]) - 1))
    kind = draw(st.sampled_from(kinds))
    size = sum(len(b) for b in layout.segments[seg])
    if kind == "flip":
        return kind, seg, (draw(st.integers(0, size - 1)), draw(st.integers(0, 7)))
    if kind == "truncate":
        return kind, seg, draw(st.integers(0, size - 1))
    if kind == "bomb":
        return kind, seg, (batch, draw(st.sampled_from([2 << 30, 64 * MiB])))
    if kind == "rewind":  # a later batch of the segment starting at or below an earlier one's offsets
        return kind, seg, (batch, (draw(st.integers(0, batch)), draw(st.integers(0, 2))))
    return kind, seg, (batch, draw(st.integers(-8, 8) | LIES))  # off by a few, or by anything


def damaged(layout: Layout, damage: tuple[str, int, object]) -> Layout:
    kind, seg, how = damage
    segments = [list(s) for s in layout.segments]
    batches = segments[seg]
    if kind == "flip":
        at, bit = how  # type: ignore[misc]
        joined = flip(b"".join(batches), at, bit)
        segments[seg] = [joined]
    elif kind == "truncate":
        segments[seg] = [b"".join(batches)[: int(how)]]  # type: ignore[call-overload]
    else:
        i, value = how  # type: ignore[misc]
        b = batches[i]
        if kind == "length":
            batches[i] = set_field(b, ">i", 8, value, recrc=False)
        elif kind == "count":
            batches[i] = set_field(b, ">i", 57, value, recrc=True)
        elif kind == "delta":
            batches[i] = set_field(b, ">i", 23, value, recrc=True)
        elif kind == "base":
            batches[i] = set_field(b, ">q", 0, struct.unpack_from(">q", b)[0] + value, recrc=False)
        elif kind == "bomb":
            batches[i] = bomb(struct.unpack_from(">q", b)[0], value)
        elif kind == "rewind":
            earlier, back = value
            base = struct.unpack_from(">q", batches[earlier])[0] - back
            batches[i] = set_field(b, ">q", 0, base, recrc=False)
    return Layout(tuple(tuple(s) for s in segments))


# ---------------------------------------------------------------------------- the independent view
@dataclass(frozen=True)
class View:
    """What kafka-python reads from a partition: the records of the batches it reads whole, in file order,
    and the batches it cannot read (file and position) in the segments before the active one."""

    records: list[tuple[int, bytes | None, bytes | None]]
    unreadable: list[str]


def consumer_view(directory: Path) -> View:
    """The partition as kafka-python reads it: per segment, batch after batch until one's CRC fails, one
    inflates past 64 MiB (never decompressed further) or one does not decode -- the rest of that segment is
    unreadable to a consumer. The active (last) segment is read the same way, but a job that cleans never
    reads its records, so what is unreadable there is not listed."""
    from kafka.record.memory_records import MemoryRecords

    records: list[tuple[int, bytes | None, bytes | None]] = []
    unreadable: list[str] = []
    logs = sorted(directory.glob("*.log"))
    for n, log in enumerate(logs):
        data = log.read_bytes()
        position = 0
        try:
            batches = MemoryRecords(data)
            while True:
                batch = batches.next_batch()
                if batch is None:
                    break
                if not batch.validate_crc() or _inflates_past(batch, 64 * MiB):
                    raise ValueError("CRC mismatch or inflates past 64 MiB")
                records += [(r.offset, r.key, r.value) for r in batch]
                position += len(batch._buffer)
        except Exception as err:  # kafka-python reads no further in this segment: nor would a consumer
            if n < len(logs) - 1:
                unreadable.append(f"{log.name} at position {position}: {type(err).__name__}: {err}")
    return View(records, unreadable)


def _inflates_past(batch, limit: int) -> bool:
    """A zstd batch whose record area inflates past ``limit`` bytes (read at most that far)."""
    import io

    import zstandard

    raw = bytes(batch._buffer)
    if struct.unpack_from(">h", raw, 21)[0] & 7 != 4:
        return False
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw[61:])) as reader:
            return len(reader.read(limit + 1)) > limit
    except zstandard.ZstdError:
        return False


# --------------------------------------------------------------------------------- running the job
def compact_in_child(log_dir: Path) -> dict:
    """compact_partition on the log dir's partition in a forked child under RLIMIT_AS (what this process
    maps plus :data:`BUDGET`) and :data:`TIMEOUT_S`; its row, or {"crash": ...} / {"hang": ...}."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            limit = _mapped_bytes() + BUDGET
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            configs = load_config(None, [], [], ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0"])
            tp = TopicPartition(TOPIC, 0)
            task = PartitionTask(str(log_dir), TOPIC, 0, LogDirState.read(log_dir).for_partition(tp))
            result = compact_partition(task, configs, JobOptions(now_ms=NOW))
        except BaseException:
            result = {"crash": traceback.format_exc()}
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(result, default=str))
        os._exit(0)
    os.close(write_end)
    ready, _, _ = select.select([read_end], [], [], TIMEOUT_S)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        return {"hang": f"no end within {TIMEOUT_S} s"}
    with os.fdopen(read_end) as got:
        text = got.read()
    _, status = os.waitpid(pid, 0)
    return json.loads(text) if text else {"crash": f"child died, wait status {status}"}


def _mapped_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> None:
    """Compile the kernels in this process first: the forked children inherit them (each would compile
    them again otherwise, seconds each)."""
    root = tmp_path_factory.mktemp("warm")
    records = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(6)]
    for codec in CODECS:
        ld = root / f"c{codec}"
        write_partition(ld, Layout(((kafka_python_batch(0, records, codec=codec, ts=TS),),
                                    (kafka_python_batch(6, records, codec=codec, ts=TS),))))  # fmt: skip
        configs = load_config(None, [], [], ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0"])
        tp = TopicPartition(TOPIC, 0)
        task = PartitionTask(str(ld), TOPIC, 0, LogDirState.read(ld).for_partition(tp))
        row = compact_partition(task, configs, JobOptions(now_ms=NOW))
        assert row["status"] == "cleaned", row


def check_outcome(row: dict, directory: Path, before_state: dict, before: View) -> None:
    """Refused with a named file and nothing changed; or cleaned from input kafka-python reads whole,
    keeping what a consumer reads (no record that was not there, every key's last record unless a
    tombstone)."""
    assert "hang" not in row and "crash" not in row, row
    reason = row.get("reason") or ""
    assert "internal error" not in reason, reason
    assert "\n" not in reason
    if row["status"] == "failed":
        assert str(directory) in reason, f"the reason names no file of the partition: {reason}"
        assert tree_state(directory) == before_state, "a refused partition was changed"
        return
    assert row["status"] in ("cleaned", "skipped"), row
    if row["status"] == "cleaned":
        assert not before.unreadable, f"cleaned what kafka-python cannot read: {before.unreadable}"
    after = consumer_view(directory).records
    assert set(after) <= set(before.records), "records that were not in the input"
    latest: dict[bytes | None, tuple] = {}
    for record in before.records:
        latest[record[1]] = record
    kept = set(after)
    for key, record in latest.items():
        if key is not None and record[2] is not None:
            assert record in kept, f"the last record of key {key!r} is gone: {record}"


def fuzz_once(tmp_path_factory, data, kinds: tuple[str, ...]) -> None:
    layout = data.draw(layouts())
    damage = data.draw(damages(layout, kinds))
    log_dir = tmp_path_factory.mktemp("fuzz") / "logs"
    directory = write_partition(log_dir, damaged(layout, damage), bases(layout))
    before_state = tree_state(directory)
    before = consumer_view(directory)
    try:
        check_outcome(compact_in_child(log_dir), directory, before_state, before)
    finally:
        shutil.rmtree(log_dir.parent, ignore_errors=True)


_SETTINGS = dict(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@settings(**_SETTINGS)
@given(data=st.data())
def test_compacting_a_damaged_partition_refuses_or_keeps_what_a_consumer_reads(warm, tmp_path_factory, data):
    fuzz_once(tmp_path_factory, data, FRAMING)


@settings(**_SETTINGS, phases=[Phase.explicit, Phase.generate])  # an expected failure is not shrunk
@given(data=st.data())
def test_compacting_a_partition_with_a_count_lie_or_a_bomb_refuses_within_its_memory(
    warm, tmp_path_factory, data
):
    fuzz_once(tmp_path_factory, data, INFLATING)
