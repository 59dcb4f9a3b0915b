"""The incremental export's plan, rule by rule: what each partition reads and which rows it drops."""

from __future__ import annotations

import pytest

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.work.table_state import (
    ALL_ROWS,
    PartitionMark,
    PartitionNow,
    Step,
    TableState,
    plan_increment,
)

SETTINGS = {"view": "latest", "isolation": "read_committed"}
MARK = PartitionMark(end=100, log_start=0, topic_id="T1", last_batch=(95, 1234))


def _now(**changes) -> PartitionNow:
    base = dict(log_start=0, end=150, log_end=150, topic_id="T1", cleaner_offset=40, batch_at_mark=(95, 1234))
    return PartitionNow(**{**base, **changes})


def _plan(now: PartitionNow, mark: PartitionMark | None = MARK):
    state = TableState(SETTINGS, {} if mark is None else {"t-0": mark})
    return plan_increment(state, SETTINGS, {"t-0": now}).partitions["t-0"]


def test_appended_records_are_read_from_the_covered_end():
    p = _plan(_now())
    assert (p.step, p.read_from, p.delete_below) == (Step.SINCE, 100, None)


def test_a_partition_not_in_the_table_is_read_from_the_log_start():
    p = _plan(_now(log_start=7), mark=None)
    assert (p.step, p.read_from, p.delete_below) == (Step.NEW, 7, None)


def test_retention_drops_rows_below_the_new_log_start():
    p = _plan(_now(log_start=60))
    assert (p.step, p.read_from, p.delete_below) == (Step.SINCE, 100, 60)
    p = _plan(_now(log_start=120, batch_at_mark=None))  # retention past the covered end
    assert (p.step, p.read_from, p.delete_below) == (Step.SINCE, 120, 120)


@pytest.mark.parametrize(
    ("now", "why"),
    [
        (_now(cleaner_offset=101), "cleaned up to 101 since, past the offset 100"),
        (_now(log_end=90, end=90), "the log ends at 90, below the offset 100"),
        (_now(batch_at_mark=(95, 999)), "the batch holding offset 99 is not the one exported"),
        (_now(topic_id="T2"), "topic id T2, not T1"),
    ],
    ids=["cleaned-past-the-end", "truncated", "written-again", "topic-recreated"],
)
def test_a_partition_whose_covered_offsets_changed_is_read_whole(now, why):
    p = _plan(now)
    assert (p.step, p.read_from, p.delete_below) == (Step.WHOLE, now.log_start, ALL_ROWS)
    assert why in p.reason


def test_cleaning_up_to_the_covered_end_is_not_a_change():
    """The cleaner rewrote the batch holding end - 1, but left everything from the end on alone."""
    p = _plan(_now(cleaner_offset=100, batch_at_mark=(90, 5)))
    assert (p.step, p.read_from) == (Step.SINCE, 100)


def test_gone_partitions_and_changed_settings():
    state = TableState(SETTINGS, {"t-0": MARK, "t-1": MARK})
    plans = plan_increment(state, SETTINGS, {"t-0": _now()}).partitions
    assert (plans["t-1"].step, plans["t-1"].delete_below) == (Step.GONE, ALL_ROWS)
    full = plan_increment(state, {**SETTINGS, "isolation": "read_uncommitted"}, {"t-0": _now()})
    assert full.full and "isolation" in full.why
    assert plan_increment(None, SETTINGS, {}).full


def test_the_state_round_trips_through_its_json_and_refuses_garbage():
    state = TableState(SETTINGS, {"t-0": MARK, "u-3": PartitionMark(5, 0)})
    assert TableState.from_json(state.to_json(), "x") == state
    with pytest.raises(KafkaLogError, match="table x: the export state kafka-log-jobs.export cannot be read"):
        TableState.from_json('{"version": 9}', "table x")
