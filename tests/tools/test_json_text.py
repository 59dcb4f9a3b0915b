"""Jackson's JSON text: doubles as Java's Double.toString writes them."""

from __future__ import annotations

import pytest

from kafka_log_core.tools.json_text import to_json


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024.0, "1024.0"),
        (2.5e7, "2.5E7"),
        (1e7, "1.0E7"),
        (9999999.0, "9999999.0"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (-0.5, "-0.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (123.456, "123.456"),
        (float("nan"), '"NaN"'),
        (float("-inf"), '"-Infinity"'),
    ],
)
def test_doubles_are_written_as_java_writes_them(value, text):
    assert to_json(value) == text
