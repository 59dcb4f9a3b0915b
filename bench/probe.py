"""One measurement per process, so each one's peak memory is its own.

``python -m bench.probe KIND ...`` prints one JSON object on standard output. Every probe imports and
warms up what it measures first (numba loads its cached machine code on the first call), then records
the resident set as ``baseline_rss``, resets the kernel's high-water mark (``/proc/self/clear_refs``)
and measures; ``peak_rss`` is the high-water mark of the measured part alone. Times are the best of
``--repeat`` runs (``time.perf_counter``), in one thread: per core.

Kinds:

* ``read SEGMENT``: plain sequential read of the file (1 MiB ``readinto``; page cache warm).
* ``crc SEGMENT``: one CRC32C pass (``crc32c.crc32c``) over the bytes, in memory.
* ``scan SEGMENT``: the scan every cleaner pass makes, compiled over the whole segment (framing, CRC32C,
  every record walked and its key hashed: ``chunk_walk.walk_segment``). With a breakdown of its parts.
* ``digest SEGMENT``: the key digest alone on the segment's keys: MD5 in lanes against MurmurHash3 x64 128.
* ``kafka-python SEGMENT``: ``kafka.record.MemoryRecords`` over the same bytes, touching every
  record's key (no CRC check: kafka-python's iteration does not verify it).
* ``compact LOG_DIR``: ``tasks.compact_partition`` on every partition of LOG_DIR (changes it), with
  ``--phases`` a separate timing of the parts first (producer table, plan, pass 1); with ``--warm-copy
  DIR`` a copy of DIR (the same shape) cleaned first, untimed (its CPU reported apart); with ``--canary``
  the wide canary of ``bench.noise`` timed just before and just after the clean (``canary_ms``).
* ``spark SOURCE_LOG_DIR --master local[N] --counts 1,2,4,8 --work DIR``: the Spark job
  (``jobs.compact.run``) on copies of the first 1, 2, 4, 8 partitions of SOURCE, one session, after a
  warm-up job that starts every Python worker. Copies are made before the clock starts. The peak memory
  here is the driver's only (the executors are Spark's Python workers).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

KiB = 1024


# ---------------------------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    kib = _status_kib("VmRSS")
    return (kib or 0) * KiB


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes() -> int:
    kib = _status_kib("VmHWM")
    if kib is None:  # not Linux: the whole process's peak (ru_maxrss is KiB on Linux, bytes on macOS)
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * KiB


class Meter:
    """Baseline RSS, then peak RSS of what follows."""

    def __init__(self) -> None:
        gc.collect()
        self.baseline = rss_bytes()
        self.peak_reset = reset_peak()

    def result(self) -> dict:
        return {"baseline_rss": self.baseline, "peak_rss": peak_bytes(), "peak_reset": self.peak_reset}


class Clock:
    """Wall and CPU time (this process, all threads) of what follows."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def result(self) -> dict:
        return {"seconds": time.perf_counter() - self.wall, "cpu_seconds": time.process_time() - self.cpu}


def best_of(repeat: int, fn) -> tuple[dict, object]:
    """The fastest of ``repeat`` runs by wall time, and the least CPU time of any run."""
    best: dict = {"seconds": float("inf"), "cpu_seconds": float("inf")}
    out = None
    for _ in range(repeat):
        clock = Clock()
        out = fn()
        took = clock.result()
        best = {k: min(best[k], took[k]) for k in best}
    return best, out


# ---------------------------------------------------------------------------------------------- probes
def probe_read(path: str, repeat: int) -> dict:
    size = os.path.getsize(path)
    buf = bytearray(1 << 20)
    view = memoryview(buf)

    def run() -> int:
        total = 0
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
        return total

    run()
    meter = Meter()
    times, total = best_of(repeat, run)
    if total != size:
        raise RuntimeError(f"{path}: read {total} bytes, expected {size}")
    return {**times, "bytes": size, **meter.result()}


