"""The sweep's gate on the wide canary (``python -m bench.run --sweep-canary``).

Another guest on our physical core's sibling hyperthread comes and goes in stretches of 0.3 s to minutes
and slows throughput-bound work 1.3–1.5× while it is there (docs/benchmark.md, "Session 9: the slow group of
cleans"). The wide canary (``bench.noise.wide_canary_ms``, ~4.5 ms on the core alone, 9–11 ms beside a busy
sibling) is timed just before and just after every clean of either side. A clean whose canary reads slow on
either side of it, over ``QUIET_CANARY`` times the floor known at that moment, is redone on a fresh copy of
the same bytes, up to ``EXTRA_TRIES`` more times; the same rule on both sides. The floor is the fastest
reading of a short calibration at the sweep's start, lowered by every reading taken since (the running
minimum), so a calibration that fell in a slow phase is mended by the first quiet reading.

Nothing is hidden: every attempt is kept in the JSON, the discarded ones marked; a clean that never read
quiet within its tries is kept (the last try) and marked ``quiet_try: false``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

# a clean counts as quiet when the canary before and after it is within this of the floor
QUIET_CANARY = 1.3
# redoes of one clean at most: with a side's clean quiet about half the time (session 9's sweeps: ours 30-60 %,
# Kafka's 22-43 % of cleans), 4 tries leave ~3-13 % of cleans without a quiet one, and the slow stretches that
# last minutes cannot make a sweep run away (a shape's round costs at most 4 cleans a side)
EXTRA_TRIES = 3
CALIBRATION_READINGS = 60  # ~0.3 s of the canary back to back at the sweep's start
# before a redo, the canary is read until it is quiet, for at most this long: slow stretches last 0.3 s to
# minutes, and a redo inside the stretch that slowed the clean would read slow again
PATIENCE_S = 3.0


def calibrate(read: Callable[[], float], readings: int = CALIBRATION_READINGS) -> list[float]:
    """The canary ``readings`` times back to back; the floor at the start is their minimum."""
    return [read() for _ in range(readings)]


def is_slow(canary_ms: Sequence[float], floor_ms: float) -> bool:
    """Whether a clean ran on a contended core: either canary beside it over ``QUIET_CANARY`` x the floor."""
    return max(canary_ms) > QUIET_CANARY * floor_ms


def wait_quiet(
    read: Callable[[], float], floor_ms: float, patience_s: float, clock: Callable[[], float] = time.monotonic
) -> tuple[float, float]:
    """Read the canary back to back until one reading is quiet against the floor (lowered by each reading)
    or ``patience_s`` has passed: a redo started inside the same slow stretch would be wasted. Returns the
    floor and the seconds waited."""
    started = clock()
    while True:
        ms = read()
        floor_ms = min(floor_ms, ms)
        waited = clock() - started
        if not is_slow([ms], floor_ms) or waited >= patience_s:
            return floor_ms, waited


def gated(
    attempt: Callable[[int], dict], tries: int, floor_ms: float, read: Callable[[], float] | None = None,
    patience_s: float = PATIENCE_S, clock: Callable[[], float] = time.monotonic,
) -> tuple[list[dict], float]:  # fmt: skip
    """Run ``attempt(try_index)`` (a clean on a fresh copy, its ``canary_ms`` read before and after) until
    one is quiet against the floor as it stands after that clean's own readings, or ``tries`` are used;
    before each redo, with ``read`` (the canary), wait up to ``patience_s`` for a quiet reading
    (``wait_quiet``; the seconds waited kept as ``waited_s``). Returns every attempt in order, each marked
    (``try``; ``discarded`` on all but the last; on the last, ``quiet_try`` whether it read quiet), and the
    lowered floor."""
    attempts: list[dict] = []
    for i in range(tries):
        waited = None
        if i > 0 and read is not None:
            floor_ms, waited = wait_quiet(read, floor_ms, patience_s, clock)
        run = attempt(i)
        if waited is not None:
            run["waited_s"] = waited
        floor_ms = min(floor_ms, *run["canary_ms"])
        slow = is_slow(run["canary_ms"], floor_ms)
        run["try"] = i
        attempts.append(run)
        if not slow:
            break
    for run in attempts[:-1]:
        run["discarded"] = True
    attempts[-1]["quiet_try"] = not is_slow(attempts[-1]["canary_ms"], floor_ms)
    return attempts, floor_ms
