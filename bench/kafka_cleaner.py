"""Kafka's own log cleaner on a generated partition, through the real-broker harness (tests/kafka_harness.py).

1. Start a broker on an empty log dir and create the topic compacted (``segment.bytes`` of the workload,
   ``min.cleanable.dirty.ratio`` 0.01), so the metadata, ``partition.metadata`` and the topic id exist.
2. Stop it cleanly and put a copy of the generated segments in the topic's partition directory, with
   ``replication-offset-checkpoint`` / ``recovery-point-offset-checkpoint`` at their log end offset,
   the way the broker would have left the same data.
3. Start it again (``log.cleaner.backoff.ms`` 200, one cleaner thread, the same dedupe buffer as ours)
   and wait until ``cleaner-offset-checkpoint`` reaches the active segment.
4. Read the cleaner's statistics from the broker log, every round of this partition::

       Log cleaner thread 0 cleaned log bench-0 (dirty section = [0, 1234])
       256.0 MB of log processed in 2.9 seconds (88.3 MB/sec).
       ...
       Start size: 256.0 MB (2,182,402 messages)
       End size: 128.0 MB (1,091,235 messages)

   Kafka's "MB" is MiB; its seconds are printed with one decimal, so the rate is taken from its MB/sec.

The harness starts brokers with ``-XX:TieredStopAtLevel=1`` (C1 only: quick starts for tests). That would
slow Kafka's cleaner and flatter our ratio, so for this measurement the broker runs with the JVM's full
tiered compilation: the flag is left out while the broker starts (``_full_jit``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from bench.kept import kept_records
from kafka_log_core.format.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from kafka_log_core.format.filenames import TopicPartition

MiB = 1024 * 1024
_SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)$")
_STATS = re.compile(
    r"Log cleaner thread (?P<thread>\d+) cleaned log (?P<log>\S+) \(dirty section = \[(?P<first>\d+), (?P<last>\d+)\]\)\s+"
    r"(?P<mb>[\d,.]+) MB of log processed in (?P<secs>[\d,.]+) seconds \((?P<rate>[\d,.]+) MB/sec\)\.\s+"
    r"Indexed (?P<map_mb>[\d,.]+) MB in (?P<map_secs>[\d,.]+) seconds.*?"
    r"Start size: (?P<start_mb>[\d,.]+) MB \((?P<start_msgs>[\d,]+) messages\)\s+"
    r"End size: (?P<end_mb>[\d,.]+) MB \((?P<end_msgs>[\d,]+) messages\)",
    re.DOTALL,
)


def missing_tools() -> list[str]:
    return [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_cleaner_stats(log_text: str, log_name: str) -> list[dict]:
    """Every cleaning round of ``log_name`` reported in a broker log, in order."""
    rounds = []
    for m in _STATS.finditer(log_text):
        if m["log"] != log_name:
            continue
        rounds.append(
            {
                "dirty_section": [int(m["first"]), int(m["last"])],
                "bytes_read": _number(m["mb"]) * MiB,
                "seconds_printed": _number(m["secs"]),
                "bytes_per_second": _number(m["rate"]) * MiB,
                "map_seconds_printed": _number(m["map_secs"]),
                "start_messages": int(_number(m["start_msgs"])),
                "end_messages": int(_number(m["end_msgs"])),
                "end_bytes": _number(m["end_mb"]) * MiB,
            }
        )
    return rounds


@contextlib.contextmanager
def _full_jit(harness) -> Iterator[None]:
    saved = harness._JVM_FLAGS
    harness._JVM_FLAGS = tuple(f for f in saved if not f.startswith("-XX:TieredStopAtLevel"))
    try:
        yield
    finally:
        harness._JVM_FLAGS = saved


def _broker_proc(process_marker: str) -> Path | None:
    """/proc entry of the broker JVM whose command line mentions ``process_marker`` (its work dir)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in cmdline and process_marker in cmdline:
            return proc
    return None


