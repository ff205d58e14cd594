"""The format registry, and the helpers shared by the hand-written format tests
(tests/helpers/formats.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.formats import own_template
from helpers.generate_cases import accumulate
from helpers.paths import OWN_TEMPLATES

from autoparser.definition import ParserDefinition
from autoparser.errors import ExportError, TemplateError
from autoparser.formats import (
    _HANDLERS,
    BUILTIN_FORMATS,
    FINGERPRINTS,
    GENERATED,
    STANDARD,
    Format,
    add,
    format_of,
    get_handler,
    register,
    registered,
)
from autoparser.generate.context import BuildContext


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


def test_formats_answer_what_callers_ask() -> None:
    """The layers above ask the Format, never its name: the generated format lists its
    call openers and its calls are the analysis'; a hand-written one answers cautiously
    and names why a response template cannot express it."""
    generated = get_handler(STANDARD)
    assert generated is GENERATED
    assert not generated.hand_written
    assert generated.call_openers_listed and generated.calls_analysed
    assert generated.export_refusal is None
    for name in BUILTIN_FORMATS:
        if name == STANDARD:
            continue
        fmt = get_handler(name)
        assert fmt.hand_written and fmt.name == name
        assert not fmt.call_openers_listed and not fmt.calls_analysed
        assert fmt.export_refusal is not None and repr(name) in fmt.export_refusal


def test_format_of_an_analysis() -> None:
    analysis = own_template("handlers/harmony_like.jinja").analyze()
    assert format_of(analysis) is get_handler("harmony")


def test_a_registered_builder_is_a_cautious_hand_written_format() -> None:
    built: list[BuildContext] = []

    def build(ctx: BuildContext) -> ParserDefinition:
        built.append(ctx)
        raise NotImplementedError

    try:
        assert register("test_only_format")(build) is build
        fmt = get_handler("test_only_format")
        assert fmt.build is build and fmt.hand_written and not fmt.call_openers_listed
        custom = add(Format("test_only_format", build, call_openers_listed=True))
        assert get_handler("test_only_format") is custom
    finally:
        _HANDLERS.pop("test_only_format", None)
    assert "test_only_format" not in registered()


def test_a_hand_written_format_refuses_export() -> None:
    params = own_template("handlers/harmony_like.jinja").apply([{"role": "user", "content": "x"}])
    with pytest.raises(ExportError, match="hand-written 'harmony'"):
        params.to_response_template()
