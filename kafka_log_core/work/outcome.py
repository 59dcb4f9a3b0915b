"""What a task gives back to the driver: its partition's result row, with a typed status
(:class:`~kafka_log_core.status.Status`, also importable from here), and what the driver does next for
that partition.

The row is for the user (the result table); the driver's next steps do not travel in it:

* a partition this run recovered after an unclean shutdown (:class:`RecoveredPartition`): the driver
  writes ``.kafka_cleanshutdown`` once every partition of the log dir is recovered
  (:func:`kafka_log_core.rules.recovery.finish_log_dirs`);
* a partition left for split cleaning (status :attr:`Status.SPLIT`): the driver cleans it with tasks of
  its own, starting from the task the outcome names.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.rules.recovery import RecoveredPartition
from kafka_log_core.status import Status

__all__ = [
    "Status",
    "TaskOutcome",
]  # Status lives in kafka_log_core.status; the tasks and jobs import it here too


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """One task's result: its row (a dict of the row type's fields) and what the driver does next."""

    task: PartitionTask
    row: dict
    recovered: RecoveredPartition | None = None

    @property
    def status(self) -> Status:
        return Status(self.row["status"])
