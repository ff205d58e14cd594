"""Render limits: the bounds every template render runs under (templates are untrusted code).

A render that builds a value larger than ``max_value_size``, produces more than
``max_output_chars``, runs more than ``max_steps`` loop iterations and calls, or uses more than
``max_seconds`` of CPU time ends in :class:`~autoparser.errors.TemplateLimitError` naming the
limit.
Real chat templates stay orders of magnitude below the defaults; change them for a block of
code with ``with render_limits(RenderLimits(max_seconds=10.0)): ...``.

Sizes are checked *before* the value is built wherever the size can be known in advance
(``~``, ``+``, ``*``, ``join``, ``replace``, padding, printf widths ...), so a hostile template
is stopped long before it can exhaust memory. Time is the CPU time of the rendering thread
(``time.thread_time``), checked every few hundred loop iterations and calls (no tracing, no
threads): the guard measures the template's own work, so a legitimate render is never refused
because the machine is busy (wall time grows with load; the thread's CPU time does not).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Iterator

from autoparser.errors import TemplateLimitError


@dataclasses.dataclass(frozen=True)
class RenderLimits:
    """Bounds of one render.

    ``max_output_chars``: characters of the rendered text (and of a macro's output);
    ``max_value_size``: characters of a string, items of a list, built by the template;
    ``max_steps``: loop iterations plus calls (macros, methods, globals) in one render;
    ``max_seconds``: CPU seconds the rendering thread spends in one render (not wall time:
    a render on a loaded machine takes longer but does the same work).
    """

    max_output_chars: int = 32_000_000
    max_value_size: int = 16_000_000
    max_steps: int = 1_000_000
    max_seconds: float = 2.0


DEFAULT_LIMITS = RenderLimits()

_limits: contextvars.ContextVar[RenderLimits] = contextvars.ContextVar(
    "autoparser_render_limits", default=DEFAULT_LIMITS
)


def current_limits() -> RenderLimits:
    """The limits renders use here (``DEFAULT_LIMITS`` unless ``render_limits`` changed them)."""
    return _limits.get()


@contextlib.contextmanager
def render_limits(limits: RenderLimits) -> Iterator[RenderLimits]:
    """Render with ``limits`` inside the ``with`` block (this thread / task only)."""
    token = _limits.set(limits)
    try:
        yield limits
    finally:
        _limits.reset(token)


# How many steps pass between two looks at the clock.
_CLOCK_EVERY = 256


class RenderBudget:
    """What one render has used so far; the sandbox hooks charge it.

    A render runs on one thread from start to end (a budget is a context variable of that
    thread), so the thread's CPU clock measures exactly the render's work.
    """

    __slots__ = ("deadline", "limits", "steps")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.deadline = time.thread_time() + limits.max_seconds

    def step(self) -> None:
        """One loop iteration or call."""
        self.steps += 1
        if self.steps > self.limits.max_steps:
            raise TemplateLimitError(
                "max_steps",
                f"render limit max_steps={self.limits.max_steps:,} exceeded "
                "(loop iterations and calls)",
            )
        if not self.steps % _CLOCK_EVERY:
            self.check_time()

    def check_time(self) -> None:
        if time.thread_time() > self.deadline:
            raise TemplateLimitError(
                "max_seconds",
                f"render limit max_seconds={self.limits.max_seconds:g} exceeded "
                "(CPU time of the render)",
            )

    def check_value(self, size: int, what: str) -> None:
        """Refuse a value of ``size`` characters or items before it is built."""
        if size > self.limits.max_value_size:
            raise TemplateLimitError(
                "max_value_size",
                f"render limit max_value_size={self.limits.max_value_size:,} exceeded: "
                f"{what} of {size:,}",
            )

    def check_output(self, size: int) -> None:
        if size > self.limits.max_output_chars:
            raise TemplateLimitError(
                "max_output_chars",
                f"render limit max_output_chars={self.limits.max_output_chars:,} exceeded "
                f"(output of {size:,} characters so far)",
            )


_active: contextvars.ContextVar[RenderBudget | None] = contextvars.ContextVar(
    "autoparser_render_budget", default=None
)


@contextlib.contextmanager
def budgeted_render() -> Iterator[RenderBudget]:
    """A fresh budget for one render under the current limits."""
    budget = RenderBudget(current_limits())
    token = _active.set(budget)
    try:
        yield budget
    finally:
        _active.reset(token)


def active_budget() -> RenderBudget:
    """The budget of the render in progress (a throwaway one outside any render)."""
    return _active.get() or RenderBudget(current_limits())
