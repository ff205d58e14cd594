"""Example files shipped with autoparser (a small chat template for offline demos)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE_TEMPLATE = "chatml_tools.jinja"


def example_path(name: str = EXAMPLE_TEMPLATE) -> Path:
    """Filesystem path of a shipped example file (installed as package data)."""
    return Path(str(resources.files(__name__).joinpath(name)))
