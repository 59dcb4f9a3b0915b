"""Durable file writes: fsync the data, rename atomically, fsync the directory. (Reads go through
:mod:`kafka_log_core.storage`.)

The broker writes every checkpoint and metadata file as ``<name>.tmp`` + fsync + atomic rename
(``Utils.atomicMoveWithFallback``) and fsyncs the parent directory so that the rename itself survives a
power cut. Outputs that take part in the cleaner's ``.cleaned`` -> ``.swap`` protocol get their
atomicity from that protocol instead and are written in place with :func:`write_bytes_fsync`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable, Iterable, Iterator

from kafka_log_core.errors import FileOperationError

TMP_SUFFIX = ".tmp"

StrPath = str | os.PathLike[str]


@contextlib.contextmanager
def naming(path: StrPath, operation: str) -> Iterator[None]:
    """An OSError raised inside becomes a :class:`FileOperationError` naming ``path`` and ``operation``: a
    full disk says which file it was writing (``os.write`` and ``os.fsync`` name none)."""
    try:
        yield
    except FileOperationError:
        raise
    except OSError as err:
        raise FileOperationError(operation, path, err) from err


def fsync_dir(path: StrPath) -> None:
    """Flush a directory's entries (creations, renames, deletions) to disk."""
    with naming(path, "syncing the directory"):
        fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_fsync(path: StrPath, data: bytes | bytearray | memoryview) -> None:
    """Create or truncate ``path``, write all of ``data`` and fsync it (no rename, no directory fsync)."""
    with naming(path, "writing"):
        fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` (the os module has no binding), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    call.restype = ctypes.c_int
    return call


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2  # start writing the range's dirty pages out; do not wait


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing ``length`` bytes from ``offset`` to disk now, without waiting for
    them: a file written in pieces is then on its way to disk while the next piece is computed, and its
    fsync waits only for the last ones. Best effort (nothing where Linux's ``sync_file_range`` is
    missing; an error is the fsync's to report): the fsync still makes the file durable."""
    if _SYNC_FILE_RANGE is not None and length > 0:
        _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


class WriteFile:
    """A file created (or truncated) for writing whose every failure names it and the operation
    (:func:`naming`), for outputs written in pieces (a ``.cleaned`` segment)."""

    def __init__(self, path: StrPath, mode: int | None = None) -> None:
        """``mode``: the new file's permission bits (before the umask), else ``open``'s."""
        self.path = os.fspath(path)
        opener = None if mode is None else (lambda name, flags: os.open(name, flags, mode))
        with naming(self.path, "creating"):
            self._f = open(self.path, "wb", opener=opener)  # closed by close()
        self._sent = 0  # bytes whose writeback was started

    @property
    def closed(self) -> bool:
        return self._f.closed

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with naming(self.path, "writing"):
            return self._f.write(data)

    def writelines(self, pieces: Iterable[bytes | bytearray | memoryview]) -> None:
        with naming(self.path, "writing"):
            self._f.writelines(pieces)

    def start_writeback(self) -> None:
        """Send what was written since the last call on its way to disk (:func:`start_writeback`)."""
        with naming(self.path, "writing"):
            self._f.flush()
            end = self._f.tell()
        start_writeback(self._f.fileno(), self._sent, end - self._sent)
        self._sent = end

    def fsync(self) -> None:
        """Flush Python's buffer and the kernel's to disk."""
        with naming(self.path, "writing"):
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        with naming(self.path, "closing"):
            self._f.close()


def atomic_write_bytes(path: StrPath, data: bytes | bytearray | memoryview) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content.

    Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the directory. A failed write
    removes the temporary file; it never leaves a half-written ``path`` behind.
    """
    target = os.fspath(path)
    tmp = target + TMP_SUFFIX
    try:
        write_bytes_fsync(tmp, data)
        with naming(target, f"renaming {tmp} over it"):
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(target)))


def drop_cached_pages(path: StrPath) -> None:
    """Ask the kernel to drop a file's clean pages from its cache, for a file about to be deleted:
    freeing them costs about as much as reading them, and done here (in a task that runs beside others)
    it is not done later by the deletion (on the driver, one file after the other). Best effort."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        os.close(fd)
