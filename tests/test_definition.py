"""What a tool-call format produces, and how its own declarations reach the params."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.generate_cases import CASE_BY_NAME, TOOLS

from autoparser.definition import ParserDefinition
from autoparser.peg import GrammarTrigger, literal


def test_handler_tokens_stops_and_triggers_are_used() -> None:
    """A hand-written format's own preserved tokens and stops are merged with the
    analysis' ones; its explicit triggers replace those the lazy grammar derives."""
    from autoparser.formats import register
    from autoparser.generate import build_standard
    from autoparser.generate.context import BuildContext

    anchored = GrammarTrigger("pattern_full", r"^(<tool_call>)[\s\S]*")

    @register("test_extra_fields")
    def build(ctx: BuildContext) -> ParserDefinition:
        return dataclasses.replace(
            build_standard(ctx),
            preserved_tokens=("<extra>", "<tool_call>"),
            additional_stops=("<stop>", "<|im_end|>"),
            grammar_triggers=(anchored,),
        )

    base = CASE_BY_NAME["hermes"]
    tokens = ("<tool_call>", "</tool_call>")
    case = dataclasses.replace(
        base, analysis=dataclasses.replace(base.analysis, preserved_tokens=tokens)
    )
    plain = case.params(TOOLS)
    handled = dataclasses.replace(
        case, analysis=dataclasses.replace(case.analysis, handler="test_extra_fields")
    ).params(TOOLS)
    assert plain.preserved_tokens == list(tokens)
    assert plain.grammar_triggers != [anchored]
    assert handled.grammar_triggers == [anchored]
    assert handled.grammar == plain.grammar
    assert handled.preserved_tokens == [*plain.preserved_tokens, "<extra>"]
    assert handled.additional_stops == ["<|im_end|>", "<stop>"]


def test_a_definition_is_plain_frozen_data_with_empty_defaults() -> None:
    definition = ParserDefinition(literal("x"))
    assert definition.grammar_parser is None and not definition.grammar_lazy
    assert definition.trigger_markers == () and definition.value_converters == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        definition.grammar_lazy = True  # type: ignore[misc]
