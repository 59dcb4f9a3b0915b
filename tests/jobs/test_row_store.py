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
def test_a_kept_row_is_the_dict_it_was_kept_from_and_sorts_as_it(given_rows):
    store = RowStore(COLUMNS)
    kept = [store.keep(r) for r in given_rows]
    assert kept == given_rows and [dict(k) for k in kept] == given_rows
    assert all(list(k) == list(COLUMNS) and k.get("nope", 7) == 7 for k in kept)
    assert all(k.get(c) == r[c] for k, r in zip(kept, given_rows, strict=True) for c in COLUMNS)

    def key(row):
        return (str(row["topic"]), str(row["partition"]))

    assert sorted(kept, key=key) == sorted(given_rows, key=key)


@given(rows, st.sampled_from([None, 1, 2]))
def test_json_written_a_row_at_a_time_is_json_dumps_of_the_list(given_rows, indent):
    store = RowStore(COLUMNS)
    out = io.StringIO()
    write_json((store.keep(r) for r in given_rows), out, indent=indent, default=str)
    in_column_order = [{c: r[c] for c in COLUMNS} for r in given_rows]
    assert out.getvalue() == json.dumps(in_column_order, indent=indent, default=str) + "\n"


def test_equal_strings_are_kept_once_and_a_column_a_row_lacks_is_none():
    reason = "nothing to delete; " * 5
    store = RowStore(COLUMNS)
    kept = [store.keep({"topic": "orders", "reason": reason[:-1] + " "}) for _ in range(3)]
    assert (
        kept[0]["reason"] == reason[:-1] + " " and kept[0]["reason"] is kept[1]["reason"] is kept[2]["reason"]
    )
    assert [k["partition"] for k in kept] == [None, None, None]
    assert store.keep({"topic": "a"}, topic="b")["topic"] == "b"
