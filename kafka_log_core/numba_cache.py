"""numba's on-disk cache of the compiled kernels (``*.nbi`` / ``*.nbc``), dropped when a source changes.

numba checks a cached function against its own file only. A kernel whose callee, or a constant it was
compiled with, changed in another file would load the code it was compiled with before. So the sources
the compiled code is built from are fingerprinted together, and a fingerprint that changed drops every
cached kernel once; numba then compiles them again. An installed wheel never changes its files; an
editable checkout does (a pull, a branch switched, an edit).
"""

from __future__ import annotations

import hashlib
import os

from numba.core import config

PACKAGE = os.path.dirname(os.path.abspath(__file__))
# What compiled code is built from (relative to the package): the kernels, the layouts and constants they
# read, and the one kernel outside them.
SOURCES = ("kernels", "format", "constants.py", "errors.py", os.path.join("rules", "split_cleaning.py"))
CACHED = ("kernels", "rules")  # the directories whose modules hold cached kernels
STAMP = "numba-sources.sha256"  # in kernels/__pycache__: the fingerprint the cache was built from


def fingerprint(package: str = PACKAGE) -> str:
    """One SHA-256 over the names and bytes of the compiled code's sources."""
    files = []
    for source in SOURCES:
        path = os.path.join(package, source)
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            files += [os.path.join(source, n) for n in os.listdir(path) if n.endswith(".py")]
        else:
            files.append(source)
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        with open(os.path.join(package, name), "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest()


def cache_dirs(package: str = PACKAGE, sources: tuple[str, ...] = ()) -> list[str]:
    """Where numba keeps the cache of each directory in CACHED (or of each directory in ``sources``, when
    given): ``__pycache__`` beside the sources, or the same path under ``NUMBA_CACHE_DIR`` when that is set."""
    dirs = []
    user_dir = getattr(config, "CACHE_DIR", "")  # set from NUMBA_CACHE_DIR at run time
    for source_dir in sources or tuple(os.path.join(package, name) for name in CACHED):
        dirs.append(os.path.join(source_dir, "__pycache__"))
        if user_dir:
            tail = os.path.splitdrive(source_dir)[1]
            dirs.append(os.path.join(user_dir, tail.lstrip(os.sep)))
    return dirs


def drop_stale(package: str = PACKAGE, outside: str | None = None) -> bool:
    """Remove the cached kernels when the sources' fingerprint is not the one they were built from, and
    record the new one; True when they were dropped. A package that cannot be read or written (an
    installed one, whose files do not change) is left as it is.

    ``outside``: a directory of modules outside the package whose cached functions call the package's
    kernels (``bench``): its cache, with its own stamp, is dropped when the package's sources changed."""
    try:
        current = fingerprint(package)
        home = outside or os.path.join(package, "kernels")
        stamp = os.path.join(home, "__pycache__", STAMP)
        try:
            with open(stamp, encoding="ascii") as f:
                if f.read() == current:
                    return False
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        for directory in cache_dirs(package, (outside,) if outside else ()):
            try:
                names = os.listdir(directory)
            except FileNotFoundError:
                continue
            for name in names:
                if name.endswith((".nbi", ".nbc")):
                    try:
                        os.unlink(os.path.join(directory, name))
                    except FileNotFoundError:
                        pass
        os.makedirs(os.path.dirname(stamp), exist_ok=True)
        temporary = f"{stamp}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="ascii") as f:
            f.write(current)
        os.replace(temporary, stamp)
        return True
    except OSError:
        return False
