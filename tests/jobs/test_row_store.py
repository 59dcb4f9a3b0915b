"""The driver's result rows (``jobs/row_store``): kept as columns, read back as the same values (the same
types, the same bits), sorted as Python sorts the dicts, and written as the same JSON text."""

from __future__ import annotations

import io
import json
import math
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs import runner
from jobs.row_store import DICTIONARY_LIMIT, RowStore, StoredRows, write_json
from kafka_log_core.work.outcome import Status

COLUMNS = ("log_dir", "topic", "partition", "status", "reason", "dirty_ratio", "would_compact", "bytes")
values = (
    st.none()
    | st.integers(-(2**70), 2**70)  # beyond 2**53 and beyond int64 too
    | st.floats()
    | st.booleans()
    | st.text(max_size=5)
    | st.sampled_from(list(Status))
    | st.lists(st.integers(), max_size=2)  # not hashable
)
rows = st.lists(st.fixed_dictionaries({c: values for c in COLUMNS}), max_size=30)


def _same(a, b) -> bool:
    """The same value: the same type, and for floats the same bits (NaN is NaN, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
    return a == b


def _kept(given_rows, store=None):
    store = RowStore(COLUMNS) if store is None else store
    numbers = [store.keep(r) for r in given_rows]
    return store, [store.row(n) for n in numbers]


@given(rows)
def test_a_kept_row_reads_back_every_value_as_it_was_kept(given_rows):
    _, kept = _kept(given_rows)
    for row, original in zip(kept, given_rows, strict=True):
        assert list(row) == list(COLUMNS) and len(row) == len(COLUMNS) and row.get("nope", 7) == 7
        assert all(_same(row[c], original[c]) and _same(row.get(c), original[c]) for c in COLUMNS)


def _column_of_each_form(n: int) -> list[dict]:
    """Rows whose columns take each form: few distinct values (a dictionary of byte codes), many distinct
    strings (wider codes), many distinct ints and floats (numbers), and then values that fit no array."""
    out = []
    for i in range(n):
        out.append({
            "log_dir": "/data/kafka-logs",
            "topic": f"topic-{i % 700}",  # 700 distinct strings: two-byte codes
            "partition": i % 20,
            "status": Status.OK if i % 3 else "ok",  # the enum and the plain string stay what they were
            "reason": None if i % 2 else "nothing to clean",
            "dirty_ratio": None if i % 5 == 0 else (-0.0 if i % 7 == 0 else i / 3),
            "would_compact": bool(i % 2) if i < n - 1 else 1,  # True and 1 are different values
            "bytes": None if i % 11 == 0 else 2**53 + i if i < n - 2 else 2**64 + i,  # beyond int64 last
        })  # fmt: skip
    return out


@pytest.mark.parametrize("n", [1, DICTIONARY_LIMIT, DICTIONARY_LIMIT + 1, 3_000])
def test_rows_read_back_as_kept_whatever_form_their_columns_take(n):
    given_rows = _column_of_each_form(n)
    store, kept = _kept(given_rows)
    for row, original in zip(kept, given_rows, strict=True):
        assert all(_same(row[c], original[c]) for c in COLUMNS), (row, original)
    assert all(kept[i]["topic"] is kept[i + 700]["topic"] for i in range(n - 700))  # each string once
    for keys, key in [(runner.FILTHIEST_FIRST, _filthiest_first), (runner.BY_PARTITION, runner.by_partition)]:
        expected = sorted(range(n), key=lambda i: key(given_rows[i]))  # noqa: B023
        assert list(store.ordered(range(n), keys)) == expected


def test_rows_of_mostly_equal_or_numeric_values_take_a_few_bytes_a_column():
    given_rows = _column_of_each_form(20_000)[:-2]  # every column fits an array
    tracemalloc.start()
    try:
        store = RowStore(COLUMNS)
        for r in given_rows:
            store.keep(r)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # numbers: 9 bytes a row (two columns); codes: 1-2 bytes (six); the dictionaries: the 700 topics
    assert held < 40 * len(given_rows)


@given(rows, st.sampled_from([None, 1, 2]))
def test_json_written_a_row_at_a_time_is_json_dumps_of_the_list(given_rows, indent):
    _, kept = _kept(given_rows)
    out = io.StringIO()
    write_json(kept, out, indent=indent, default=str)
    in_column_order = [{c: r[c] for c in COLUMNS} for r in given_rows]
    assert out.getvalue() == json.dumps(in_column_order, indent=indent, default=str) + "\n"


def _filthiest_first(row) -> tuple:
    """The report's order as a key of each row (what the sort by columns must give)."""
    return (-(row.get("dirty_ratio") or 0.0), row["log_dir"], row["topic"], row["partition"])


sortable = st.fixed_dictionaries({
    "log_dir": st.sampled_from(["/a", "/b", "b"]), "topic": st.sampled_from(["orders", "payments", "a-b"]),
    "partition": st.integers(0, 300), "dirty_ratio": st.none() | st.floats(0, 1) | st.just(0.5),
})  # fmt: skip


@given(st.lists(sortable, max_size=60))
def test_rows_sorted_by_columns_are_in_the_order_python_sorts_the_dicts(given_rows):
    store, _ = _kept(given_rows, RowStore(("log_dir", "topic", "partition", "dirty_ratio")))
    for keys, key in [(runner.FILTHIEST_FIRST, _filthiest_first), (runner.BY_PARTITION, runner.by_partition)]:
        table = StoredRows(store, store.ordered(range(len(given_rows)), keys))
        expected = sorted(range(len(given_rows)), key=lambda i: key(given_rows[i]))  # noqa: B023
        assert list(table.order) == expected
        assert [dict(r) for r in table] == [given_rows[i] for i in expected]


def test_a_column_a_row_lacks_is_none_and_a_change_replaces_a_value():
    store = RowStore(COLUMNS)
    row = store.row(store.keep({"topic": "a"}, topic="b", partition=3))
    assert dict(row) == {**dict.fromkeys(COLUMNS), "topic": "b", "partition": 3}
    with pytest.raises(IndexError):
        store.row(1)


def test_a_column_of_distinct_strings_is_asked_once_whether_numbers_would_hold_it(monkeypatch):
    # A reason naming each partition's offsets is a distinct string a row: asking at every new value
    # whether the whole dictionary could be numbers made keeping 20,000 rows take seconds (quadratic).
    from jobs import row_store

    asked = []
    real = row_store._numbers_type
    monkeypatch.setattr(row_store, "_numbers_type", lambda values: asked.append(len(values)) or real(values))
    store = RowStore(["reason", "offset"])
    n = 4 * DICTIONARY_LIMIT
    for i in range(n):
        store.keep({"reason": f"orders-{i}: log start offset {i}", "offset": i})
    assert [store.row(i)["reason"] for i in (0, n - 1)] == ["orders-0: log start offset 0",
                                                            f"orders-{n - 1}: log start offset {n - 1}"]  # fmt: skip
    assert [store.row(i)["offset"] for i in range(n)] == list(range(n))
    assert asked == [DICTIONARY_LIMIT, DICTIONARY_LIMIT]  # once for each column: strings stay, ints leave
