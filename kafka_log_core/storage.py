"""The seam between the tool and the files it reads (pyiceberg's ``FileIO``): every read of a log dir --
segment files, indexes, checkpoints, snapshots, directory listings and file metadata -- goes through these
functions, from ``format/``, ``log/``, ``spark_udfs/`` and ``jobs/``. Writes go through :mod:`fsutil`.

Local files today. A second backend (an object store, HDFS) is a second module with these functions; the
format readers, the partition log and the data source do not change.

What is read as a log file must be a regular file: a FIFO, device, socket or directory with a log file's
name is refused with one line (:class:`NotRegularFileError`), never opened blocking.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from kafka_log_core.errors import NotRegularFileError

StrPath = str | os.PathLike[str]


# ---------------------------------------------------------------------------------------------- metadata
def exists(path: StrPath) -> bool:
    return os.path.exists(path)


def is_dir(path: StrPath) -> bool:
    return os.path.isdir(path)


def is_file(path: StrPath) -> bool:
    return os.path.isfile(path)


def stat(path: StrPath) -> os.stat_result:
    """Size, modification time and identity of ``path`` (symlinks followed)."""
    return os.stat(path)


def readlink(path: StrPath) -> str:
    """Where a symlink points."""
    return os.readlink(path)


def listdir(path: StrPath) -> list[str]:
    """The names in a directory."""
    return os.listdir(path)


@contextmanager
def scandir(path: StrPath) -> Iterator[Iterator[os.DirEntry]]:
    """The entries of a directory, with what the listing already knows of each (type, stat)."""
    with os.scandir(path) as entries:
        yield entries


# ---------------------------------------------------------------------------------------------- contents
_KINDS = {
    stat_module.S_IFIFO: "a FIFO",
    stat_module.S_IFDIR: "a directory",
    stat_module.S_IFSOCK: "a socket",
    stat_module.S_IFCHR: "a character device",
    stat_module.S_IFBLK: "a block device",
    stat_module.S_IFLNK: "a symlink",
}


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, in words ("a FIFO", "a directory", ...)."""
    return _KINDS.get(stat_module.S_IFMT(mode), f"a file of type {stat_module.S_IFMT(mode):o}")


def not_regular(path: StrPath, mode: int) -> NotRegularFileError:
    return NotRegularFileError(f"not a regular file ({file_kind(mode)}): not read", path)


def check_regular(path: StrPath, st: os.stat_result) -> None:
    """Refuse ``path`` unless ``st`` (its stat, symlinks followed) is a regular file's."""
    if not stat_module.S_ISREG(st.st_mode):
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
        if not stat_module.S_ISREG(mode):
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


def map_regular(path: StrPath, check: Callable[[os.stat_result], None] | None = None) -> bytes | mmap.mmap:
    """The whole regular file ``path``, memory-mapped read-only (``b""`` when it is empty, which cannot be
    mapped). ``check`` is given the stat of the very file opened, before it is mapped (to refuse a file
    replaced or shortened since it was planned)."""
    with open_regular_file(path) as f:
        st = os.fstat(f.fileno())
        if check is not None:
            check(st)
        if st.st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
