"""The format registry, and the helpers shared by the hand-written format tests
(tests/helpers/formats.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.formats import own_template
from helpers.generate_cases import accumulate
from helpers.paths import OWN_TEMPLATES

from autoparser.errors import TemplateError
from autoparser.formats import FINGERPRINTS, STANDARD, get_handler, registered


def test_handlers_are_listed_by_name() -> None:
    assert get_handler("harmony") is get_handler("harmony")
    assert get_handler("functionary_v3_2")
    assert {"harmony", "functionary_v3_2"} <= set(registered())


def test_every_fingerprint_names_a_listed_handler() -> None:
    assert {name for name, _ in FINGERPRINTS} | {STANDARD} <= set(registered())


def test_unknown_handler_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="no_such_format"):
        get_handler("no_such_format")


@pytest.mark.parametrize(
    ("name", "handler"),
    [
        ("handlers/harmony_like.jinja", "harmony"),
        ("handlers/functionary_v3_2_like.jinja", "functionary_v3_2"),
    ],
)
def test_own_templates_are_fingerprinted(name: str, handler: str) -> None:
    assert own_template(name).analyze().handler == handler


def test_helpers_fold_deltas() -> None:
    deltas = [
        {"content": "a"},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "x",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
    ]
    folded = accumulate(deltas)
    assert folded == {
        "content": "a",
        "reasoning_content": None,
        "tool_calls": [{"id": "x", "name": "f", "arguments": "{}"}],
    }
    assert Path(OWN_TEMPLATES).is_dir()
