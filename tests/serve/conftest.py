"""Fixtures every serve test module shares."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.serve_standin import LoopThread


@pytest.fixture(scope="module")
def loop() -> Iterator[LoopThread]:
    """An event loop on a thread of its own, for the servers and stand-in engines of one
    module (closed with it)."""
    thread = LoopThread()
    yield thread
    thread.close()
