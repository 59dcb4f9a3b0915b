"""Test helper for hostile input: run a real ``kafka-log-jobs`` command in a child process under a memory
limit (``RLIMIT_AS``) and a wall-clock bound, and tell what it printed and what it left on disk.

Shared by the hostile-input corpus (``tests/jobs/test_hostile_corpus.py``) and the fuzz over mutated real
segments; other tests may import it. Everything here is independent of the code under test: batches are
built with kafka-python's codec or by hand from the published layout, CRCs with the ``crc32c`` library.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import resource
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import crc32c
import pytest

MiB = 1 << 20
GiB = 1 << 30
# Address space a command may map, per process (RLIMIT_AS is inherited by every child). A command that
# starts no JVM (dump, offsets, a usage error found before Spark starts) maps about 350 MiB.
LIMIT_PLAIN = 1 * GiB
# A Spark job: the driver's JVM alone maps about 3.8 GiB of address space (heap and class-space
# reservations), most of it never touched; each Python worker maps what our code allocates.
LIMIT_SPARK = 5 * GiB
# Wall-clock bounds: what a hang costs, not a speed target (a first run compiles the numba kernels).
TIMEOUT_PLAIN_S = 60.0
TIMEOUT_SPARK_S = 900.0

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_JAVA_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(.*\)\s*$", re.M)
_JAVA_CAUSE = re.compile(r"^(Exception in thread|Caused by: )|Py4JJavaError|PythonException", re.M)
_BARE_ERRNO = re.compile(r"\[Errno \d+\]")


@dataclass(frozen=True)
class Run:
    """What a command did: exit status, its two streams, its wall time, and whether it was killed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool
    memory_limit: int

    def stack_traces(self) -> list[str]:
        """The lines of stderr that belong to a Python traceback or a Java stack (none is allowed)."""
        text = self.stderr
        found = [m.group(0) for m in _TRACEBACK.finditer(text)]
        found += [m.group(0).strip() for m in _JAVA_FRAME.finditer(text)]
        found += [m.group(0) for m in _JAVA_CAUSE.finditer(text)]
        return found

    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def describe(self) -> str:
        tail = self.stderr[-3000:]
        return f"{' '.join(self.argv)}\nexit {self.returncode} after {self.wall_s:.1f} s\nstderr:\n{tail}"


def kafka_log_jobs(*args: object) -> list[str]:
    """The ``kafka-log-jobs`` command of this interpreter's environment, with ``args`` as strings."""
    script = Path(sys.executable).with_name("kafka-log-jobs")
    head = [str(script)] if script.exists() else [sys.executable, "-c", "from jobs.cli import main; main()"]
    return head + [str(a) for a in args]


def run_limited(
    argv: Sequence[str],
    *,
    memory: int = LIMIT_PLAIN,
    timeout_s: float = TIMEOUT_PLAIN_S,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    """Run ``argv`` in its own process group with ``RLIMIT_AS = memory`` (every process it starts inherits
    it) and kill the group after ``timeout_s``; standard input is empty."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    started = time.monotonic()
    child = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=limit,
    )
    timed_out = False
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(child.pid)
        out, err = child.communicate()
    finally:
        _kill_group(child.pid)  # what the command left running (a JVM, Python workers)
    return Run(
        tuple(argv),
        child.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        time.monotonic() - started,
        timed_out,
        memory,
    )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------------- what is on disk
def tree_state(root: str | os.PathLike[str]) -> dict[str, str]:
    """Every entry under ``root`` (not following symlinks): a regular file as its size, mtime and SHA-256,
    anything else as its kind (a symlink with its target). FIFOs and devices are never opened."""
    base = Path(root)
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            state[str(path.relative_to(base))] = _entry_state(path)
    return state


def _entry_state(path: Path) -> str:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return f"symlink -> {os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        return f"special {stat.S_IFMT(st.st_mode):o}"
    return f"file {st.st_size} bytes, mtime {st.st_mtime_ns}, sha256 {file_digest(path)}"


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, reading only its data extents (a sparse file's holes read as zeros
    would cost gigabytes): the digest covers each extent's position and bytes, and the size."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        h.update(struct.pack(">q", size))
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # no data past pos (ENXIO)
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            h.update(struct.pack(">q", start))
            os.lseek(fd, start, os.SEEK_SET)
            left = end - start
            while left:
                chunk = os.read(fd, min(left, 4 * MiB))
                if not chunk:
                    break
                h.update(chunk)
                left -= len(chunk)
            pos = end
    finally:
        os.close(fd)
    return h.hexdigest()


@contextlib.contextmanager
def bind_mount(source: Path, target: Path) -> Iterator[Path]:
    """``source`` seen a second time at ``target`` (created): a bind mount, the same device and inode under
    another path. Skips the test where this process may not mount."""
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode:
        target.rmdir()
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        yield target
    finally:
        # Lazy: the locks keep one descriptor of .lock per log dir for the life of the process.
        subprocess.run(["umount", "-l", str(target)], check=True)


@contextlib.contextmanager
def another_process_holding(take: str, hold_s: float = 120) -> Iterator[None]:
    """Another process that runs ``take`` (Python statements that take a lock and keep what holds it in a
    module-level name) and keeps the lock for the block, or until it ends by itself after ``hold_s`` seconds;
    killed after the block (its POSIX locks die with it)."""
    script = textwrap.dedent(take) + f"\nimport time\nprint('held', flush=True)\ntime.sleep({hold_s})\n"
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        if child.stdout is None or child.stdout.readline().strip() != b"held":
            raise RuntimeError(f"the other process took no lock:\n{script}")
        yield
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------------------------------------ hostile batches
V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # the published DefaultRecordBatch header, 61 bytes
_CRC_FROM = 21  # the CRC32C covers the attributes onwards


def kafka_python_batch(
    base_offset: int, records: Sequence[tuple[bytes | None, bytes | None]], *, codec: int = 0, ts: int = 0
) -> bytes:
    """A magic-2 batch encoded by kafka-python (an independent codec), at ``base_offset``."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 30,
    )  # fmt: skip
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts + i, key=key, value=value, headers=[])
    out = bytearray(builder.build())
    struct.pack_into(">q", out, 0, base_offset)  # outside the CRC
    return bytes(out)


