"""A command run as a user runs it, measured from outside: wall time, the CPU of its whole process tree
(the Python driver, Spark's JVM, the Python workers) and the Python driver's peak memory.

CPU: what the kernel reports for the children this process waited for (``RUSAGE_CHILDREN``: a process's
own CPU plus that of the descendants it waited for), checked against the sum over the tree polled from
``/proc`` while it runs (a descendant nobody waits for is counted there): the larger of the two.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_HZ = os.sysconf("SC_CLK_TCK")
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float
    driver_peak_rss: int  # bytes: VmHWM of the process started (the Python driver)
    returncode: int
    stdout: str
    stderr: str
    load_average: tuple[float, float, float]  # at the start
    cpu_by_process: dict[str, float]  # "driver", "jvm", "workers": CPU seconds of each part of the tree


def _tree(root: int) -> dict[int, float]:
    """CPU seconds of every live process under ``root`` (itself included), by pid."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / _HZ
    out, stack = {}, [root]
    while stack:
        pid = stack.pop()
        if pid in cpu:
            out[pid] = cpu[pid]
        stack += children.get(pid, [])
    return out


def _peak_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, timeout: float = 3600) -> Run:
    """Run ``cmd`` to its end, measured (its output captured)."""
    load = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seen: dict[int, float] = {}
    kinds: dict[int, str] = {}
    peak = 0
    started = time.perf_counter()
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        output: list[tuple[str, str]] = []
        reader = threading.Thread(
            target=lambda: output.append(proc.communicate(timeout=timeout)), daemon=True
        )
        reader.start()
        while reader.is_alive():
            for pid, cpu in _tree(proc.pid).items():
                seen[pid] = max(seen.get(pid, 0.0), cpu)
                kinds[pid] = "driver" if pid == proc.pid else _kind(pid)  # as it is now (exec changes it)
            peak = max(peak, _peak_rss(proc.pid))
            reader.join(POLL_SECONDS)
        seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stdout, stderr = output[0] if output else ("", "")
    parts: dict[str, float] = {}
    for pid, cpu in seen.items():
        parts[kinds[pid]] = parts.get(kinds[pid], 0.0) + cpu
    return Run(seconds, max(waited, sum(seen.values())), peak, proc.returncode, stdout, stderr, load, parts)


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return "other"
    program = cmdline.split(b"\0")[0]
    if program.endswith(b"java"):
        return "jvm"
    return "workers" if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline else "other"