def probe_crc(path: str, repeat: int) -> dict:
    import crc32c

    data = Path(path).read_bytes()
    crc32c.crc32c(data[:4096])
    meter = Meter()
    times, _ = best_of(repeat, lambda: crc32c.crc32c(data))
    return {**times, "bytes": len(data), **meter.result()}


def probe_scan(path: str, repeat: int) -> dict:
    """The scan every cleaner pass makes, compiled over the whole segment: framing, CRC32C, every record
    walked, every key hashed (``chunk_walk.walk_segment``); its parts one by one."""
    from kafka_log_core.constants import MIN_LONG
    from kafka_log_core.format import log_file
    from kafka_log_core.format.compression import MAX_BATCH_BYTES
    from kafka_log_core.kernels import chunk_walk, fields, header_scan, key_digest, statuses
    from kafka_log_core.rules.cleaner_segments import new_karea

    buf = fields.as_bytes(log_file.read_log(path))
    end = buf.shape[0]
    karea = new_karea()
    chunk_walk.walk_segment(buf, 0, end, *karea, MAX_BATCH_BYTES)  # load the compiled kernels, map the pages
    meter = Meter()
    times, (status, _, batches, records) = best_of(
        repeat, lambda: chunk_walk.walk_segment(buf, 0, end, *karea, MAX_BATCH_BYTES)
    )
    mem = meter.result()
    if status != statuses.DONE:
        raise RuntimeError(f"{path}: the scan stopped: {statuses.STATUS_NAMES.get(status, status)}")
    _, _, rows = header_scan.scan_headers(buf, 0, end)
    rows = header_scan.header_rows(rows)
    positions, sizes = rows["position"].copy(), rows["size"].copy()
    keys = key_positions(buf, rows)
    calls = {
        "header_scan": lambda: header_scan.scan_headers(buf, 0, end),
        "crc32c": lambda: header_scan.verify_batches(buf, 0, end, MIN_LONG),  # with the offsets
        "md5_keys": lambda: key_digest.hash_keys(buf, *keys),
    }
    parts = {name: best_of(repeat, call)[0]["cpu_seconds"] for name, call in calls.items()}
    parts["walk_and_rest"] = times["cpu_seconds"] - parts["crc32c"] - parts["md5_keys"]
    del positions, sizes
    return {**times, "bytes": end, "records": records, "batches": batches, "parts_cpu_seconds": parts, **mem}


def key_positions(buf, rows) -> tuple[np.ndarray, np.ndarray]:
    """Positions and lengths of every key of the uncompressed v2 batches of a segment."""
    from kafka_log_core.kernels import record_walk

    pos, lens = [], []
    for position, size, count in zip(rows["position"].tolist(), rows["size"].tolist(),
                                     rows["records_count"].tolist(), strict=True):  # fmt: skip
        _, _, table = record_walk.walk_records(buf, position + 61, position + size, count, 0)
        pos.append(table[:, record_walk.R_KEY_POS])
        lens.append(table[:, record_walk.R_KEY_LEN])
    return np.concatenate(pos), np.concatenate(lens)


def probe_digest(path: str, repeat: int) -> dict:
    """The key digest's cost: MD5 in lanes (what the map keys on, as the broker's) against MurmurHash3 x64
    128 compiled in the same module, on the keys of one segment."""
    from bench import murmur3
    from kafka_log_core.format import log_file
    from kafka_log_core.kernels import fields, header_scan, key_digest

    buf = fields.as_bytes(log_file.read_log(path))
    _, _, rows = header_scan.scan_headers(buf, 0, buf.shape[0])
    key_pos, key_len = key_positions(buf, header_scan.header_rows(rows))
    key_digest.hash_keys(buf, key_pos[:32], key_len[:32])
    murmur3.murmur3_keys(buf, key_pos[:32], key_len[:32])
    md5, _ = best_of(repeat, lambda: key_digest.hash_keys(buf, key_pos, key_len))
    murmur, _ = best_of(repeat, lambda: murmur3.murmur3_keys(buf, key_pos, key_len))
    n = int(key_pos.shape[0])
    return {
        "keys": n,
        "key_bytes_mean": float(key_len.mean()) if n else 0.0,
        "md5_cpu_seconds": md5["cpu_seconds"],
        "murmur3_cpu_seconds": murmur["cpu_seconds"],
        "md5_ns_per_key": md5["cpu_seconds"] / n * 1e9 if n else 0.0,
        "murmur3_ns_per_key": murmur["cpu_seconds"] / n * 1e9 if n else 0.0,
        "seconds": md5["seconds"],
        "cpu_seconds": md5["cpu_seconds"],
        "bytes": int(buf.shape[0]),
    }