def raw_batch(
    base_offset: int, last_offset_delta: int, records_count: int, area: bytes, *, codec: int = 0, ts: int = 0
) -> bytes:
    """A magic-2 batch with whatever header fields are given (a lie included) around ``area``, its records
    (compressed when ``codec`` says so), and a correct CRC32C: only the lie is wrong."""
    header = V2_HEADER.pack(
        base_offset, V2_HEADER.size - 12 + len(area), -1, 2, 0, codec, last_offset_delta, ts, ts, -1, -1, -1,
        records_count,
    )  # fmt: skip
    out = bytearray(header + area)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[_CRC_FROM:])))
    return bytes(out)


def zstd_zeros(size: int) -> bytes:
    """A zstd frame that decompresses to ``size`` zero bytes, made of RLE blocks of 128 KiB (4 bytes each,
    RFC 8878 section 3.1.1.2): gigabytes in kilobytes, built without compressing anything. The frame
    header declares no content size (as a streaming encoder's)."""
    block = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0x00)  # frame header descriptor: no content size, windowed, no checksum, no dict id
    out.append(0x58)  # window descriptor: exponent 11 -> 2^21 bytes (a window holds a whole block)
    left = size
    while left > 0:
        n = min(block, left)
        left -= n
        last = 1 if left == 0 else 0
        out += (last | (1 << 1) | (n << 3)).to_bytes(3, "little")  # RLE block of n bytes
        out.append(0)
    return bytes(out)


def gzip_zeros(size: int, member: int = 64 * MiB) -> bytes:
    """Gzip members (RFC 1952 allows several in a row) that decompress to ``size`` zero bytes."""
    import gzip

    whole, rest = divmod(size, member)
    chunk = gzip.compress(bytes(member), compresslevel=9, mtime=0) if whole else b""
    return chunk * whole + (gzip.compress(bytes(rest), compresslevel=9, mtime=0) if rest else b"")


def lz4_zeros(size: int) -> bytes:
    """An LZ4 frame (Kafka's framing: 64 KiB independent blocks) that decompresses to ``size`` zero bytes."""
    import lz4.block
    import xxhash

    flg, bd = 0x60, 0x40
    descriptor = bytes([flg, bd])
    out = bytearray(
        b"\x04\x22\x4d\x18" + descriptor + bytes([(xxhash.xxh32(descriptor).intdigest() >> 8) & 0xFF])
    )
    block = 64 * 1024
    whole, rest = divmod(size, block)
    full = lz4.block.compress(bytes(block), store_size=False)
    out += (struct.pack("<I", len(full)) + full) * whole
    if rest:
        tail = lz4.block.compress(bytes(rest), store_size=False)
        out += struct.pack("<I", len(tail)) + tail
    out += b"\x00\x00\x00\x00"
    return bytes(out)
