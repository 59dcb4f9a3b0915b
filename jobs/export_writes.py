"""One table of an export written in full or incrementally (the plan: kafka_log_core.work.table_state).

A *group* is what goes into one table: every exported partition (bytes: one table partitioned by topic),
or one topic (typed columns from its schemas: a table per topic, and its side table of the records that
cannot be decoded).

* **Full**: the group's partitions read to the ends measured now (``endingOffsets`` given explicitly, so
  that the state says exactly what was read), the table replaced in one commit carrying the state.
* **Incremental** (``--incremental``, the latest view, Delta or Iceberg): each partition read from where
  its plan starts (the latest record of each key there, tombstones included, aborted transactions left
  out), merged by key in one commit with the new state; rows the plan drops are deleted in that same
  commit. The side table is merged the same way, its own commit and state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from jobs.tables import Table
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.work.table_state import (
    ALL_ROWS,
    IncrementPlan,
    PartitionMark,
    PartitionNow,
    PartitionPlan,
    TableState,
    plan_increment,
)
from spark_udfs.options import ReadOptions

#: Columns of the side table, from the decoded source's.
SIDE_COLUMNS = {
    "topic": "topic", "partition": "partition", "offset": "offset", "timestamp": "timestamp",
    "timestampType": "timestampType", "key": "keyBytes", "value": "valueBytes", "reason": "decodeError",
}  # fmt: skip


@dataclass(frozen=True)
class Group:
    """One table (and, with schemas, its side table) and the partitions it holds."""

    table: Table
    side: Table | None
    partitions: tuple[TopicPartition, ...]
    #: The kafka-log options of the group's read (schemas, isolation, view...); offsets are added here.
    options: dict[str, str]
    #: What must not change for an incremental export (view, isolation, headers, schema ids).
    settings: dict
    key_decoded: bool = False
    value_decoded: bool = False
    partition_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What one group's export did, per partition name: where it read from and why."""

    read_from: dict[str, int]
    notes: dict[str, str]
    full_reason: str | None


def _offsets(per_partition: dict[TopicPartition, int]) -> str:
    by_topic: dict[str, dict[str, int]] = {}
    for tp, offset in per_partition.items():
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return json.dumps(by_topic, sort_keys=True)


def _assign(partitions: Sequence[TopicPartition]) -> str:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return json.dumps(topics, sort_keys=True)


def _read(spark, options: dict[str, str]):
    reader = spark.read.format("kafka-log")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _main_columns(group: Group, df) -> list[str]:
    dropped = {"valueBytes", "decodeError"}
    if not group.key_decoded:
        dropped |= {"keyBytes", "keySchemaId"}
    if not group.value_decoded:
        dropped.add("valueSchemaId")
    return [c for c in df.columns if c not in dropped]


def _identity(group: Group) -> str:
    """The column a key's rows are matched on: the key's bytes as on the log."""
    return "keyBytes" if group.key_decoded else "key"


def _tombstone(group: Group, alias: str) -> str:
    if group.side is None:
        return f"{alias}.value IS NULL"
    if not group.value_decoded:
        return f"({alias}.value IS NULL AND {alias}.decodeError IS NULL)"
    return f"({alias}.value IS NULL AND {alias}.valueSchemaId IS NULL AND {alias}.decodeError IS NULL)"


def _side_frame(df):
    from pyspark.sql import functions as F

    return df.where("decodeError IS NOT NULL").select(
        *[F.col(src).alias(name) for name, src in SIDE_COLUMNS.items()]
    )


def full_options(group: Group, now: dict[TopicPartition, PartitionNow]) -> dict[str, str]:
    """The read of a full export: the partitions that can be read, from their log start to the ends
    measured now."""
    return {
        **group.options,
        "assign": _assign(list(now)),
        "endingOffsets": _offsets({tp: n.end for tp, n in now.items()}),
    }


def incremental_options(
    group: Group, planned: IncrementPlan, now: dict[TopicPartition, PartitionNow]
) -> dict[str, str]:
    """The read of an incremental export: each partition from where its plan starts (only what was
    written since the table's mark, unless the plan reads it whole) to its end now; the last record of
    each key there, tombstones included."""
    plans = planned.partitions or {}
    starts = {tp: plans[tp.dir_name].read_from for tp in now}
    return {
        **group.options, "assign": _assign(list(now)), "level": "latest", "includeTombstones": "true",
        "startingOffsets": _offsets(starts), "endingOffsets": _offsets({tp: n.end for tp, n in now.items()}),
    }  # fmt: skip


