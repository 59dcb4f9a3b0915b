"""A result row's status, typed: what every job's table says a partition came to.

Importable by every module of the core (layer 0): the listing (``log``) says "failed" or "skipped" for
what it cannot or will not hand to a task, the tasks (``work``) say the rest, the jobs print them.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A result row's ``status`` column (a ``str``: it prints and serializes as its value)."""

    CLEANED = "cleaned"
    WOULD_CLEAN = "would clean"
    DELETED = "deleted"
    WOULD_DELETE = "would delete"
    OK = "ok"  # a report row
    EXPORTED = "exported"
    SKIPPED = "skipped"  # nothing to do, or another job writes the partition now
    FAILED = "failed"
    SPLIT = "split"  # an executor left the partition for the driver to clean in split tasks
