"""Never two writers: the broker's ``.lock`` and our own per-partition locks, in one file.

A running broker holds an exclusive POSIX record lock over the whole of ``<log.dir>/.lock``
(Java's ``FileChannel.tryLock`` is ``fcntl(F_SETLK)`` on Linux; ``flock`` would not see it). We take
*byte-range* locks on the same file instead of creating files of our own:

* byte 0, shared: held by every job process that writes in the log dir. A broker that holds the
  file makes it fail (refused with a clear message); a broker that starts while we hold it fails to
  get its own lock and refuses to start.
* one byte per partition at ``1 + (64-bit digest of "<topic>-<partition>")``, exclusive: two jobs (or
  a retried / speculative Spark task) can never write the same partition at once.
* byte 1, exclusive, blocking: guards read-modify-write of the log-dir checkpoint files.

POSIX locks die with the process, so a crashed job leaves nothing to clean up. They are also
released when the process closes *any* descriptor of the file, so the descriptor is opened once per
log dir and kept for the life of the process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import LogDirLockedError
from .filenames import TopicPartition
from .log_dir import LOCK_FILE

_BROKER_BYTE = 0
_CHECKPOINT_BYTE = 1
_fds: dict[str, int] = {}
_holders: dict[str, int] = {}  # in-process count of partition locks holding byte 0 per log dir
_guard = threading.Lock()


def _fd(log_dir: Path) -> int:
    key = os.fspath(log_dir.resolve())
    with _guard:
        fd = _fds.get(key)
        if fd is None:
            fd = os.open(os.path.join(key, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            _fds[key] = fd
        return fd


def _partition_byte(tp: TopicPartition) -> int:
    digest = hashlib.blake2b(tp.dir_name.encode("utf-8"), digest_size=7).digest()
    return 2 + int.from_bytes(digest, "big")


def _try(fd: int, kind: int, start: int) -> bool:
    try:
        fcntl.lockf(fd, kind | fcntl.LOCK_NB, 1, start)
        return True
    except OSError as err:
        if err.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise


def broker_holds(log_dir: str | os.PathLike[str]) -> bool:
    """True when another process (a broker) holds a lock covering byte 0 of ``.lock``."""
    d = Path(log_dir)
    if not (d / LOCK_FILE).exists():
        return False
    fd = _fd(d)
    with _guard:
        if _holders.get(os.fspath(d.resolve()), 0):
            return False  # we hold it ourselves
        if _try(fd, fcntl.LOCK_SH, _BROKER_BYTE):
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, _BROKER_BYTE)
            return False
    return True


@contextlib.contextmanager
def partition_lock(log_dir: str | os.PathLike[str], tp: TopicPartition) -> Iterator[None]:
    """Hold the log dir against a broker and ``tp`` against other jobs, or raise LogDirLockedError."""
    d = Path(log_dir)
    fd = _fd(d)
    key = os.fspath(d.resolve())
    lock_path = d / LOCK_FILE
    with _guard:
        if not _holders.get(key, 0) and not _try(fd, fcntl.LOCK_SH, _BROKER_BYTE):
            raise LogDirLockedError(
                f"{lock_path} is locked by another process: a Kafka broker is running on this log dir; "
                "stop it before running a job that writes"
            )
        _holders[key] = _holders.get(key, 0) + 1
    byte = _partition_byte(tp)
    try:
        if not _try(fd, fcntl.LOCK_EX, byte):
            raise LogDirLockedError(
                f"partition {tp} in {d} is being written by another kafka-log-jobs process (lock on {lock_path})"
            )
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, byte)
    finally:
        with _guard:
            _holders[key] -= 1
            if not _holders[key]:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, _BROKER_BYTE)


@contextlib.contextmanager
def checkpoint_lock(log_dir: str | os.PathLike[str], timeout_s: float = 60.0) -> Iterator[None]:
    """Serialise read-modify-write of the log dir's checkpoint files between job processes."""
    fd = _fd(Path(log_dir))
    deadline = time.monotonic() + timeout_s
    while not _try(fd, fcntl.LOCK_EX, _CHECKPOINT_BYTE):
        if time.monotonic() > deadline:
            raise LogDirLockedError(
                f"timed out waiting for the checkpoint lock on {Path(log_dir) / LOCK_FILE}"
            )
        time.sleep(0.01)
    try:
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _CHECKPOINT_BYTE)
