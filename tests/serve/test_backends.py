"""The names the request routes read from ``serve/backends.py`` are the engines' own."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp", reason="the serve extra (aiohttp) is not installed")

from autoparser.serve import backends
from autoparser.serve.engines import base


def test_the_routes_names_are_the_engines() -> None:
    for name in backends.__all__:
        assert getattr(backends, name) is getattr(base, name)
    assert set(backends.__all__) == {"BackendError", "Finished", "Generation"}
