"""Why our cleans of one shape vary from clean to clean: ``python -m bench.noise LOG_DIR [--cleans N]``.

Cleans fresh copies of one sweep shape (a generated log dir, copied as ``run_sweep`` copies it) one after
another in ONE process, after the warm-up the sweep's probe makes, and prints for each clean: CPU user and
system time apart, minor and major page faults, voluntary and involuntary context switches, CPU migrations
(``/proc/self/sched``), garbage collections, the pass-1 phases the sweep records (``--phases``), what the
rest of the machine ran meanwhile (both cores' busy time from ``/proc/stat`` less ours) and the steal time,
the dirty and under-writeback pages at its start and the KiB written out during it (``/proc/vmstat``), and
three canaries timed just before and just after the clean, which say how fast the machine was at that
moment whatever our code does: a dependent chain of register arithmetic (the core's latency), a pointer
chase over 32 MiB (the caches' and memory's) and independent vector arithmetic over 256 KiB (the core's
throughput: the one that halves when another guest runs on the physical core's other hyperthread, and our
cleans with it; docs/benchmark.md, session 9).

``--trace SECONDS`` runs the canaries alone, back to back, and prints how their times spread.

``--variants plain,synced`` alternates ways of preparing each copy: ``plain`` as the sweep (copied, then
cleaned); ``synced`` with the copy written back first (``os.sync``) and a second's pause. The allocator's
part is measured by running the whole script again under ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` (glibc then keeps freed memory mapped between cleans).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

_SETS = ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"]
_SPIN_STEPS = 3_000_000
_CHASE_SLOTS = 4 * 1024 * 1024  # 32 MiB of int64: past L2, within what the VM's share of L3 may hold
_CHASE_STEPS = 200_000
_WIDE_WORDS, _WIDE_ROUNDS = 32 * 1024, 600  # 256 KiB, ~5 ms
_USER_HZ = os.sysconf("SC_CLK_TCK")


@njit(cache=True)
def _spin(steps):
    """A dependent chain of register arithmetic (xorshift): no memory, the core's own speed."""
    x = np.uint64(88172645463325252)
    for _ in range(steps):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
    return x


@njit(cache=True)
def _chase(nxt, steps):
    """A dependent walk through a random cycle: one cache or memory miss a step."""
    i = 0
    for _ in range(steps):
        i = nxt[i]
    return i


@njit(cache=True)
def _wide(a, rounds):
    """Independent vector arithmetic over an array held in L2: the core's throughput, which a busy SMT
    sibling (another guest's vCPU on the same physical core) takes half of, where the two chains above
    hardly notice it."""
    acc = np.uint64(0)
    for _ in range(rounds):
        for i in range(a.shape[0]):
            acc += (a[i] * np.uint64(0x9E3779B97F4A7C15)) ^ (a[i] >> np.uint64(29))
    return acc


@functools.cache
def _wide_words() -> np.ndarray:
    return np.arange(_WIDE_WORDS, dtype=np.uint64)


def wide_canary_ms() -> float:
    """CPU milliseconds of the wide canary once, in this thread (~4.5 ms on this VM's core alone, ~9 with a
    busy sibling): how fast the core is at this moment for throughput-bound work like our kernels."""
    words = _wide_words()
    started = time.thread_time()
    _wide(words, _WIDE_ROUNDS)
    return (time.thread_time() - started) * 1e3