def probe_kafka_python(path: str, repeat: int) -> dict:
    from kafka.record.memory_records import MemoryRecords

    data = Path(path).read_bytes()

    def run() -> int:
        records = 0
        mr = MemoryRecords(data)
        while (batch := mr.next_batch()) is not None:
            for record in batch:
                record.key  # noqa: B018 - the key is what compaction needs
                records += 1
        return records

    meter = Meter()
    times, records = best_of(repeat, run)
    return {**times, "bytes": len(data), "records": records, **meter.result()}


def _warm_compaction(sets: list[str]) -> None:
    """Compact a tiny generated partition so every kernel is loaded before we measure: batches of every
    codec (rotated), so a compressed shape does not pay for loading the codec paths (numba's cache, the
    codec libraries' first calls) inside its measurement; Kafka's cleaner is warmed up likewise."""
    from bench.generate import MiB, Workload, generate
    from jobs.context import job_options, list_tasks
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import compact_partition

    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        codecs = ("none", "gzip", "snappy", "lz4", "zstd")
        generate(
            tmp, Workload(partition_bytes=MiB, segment_bytes=128 * KiB, tombstone_share=0.1, codecs=codecs)
        )
        configs = load_config(None, [], [], sets)
        listing = list_tasks([tmp], None, writing=True)
        for task in listing.tasks:
            compact_partition(task, configs, job_options(None))


def _clean_a_copy(log_dir: str, sets: list[str], now_ms: int) -> float:
    """Compact a copy of ``log_dir`` (untimed for the result): the CPU seconds it took. Cleaning the same
    shape once before the measured run puts this process where a worker is after its first partition --
    the allocator holds memory the size of this shape's buffers, numba has every kernel the shape takes
    -- as Kafka's cleaner thread is after its warm-up partition and the shapes before."""
    from jobs.context import job_options, list_tasks
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import compact_partition

    configs = load_config(None, [], [], sets)
    with tempfile.TemporaryDirectory(prefix="bench-warm-copy-") as tmp:
        copy = Path(tmp) / "log-dir"
        shutil.copytree(log_dir, copy)
        listing = list_tasks([str(copy)], None, writing=True)
        started = time.process_time()
        for task in listing.tasks:
            compact_partition(task, configs, job_options(now_ms))
        return time.process_time() - started


def pass1_phases(tasks, configs, opts, map_bytes: int) -> dict[str, float]:
    """The parts before the rewrite, in CPU seconds, on their own (pass 1 on a map of its own; nothing is
    written): opening the partition with its producer table, the plan, the map's allocation, pass 1."""
    from kafka_log_core.kernels.offset_map import OffsetMap
    from kafka_log_core.log.partition_log import PartitionLog
    from kafka_log_core.rules import cleaner
    from kafka_log_core.rules.producer_state import build_producer_table

    broker = configs.broker
    parts: dict[str, float] = {}
    for task in tasks:
        cfg = configs.for_topic(task.topic)
        t0 = time.process_time()
        log = PartitionLog.open(task.log_dir, task.tp, task.checkpoints)
        producers = build_producer_table(log, opts.now_ms, broker.producer_id_expiration_ms)
        t1 = time.process_time()
        plan = cleaner.plan_cleaning(log, cfg, broker, opts.now_ms, producers)
        t2 = time.process_time()
        # the map as the cleaner makes it: the configured buffer, slots for the dirty section's keys
        bound = cleaner.keyed_bound(log, plan.first_dirty_offset, plan.first_uncleanable_offset)
        omap = OffsetMap(map_bytes, broker.log_cleaner_io_buffer_load_factor, bound)
        t3 = time.process_time()
        cleaner.build_offset_map(log, plan.first_dirty_offset, plan.first_uncleanable_offset, omap)
        t4 = time.process_time()
        for key, dt in (("open_and_producer_table", t1 - t0), ("plan", t2 - t1), ("map_alloc", t3 - t2),
                        ("pass1_offset_map", t4 - t3)):  # fmt: skip
            parts[key] = parts.get(key, 0.0) + dt
        del log, omap
    return parts


