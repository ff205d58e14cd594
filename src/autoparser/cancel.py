"""Cooperative cancellation of CPU work: a token the caller sets, checked by the builders.

Building a grammar for thousands of tools runs in a worker thread, which Python cannot
stop from outside: a server whose client left would otherwise let it run to the end. The
caller makes a ``CancelToken`` and runs the work under it (``token.run(fn)``, or
``with token.active():``); the builders call ``checkpoint()`` at coarse points (per tool,
per schema node), which raises ``Cancelled`` once the token is set. The token is
context-local (a ``contextvars`` variable), so nothing has to pass it through every call,
and work run under no token is never cancelled.

A token can also bound the work's size: ``CancelToken(cpu_seconds=30)`` stops the work with
``WorkLimitError`` once the thread running it has spent that much CPU time under the token.
CPU time, not wall time: on a loaded machine legitimate work takes longer but is no larger,
and a guard measured by the clock on the wall would refuse it exactly when the server is
busiest.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from autoparser.errors import Cancelled, WorkLimitError

T = TypeVar("T")
# How many checkpoints pass between two looks at the thread's CPU clock (a system call).
_CLOCK_EVERY = 16
_CURRENT: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar(
    "autoparser_cancel_token", default=None
)


class CancelToken:
    """A flag one side sets (``cancel``) and the work under it checks (``checkpoint``).

    Thread-safe (a ``threading.Event``): a server's event loop sets it while a worker
    thread builds. ``checks`` counts the checkpoints passed under it, so a caller (a test)
    can see how far the work went before it stopped.
    """

    def __init__(self, cpu_seconds: float | None = None) -> None:
        if cpu_seconds is not None and not cpu_seconds > 0:
            raise ValueError(f"cpu_seconds must be a positive number, got {cpu_seconds!r}")
        self._event = threading.Event()
        self.reason = ""
        self.checks = 0
        self.cpu_seconds = cpu_seconds
        # The running thread's CPU clock when the work's CPU budget runs out (set by active()).
        self._cpu_deadline: float | None = None

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the work to stop at its next checkpoint (the first reason given is kept)."""
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` was called."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled (or ``timeout`` seconds); whether it was."""
        return self._event.wait(timeout)

    def check(self) -> None:
        """Raise ``Cancelled`` if the token is set, ``WorkLimitError`` past the CPU budget."""
        self.checks += 1
        if self._event.is_set():
            raise Cancelled(f"the work was cancelled: {self.reason}")
        deadline = self._cpu_deadline
        if deadline is None or self.checks % _CLOCK_EVERY:
            return
        if time.thread_time() > deadline:
            assert self.cpu_seconds is not None
            message = f"the work used more than {self.cpu_seconds:g} s of CPU time"
            self.cancel(message)
            raise WorkLimitError(self.cpu_seconds, message)

    @contextlib.contextmanager
    def active(self) -> Iterator[CancelToken]:
        """Make this the current token for the block (in this thread or task); a CPU budget
        counts from here, on the CPU clock of the thread that enters the block."""
        reset = _CURRENT.set(self)
        if self.cpu_seconds is not None and self._cpu_deadline is None:
            self._cpu_deadline = time.thread_time() + self.cpu_seconds
        try:
            yield self
        finally:
            _CURRENT.reset(reset)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` with this token current: the form to hand to a worker thread."""
        with self.active():
            return fn()


def current() -> CancelToken | None:
    """The token the running work is under, or None."""
    return _CURRENT.get()


def checkpoint() -> None:
    """Raise ``Cancelled`` if the current token is set; nothing under no token.

    Cheap (one context-variable read): builders call it once per tool and per schema node.
    """
    token = _CURRENT.get()
    if token is not None:
        token.check()
