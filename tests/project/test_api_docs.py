"""Every public class, method and property has a docstring, and docs/api.md documents it."""

from __future__ import annotations

import sys

import pytest
from helpers.paths import REPO_ROOT

import autoparser

DOCS = REPO_ROOT / "docs"
sys.path.insert(0, str(DOCS))
from gen_api import public_members, render  # noqa: E402

PUBLIC = sorted(autoparser.__all__)
MEMBERS = [
    (f"{name}.{member}", value)
    for name in PUBLIC
    if isinstance(getattr(autoparser, name), type)
    for member, value in public_members(getattr(autoparser, name))
]


def _doc(value: object) -> str | None:
    if isinstance(value, property):
        value = value.fget
    return getattr(value, "__doc__", None)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_has_docstring(name: str) -> None:
    assert (getattr(autoparser, name).__doc__ or "").strip(), f"{name} has no docstring"


@pytest.mark.parametrize(("name", "value"), MEMBERS, ids=[m for m, _ in MEMBERS])
def test_public_member_has_docstring(name: str, value: object) -> None:
    assert (_doc(value) or "").strip(), f"{name} has no docstring"


def test_members_cover_the_stream_api() -> None:
    """The walk finds methods, properties and classmethods (it cannot silently find nothing)."""
    names = {m for m, _ in MEMBERS}
    assert {"StreamParser.feed", "StreamParser.message", "ChatTemplate.from_file"} <= names


def test_api_md_is_current() -> None:
    """docs/api.md is what docs/gen_api.py writes from today's docstrings."""
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    for name in [*PUBLIC, *(m for m, _ in MEMBERS)]:
        assert f"`{name}" in text, f"{name} missing from docs/api.md"
    assert text == render(), "docs/api.md is stale: run python docs/gen_api.py"
