"""The CPU hogs the load-proof run uses (``pytest --cpu-hog N``, issue 35) spin, stop by PID,
and never outlive their own bound."""

from __future__ import annotations

import os

import pytest
from helpers.cpu_hog import CpuHogs, cpu_hogs


def _cpu_ticks(pid: int) -> int:
    """User + system clock ticks the process has used (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_hogs_burn_cpu_until_stopped_by_pid() -> None:
    with cpu_hogs(2, max_seconds=120) as hogs:
        assert hogs.alive() == 2
        pid = hogs.pids[0]
        first = _cpu_ticks(pid)
        # the hog uses CPU without being asked: wait (bounded) for its clock to move
        for _ in range(10**6):
            if _cpu_ticks(pid) > first:
                break
        assert _cpu_ticks(pid) > first
    assert hogs.alive() == 0
    assert not any(os.path.exists(f"/proc/{pid}") for pid in hogs.pids)


def test_a_hog_ends_by_itself_at_its_bound() -> None:
    hogs = CpuHogs(1, max_seconds=0.2)
    try:
        assert hogs.processes[0].wait(timeout=120) == 0
    finally:
        hogs.stop()
