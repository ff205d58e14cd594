"""The one timing helper of the benchmark scripts: run a callable, measure, summarise.

``clock`` is ``time.perf_counter`` (wall time) or ``time.process_time`` (CPU time, steadier
when the machine is shared); each script picks the one its baseline is measured with.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

Clock = Callable[[], float]


def samples(
    fn: Callable[[], object], repeats: int, clock: Clock = time.perf_counter
) -> list[float]:
    """Seconds taken by each of ``repeats`` runs of ``fn``."""
    out = []
    for _ in range(repeats):
        start = clock()
        fn()
        out.append(clock() - start)
    return out


def best_of(fn: Callable[[], object], repeats: int, clock: Clock = time.perf_counter) -> float:
    """The fastest of ``repeats`` runs, in seconds."""
    return min(samples(fn, repeats, clock))


def median_of(fn: Callable[[], object], repeats: int, clock: Clock = time.perf_counter) -> float:
    """The median of ``repeats`` runs, in seconds."""
    return statistics.median(samples(fn, repeats, clock))


def total_of(fn: Callable[[], object], repeats: int, clock: Clock = time.perf_counter) -> float:
    """The time of ``repeats`` runs back to back, in seconds (one clock read per batch)."""
    start = clock()
    for _ in range(repeats):
        fn()
    return clock() - start
