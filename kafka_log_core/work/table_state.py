"""What an exported table covers of each partition, kept in the table's own commit metadata, and the
plan of the next incremental export (plan, then apply: the job carries the plan out as one commit).

The state (JSON, under :data:`STATE_KEY` in an Iceberg snapshot's summary or a Delta commit's
``userMetadata``): the export's settings (view, isolation level, headers, the schema ids of the
table's columns) and, per partition, a :class:`PartitionMark`: the end offset the export read to, the
log start offset then, the topic id, and the base offset and CRC of the batch holding the last offset
read (what tells a log rewritten since from one only appended to).

The rules of an incremental export of the latest view, per partition (``E``: the end it covered):

* **new** (no mark): read from the log start.
* **since**: read ``[max(E, log start), end)``; the latest record of each key there replaces the
  table's row of that key, a tombstone deletes it, an aborted transaction changes nothing (the read
  leaves it out). Retention since (the log start moved up, ``log start > mark's``): rows below the new
  log start are deleted -- a full export would not read them; what retention removed above ``E``
  was never in the table and is not in a full export either.
* **whole** (its rows replaced by the partition's whole latest view) when the offsets ``E`` covered
  cannot be trusted any more:

  - the cleaner has cleaned past ``E`` (its checkpoint, ``cleaner-offset-checkpoint``, is above ``E``):
    a tombstone above ``E`` may have been removed (after ``delete.retention.ms``) and the incremental
    read would not see the delete. Cleaning below ``E`` changes nothing a full export sees: the cleaner
    keeps each key's last record, and a tombstone it removes below ``E`` was read when it was above;
  - the log ends below ``E`` (truncated), or the batch holding ``E - 1`` is not the one read then (the
    log was truncated and written again, or replaced), or the topic id changed (deleted and created
    again): the offsets name other records now.

* **gone** (marked, no longer listed): its rows are deleted.
* A change of settings or of a schema the columns come from makes the whole table a full export.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from kafka_log_core.errors import KafkaLogError

STATE_KEY = "kafka-log-jobs.export"
STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class PartitionMark:
    """What an export covered of one partition."""

    end: int
    log_start: int
    topic_id: str | None = None
    #: (base offset, CRC) of the batch holding offset end - 1; None when the read covered nothing.
    last_batch: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class PartitionNow:
    """What the log of one partition holds now."""

    log_start: int
    #: The end offset a read now covers (the high watermark, or the last stable offset).
    end: int
    log_end: int
    topic_id: str | None
    cleaner_offset: int | None
    #: (base offset, CRC) of the batch holding the mark's end - 1, if the log still has it.
    batch_at_mark: tuple[int, int] | None

    def mark(self, last_batch: tuple[int, int] | None) -> PartitionMark:
        return PartitionMark(self.end, self.log_start, self.topic_id, last_batch)


@dataclass(frozen=True)
class TableState:
    settings: dict
    partitions: dict[str, PartitionMark] = field(default_factory=dict)

    def to_json(self) -> str:
        marks = {name: asdict(mark) for name, mark in sorted(self.partitions.items())}
        return json.dumps(
            {"version": STATE_VERSION, "settings": self.settings, "partitions": marks}, sort_keys=True
        )

    @classmethod
    def from_json(cls, text: str, where: str) -> TableState:
        try:
            found = json.loads(text)
            if found.get("version") != STATE_VERSION:
                raise ValueError(f"state version {found.get('version')!r}, not {STATE_VERSION}")
            marks = {}
            for name, mark in found["partitions"].items():
                last = mark.get("last_batch")
                marks[name] = PartitionMark(
                    int(mark["end"]), int(mark["log_start"]), mark.get("topic_id"),
                    None if last is None else (int(last[0]), int(last[1])),
                )  # fmt: skip
            return cls(dict(found["settings"]), marks)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise KafkaLogError(f"{where}: the export state {STATE_KEY} cannot be read: {err}") from err


class Step(StrEnum):
    NEW = "new"
    SINCE = "since"
    WHOLE = "whole"
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    name: str
    step: Step
    #: Where the read starts (None: nothing to read, a gone partition).
    read_from: int | None
    #: Table rows of this partition below this offset are deleted (None: none; 1 << 63: all of them).
    delete_below: int | None
    reason: str = ""


ALL_ROWS = (1 << 63) - 1


@dataclass(frozen=True)
class IncrementPlan:
    #: None: the whole table is exported again (``why`` says why).
    partitions: dict[str, PartitionPlan] | None
    why: str = ""

    @property
    def full(self) -> bool:
        return self.partitions is None


def plan_increment(state: TableState | None, settings: dict, now: dict[str, PartitionNow]) -> IncrementPlan:
    """The next export's plan from the table's state and the logs as they are now."""
    if state is None:
        return IncrementPlan(None, "the table has no export state yet")
    if state.settings != settings:
        changed = sorted(
            k for k in set(state.settings) | set(settings) if state.settings.get(k) != settings.get(k)
        )
        return IncrementPlan(None, f"the export's settings changed since ({', '.join(changed)})")
    plans = {}
    for name, partition in now.items():
        mark = state.partitions.get(name)
        plans[name] = _plan_partition(name, mark, partition)
    for name in state.partitions.keys() - now.keys():
        plans[name] = PartitionPlan(name, Step.GONE, None, ALL_ROWS, "no longer in the log dirs")
    return IncrementPlan(plans)


def _plan_partition(name: str, mark: PartitionMark | None, now: PartitionNow) -> PartitionPlan:
    if mark is None:
        return PartitionPlan(name, Step.NEW, now.log_start, None, "not in the table yet")
    whole = _why_whole(mark, now)
    if whole:
        return PartitionPlan(name, Step.WHOLE, now.log_start, ALL_ROWS, whole)
    delete_below = now.log_start if now.log_start > mark.log_start else None
    return PartitionPlan(name, Step.SINCE, max(mark.end, now.log_start), delete_below)


def _why_whole(mark: PartitionMark, now: PartitionNow) -> str:
    if mark.topic_id is not None and now.topic_id is not None and mark.topic_id != now.topic_id:
        return f"topic id {now.topic_id}, not {mark.topic_id}: the topic was deleted and created again"
    if now.log_end < mark.end:
        return f"the log ends at {now.log_end}, below the offset {mark.end} the table covered: truncated"
    if now.cleaner_offset is not None and now.cleaner_offset > mark.end:
        return (
            f"cleaned up to {now.cleaner_offset} since, past the offset {mark.end} the table covered "
            "(a tombstone there may be gone)"
        )
    cleaned_to_mark = now.cleaner_offset is not None and now.cleaner_offset >= mark.end
    if mark.last_batch is not None and now.log_start < mark.end and not cleaned_to_mark:
        if now.batch_at_mark != mark.last_batch:
            return (
                f"the batch holding offset {mark.end - 1} is not the one exported (base offset, CRC "
                f"{now.batch_at_mark} now, {mark.last_batch} then): the log was written again"
            )
    return ""