def probe_compact(
    log_dir: str,
    sets: list[str],
    now_ms: int,
    phases: bool,
    warm_copy: str | None = None,
    canary: bool = False,
    gate_floor: float | None = None,
    tries: int = 1,
) -> dict:
    """One measured clean of ``log_dir``; with ``gate_floor`` (the sweep's canary floor, ms) gated as the
    sweep gates every clean (``bench.gate``): a clean whose canary read slow is redone on a fresh copy of
    ``warm_copy`` (the shape's source), up to ``tries`` in all; the kept try's figures, the discarded tries
    under ``discarded_tries``, the lowered floor as ``gate_floor_ms`` and where the kept try's partition
    is (``log_dir``: the caller reads its records, then removes it)."""
    from jobs.context import job_options
    from kafka_log_core.settings.config import load_config

    _warm_compaction(sets)
    first_clean = _clean_a_copy(warm_copy, sets, now_ms) if warm_copy else None
    configs = load_config(None, [], [], sets)
    opts = job_options(now_ms)

    def measured(path: str) -> dict:
        out = _measured_clean(path, configs, opts, phases, canary)
        if first_clean is not None:
            out["warm_copy_cpu_seconds"] = first_clean  # the same shape cleaned first, in this process
        return {**out, "log_dir": path}

    if gate_floor is None:
        return measured(log_dir)
    if not (canary and warm_copy):
        raise SystemExit("--gate-floor needs --canary and --warm-copy (the source of a redone clean's copy)")
    from bench import gate

    def attempt(i: int) -> dict:
        if i == 0:
            return measured(log_dir)
        fresh = f"{log_dir}-try{i}"
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(warm_copy, fresh)
        return measured(fresh)

    from bench.noise import wide_canary_ms

    attempts, floor = gate.gated(attempt, tries, gate_floor, read=wide_canary_ms)
    for run in attempts[1:-1]:  # the first try's copy is the caller's, the kept one it reads
        shutil.rmtree(run["log_dir"], ignore_errors=True)
    return {**attempts[-1], "discarded_tries": attempts[:-1], "gate_floor_ms": floor}


def _measured_clean(log_dir: str, configs, opts, phases: bool, canary: bool) -> dict:
    from jobs.context import list_tasks
    from kafka_log_core.constants import OFFSET_MAP_ENTRY_BYTES
    from kafka_log_core.settings import config
    from kafka_log_core.work.tasks import compact_partition

    broker = configs.broker
    listing = list_tasks([log_dir], None, writing=True)
    out: dict = {
        "map_bytes": config.dedupe_map_slots(broker) * OFFSET_MAP_ENTRY_BYTES,
        "map_slots": config.dedupe_map_slots(broker),
        "map_capacity": config.dedupe_map_usable_entries(broker),
    }
    if phases:
        out["phases_cpu_seconds"] = pass1_phases(listing.tasks, configs, opts, out["map_bytes"])
    if canary:  # the core's speed just before and just after the measured clean (bench.noise)
        from bench.noise import wide_canary_ms

        wide_canary_ms()
        before = wide_canary_ms()
    meter = Meter()
    clock = Clock()
    rows = [compact_partition(task, configs, opts) for task in listing.tasks]
    out.update(clock.result())
    out.update(meter.result())
    if canary:
        out["canary_ms"] = [before, wide_canary_ms()]
    out["rows"] = rows
    return out


