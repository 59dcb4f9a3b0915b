"""What a task gives back to the driver: its partition's result row, with a typed status, and what the
driver does next for that partition.

The row is for the user (the result table); the driver's next steps do not travel in it:

* a partition this run recovered after an unclean shutdown (:class:`RecoveredPartition`): the driver
  writes ``.kafka_cleanshutdown`` once every partition of the log dir is recovered
  (:func:`kafka_log_core.rules.recovery.finish_log_dirs`);
* a partition left for split cleaning (status :attr:`Status.SPLIT`): the driver cleans it with tasks of
  its own, starting from the task the outcome names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.rules.recovery import RecoveredPartition


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


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """One task's result: its row (a dict of the row type's fields) and what the driver does next."""

    task: PartitionTask
    row: dict
    recovered: RecoveredPartition | None = None

    @property
    def status(self) -> Status:
        return Status(self.row["status"])
