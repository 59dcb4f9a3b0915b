"""Durable file writes: fsync the data, rename atomically, fsync the directory; and reads of what must be
a regular file.

The broker writes every checkpoint and metadata file as ``<name>.tmp`` + fsync + atomic rename
(``Utils.atomicMoveWithFallback``) and fsyncs the parent directory so that the rename itself survives a
power cut. Outputs that take part in the cleaner's ``.cleaned`` -> ``.swap`` protocol get their
atomicity from that protocol instead and are written in place with :func:`write_bytes_fsync`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from kafka_log_core.errors import FileOperationError, NotRegularFileError

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


class WriteFile:
    """A file created (or truncated) for writing whose every failure names it and the operation
    (:func:`naming`), for outputs written in pieces (a ``.cleaned`` segment)."""

    def __init__(self, path: StrPath) -> None:
        self.path = os.fspath(path)
        with naming(self.path, "creating"):
            self._f = open(self.path, "wb")  # closed by close()

    @property
    def closed(self) -> bool:
        return self._f.closed

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with naming(self.path, "writing"):
            return self._f.write(data)

    def writelines(self, pieces: Iterable[bytes | bytearray | memoryview]) -> None:
        with naming(self.path, "writing"):
            self._f.writelines(pieces)

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


# ---------------------------------------------------------------------------------------------- reading
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symlink",
}


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, in words ("a FIFO", "a directory", ...)."""
    return _KINDS.get(stat.S_IFMT(mode), f"a file of type {stat.S_IFMT(mode):o}")


def not_regular(path: StrPath, mode: int) -> NotRegularFileError:
    return NotRegularFileError(f"not a regular file ({file_kind(mode)}): not read", path)


def check_regular(path: StrPath, st: os.stat_result) -> None:
    """Refuse ``path`` unless ``st`` (its stat, symlinks followed) is a regular file's."""
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(path, st.st_mode)


def open_regular(path: StrPath) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (symlinks followed), else
    NotRegularFileError naming what it is.

    Opened non-blocking, so a FIFO cannot block the open itself, and checked with ``fstat`` of the
    descriptor, so a file swapped in between a check and the open cannot fool it; a socket cannot be
    opened at all (ENXIO) and is named too. Other errors (a missing file, no permission) are the
    ``OSError`` of the open, with the path."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ENXIO:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise err from None
            raise not_regular(path, mode) from err
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_file(path: StrPath) -> BinaryIO:
    """:func:`open_regular` as a binary file object (unbuffered reads go straight to the descriptor)."""
    return os.fdopen(open_regular(path), "rb")


def read_regular(path: StrPath) -> bytes:
    """The whole content of the regular file ``path`` (see :func:`open_regular`)."""
    with open_regular_file(path) as f:
        return f.read()