def _peak_rss(proc: Path | None) -> int | None:
    try:
        for line in (proc / "status").read_text().splitlines() if proc else ():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cleaner_cpu_seconds(proc: Path | None) -> float | None:
    """CPU time of the JVM's cleaner threads (Java names them kafka-log-cleaner-thread-N; Linux keeps the
    first 15 characters): ``schedstat``'s nanoseconds on CPU where the kernel has it, else utime + stime
    in clock ticks."""
    if proc is None:
        return None
    total, found = 0.0, False
    try:
        for task in (proc / "task").iterdir():
            if not (task / "comm").read_text().strip().startswith("kafka-log-clea"):
                continue
            found = True
            schedstat = task / "schedstat"
            if schedstat.exists():
                total += int(schedstat.read_text().split()[0]) / 1e9
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except OSError:
        return None
    return total if found else None


def measure(
    partition_dir: Path,
    topic: str,
    partition: int,
    *,
    segment_bytes: int,
    dedupe_buffer_bytes: int,
    work_dir: Path,
    timeout: float = 600.0,
) -> dict:
    """Clean a copy of ``partition_dir`` with a real broker; the stats of its cleaner rounds."""
    from tests import kafka_harness as kh

    lib_dir = kh.resolve_kafka_jars()
    log_dir = work_dir / "log-dir"
    shutil.rmtree(work_dir, ignore_errors=True)
    props = {
        "log.cleaner.backoff.ms": 200,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": dedupe_buffer_bytes,
    }
    broker = kh.KafkaBroker(log_dir, work_dir, props, lib_dir=lib_dir)
    tp = TopicPartition(topic, partition)
    with _full_jit(kh):
        broker.start()
    try:
        kh.create_topic(
            broker.bootstrap,
            topic,
            partition + 1,
            {"cleanup.policy": "compact", "segment.bytes": segment_bytes, "min.cleanable.dirty.ratio": 0.01},
        )
        broker.stop()
        target = log_dir / tp.dir_name
        for f in target.iterdir():
            if _SEGMENT_FILE.match(f.name):
                f.unlink()
        copied = 0
        for f in sorted(partition_dir.iterdir()):
            if _SEGMENT_FILE.match(f.name):
                shutil.copyfile(f, target / f.name)
                copied += f.stat().st_size if f.name.endswith(".log") else 0
        bases = sorted(int(f.name[:20]) for f in target.glob("*.log"))
        snapshot = sorted(int(f.name[:20]) for f in target.glob("*.snapshot"))
        leo = snapshot[-1] if snapshot else None
        if leo is None:
            raise RuntimeError(f"{partition_dir}: no producer snapshot at the log end offset")
        for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
            path = log_dir / name
            entries = read_offset_checkpoint(path) if path.exists() else {}
            entries[tp] = leo
            write_offset_checkpoint(path, entries)
        started = time.monotonic()
        with _full_jit(kh):
            broker.start()
        loaded = time.monotonic()
        kh.wait_for_broker_cleaning(log_dir, topic, partition, bases[-1], timeout=timeout)
        waited = time.monotonic()
        proc = _broker_proc(str(work_dir))
        rounds = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the stats line follows the checkpoint by a moment
            rounds = parse_cleaner_stats(broker.log_path.read_text(errors="replace"), tp.dir_name)
            if rounds and rounds[-1]["dirty_section"][1] >= bases[-1] - 1:
                break
            time.sleep(0.2)
        peak, cleaner_cpu = _peak_rss(proc), _cleaner_cpu_seconds(proc)
    finally:
        broker.stop()
    if not rounds:
        raise RuntimeError(f"no cleaner statistics for {tp.dir_name} in {broker.log_path}")
    total_bytes = sum(r["bytes_read"] for r in rounds)
    seconds = sum(r["bytes_read"] / r["bytes_per_second"] for r in rounds if r["bytes_per_second"] > 0)
    shutil.rmtree(log_dir, ignore_errors=True)
    return {
        "kafka_version": kh.KAFKA_VERSION,
        "rounds": rounds,
        "bytes": total_bytes,
        "seconds": seconds,
        "bytes_per_second": total_bytes / seconds if seconds else 0.0,
        "cleaner_thread_cpu_seconds": cleaner_cpu,
        "start_messages": rounds[0]["start_messages"],
        "end_messages": rounds[-1]["end_messages"],
        "copied_log_bytes": copied,
        "broker_start_seconds": loaded - started,
        "start_to_checkpoint_seconds": waited - started,
        "broker_peak_rss": peak,
        "jvm": "full tiered JIT (harness flags minus -XX:TieredStopAtLevel=1), " + kh.BROKER_HEAP,
    }


