"""The driver's result rows (``jobs/row_store``): the same rows and the same JSON as plain dicts, kept small."""

from __future__ import annotations

import io
import json

from hypothesis import given
from hypothesis import strategies as st

from jobs.row_store import RowStore, write_json

COLUMNS = ("log_dir", "topic", "partition", "status", "reason", "dirty_ratio", "would_compact", "bytes")
values = st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.booleans() | st.text()
rows = st.lists(st.fixed_dictionaries({c: values for c in COLUMNS}), max_size=30)


@given(rows)
def test_rows_come_back_as_given_and_sorted_as_dicts_sort(given_rows):
    store = RowStore(COLUMNS, given_rows)
    assert list(store) == given_rows and len(store) == len(given_rows)

    def key(row):
        return (str(row["topic"]), str(row["partition"]))

    store.sort(key)
    assert list(store) == sorted(given_rows, key=key)


@given(rows, st.sampled_from([None, 1, 2]))
def test_json_written_a_row_at_a_time_is_json_dumps_of_the_list(given_rows, indent):
    out = io.StringIO()
    write_json(iter(given_rows), out, indent=indent, default=str)
    assert out.getvalue() == json.dumps(given_rows, indent=indent, default=str) + "\n"


def test_equal_strings_are_kept_once():
    reason = "nothing to delete; " * 5
    store = RowStore(COLUMNS, [{"topic": "orders", "reason": reason[:-1] + " "} for _ in range(3)])
    kept = [row["reason"] for row in store]
    assert kept[0] == reason[:-1] + " " and kept[0] is kept[1] is kept[2]
    assert [row["partition"] for row in store] == [None, None, None]  # a column the row lacks
