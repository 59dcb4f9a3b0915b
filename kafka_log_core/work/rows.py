"""The jobs' result rows: one frozen dataclass per job, one row per partition directory.

A row's fields ARE the job's result table: their order is the column order of the JSON, the printed table,
CSV and Parquet; their types give the Spark and Arrow schema (``jobs.output.row_schema``): ``int`` is a
Spark long, ``Int32`` an integer, ``float`` a double, ``bool`` a boolean, ``str`` a string; ``X | None``
is a nullable column, a plain ``X`` a column that is never null. ``status`` holds a
:class:`~kafka_log_core.work.outcome.Status`.

A task fills its row through a :class:`RowDraft` (every change checked against the row's fields), and the
row crosses the Spark boundary as a plain dict (:func:`dataclasses.asdict`) inside the task's
:class:`~kafka_log_core.work.outcome.TaskOutcome`: the row says what happened, nothing else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from kafka_log_core.rules.recovery import RecoveredPartition
from kafka_log_core.work.outcome import Status

#: Marks an ``int`` field stored as a 32-bit integer (Java int), e.g. a partition number.
INT32 = "int32"
Int32 = Annotated[int, INT32]


@dataclass(frozen=True, slots=True)
class CompactRow:
    """One partition's result of the compact job."""

    log_dir: str
    topic: str
    partition: Int32
    status: str = Status.SKIPPED
    reason: str | None = ""
    settings: str | None = None
    dirty_ratio: float | None = None
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    bytes_before: int | None = None
    bytes_after: int | None = None
    records_before: int | None = None
    records_after: int | None = None
    tombstones_removed: int | None = None
    map_utilization: float | None = None
    # the cleaner thread's retention after cleaning (deleteOldSegments; null when it was not applied)
    segments_deleted: int | None = None
    bytes_deleted: int | None = None
    log_start_offset_after: int | None = None
    # what the broker's log loader recovered first (null when it recovered nothing)
    recovered_segments: int | None = None
    recovered_bytes: int | None = None
    truncated_bytes: int | None = None
    truncated_records: int | None = None
    duration_ms: int | None = 0


@dataclass(frozen=True, slots=True)
class RetainRow:
    """One partition's result of the retain job."""

    log_dir: str
    topic: str
    partition: Int32
    status: str = Status.SKIPPED
    reason: str | None = ""
    settings: str | None = None
    segments_deleted: int | None = 0
    bytes_deleted: int | None = 0
    log_start_offset_before: int | None = None
    log_start_offset_after: int | None = None
    recovered_segments: int | None = None
    recovered_bytes: int | None = None
    truncated_bytes: int | None = None
    truncated_records: int | None = None
    duration_ms: int | None = 0


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One partition's row of the dry-run report (``work.report``)."""

    log_dir: str
    topic: str
    partition: Int32
    cleanup_policy: str | None = ""
    cleanup_policy_source: str | None = None
    segments: int | None = 0
    total_bytes: int | None = 0
    clean_bytes: int | None = None
    cleanable_bytes: int | None = None
    dirty_ratio: float | None = None
    min_cleanable_dirty_ratio: float | None = None
    min_cleanable_dirty_ratio_source: str | None = None
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    would_compact: bool | None = False
    compact_reason: str | None = ""
    duplicate_share: float | None = None
    retention_segments: int | None = 0
    retention_bytes: int | None = 0
    retention_reason: str | None = ""
    retention_log_start_offset: int | None = None
    retention_ms: int | None = None
    retention_ms_source: str | None = None
    retention_bytes_setting: int | None = None
    retention_bytes_source: str | None = None
    oldest_segment_age_ms: int | None = None
    reclaimable_bytes: int | None = 0
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    recovered_segments: int | None = None
    recovered_bytes: int | None = None
    truncated_bytes: int | None = None
    truncated_records: int | None = None
    status: str = Status.OK
    reason: str | None = ""
    duration_ms: int | None = 0


R = TypeVar("R", CompactRow, RetainRow, ReportRow)


def columns(row_type: type) -> list[str]:
    """The result table's columns of ``row_type``, in order."""
    return [f.name for f in dataclasses.fields(row_type)]


class RowDraft(Generic[R]):
    """A result row while a task fills it: :meth:`set` changes fields (an unknown field name is an error),
    :attr:`row` is the row so far -- what is reported even when the task fails midway. The values are kept
    in a dict until the row is needed (a task sets a dozen fields; a frozen row rebuilt for each costs more
    than an idle partition's whole work). :attr:`recovered` is set when the task recovered its partition
    after an unclean shutdown."""

    __slots__ = ("_type", "_values", "recovered")

    def __init__(self, row: R) -> None:
        self._type: type[R] = type(row)
        self._values: dict[str, Any] = {name: getattr(row, name) for name in _names(self._type)}
        self.recovered: RecoveredPartition | None = None

    @classmethod
    def of(cls, row_type: type[R], **fields: Any) -> RowDraft[R]:
        """A draft of a ``row_type`` row: ``fields`` (every field without a default), the defaults for the
        rest; as ``RowDraft(row_type(**fields))`` without making a frozen row."""
        defaults = _defaults(row_type)
        wrong = (fields.keys() - defaults.keys()) | {
            n for n, v in defaults.items() if v is _REQUIRED and n not in fields
        }
        if wrong:
            raise TypeError(
                f"{row_type.__name__}: give exactly its fields without a default, not {sorted(wrong)}"
            )
        draft = cls.__new__(cls)
        draft._type = row_type
        draft._values = {**defaults, **fields}
        draft.recovered = None
        return draft

    def value(self, name: str) -> Any:
        """One field of the row so far."""
        return self._values[name]

    def set(self, **changes: Any) -> None:
        unknown = changes.keys() - self._values.keys()
        if unknown:
            raise TypeError(f"{self._type.__name__} has no field {', '.join(sorted(unknown))}")
        self._values.update(changes)

    @property
    def row(self) -> R:
        return self._type(**self._values)

    def as_dict(self) -> dict[str, Any]:
        """The row as it crosses to the driver: :func:`dataclasses.asdict` of :attr:`row` (plain values)."""
        return dict(self._values)


_NAMES: dict[type, tuple[str, ...]] = {}
_DEFAULTS: dict[type, dict[str, Any]] = {}
_REQUIRED = object()  # in _DEFAULTS: a field without a default


def _defaults(row_type: type) -> dict[str, Any]:
    """Every field of ``row_type`` in order, with its default (:data:`_REQUIRED` where it has none)."""
    defaults = _DEFAULTS.get(row_type)
    if defaults is None:
        defaults = _DEFAULTS[row_type] = {
            f.name: _REQUIRED if f.default is dataclasses.MISSING else f.default
            for f in dataclasses.fields(row_type)
        }
    return defaults


def _names(row_type: type) -> tuple[str, ...]:
    names = _NAMES.get(row_type)
    if names is None:
        names = _NAMES[row_type] = tuple(f.name for f in dataclasses.fields(row_type))
    return names
