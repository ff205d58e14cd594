"""The install extras are named after the faces (issue 37 §5): ``[serve]``, ``[studio]``,
``[hub]``, and ``[all]`` for every one of them; each face's "needs the extra" message names
an extra that exists and brings what that face imports."""

from __future__ import annotations

import re

import pytest
from helpers.paths import REPO_ROOT

tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads pyproject.toml")

EXTRAS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]
SOURCE = REPO_ROOT / "src/autoparser"


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_each_face_has_its_extra_and_all_has_them_all() -> None:
    assert {"aiohttp", "prometheus_client"} <= _names(EXTRAS["serve"])
    assert "aiohttp" in _names(EXTRAS["studio"])
    assert "huggingface_hub" in _names(EXTRAS["hub"])
    (everything,) = EXTRAS["all"]
    assert everything == "autoparser[hub,serve,studio]"


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("serve/command.py", "serve"),
        ("studio/command.py", "studio"),
        ("template/loading.py", "hub"),
    ],
)
def test_the_missing_extra_messages_name_real_extras(module: str, extra: str) -> None:
    text = (SOURCE / module).read_text(encoding="utf-8")
    named = set(re.findall(r"autoparser\[(\w+)\]", text))
    assert named == {extra} and extra in EXTRAS
