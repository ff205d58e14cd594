"""CPU hogs: busy processes that load the machine while tests run (issue 35).

A test that passes only on a quiet machine depends on timing. ``python -m pytest --cpu-hog N``
(or ``AUTOPARSER_CPU_HOG=N``) starts N processes that spin until the session ends, so the
whole suite can be shown to pass on a machine whose every core is busy; ``--cpu-hog 0`` means
one hog per core. Each hog is bounded on its own (it exits after ``max_seconds`` even if this
session dies without stopping it) and is stopped by its PID when the session ends.

``CpuHogs`` is also used directly by tests that need wall time to run far ahead of CPU time
(a hog pinned to the same core as the measured process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

# A hog spins in pure Python until its own deadline; it needs nothing but the interpreter.
_HOG = """
import os, sys, time
cpus = [int(c) for c in sys.argv[2].split(",") if c]
if cpus:
    os.sched_setaffinity(0, cpus)
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    n += 1
"""

# A hog outlives no session by more than this, whatever happens to the session.
DEFAULT_MAX_SECONDS = 3 * 3600.0


class CpuHogs:
    """``count`` spinning child processes, optionally pinned to ``cpus``; stop() ends them."""

    def __init__(
        self, count: int, *, cpus: Sequence[int] = (), max_seconds: float = DEFAULT_MAX_SECONDS
    ) -> None:
        pinned = ",".join(map(str, cpus))
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-c", _HOG, str(max_seconds), pinned],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(count)
        ]

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def alive(self) -> int:
        """How many hogs are still spinning."""
        return sum(process.poll() is None for process in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def cpu_hogs(
    count: int, *, cpus: Sequence[int] = (), max_seconds: float = DEFAULT_MAX_SECONDS
) -> Iterator[CpuHogs]:
    """Hogs for the duration of a ``with`` block."""
    hogs = CpuHogs(count, cpus=cpus, max_seconds=max_seconds)
    try:
        yield hogs
    finally:
        hogs.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-hog",
        type=int,
        default=None,
        metavar="N",
        help="keep N busy processes running for the whole session (0: one per core); "
        "also AUTOPARSER_CPU_HOG=N",
    )


def hog_count(config: pytest.Config) -> int | None:
    """The hogs asked for on the command line or in the environment (None: no hog)."""
    asked = config.getoption("--cpu-hog")
    if asked is None:
        from_env = os.environ.get("AUTOPARSER_CPU_HOG", "").strip()
        if not from_env:
            return None
        asked = int(from_env)
    return asked if asked > 0 else (os.cpu_count() or 1)


_SESSION_HOGS = pytest.StashKey[CpuHogs]()


def pytest_configure(config: pytest.Config) -> None:
    count = hog_count(config)
    if count is not None and not hasattr(config, "workerinput"):
        config.stash[_SESSION_HOGS] = CpuHogs(count)


def pytest_report_header(config: pytest.Config) -> str | None:
    hogs = config.stash.get(_SESSION_HOGS, None)
    if hogs is None:
        return None
    return f"cpu hog: {len(hogs.processes)} busy processes (pids {hogs.pids})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    hogs = terminalreporter.config.stash.get(_SESSION_HOGS, None)
    if hogs is not None:
        terminalreporter.write_line(
            f"cpu hog: {hogs.alive()} of {len(hogs.processes)} hogs still busy at the end"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    hogs = config.stash.get(_SESSION_HOGS, None)
    if hogs is not None:
        hogs.stop()