# ---------------------------------------------------------------------------------------------- many shapes
UNCLEANABLE_LAG_MS = 10 * 365 * 24 * 3600 * 1000  # min.compaction.lag.ms that keeps every segment dirty


def _copy_in(source: Path, target: Path) -> tuple[int, int]:
    """The generated segments into the broker's partition directory; (last segment base, LEO)."""
    for f in target.iterdir():
        if _SEGMENT_FILE.match(f.name):
            f.unlink()
    for f in sorted(source.iterdir()):
        if _SEGMENT_FILE.match(f.name):
            shutil.copyfile(f, target / f.name)
    bases = sorted(int(f.name[:20]) for f in target.glob("*.log"))
    snapshots = sorted(int(f.name[:20]) for f in target.glob("*.snapshot"))
    if not snapshots:
        raise RuntimeError(f"{source}: no producer snapshot at the log end offset")
    return bases[-1], snapshots[-1]


def _release(bootstrap: str, topic: str) -> None:
    """Let the cleaner at a topic: min.compaction.lag.ms back to 0 (an incremental change)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from tests import kafka_harness as kh

    entry = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin = kh._admin(bootstrap)  # kept alive until the answer is in
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


class CleanerBroker:
    """One broker whose cleaner cleans, on request, topics that hold copies of generated partitions.

    Every topic is created with ``min.compaction.lag.ms`` of ten years, so the cleaner leaves it alone; a
    warm-up partition (the same code paths, smaller) is cleaned first, so the JIT has compiled the cleaner
    before anything is measured (the broker stays up between requests: Kafka's side runs warm in one JVM, as
    ours runs warm in each probe). ``clean(topic)`` gives the topic ``min.compaction.lag.ms=0`` and reads the
    cleaner thread's CPU before that and after the topic's checkpoint reaches its active segment (and its
    statistics line is logged). Use it as a context manager; the records each cleaned topic kept are read
    (``bench.kept``) once the broker has stopped, for the topics cleaned with ``digest=True``."""

    def __init__(
        self, topics: dict[str, Path], warmup_dir: Path, *, segment_bytes: int, dedupe_buffer_bytes: int,
        work_dir: Path, timeout: float = 600.0, log=lambda message: None,
    ) -> None:  # fmt: skip
        self.topics, self.warmup_dir, self.timeout, self.log = topics, warmup_dir, timeout, log
        self.segment_bytes, self.dedupe_buffer_bytes = segment_bytes, dedupe_buffer_bytes
        self.work_dir = work_dir
        self.log_dir = work_dir / "log-dir"
        self.broker = None
        self.proc: Path | None = None
        self.ends: dict[str, tuple[int, int]] = {}
        self.cleaned: dict[str, dict] = {}  # topic -> its result, to get "kept" after the broker stops
        self.info: dict = {}

    def __enter__(self) -> CleanerBroker:
        from tests import kafka_harness as kh

        lib_dir = kh.resolve_kafka_jars()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        props = {
            "log.cleaner.backoff.ms": 200,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": self.dedupe_buffer_bytes,
        }
        self.broker = kh.KafkaBroker(self.log_dir, self.work_dir, props, lib_dir=lib_dir)
        # Kafka 4 refuses segment.bytes below 1 MiB; internal.segment.bytes takes any (tests/kafka_harness.py)
        base_config = {
            "cleanup.policy": "compact",
            "segment.bytes" if self.segment_bytes >= MiB else "internal.segment.bytes": self.segment_bytes,
            "min.cleanable.dirty.ratio": 0.01,
        }
        with _full_jit(kh):
            self.broker.start()
        try:
            kh.create_topic(self.broker.bootstrap, "warmup", 1, base_config)
            for topic in self.topics:
                config = {**base_config, "min.compaction.lag.ms": UNCLEANABLE_LAG_MS}
                kh.create_topic(self.broker.bootstrap, topic, 1, config)
            self.broker.stop()
            replication = {}
            for topic, source in [("warmup", self.warmup_dir), *self.topics.items()]:
                self.ends[topic] = _copy_in(source, self.log_dir / TopicPartition(topic, 0).dir_name)
                replication[TopicPartition(topic, 0)] = self.ends[topic][1]
            for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
                path = self.log_dir / name
                entries = read_offset_checkpoint(path) if path.exists() else {}
                entries.update(replication)
                write_offset_checkpoint(path, entries)
            with _full_jit(kh):
                self.broker.start()
            self.proc = _broker_proc(str(self.work_dir))
            kh.wait_for_broker_cleaning(
                self.log_dir, "warmup", 0, self.ends["warmup"][0], timeout=self.timeout
            )
            self.log("kafka: warm-up partition cleaned")
        except BaseException:
            self.broker.stop()
            raise
        return self

    def clean(self, topic: str, input_bytes: int, *, digest: bool = True) -> dict:
        """Let the cleaner at ``topic`` and wait until it has cleaned it; its statistics and CPU."""
        from tests import kafka_harness as kh

        log_name = TopicPartition(topic, 0).dir_name
        last_base = self.ends[topic][0]
        before = _cleaner_cpu_seconds(self.proc)
        started = time.monotonic()
        _release(self.broker.bootstrap, topic)
        kh.wait_for_broker_cleaning(self.log_dir, topic, 0, last_base, timeout=self.timeout)
        rounds: list[dict] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the statistics line follows the checkpoint by a moment
            rounds = parse_cleaner_stats(self.broker.log_path.read_text(errors="replace"), log_name)
            if rounds and rounds[-1]["dirty_section"][1] >= last_base - 1:
                break
            time.sleep(0.1)
        after = _cleaner_cpu_seconds(self.proc)
        if not rounds:
            raise RuntimeError(f"no cleaner statistics for {log_name} in {self.broker.log_path}")
        cpu = None if before is None or after is None else after - before
        result = {
            "topic": topic,
            "input_bytes": input_bytes,
            "cleaner_thread_cpu_seconds": cpu,
            "bytes_per_cpu_second": input_bytes / cpu if cpu else None,
            "rounds": rounds,
            "start_messages": rounds[0]["start_messages"],
            "end_messages": rounds[-1]["end_messages"],
            "seconds_printed": sum(r["seconds_printed"] for r in rounds),
            # the same time to three figures: the bytes over the rate it prints (its seconds have one decimal)
            "seconds_from_rate": sum(r["bytes_read"] / r["bytes_per_second"] for r in rounds)
            if all(r["bytes_per_second"] for r in rounds)
            else None,
            "release_to_checkpoint_seconds": time.monotonic() - started,
        }
        if digest:
            self.cleaned[topic] = result
        return result

    def __exit__(self, *exc) -> None:
        from tests import kafka_harness as kh

        self.info = {
            "kafka_version": kh.KAFKA_VERSION,
            "broker_peak_rss": _peak_rss(self.proc),
            "jvm": "full tiered JIT (harness flags minus -XX:TieredStopAtLevel=1), " + kh.BROKER_HEAP,
        }
        self.broker.stop()
        if exc[0] is None:  # the records each kept, read once the broker has stopped (bench.kept)
            for topic, result in self.cleaned.items():
                result["kept"] = kept_records(self.log_dir / TopicPartition(topic, 0).dir_name)
        shutil.rmtree(self.log_dir, ignore_errors=True)
