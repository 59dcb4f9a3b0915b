"""Never two writers: the broker's ``.lock`` and our own per-partition locks, in one file.

A running broker holds an exclusive POSIX record lock over the whole of ``<log.dir>/.lock``
(Java's ``FileChannel.tryLock`` is ``fcntl(F_SETLK)`` on Linux; ``flock`` would not see it). We take
*byte-range* locks on the same file instead of creating files of our own:

* byte 0, shared: held by every job process that writes in the log dir. A broker that holds the
  file makes it fail (refused with a clear message); a broker that starts while we hold it fails to
  get its own lock and refuses to start.
* one byte per partition directory at ``2 + (56-bit digest of its inode number)``, exclusive: two jobs
  (or a retried / speculative Spark task) can never write the same partition at once, even under two
  names (a symlink, a bind mount, the log dir given under another path). The inode, not the device: on a
  shared filesystem every host sees the same inode number, not the same device number. A job that finds
  the byte taken waits its turn (``--busy-timeout``), then plans from what the other left: two jobs
  started together end as if run one after the other.
* byte 1, exclusive, blocking: guards read-modify-write of the log-dir checkpoint files.

POSIX locks die with the process, so a crashed job leaves nothing to clean up. They are also
released when the process closes *any* descriptor of the file, so the descriptor is opened once per
log dir and kept for the life of the process. They do not exclude two threads of one process either:
this module keeps its own record of what the process holds, keyed as the kernel keys the locks, by
the ``.lock`` file's device and inode (so under every path to the log dir): a partition byte held by one
thread is busy for another; the checkpoint byte is also a thread lock.

A log dir this process may not write (a backup mounted read-only, a directory of another user) gets a
read-only descriptor: enough to see a broker's lock, which is all a dry run needs; a job that writes is
refused with one line saying why (:func:`not_writable`).
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

from kafka_log_core import storage
from kafka_log_core.errors import LogDirLockedError, PartitionBusyError, ReadOnlyLogDirError
from kafka_log_core.format.filenames import TopicPartition

LOCK_FILE = ".lock"  # in every log dir; a running broker holds a lock on it

#: How long a job that writes waits for a partition another job (or thread) is writing, by default; then it
#: skips the partition. The holder ends by itself (a killed holder's lock dies with it): ten minutes cover a
#: partition of several GiB being cleaned, and a job stuck behind a stopped one still ends.
BUSY_TIMEOUT_S = 600.0

_BROKER_BYTE = 0
_CHECKPOINT_BYTE = 1
# Descriptors by the log dir's path (whether it can be written depends on the mount it is reached by);
# what this process holds by the log dir's identity (POSIX locks belong to the process and the file).
_fds: dict[str, int] = {}
_read_only: set[str] = set()  # log dirs whose descriptor is read-only
_holders: dict[tuple[int, int], int] = {}  # in-process count of partition locks holding byte 0 per log dir
_held: set[tuple[tuple[int, int], int]] = set()  # (log dir, partition byte) held by a thread of this process
_checkpoint_guards: dict[tuple[int, int], threading.Lock] = {}
_resolved: dict[str, str] = {}  # a log dir's path as given -> resolved (the key of _fds)
_identities: dict[int, tuple[int, int]] = {}  # a descriptor of _fds -> its file's (device, inode)
_guard = threading.Lock()


def not_writable(log_dir: str | os.PathLike[str]) -> str | None:
    """Why a job that writes cannot work in ``log_dir`` (one line), or None when it can."""
    d = Path(log_dir)
    try:
        read_only_mount = bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError:
        return None  # not even readable: the listing says so
    if read_only_mount:
        return f"{d} is on a read-only file system: a job that writes cannot run on it (--dry-run and report only read)"
    if not os.access(d, os.W_OK | os.X_OK):
        return f"{d} is not writable by this user: a job that writes cannot run on it (--dry-run and report only read)"
    return None


def _fd(log_dir: str | os.PathLike[str], key: str | None = None) -> int:
    """This process's one descriptor of ``<log_dir>/.lock``: read-write (created if missing) when the log
    dir can be written, else read-only (enough for a shared lock: seeing a broker). ``key``: the log dir's
    resolved path, when the caller has it."""
    key = os.fspath(Path(log_dir).resolve()) if key is None else key
    with _guard:
        fd = _fds.get(key)
        if fd is None:
            path = os.path.join(key, LOCK_FILE)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                if err.errno not in (errno.EROFS, errno.EACCES, errno.EPERM) or not os.path.exists(path):
                    raise ReadOnlyLogDirError(not_writable(key) or f"{path}: {err.strerror}") from err
                fd = os.open(path, os.O_RDONLY)
                _read_only.add(key)
            _fds[key] = fd
        return fd


def _writable_fd(log_dir: Path) -> int:
    key = os.fspath(log_dir.resolve())  # once: a path resolved costs a stat per component
    fd = _fd(log_dir, key)
    return _checked_writable(fd, key, log_dir)


def _checked_writable(fd: int, key: str, log_dir: str | os.PathLike[str]) -> int:
    if key in _read_only:
        lock_path = os.path.join(log_dir, LOCK_FILE)
        raise ReadOnlyLogDirError(
            not_writable(key) or f"{lock_path} cannot be opened for writing by this user"
        )
    return fd


def _partition_lock_fd(log_dir: str) -> int:
    """:func:`_writable_fd` of a log dir named as before in this process: its resolved path is kept (a path
    resolved costs a stat per component, for every partition)."""
    key = _resolved.get(log_dir)
    if key is None:
        key = _resolved[log_dir] = os.fspath(Path(log_dir).resolve())
    return _checked_writable(_fd(log_dir, key), key, log_dir)


def _identity(fd: int) -> tuple[int, int]:
    """The ``.lock`` file open on ``fd`` as (device, inode): the same for every path to the log dir (a
    symlink, a bind mount, as POSIX locks see it), so this process knows what it holds under any of them.
    Kept with the descriptor, which stays open (and on the same file) for the life of the process."""
    identity = _identities.get(fd)
    if identity is None:
        st = os.fstat(fd)
        identity = _identities[fd] = (st.st_dev, st.st_ino)
    return identity


def _partition_byte(log_dir: str | os.PathLike[str], tp: TopicPartition) -> int:
    """The lock byte of ``tp``'s directory, keyed by what it is on disk (its inode); by its name when it
    cannot be looked at (the task then fails on the missing directory anyway)."""
    try:
        key = f"inode {storage.stat(os.path.join(log_dir, tp.dir_name)).st_ino}"
    except OSError:
        key = f"name {tp.dir_name}"
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=7).digest()
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
    try:
        fd = _fd(d)
    except (OSError, ReadOnlyLogDirError):
        return False  # a .lock this user cannot even read: nothing to learn from it
    with _guard:
        if _holders.get(_identity(fd), 0):
            return False  # we hold it ourselves
        if _try(fd, fcntl.LOCK_SH, _BROKER_BYTE):
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, _BROKER_BYTE)
            return False
    return True


@contextlib.contextmanager
def partition_lock(
    log_dir: str | os.PathLike[str], tp: TopicPartition, wait_s: float = 0.0
) -> Iterator[None]:
    """Hold the log dir against a broker and ``tp`` against other jobs, or raise LogDirLockedError
    (PartitionBusyError when it is another job, or another thread of this one, that writes ``tp`` and still
    does after ``wait_s`` seconds: a job waits its turn, as the broker's retention waits for its cleaner)."""
    d = os.fspath(log_dir)  # paths as strings: this runs once per partition of a job that writes
    fd = _partition_lock_fd(d)
    key = _identity(fd)
    lock_path = os.path.join(d, LOCK_FILE)
    byte = _partition_byte(d, tp)
    with _guard:
        if not _holders.get(key, 0) and not _try(fd, fcntl.LOCK_SH, _BROKER_BYTE):
            raise LogDirLockedError(
                f"{lock_path} is locked by another process: a Kafka broker is running on this log dir; "
                "stop it before running a job that writes"
            )
        _holders[key] = _holders.get(key, 0) + 1
    try:
        if not _take(fd, (key, byte), wait_s):
            waited = f"; waited {wait_s:g} s" if wait_s > 0 else ""
            raise PartitionBusyError(
                f"partition {tp} in {d} is being written by another kafka-log-jobs process (lock on {lock_path})"
                f"{waited}: skipped, a later run takes it up"
            )
        try:
            yield
        finally:
            with _guard:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, byte)
                _held.discard((key, byte))
    finally:
        with _guard:
            _holders[key] -= 1
            if not _holders[key]:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, _BROKER_BYTE)