def _chase_cycle(slots: int) -> np.ndarray:
    order = np.random.default_rng(26).permutation(slots)
    nxt = np.empty(slots, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


def _canaries(nxt: np.ndarray, wide: np.ndarray) -> tuple[float, float, float]:
    """Milliseconds of the three canaries, in this thread."""
    t0 = time.perf_counter()
    _spin(_SPIN_STEPS)
    t1 = time.perf_counter()
    _chase(nxt, _CHASE_STEPS)
    t2 = time.perf_counter()
    _wide(wide, _WIDE_ROUNDS)
    t3 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3


# ---------------------------------------------------------------------------------------------- the kernel's counters
def _sched() -> dict[str, int]:
    wanted = {
        "se.nr_migrations": "migrations",
        "nr_voluntary_switches": "vcsw",
        "nr_involuntary_switches": "ivcsw",
    }
    out = {}
    with open("/proc/self/sched") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name.strip() in wanted:
                out[wanted[name.strip()]] = int(float(value))
    return out


def _cpu_jiffies() -> dict[str, tuple[int, int]]:
    """(busy, steal) jiffies of each core."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *v = line.split()
                user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in v[:8])
                out[name] = (user + nice + system + irq + softirq, steal)
    return out


def _vmstat(names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            name, value = line.split()
            if name in names:
                out[name] = int(value)
    return out


def _last_cpu() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


class _Counters:
    """What the process and the machine did between ``__init__`` and ``result``."""

    def __init__(self) -> None:
        self.gcs = 0
        gc.callbacks.append(self._gc)
        self.vm = _vmstat(("nr_dirty", "nr_writeback", "pgpgout", "thp_fault_alloc"))
        self.jiffies = _cpu_jiffies()
        self.sched = _sched()
        self.cpu_at_start = _last_cpu()
        self.ru = resource.getrusage(resource.RUSAGE_SELF)
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.gcs += 1

    def result(self) -> dict:
        wall, cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        ru = resource.getrusage(resource.RUSAGE_SELF)
        sched, jiffies = _sched(), _cpu_jiffies()
        vm = _vmstat(("nr_dirty", "nr_writeback", "pgpgout", "thp_fault_alloc"))
        gc.callbacks.remove(self._gc)
        ms = 1e3 / _USER_HZ
        busy = sum(jiffies[c][0] - self.jiffies[c][0] for c in jiffies) * ms
        return {
            "wall_ms": wall * 1e3, "cpu_ms": cpu * 1e3,
            "user_ms": (ru.ru_utime - self.ru.ru_utime) * 1e3, "sys_ms": (ru.ru_stime - self.ru.ru_stime) * 1e3,
            "minflt": ru.ru_minflt - self.ru.ru_minflt, "majflt": ru.ru_majflt - self.ru.ru_majflt,
            "vcsw": ru.ru_nvcsw - self.ru.ru_nvcsw, "ivcsw": ru.ru_nivcsw - self.ru.ru_nivcsw,
            "migrations": sched["migrations"] - self.sched["migrations"],
            "cpus": f"{self.cpu_at_start}>{_last_cpu()}", "gcs": self.gcs,
            "others_ms": busy - cpu * 1e3,  # both cores' busy time (10 ms ticks) less ours
            "steal_ms": sum(jiffies[c][1] - self.jiffies[c][1] for c in jiffies) * ms,
            "dirty_kib": self.vm.get("nr_dirty", 0) * 4, "writeback_kib": self.vm.get("nr_writeback", 0) * 4,
            "written_kib": vm.get("pgpgout", 0) - self.vm.get("pgpgout", 0),
            "thp": vm.get("thp_fault_alloc", 0) - self.vm.get("thp_fault_alloc", 0),
        }  # fmt: skip


# ---------------------------------------------------------------------------------------------- the cleans
def _clean(source: Path, sets: list[str], now_ms: int, variant: str, phases: bool, map_bytes: int) -> dict:
    from bench.probe import pass1_phases
    from jobs.context import job_options, list_tasks
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import compact_partition

    configs, opts = load_config(None, [], [], sets), job_options(now_ms)
    with tempfile.TemporaryDirectory(prefix="bench-noise-") as tmp:
        copy = Path(tmp) / "log-dir"
        shutil.copytree(source, copy)
        if variant == "synced":
            os.sync()
            time.sleep(1.0)
        tasks = list_tasks([str(copy)], None, writing=True).tasks
        parts = pass1_phases(tasks, configs, opts, map_bytes) if phases else {}
        counters = _Counters()
        rows = [compact_partition(task, configs, opts) for task in tasks]
        out = counters.result()
    if any(r["status"] != "cleaned" for r in rows):
        raise RuntimeError(f"{source}: {[(r['status'], r['reason']) for r in rows]}")
    return {"variant": variant, **out, "pass1_ms": parts.get("pass1_offset_map", 0.0) * 1e3}


_COLUMNS = ("variant", "cpu_ms", "user_ms", "sys_ms", "wall_ms", "spin_ms", "chase_ms", "wide_ms", "pass1_ms", "minflt",
            "majflt", "vcsw", "ivcsw", "migrations", "cpus", "gcs", "others_ms", "steal_ms", "dirty_kib",
            "writeback_kib", "written_kib", "thp")  # fmt: skip


def _line(r: dict) -> str:
    return " ".join(f"{r[c]:>8.1f}" if isinstance(r[c], float) else f"{r[c]!s:>8}" for c in _COLUMNS)


def trace(seconds: float) -> None:
    """The three canaries alone, back to back: how the machine's speed moves with nothing of ours running."""
    nxt, wide = _chase_cycle(_CHASE_SLOTS), _wide_words()
    _canaries(nxt, wide)
    end, rows = time.monotonic() + seconds, []
    while time.monotonic() < end:
        cpu = time.thread_time()
        rows.append((*_canaries(nxt, wide), (time.thread_time() - cpu) * 1e3))
    for i, name in enumerate(("spin", "chase", "wide", "all three by CPU time")):
        v = [r[i] for r in rows]
        slow = sum(x > 1.3 * min(v) for x in v) / len(v)
        print(f"{name}: {len(v)} samples, min {min(v):.2f} ms, median {statistics.median(v):.2f}, "
              f"p95 {statistics.quantiles(v, n=20, method='inclusive')[-1]:.2f}, max {max(v):.2f}; over 1.3x the min: {slow:.0%}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from bench.probe import _clean_a_copy, _warm_compaction
    from kafka_log_core.constants import OFFSET_MAP_ENTRY_BYTES
    from kafka_log_core.settings import config
    from kafka_log_core.settings.config import load_config

    ap = argparse.ArgumentParser(prog="python -m bench.noise")
    ap.add_argument("log_dir", nargs="?", help="a sweep shape's generated log dir (copied for each clean)")
    ap.add_argument("--cleans", type=int, default=16)
    ap.add_argument("--segment-bytes", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--variants", default="plain", help="comma-separated, alternated: plain, synced")
    ap.add_argument(
        "--phases", action="store_true", help="pass 1 timed apart before each clean, as the sweep"
    )
    ap.add_argument("--json", default=None, help="write every clean's figures here")
    ap.add_argument(
        "--trace", type=float, default=None, metavar="SECONDS", help="the canaries alone, no clean"
    )
    args = ap.parse_args(argv)
    if args.trace is not None:
        trace(args.trace)
        return 0
    if args.log_dir is None:
        ap.error("LOG_DIR is needed unless --trace")
    variants = args.variants.split(",")
    sets = [*_SETS, f"segment.bytes={args.segment_bytes}"]
    now_ms = int(time.time() * 1000)
    map_bytes = config.dedupe_map_slots(load_config(None, [], [], sets).broker) * OFFSET_MAP_ENTRY_BYTES
    nxt = _chase_cycle(_CHASE_SLOTS)
    wide = _wide_words()
    _canaries(nxt, wide)
    _warm_compaction(sets)
    _clean_a_copy(args.log_dir, sets, now_ms)
    print(" ".join(f"{c:>8}" for c in _COLUMNS), flush=True)
    results = []
    for i in range(args.cleans):
        variant = variants[i % len(variants)]
        before = _canaries(nxt, wide)
        r = _clean(Path(args.log_dir), sets, now_ms, variant, args.phases, map_bytes)
        after = _canaries(nxt, wide)
        r["spin_ms"], r["chase_ms"], r["wide_ms"] = ((b + a) / 2 for b, a in zip(before, after, strict=True))
        r["canaries_before_after"] = [before, after]
        results.append(r)
        print(_line(r), flush=True)
    for v in variants:
        mine = [r for r in results if r["variant"] == v]
        print(f"{v}: median cpu {statistics.median(r['cpu_ms'] for r in mine):.1f} ms, min "
              f"{min(r['cpu_ms'] for r in mine):.1f}, max {max(r['cpu_ms'] for r in mine):.1f} ({len(mine)} cleans)")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
