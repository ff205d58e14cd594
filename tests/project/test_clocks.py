"""Every clock the library reads is read for a stated reason (issue 35).

A guard against too much work (a hostile template, a huge request) must measure the work —
steps, sizes, the working thread's CPU time (``time.thread_time``) — never the clock on the
wall, which runs fast on a busy machine and refuses legitimate work exactly when a server is
busiest. Wall clocks stay where they measure for people (latency metrics, the ``created``
timestamps of the wire formats) or bound a wait on something outside (the engine's timeouts,
which use asyncio's own timers). This test lists each read of a wall clock in ``src/`` with
its reason, so a new one is a decision, not an accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autoparser

SRC = Path(autoparser.__file__).parent
WALL_CLOCKS = frozenset(
    {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
)

# (module path under src/autoparser, the function reading it) -> why a wall clock is right
ALLOWED: dict[tuple[str, str], str] = {
    ("serve/openai_format.py", "new"): "the `created` Unix timestamp of a completion",
    ("serve/responses_api.py", "new"): "the `created_at` Unix timestamp of a response",
    ("serve/observe.py", "middleware"): "a request's start, for its latency metric and log",
    ("serve/observe.py", "_finish"): "a request's latency, for its metric and access log",
    ("serve/chat_completions.py", "relay"): "time to first token, for its metric",
    ("serve/chat_completions.py", "relay_choices"): "time to first token, for its metric",
    ("serve/completions_api.py", "new"): "the `created` Unix timestamp of a completion",
}


class _Reads(ast.NodeVisitor):
    """``time.<wall clock>`` attributes, by the innermost function they are read in."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.where = ["<module>"]
        self.found: dict[tuple[str, str], int] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # ``from time import monotonic`` would hide the reads from the check below
        if node.module == "time" and any(alias.name in WALL_CLOCKS for alias in node.names):
            self.found[(self.module, "from time import")] = 1

    def visit_Attribute(self, node: ast.Attribute) -> None:
        value = node.value
        if node.attr in WALL_CLOCKS and isinstance(value, ast.Name) and value.id == "time":
            key = (self.module, self.where[-1])
            self.found[key] = self.found.get(key, 0) + 1
        self.generic_visit(node)


def wall_clock_reads() -> dict[tuple[str, str], int]:
    """(module, enclosing function) -> how many wall-clock reads it makes."""
    found: dict[tuple[str, str], int] = {}
    for path in sorted(SRC.rglob("*.py")):
        reads = _Reads(path.relative_to(SRC).as_posix())
        reads.visit(ast.parse(path.read_text(encoding="utf-8")))
        found.update(reads.found)
    return found


def test_every_wall_clock_read_has_a_reason() -> None:
    unexplained = sorted(set(wall_clock_reads()) - set(ALLOWED))
    assert not unexplained, (
        "a wall clock read where no reason is listed; a guard against work must count the "
        f"work (steps, sizes, time.thread_time), not wall time: {unexplained}"
    )


def test_the_reasons_name_reads_that_exist() -> None:
    stale = sorted(set(ALLOWED) - set(wall_clock_reads()))
    assert not stale, f"listed reads no longer in the source: {stale}"


def test_the_render_limit_reads_the_threads_cpu_clock() -> None:
    source = (SRC / "template" / "limits.py").read_text(encoding="utf-8")
    assert "time.thread_time()" in source