_BUSY_POLL_S = 0.05  # how often a job waiting for a partition asks again


def _take(fd: int, held: tuple[tuple[int, int], int], wait_s: float) -> bool:
    """The partition byte ``held[1]`` locked by this thread, asking again until ``wait_s`` seconds have
    passed; False when another process, or another thread of this one, still holds it then."""
    deadline = time.monotonic() + wait_s
    while True:
        with _guard:
            if held not in _held:
                if _try(fd, fcntl.LOCK_EX, held[1]):
                    _held.add(held)
                    return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(_BUSY_POLL_S, left))


@contextlib.contextmanager
def checkpoint_lock(log_dir: str | os.PathLike[str], timeout_s: float = 60.0) -> Iterator[None]:
    """Serialise read-modify-write of the log dir's checkpoint files between job processes, and between
    the threads of this one. Every writer of a log-dir file updates it inside this lock."""
    d = Path(log_dir)
    fd = _writable_fd(d)
    key = _identity(fd)
    with _guard:
        in_process = _checkpoint_guards.setdefault(key, threading.Lock())
    timed_out = LogDirLockedError(
        f"timed out after {timeout_s:g} s waiting for the checkpoint lock on {d / LOCK_FILE}"
    )
    deadline = time.monotonic() + timeout_s
    if not in_process.acquire(timeout=timeout_s):
        raise timed_out
    try:
        while not _try(fd, fcntl.LOCK_EX, _CHECKPOINT_BYTE):
            if time.monotonic() > deadline:
                raise timed_out
            time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, _CHECKPOINT_BYTE)
    finally:
        in_process.release()
