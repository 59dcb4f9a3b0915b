"""The sweep's gate (``bench.gate``) decided on hand-made canary readings: which tries are redone, which one
is kept, and how the floor moves."""

from __future__ import annotations

import pytest

from bench import gate


def cleans(*canaries: tuple[float, float]):
    """An attempt that hands out the given (before, after) canary readings in turn, one per try."""
    given = iter(canaries)
    made: list[int] = []

    def attempt(i: int) -> dict:
        made.append(i)
        return {"cpu_seconds": 0.1 + i, "canary_ms": list(next(given))}

    return attempt, made


def test_a_clean_with_both_canaries_within_the_margin_of_the_floor_is_kept_at_once():
    attempt, made = cleans((4.6, 5.8))
    runs, floor = gate.gated(attempt, 4, 4.5)
    assert made == [0] and floor == 4.5
    assert runs == [{"cpu_seconds": 0.1, "canary_ms": [4.6, 5.8], "try": 0, "quiet_try": True}]


def test_exactly_the_margin_is_quiet_and_just_over_it_is_slow():
    assert not gate.is_slow([4.0, 4.0 * gate.QUIET_CANARY], 4.0)
    assert gate.is_slow([4.0 * gate.QUIET_CANARY + 0.01, 4.0], 4.0)


def test_a_slow_canary_on_either_side_redoes_the_clean_until_a_quiet_try():
    attempt, made = cleans((9.1, 4.6), (4.5, 8.7), (4.7, 4.4))
    runs, floor = gate.gated(attempt, 4, 4.5)
    assert made == [0, 1, 2]
    assert [r.get("discarded", False) for r in runs] == [True, True, False]
    assert [r["try"] for r in runs] == [0, 1, 2]
    assert runs[-1]["quiet_try"] is True and "quiet_try" not in runs[0]
    assert floor == 4.4  # lowered by the kept try's own reading


def test_a_clean_never_quiet_within_its_tries_keeps_its_last_try_marked():
    attempt, made = cleans((9.0, 9.5), (8.8, 10.1), (9.2, 4.5), (7.0, 9.9), (4.5, 4.5))
    runs, floor = gate.gated(attempt, 4, 4.5)
    assert made == [0, 1, 2, 3]  # the fifth reading is never asked for
    assert [r.get("discarded", False) for r in runs] == [True, True, True, False]
    assert runs[-1]["quiet_try"] is False and runs[-1]["canary_ms"] == [7.0, 9.9]


def test_one_try_only_keeps_a_slow_clean_marked():
    attempt, made = cleans((9.0, 9.5))
    runs, _ = gate.gated(attempt, 1, 4.5)
    assert made == [0] and runs[0]["quiet_try"] is False and "discarded" not in runs[0]


def test_a_floor_calibrated_in_a_slow_phase_is_lowered_by_the_first_fast_reading():
    # the calibration saw only the busy sibling (~9 ms): a clean at 9 ms passes as quiet against it, until a
    # fast reading beside a later clean lowers the floor and that clean's slow side is judged against it
    attempt, made = cleans((9.2, 9.4))
    runs, floor = gate.gated(attempt, 4, min(gate.calibrate(iter([9.3, 9.0, 9.6]).__next__, 3)))
    assert made == [0] and floor == 9.0 and runs[0]["quiet_try"] is True
    attempt, made = cleans((4.5, 9.4), (4.6, 4.8))
    runs, floor = gate.gated(attempt, 4, floor)
    assert made == [0, 1] and floor == 4.5 and runs[0]["discarded"] is True


@pytest.mark.parametrize("readings", [[4.4, 4.6, 9.8], [9.8, 4.4]])
def test_the_floor_at_the_start_is_the_fastest_calibration_reading(readings):
    taken = gate.calibrate(iter(readings).__next__, len(readings))
    assert taken == readings and min(taken) == 4.4


def ticking(step: float):
    """A clock that moves ``step`` seconds each time it is read."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def test_before_a_redo_the_canary_is_read_until_quiet_and_the_wait_is_kept():
    attempt, made = cleans((9.0, 9.1), (4.6, 4.7))
    readings = iter([9.2, 8.8, 5.0, 9.9])
    runs, floor = gate.gated(attempt, 4, 4.5, read=readings.__next__, patience_s=10, clock=ticking(0.5))
    assert made == [0, 1] and next(readings) == 9.9  # the wait stopped at the first quiet reading
    assert "waited_s" not in runs[0] and runs[1]["waited_s"] == pytest.approx(1.5) and runs[1]["quiet_try"]


def test_the_wait_before_a_redo_gives_up_after_its_patience_and_redoes_all_the_same():
    attempt, made = cleans((9.0, 9.1), (9.3, 9.0))
    readings = iter([9.2] * 100)
    runs, floor = gate.gated(attempt, 2, 4.5, read=readings.__next__, patience_s=2, clock=ticking(0.5))
    assert made == [0, 1] and runs[1]["quiet_try"] is False
    assert len(list(readings)) == 100 - 4  # 4 readings, each half a second on this clock, then the redo


def test_a_fast_reading_while_waiting_lowers_the_floor():
    floor, waited = gate.wait_quiet(iter([9.0, 3.9]).__next__, 4.5, 10, ticking(1.0))
    assert floor == 3.9 and waited == pytest.approx(2.0)