def _copy_partitions(source: Path, target: Path, count: int) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for f in source.iterdir():
        if f.is_file():
            shutil.copyfile(f, target / f.name)
    dirs = sorted((d for d in source.iterdir() if d.is_dir()), key=lambda d: int(d.name.rsplit("-", 1)[1]))
    if len(dirs) < count:
        raise RuntimeError(f"{source}: {len(dirs)} partitions, {count} wanted")
    for d in dirs[:count]:
        shutil.copytree(d, target / d.name)


def probe_spark(source: str, master: str, counts: list[int], work: str, sets: list[str], now_ms: int) -> dict:
    from bench.generate import MiB, Workload, generate
    from jobs import compact
    from jobs.context import job_options
    from jobs.spark import spark_session
    from kafka_log_core.settings.config import load_config

    configs = load_config(None, [], [], sets)
    opts = job_options(now_ms)
    session_started = time.perf_counter()
    spark = spark_session(master, "kafka-log-jobs bench")
    parallelism = spark.sparkContext.defaultParallelism
    try:
        with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
            warm = Workload(partitions=max(2, parallelism), partition_bytes=MiB, segment_bytes=128 * KiB)
            generate(tmp, warm)
            compact.run(spark, [tmp], None, configs, opts)
        warm_seconds = time.perf_counter() - session_started
        runs = []
        for count in counts:
            target = Path(work) / f"spark-{parallelism}-{count}"
            _copy_partitions(Path(source), target, count)
            meter = Meter()
            started = time.perf_counter()
            rows = compact.run(spark, [str(target)], None, configs, opts)
            seconds = time.perf_counter() - started
            runs.append(
                {
                    "partitions": count,
                    "seconds": seconds,
                    "statuses": sorted({r["status"] for r in rows}),
                    "failed": [r["reason"] for r in rows if r["status"] == "failed"],
                    "records": sum(r.get("records_before") or 0 for r in rows),
                    "records_after": sum(r.get("records_after") or 0 for r in rows),
                    "task_ms": [r.get("duration_ms") for r in rows],
                    **meter.result(),
                }
            )
            shutil.rmtree(target, ignore_errors=True)
    finally:
        spark.stop()
    return {"master": master, "cores": parallelism, "session_and_warmup_seconds": warm_seconds, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe")
    parser.add_argument("kind", choices=["read", "crc", "scan", "digest", "kafka-python", "compact", "spark"])
    parser.add_argument("path")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--now-ms", type=int, default=None)
    parser.add_argument("--phases", action="store_true")
    parser.add_argument(
        "--warm-copy", default=None, help="compact: clean a copy of this log dir first (untimed)"
    )
    parser.add_argument(
        "--canary",
        action="store_true",
        help="compact: the wide canary (bench.noise) before and after the clean",
    )
    parser.add_argument(
        "--gate-floor",
        type=float,
        default=None,
        help="compact, with --canary and --warm-copy: the sweep's canary floor (ms); a clean whose canary reads "
        "slow against it is redone on a fresh copy of the --warm-copy dir (bench.gate)",
    )
    parser.add_argument("--tries", type=int, default=1, help="compact, with --gate-floor: cleans at most")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--counts", default="1,2,4,8")
    parser.add_argument("--work", default=None)
    args = parser.parse_args(argv)
    if args.kind == "read":
        result = probe_read(args.path, args.repeat)
    elif args.kind == "crc":
        result = probe_crc(args.path, args.repeat)
    elif args.kind == "scan":
        result = probe_scan(args.path, args.repeat)
    elif args.kind == "digest":
        result = probe_digest(args.path, args.repeat)
    elif args.kind == "kafka-python":
        result = probe_kafka_python(args.path, args.repeat)
    else:
        now_ms = args.now_ms if args.now_ms is not None else int(time.time() * 1000)
        if args.kind == "compact":
            result = probe_compact(args.path, args.sets, now_ms, args.phases, args.warm_copy, args.canary,
                                   args.gate_floor, args.tries)  # fmt: skip
        else:
            counts = [int(c) for c in args.counts.split(",")]
            work = args.work or tempfile.mkdtemp(prefix="bench-spark-")
            result = probe_spark(args.path, args.master, counts, work, args.sets, now_ms)
    result["kind"] = args.kind
    sys.stdout.write(json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
