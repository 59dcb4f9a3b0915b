"""A deterministic sample log dir for ``make run``: what a cleanly stopped Kafka 4.x broker leaves behind.

    python -m kafka_log_core.simulator.sample --out DIR [--fresh] [--seed N] [--now-ms MS] [--conf-dir CONF]

``DIR`` becomes the log dir of broker (node) 1, written with :class:`~kafka_log_core.simulator.writer.PartitionWriter`
(the broker's roll rules, indexes, snapshots and epochs) and closed with ``write_log_dir_checkpoints``.
Record timestamps are fixed relative to ``--now-ms`` (default 1767225600000 = 2026-01-01T00:00:00Z, the
clock ``make run`` gives the jobs), so every run writes the same bytes; only file mtimes are real.

Topics (timestamps relative to now):

* ``orders.compacted`` (3 partitions, ``compact``): keyed order updates from 10 days ago to 5 minutes
  ago, duplicates and ~8 % tombstones, one idempotent producer, every codec in turn, one segment per
  day (``segment.ms``), a leader change (epoch 0 -> 1) 4 days ago.
* ``clicks`` (2 partitions, ``delete``, 7-day ``retention.ms``): unkeyed clicks over 10 days, lz4 and
  gzip, daily segments with ``segment.jitter.ms``; the oldest three days are past retention.
* ``payments`` (1 partition, ``compact``): an idempotent producer, then a committed transaction
  interleaved with an aborted one (``.txnindex`` entry), then later updates; zstd and snappy.
* ``audit`` (1 partition, ``delete``, ``retention.bytes`` 2 MiB): LogAppendTime, uncompressed,
  rolled by ``segment.bytes`` (1 MiB), so size retention has a segment to delete.

Topic overrides: Kafka keeps them in the cluster metadata, so the generator writes them as the jobs
read them, one ``<topic>.properties`` per topic in ``CONF/topics/``. ``CONF`` defaults to ``DIR/../conf``
(``sample/conf`` for ``make run``'s ``sample/logs``); run the jobs with ``--conf-dir CONF``. The command
prints that directory. ``--fresh`` first removes ``DIR``, but only when it looks like a log dir.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.format import checkpoints
from kafka_log_core.format.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kafka_log_core.format.filenames import parse_partition_dir
from kafka_log_core.format.record_batch import CONTROL_ABORT, CONTROL_COMMIT, LOG_APPEND_TIME, Record
from kafka_log_core.log.log_dir import CLEAN_SHUTDOWN_FILE, LOCK_FILE, random_uuid, write_log_dir_checkpoints
from kafka_log_core.simulator.writer import PartitionWriter

DEFAULT_NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
MiB = 1024 * 1024

_LOG_DIR_FILES = {
    checkpoints.META_PROPERTIES,
    checkpoints.RECOVERY_POINT_CHECKPOINT,
    checkpoints.LOG_START_OFFSET_CHECKPOINT,
    checkpoints.REPLICATION_CHECKPOINT,
    checkpoints.CLEANER_CHECKPOINT,
    LOCK_FILE,
    CLEAN_SHUTDOWN_FILE,
}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    overrides: dict[str, str]  # topic-level Kafka names -> values, as written to CONF/topics
    fill: Callable[[PartitionWriter, int, random.Random, int], None]  # (writer, partition, rng, now_ms)

    def writer_settings(self) -> dict[str, Any]:
        """The overrides the writer obeys (the rest only matter to the jobs)."""
        names = {
            "segment.bytes": "segment_bytes",
            "segment.ms": "segment_ms",
            "segment.jitter.ms": "segment_jitter_ms",
            "max.compaction.lag.ms": "max_compaction_lag_ms",
        }
        return {names[k]: int(v) for k, v in self.overrides.items() if k in names}


# ---------------------------------------------------------------------------------------------- topics
def _times(rng: random.Random, start: int, end: int, step: int, wobble: int) -> Iterator[int]:
    """start, then about every ``step`` ms, and ``end`` last."""
    t = start
    while t < end - step // 2:
        yield t
        t += step + rng.randrange(-wobble, wobble + 1)
    yield end


def _fill_orders(writer: PartitionWriter, partition: int, rng: random.Random, now: int) -> None:
    keys = [f"order-{n:04d}" for n in range(120) if zlib.crc32(f"order-{n:04d}".encode()) % 3 == partition]
    statuses = ("created", "paid", "packed", "shipped", "delivered")
    codecs = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
    sequence = 0
    for n, t in enumerate(_times(rng, now - 10 * DAY, now - 5 * MINUTE, 40 * MINUTE, 10 * MINUTE)):
        records = []
        for i in range(rng.randint(1, 6)):
            key = rng.choice(keys)
            if rng.random() < 0.08:
                value = None
            else:
                doc = {
                    "order": key,
                    "status": rng.choice(statuses),
                    "amount_cents": rng.randrange(100, 50_000),
                }
                value = json.dumps(doc, separators=(",", ":")).encode()
            records.append(Record(0, t + i, key.encode(), value))
        writer.append_records(
            records,
            now_ms=t + len(records) + 3,
            codec=codecs[n % len(codecs)],
            producer_id=500 + partition,
            producer_epoch=0,
            base_sequence=sequence,
            partition_leader_epoch=0 if t < now - 4 * DAY else 1,
        )
        sequence += len(records)


def _fill_clicks(writer: PartitionWriter, partition: int, rng: random.Random, now: int) -> None:
    pages = ("/", "/search", "/item", "/cart", "/checkout", "/help")
    for n, t in enumerate(_times(rng, now - 10 * DAY, now - 5 * MINUTE, 20 * MINUTE, 5 * MINUTE)):
        records = []
        for i in range(rng.randint(3, 12)):
            doc = {"user": f"u{rng.randrange(5000)}", "page": rng.choice(pages), "ms": rng.randrange(20, 900)}
            records.append(Record(0, t + i * 7, None, json.dumps(doc, separators=(",", ":")).encode()))
        codec = LZ4 if (n + partition) % 2 else GZIP
        writer.append_records(records, now_ms=t + 100, codec=codec, partition_leader_epoch=3)


def _fill_payments(writer: PartitionWriter, partition: int, rng: random.Random, now: int) -> None:
    def rec(t: int, account: int, cents: int | None) -> Record:
        value = None if cents is None else json.dumps({"balance_cents": cents}).encode()
        return Record(0, t, f"acct-{account}".encode(), value)

    t = now - 3 * DAY
    writer.append_records(
        [rec(t + i, i % 5, 1000 * i) for i in range(10)],
        now_ms=t + 20, codec=SNAPPY, producer_id=3001, producer_epoch=0, base_sequence=0,
    )  # fmt: skip
    t = now - 2 * DAY
    committed: dict[str, Any] = {
        "producer_id": 1001,
        "producer_epoch": 0,
        "is_transactional": True,
        "codec": ZSTD,
    }
    aborted: dict[str, Any] = {
        "producer_id": 1002,
        "producer_epoch": 4,
        "is_transactional": True,
        "codec": ZSTD,
    }
    writer.append_records(
        [rec(t, 1, 500), rec(t + 1, 2, 700), rec(t + 2, 3, 900)], now_ms=t + 5, base_sequence=0, **committed
    )
    writer.append_records([rec(t + 10, 2, 0), rec(t + 11, 4, 0)], now_ms=t + 15, base_sequence=0, **aborted)
    writer.append_records(
        [rec(t + 20, 1, 450), rec(t + 21, 3, None)], now_ms=t + 25, base_sequence=3, **committed
    )
    writer.append_control(
        CONTROL_COMMIT, producer_id=1001, producer_epoch=0, coordinator_epoch=7, now_ms=t + 30
    )
    writer.append_records([rec(t + 40, 4, 1)], now_ms=t + 45, base_sequence=2, **aborted)
    writer.append_control(
        CONTROL_ABORT, producer_id=1002, producer_epoch=4, coordinator_epoch=7, now_ms=t + 50
    )
    sequence = 10
    for t in (now - DAY + HOUR, now - 6 * HOUR, now - 5 * MINUTE):
        records = [rec(t + i, rng.randrange(5), rng.randrange(10_000)) for i in range(4)]
        writer.append_records(
            records, now_ms=t + 10, codec=SNAPPY, producer_id=3001, producer_epoch=0,
            base_sequence=sequence, partition_leader_epoch=2,
        )  # fmt: skip
        sequence += len(records)


def _fill_audit(writer: PartitionWriter, partition: int, rng: random.Random, now: int) -> None:
    padding = "x" * 900
    for n, t in enumerate(_times(rng, now - 2 * HOUR, now - 5 * MINUTE, 25_000, 0)):
        records = [
            Record(
                0,
                t + i,
                f"actor-{rng.randrange(40)}".encode(),
                f'{{"event":{n * 10 + i},"pad":"{padding}"}}'.encode(),
            )
            for i in range(10)
        ]
        writer.append_records(records, now_ms=t + 50, timestamp_type=LOG_APPEND_TIME)


TOPICS = (
    TopicSpec(
        "orders.compacted",
        3,
        {"cleanup.policy": "compact", "segment.ms": str(DAY), "min.cleanable.dirty.ratio": "0.1"},
        _fill_orders,
    ),
    TopicSpec(
        "clicks",
        2,
        {
            "cleanup.policy": "delete",
            "retention.ms": str(7 * DAY),
            "segment.ms": str(DAY),
            "segment.jitter.ms": str(HOUR),
        },
        _fill_clicks,
    ),
    TopicSpec("payments", 1, {"cleanup.policy": "compact", "segment.ms": str(DAY)}, _fill_payments),
    TopicSpec(
        "audit",
        1,
        {
            "cleanup.policy": "delete",
            "segment.bytes": str(MiB),
            "retention.bytes": str(2 * MiB),
            "message.timestamp.type": "LogAppendTime",
        },
        _fill_audit,
    ),
)


# ---------------------------------------------------------------------------------------------- generation
def generate(out: Path, conf_dir: Path, *, now_ms: int = DEFAULT_NOW_MS, seed: int = 0) -> dict[str, int]:
    """Write every topic into the log dir ``out`` and its overrides into ``conf_dir/topics``.

    Returns the number of segments written per partition directory name."""
    out.mkdir(parents=True, exist_ok=True)
    segments: dict[str, int] = {}
    for spec in TOPICS:
        for partition in range(spec.partitions):
            rng = random.Random(f"{seed}:{spec.name}:{partition}")
            directory = out / f"{spec.name}-{partition}"
            with PartitionWriter(
                directory, random_seed=rng.getrandbits(64), **spec.writer_settings()
            ) as writer:
                spec.fill(writer, partition, rng, now_ms)
            segments[directory.name] = len(writer.segment_bases)
    ids = random.Random(f"{seed}:log-dir")
    write_log_dir_checkpoints(
        out,
        node_id=1,
        cluster_id=random_uuid(ids),
        directory_id=random_uuid(ids),
        broker_epoch=42,
        now_ms=now_ms,
    )
    topics = conf_dir / "topics"
    topics.mkdir(parents=True, exist_ok=True)
    for spec in TOPICS:
        lines = [f"# {spec.name}: overrides of the sample topic (written by kafka_log_core.simulator.sample)"]
        lines += [f"{name}={value}" for name, value in spec.overrides.items()]
        (topics / f"{spec.name}.properties").write_text("\n".join(lines) + "\n", encoding="iso-8859-1")
    return segments


def _clear(out: Path, fresh: bool) -> None:
    if not out.exists() or not any(out.iterdir()):
        return
    if not fresh:
        raise UsageError(f"{out} is not empty: pass --fresh to replace it")
    strangers = sorted(
        p.name
        for p in out.iterdir()
        if not (p.is_dir() and parse_partition_dir(p.name))
        and p.name not in _LOG_DIR_FILES
        and not p.name.endswith(".tmp")
    )
    if strangers or not (out / checkpoints.META_PROPERTIES).exists():
        raise UsageError(
            f"{out} does not look like a log dir written by this generator (no meta.properties, or other "
            f"entries: {strangers[:5]}); refusing to delete it"
        )
    shutil.rmtree(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_log_core.simulator.sample", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="log dir to create")
    parser.add_argument("--fresh", action="store_true", help="replace DIR if it is a log dir already")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    parser.add_argument(
        "--now-ms", type=int, default=DEFAULT_NOW_MS, help="the clock the data is relative to"
    )
    parser.add_argument(
        "--conf-dir", type=Path, help="where topics/<topic>.properties go (default DIR/../conf)"
    )
    args = parser.parse_args(argv)
    conf_dir = args.conf_dir if args.conf_dir is not None else args.out.parent / "conf"
    started = time.monotonic()
    try:
        _clear(args.out, args.fresh)
        segments = generate(args.out, conf_dir, now_ms=args.now_ms, seed=args.seed)
    except KafkaLogError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, count in segments.items():
        print(f"{args.out / name}: {count} segment(s)")
    print(f"log dir {args.out} written in {time.monotonic() - started:.1f} s (clock {args.now_ms})")
    print(f"topic overrides in {conf_dir / 'topics'}: run the jobs with --conf-dir {conf_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
