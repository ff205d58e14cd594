"""Cooperative cancellation of CPU work: a token the caller sets, checked by the builders.

Building a grammar for thousands of tools runs in a worker thread, which Python cannot
stop from outside: a server whose client left would otherwise let it run to the end. The
caller makes a ``CancelToken`` and runs the work under it (``token.run(fn)``, or
``with token.active():``); the builders call ``checkpoint()`` at coarse points (per tool,
per schema node), which raises ``Cancelled`` once the token is set. The token is
context-local (a ``contextvars`` variable), so nothing has to pass it through every call,
and work run under no token is never cancelled.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from autoparser.errors import Cancelled

T = TypeVar("T")
_CURRENT: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar(
    "autoparser_cancel_token", default=None
)


class CancelToken:
    """A flag one side sets (``cancel``) and the work under it checks (``checkpoint``).

    Thread-safe (a ``threading.Event``): a server's event loop sets it while a worker
    thread builds. ``checks`` counts the checkpoints passed under it, so a caller (a test)
    can see how far the work went before it stopped.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.checks = 0

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
        """Raise ``Cancelled`` if the token is set."""
        self.checks += 1
        if self._event.is_set():
            raise Cancelled(f"the work was cancelled: {self.reason}")

    @contextlib.contextmanager
    def active(self) -> Iterator[CancelToken]:
        """Make this the current token for the block (in this thread or task)."""
        reset = _CURRENT.set(self)
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
