"""A broker's worth of partitions: log dirs of N partitions, most with nothing to do, for the
partition-count sweep (``bench.partitions``) and for profiling the cost of an idle partition.

``python -m bench.fleet --out DIR --partitions 10000 [--dirty-share 0.01] [--seed N]`` writes ``DIR/logs``
(the log dir of a cleanly stopped broker) and ``DIR/conf`` (``--conf-dir``: one ``topics/<topic>.properties``
per topic), and prints a JSON manifest. ``now`` for the jobs is :data:`NOW_MS`.

The mix, as a broker's log dir holds it:

* ``__consumer_offsets`` (50 partitions, compacted, Kafka's own settings) once there are 1,000 partitions;
* topics of :data:`PARTITIONS_PER_TOPIC` partitions, one in four compacted, the rest ``delete``;
* of every topic's partitions, :data:`EMPTY_SHARE` are empty (one empty segment, as a broker leaves a
  partition nobody wrote to) and the rest hold a little recent data in two segments: nothing to do for
  retention (inside ``retention.ms``), and for a compacted topic nothing for the cleaner either (its
  cleaner checkpoint at the active segment: cleaned);
* ``dirty_share`` of the partitions are in ``compact,delete`` topics of their own (``dirty-<n>``) with
  something for every job: a first segment past the 7-day ``retention.ms`` (retention deletes it) and a
  never-cleaned section with duplicate keys (the cleaner cleans it).

Each kind of partition is written once by the simulator's writer (the broker's append path: indexes,
epochs, snapshots) into a template, then copied file by file into every partition of that kind with
its topic's ``partition.metadata``: 50,000 partitions take seconds, not minutes. The log-dir files
(checkpoints at each partition's log end offset, ``.kafka_cleanshutdown``, ``meta.properties``) are
written as a broker leaves them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafka_log_core import fsutil
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition, list_segment_bases
from kafka_log_core.format.record_batch import Record
from kafka_log_core.log.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    format_meta_properties,
    random_uuid,
)
from kafka_log_core.log.segment import Segment
from kafka_log_core.simulator.writer import PartitionWriter

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the jobs' --now-ms
MINUTE = 60_000
DAY = 24 * 60 * MINUTE
PARTITIONS_PER_TOPIC = 20
COMPACTED_TOPIC_EVERY = 4  # one topic in four is compacted
EMPTY_SHARE = 0.6  # of a topic's partitions
CONSUMER_OFFSETS = "__consumer_offsets"
CONSUMER_OFFSETS_PARTITIONS = 50
CONSUMER_OFFSETS_FROM = 1000  # log dirs of at least this many partitions have one
DIRTY_SEGMENT_RECORDS = 2000  # per segment of a dirty partition (~230 KB of 16-byte keys, 100-byte values)

EMPTY, CLEAN_DELETE, CLEAN_COMPACT, DIRTY = "empty", "clean-delete", "clean-compact", "dirty"


@dataclass(frozen=True)
class Fleet:
    """What to generate."""

    partitions: int
    dirty_share: float = 0.01
    seed: int = 20260101

    def __post_init__(self) -> None:
        if self.partitions < 1 or not 0.0 <= self.dirty_share <= 1.0:
            raise ValueError(f"bad fleet: {self}")

    @property
    def dirty(self) -> int:
        return round(self.partitions * self.dirty_share)


@dataclass
class Manifest:
    log_dir: str
    conf_dir: str
    fleet: dict
    topics: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    dirty_bytes: int = 0
    seconds: float = 0.0
    dirty_partitions: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Template:
    """One kind of partition written once: its files (name -> bytes) and checkpoint entries."""

    files: dict[str, bytes]
    log_end_offset: int
    cleaner_offset: int | None  # the cleaner checkpoint of a cleaned compacted partition

    @property
    def size(self) -> int:
        return sum(len(b) for name, b in self.files.items() if name != checkpoints.PARTITION_METADATA)


def _records(rng: random.Random, count: int, t: int, keys: int | None) -> list[Record]:
    """``count`` records stamped from ``t``: 16-byte keys (unique when ``keys`` is None, else drawn from
    ``keys`` distinct ones) and 100-byte values."""
    out = []
    for i in range(count):
        k = rng.randrange(keys) if keys is not None else rng.getrandbits(60)
        value = rng.randbytes(50).hex().encode()
        out.append(Record(0, t + i, b"k%015d" % k, value))
    return out


def _write_template(directory: Path, kind: str, rng: random.Random) -> _Template:
    """The files of one partition of ``kind`` (see the module docstring)."""
    cleaner_offset = None
    with PartitionWriter(directory, random_seed=rng.getrandbits(32)) as w:
        if kind in (CLEAN_DELETE, CLEAN_COMPACT):
            t = NOW_MS - 3 * 60 * MINUTE
            for n in range(4):
                w.append_records(_records(rng, 20, t + n * MINUTE, None), now_ms=t + n * MINUTE + 20)
            active = w.roll(now_ms=t + 30 * MINUTE)
            for n in range(2):
                w.append_records(_records(rng, 20, t + (60 + n) * MINUTE, None), now_ms=t + (60 + n) * MINUTE)
            cleaner_offset = active if kind == CLEAN_COMPACT else None
        elif kind == DIRTY:
            old, recent = NOW_MS - 8 * DAY, NOW_MS - 2 * 60 * MINUTE
            for segment, t in enumerate((old, recent, recent + 30 * MINUTE)):
                if segment:
                    w.roll(now_ms=t)
                count = DIRTY_SEGMENT_RECORDS if segment < 2 else 50
                for n in range(0, count, 50):
                    w.append_records(_records(rng, 50, t + n, DIRTY_SEGMENT_RECORDS), now_ms=t + n + 50)
        leo = w.log_end_offset
    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
    last = list_segment_bases(directory)[-1]
    if Segment.open(directory, last).read_next_offset != leo:
        raise RuntimeError(f"{directory}: template log end offset is not {leo}")
    return _Template(files, leo, cleaner_offset)


def _layout(fleet: Fleet) -> list[tuple[str, str, list[str]]]:
    """Topics as (name, cleanup.policy or '' for Kafka's own, kinds of its partitions in order)."""
    topics: list[tuple[str, str, list[str]]] = []
    left = fleet.partitions - fleet.dirty
    if fleet.partitions >= CONSUMER_OFFSETS_FROM:
        topics.append((CONSUMER_OFFSETS, "", _kinds(CONSUMER_OFFSETS_PARTITIONS, CLEAN_COMPACT)))
        left -= CONSUMER_OFFSETS_PARTITIONS
    n = 0
    while left > 0:
        count = min(PARTITIONS_PER_TOPIC, left)
        compacted = n % COMPACTED_TOPIC_EVERY == COMPACTED_TOPIC_EVERY - 1
        topics.append((f"topic-{n:05d}", "compact" if compacted else "delete",
                       _kinds(count, CLEAN_COMPACT if compacted else CLEAN_DELETE)))  # fmt: skip
        left -= count
        n += 1
    for d in range(0, fleet.dirty, PARTITIONS_PER_TOPIC):
        count = min(PARTITIONS_PER_TOPIC, fleet.dirty - d)
        topics.append((f"dirty-{d // PARTITIONS_PER_TOPIC:04d}", "compact,delete", [DIRTY] * count))
    return topics


def _kinds(count: int, clean: str) -> list[str]:
    empty = round(count * EMPTY_SHARE)
    return [EMPTY] * empty + [clean] * (count - empty)


def generate(root: str | os.PathLike[str], fleet: Fleet) -> Manifest:
    """``root/logs`` and ``root/conf`` for ``fleet`` (``root`` replaced)."""
    started = time.monotonic()
    root = Path(root)
    shutil.rmtree(root, ignore_errors=True)
    logs, conf, scratch = root / "logs", root / "conf", root / "templates"
    (conf / "topics").mkdir(parents=True)
    logs.mkdir()
    rng = random.Random(fleet.seed)
    templates = {
        kind: _write_template(scratch / f"template-{i}", kind, rng)
        for i, kind in enumerate((EMPTY, CLEAN_DELETE, CLEAN_COMPACT, DIRTY))
    }
    shutil.rmtree(scratch)
    m = Manifest(os.fspath(logs), os.fspath(conf), asdict(fleet))
    leos: dict[TopicPartition, int] = {}
    cleaned: dict[TopicPartition, int] = {}
    for topic, policy, kinds in _layout(fleet):
        m.topics += 1
        if policy:
            (conf / "topics" / f"{topic}.properties").write_text(f"cleanup.policy={policy}\n")
        metadata = checkpoints.format_partition_metadata(random_uuid(rng))
        for partition, kind in enumerate(kinds):
            tp = TopicPartition(topic, partition)
            template = templates[kind]
            directory = logs / tp.dir_name
            directory.mkdir()
            for name, data in template.files.items():
                (directory / name).write_bytes(metadata if name == checkpoints.PARTITION_METADATA else data)
            leos[tp] = template.log_end_offset
            if template.cleaner_offset is not None:
                cleaned[tp] = template.cleaner_offset
            m.kinds[kind] = m.kinds.get(kind, 0) + 1
            m.bytes += template.size
            if kind == DIRTY:
                m.dirty_bytes += template.size
                m.dirty_partitions.append(tp.dir_name)
    _write_log_dir_files(logs, leos, cleaned, rng)
    m.seconds = time.monotonic() - started
    return m


def _write_log_dir_files(logs: Path, leos: dict, cleaned: dict, rng: random.Random) -> None:
    """What a cleanly stopped broker leaves beside its partition directories."""
    ordered = dict(sorted(leos.items(), key=lambda item: (item[0].topic, item[0].partition)))
    for name, entries in (
        (checkpoints.RECOVERY_POINT_CHECKPOINT, ordered),
        (checkpoints.REPLICATION_CHECKPOINT, ordered),
        (checkpoints.LOG_START_OFFSET_CHECKPOINT, {}),
        (checkpoints.CLEANER_CHECKPOINT, {tp: cleaned[tp] for tp in ordered if tp in cleaned}),
    ):
        checkpoints.write_offset_checkpoint(logs / name, entries)
    (logs / LOCK_FILE).touch()
    meta = format_meta_properties(
        node_id=1, cluster_id=random_uuid(rng), directory_id=random_uuid(rng), now_ms=NOW_MS
    )
    fsutil.atomic_write_bytes(logs / checkpoints.META_PROPERTIES, meta.encode())
    fsutil.write_bytes_fsync(logs / CLEAN_SHUTDOWN_FILE, b'{"version":0,"brokerEpoch":1}')
    fsutil.fsync_dir(logs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the directory to write (replaced): logs/ and conf/")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--dirty-share", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=Fleet.seed)
    args = parser.parse_args(argv)
    m = generate(args.out, Fleet(args.partitions, args.dirty_share, args.seed))
    print(json.dumps({k: v for k, v in m.to_json().items() if k != "dirty_partitions"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
