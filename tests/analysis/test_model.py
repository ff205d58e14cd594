"""The analysis as plain data: serialised and read back whole, and the one reasoning rule."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autoparser.analysis.model import (
    AnalysisVerification,
    ContentAnalysis,
    ContentMode,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
    VerificationFailure,
)
from autoparser.template.switches import SYSTEM_DIRECTIVE, ThinkingSwitch

THINKING = ReasoningAnalysis(
    mode=ReasoningMode.FORCED_OPEN,
    start="<think>\n",
    end="</think>",
    switch_variable="enable_thinking",
    switch_on=True,
    switch_off=False,
)
ANALYSIS = TemplateAnalysis(
    reasoning=THINKING,
    content=ContentAnalysis(ContentMode.ALWAYS_WRAPPED, "<r>", "</r>"),
    tools=ToolsAnalysis(format=ToolFormatAnalysis(mode=ToolFormat.JSON_NATIVE)),
    generation_prompt="<|im_start|>assistant\n<think>\n",
    end_of_turn=("<|im_end|>",),
    preserved_tokens=("<think>", "</think>"),
    handler="",
)


def test_to_dict_and_back_is_the_same_analysis() -> None:
    data = json.loads(ANALYSIS.to_json())
    assert TemplateAnalysis.from_dict(data) == ANALYSIS
    assert data["reasoning"]["mode"] == ReasoningMode.FORCED_OPEN.value  # enums as values
    assert "verification" not in data and "switch_kind" not in data["reasoning"]


def test_a_verification_survives_the_round_trip() -> None:
    checked = dataclasses.replace(
        ANALYSIS,
        verification=AnalysisVerification(
            checks=("parse",),
            failures=(VerificationFailure("parse", "lost a call"),),
            skipped=(("grammar", "no tools"),),
        ),
    )
    back = TemplateAnalysis.from_dict(json.loads(checked.to_json()))
    assert back == checked
    assert back.verification is not None and not back.verification.verified
    assert back.verification.summary() == "parse: lost a call"


def test_missing_fields_take_their_defaults() -> None:
    assert TemplateAnalysis.from_dict({}) == TemplateAnalysis()
    partial = TemplateAnalysis.from_dict({"reasoning": {"end": "</think>"}})
    assert partial.reasoning == ReasoningAnalysis(end="</think>")


def test_the_switch_is_read_from_its_fields() -> None:
    assert THINKING.switch == ThinkingSwitch("enable_thinking", True, False)
    assert ReasoningAnalysis(switch_variable="thinking").switch is None  # values missing
    directive = ReasoningAnalysis(
        switch_on="/think", switch_off="/no_think", switch_kind=SYSTEM_DIRECTIVE
    )
    assert directive.switch == ThinkingSwitch("", "/think", "/no_think", SYSTEM_DIRECTIVE)


@pytest.mark.parametrize(
    ("reasoning", "prompt", "enable_thinking", "opens"),
    [
        (THINKING, "<|im_start|>assistant\n<think>\n", None, True),
        (THINKING, "<|im_start|>assistant\n", True, False),
        (ReasoningAnalysis(ReasoningMode.DELIMITER, "", "</think>"), "x", True, True),
        (ReasoningAnalysis(ReasoningMode.DELIMITER, "", "</think>"), "x", None, False),
        (ReasoningAnalysis(ReasoningMode.NONE, "<think>", "</think>"), "<think>", True, False),
    ],
)
def test_prompt_opens_reasoning(
    reasoning: ReasoningAnalysis, prompt: str, enable_thinking: bool | None, opens: bool
) -> None:
    analysis = TemplateAnalysis(reasoning=reasoning)
    assert analysis.prompt_opens_reasoning(prompt, enable_thinking) is opens