def write_options(
    group: Group, planned: IncrementPlan, now: dict[TopicPartition, PartitionNow]
) -> dict[str, str]:
    """What the export of ``planned`` reads (the check before the write visits exactly that)."""
    return full_options(group, now) if planned.full else incremental_options(group, planned, now)


def write_full(
    spark, group: Group, now: dict[TopicPartition, PartitionNow], marks: dict[str, PartitionMark]
) -> None:
    """The group's tables replaced by what its partitions hold up to the ends in ``now`` (the partitions
    that can be read; the others are left out, each with its failed row)."""
    state = TableState(group.settings, marks)
    if group.side is None:
        group.table.replace(spark, _read(spark, full_options(group, now)), state, group.partition_by)
        return
    with _read_once(_read(spark, full_options(group, now))) as df:
        main = df.where("decodeError IS NULL").select(*_main_columns(group, df))
        group.table.replace(spark, main, state, group.partition_by)
        group.side.replace(spark, _side_frame(df), state)


@contextmanager
def _read_once(df):
    """``df`` kept (in memory, spilling to disk) while a table and its side table are written from it:
    the partitions are read and decoded once, not once per table (the second write reads what the
    first one kept)."""
    from pyspark import StorageLevel

    kept = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield kept
    finally:
        kept.unpersist()


def plan(
    group: Group, spark, state: TableState | None, now: dict[TopicPartition, PartitionNow], incremental: bool
) -> IncrementPlan:
    """What the export of the group does: full, or per partition (``state``: the table's)."""
    if not incremental:
        return IncrementPlan(None, "full")
    if group.side is not None:
        side_state = group.side.state(spark)
        if side_state != state:
            return IncrementPlan(None, "the table and its side table were not written by the same export")
    named = {tp.dir_name: n for tp, n in now.items()}
    return plan_increment(state, group.settings, named)


def write_incremental(
    spark, group: Group, planned: IncrementPlan, now: dict[TopicPartition, PartitionNow],
    marks: dict[str, PartitionMark], kept: dict[str, PartitionMark],
) -> None:  # fmt: skip
    """The changes of each partition since its plan's start merged into the group's tables, rows the plan
    drops deleted, in one commit per table. ``kept``: marks carried over unchanged (partitions that
    could not be read this time keep their rows and marks)."""
    state = TableState(group.settings, {**kept, **marks})
    delete = _delete_condition(list((planned.partitions or {}).values()))
    # The changes are read once per MERGE, not kept: a kept read made the MERGE into the table slower (9.1 s
    # against 6.0 s at 2M records) than the second read of the 1 % costs (docs/benchmark.md).
    changes = _read(spark, incremental_options(group, planned, now)) if now else None
    _merge(spark, group.table, group, changes, delete, state, side=False)
    if group.side is not None:
        _merge(spark, group.side, group, changes, delete, state, side=True)


def _merge(
    spark, table: Table, group: Group, changes, delete: str | None, state: TableState, *, side: bool
) -> None:
    from pyspark.sql import functions as F

    if side:
        on = ["topic", "partition", "key"]
        drop = "s.reason IS NULL"
        if changes is None:
            frame = spark.createDataFrame([], table.read(spark).schema)
        else:
            frame = changes.select(*[F.col(src).alias(name) for name, src in SIDE_COLUMNS.items()])
        columns = list(SIDE_COLUMNS)
    else:
        on = ["topic", "partition", _identity(group)]
        if changes is None:
            frame = spark.createDataFrame([], table.read(spark).schema).withColumn("__drop", F.lit(True))
            columns = [c for c in frame.columns if c != "__drop"]
        else:
            columns = _main_columns(group, changes) if group.side is not None else list(changes.columns)
            dropped = _tombstone(group, "c") + (
                " OR c.decodeError IS NOT NULL" if group.side is not None else ""
            )
            frame = changes.alias("c").select(
                *[F.col(f"c.{c}") for c in columns], F.expr(dropped).alias("__drop")
            )
        drop = "s.__drop"
    table.merge(spark, frame, on=on, columns=columns, drop=drop, delete=delete, state=state)


def _delete_condition(plans: list[PartitionPlan]) -> str | None:
    parts = []
    for p in plans:
        if p.delete_below is None:
            continue
        topic, _, partition = p.name.rpartition("-")
        clause = f"t.topic = {_literal(topic)} AND t.partition = {int(partition)}"
        if p.delete_below != ALL_ROWS:
            clause += f" AND t.offset < {int(p.delete_below)}"
        parts.append(f"({clause})")
    return " OR ".join(parts) or None


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def read_options(group: Group) -> ReadOptions:
    return ReadOptions.parse({**group.options, "assign": _assign(group.partitions)})
