"""ChatParams: one request's prompt, grammar, triggers and parser, and the prompt-facts rules."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers.formats import TOOLS, USER, own_template

from autoparser.analysis.model import ReasoningAnalysis, ReasoningMode, TemplateAnalysis
from autoparser.params import ChatParams, build_params, prompt_closes_reasoning
from autoparser.peg import GrammarTrigger

THINK = TemplateAnalysis(
    reasoning=ReasoningAnalysis(ReasoningMode.TAG_BASED, "<think>", "</think>")
)


@pytest.fixture(scope="module")
def params() -> ChatParams:
    return own_template("formats/chatml_hermes.jinja").apply(USER, tools=TOOLS)


def test_grammar_fields_are_json_ready(params: ChatParams) -> None:
    fields = json.loads(json.dumps(params.grammar_fields()))
    assert fields["grammar"] == params.grammar and fields["grammar_lazy"] is True
    assert fields["grammar_triggers"] == [t.to_dict() for t in params.grammar_triggers]


def test_parse_and_stream_share_one_reading(params: ChatParams) -> None:
    text = 'Sure.<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>'
    stream = params.stream()
    for k in range(0, len(text), 5):
        stream.feed(text[k : k + 5])
    stream.finish()
    whole = params.parse(text)
    assert [c.name for c in whole.tool_calls] == ["ping"]
    assert stream.message.content == whole.content == "Sure."


@pytest.mark.parametrize(
    ("trigger", "text", "start"),
    [
        (GrammarTrigger("word", "<tool_call>"), "a <tool_call>", 2),
        (GrammarTrigger("token", "<tool_call>"), "no call", -1),
        (GrammarTrigger("pattern", r"\s*(<call>)"), "x  <call>", 3),
        (GrammarTrigger("pattern_full", r"(\[)[\s\S]*"), "[f()]", 0),
        (GrammarTrigger("pattern_full", r"(\[)[\s\S]*"), "x[f()]", -1),
    ],
)
def test_trigger_start_applies_each_kind_as_an_engine_does(
    params: ChatParams, trigger: GrammarTrigger, text: str, start: int
) -> None:
    assert dataclasses.replace(params, grammar_triggers=[trigger]).trigger_start(text) == start


def test_build_params_needs_no_template() -> None:
    built = build_params(THINK, prompt="<|user|>Hi<|assistant|><think>\n", enable_thinking=True)
    assert built.thinking_forced_open
    message = built.parse("plan</think>answer")
    assert (message.reasoning_content, message.content) == ("plan", "answer")


@pytest.mark.parametrize(
    ("prompt", "forced", "closes"),
    [
        ("<|assistant|><think>\n\n</think>\n\n", False, True),
        ("<|assistant|>", False, False),
        ("<|assistant|><think>\n\n</think>", True, False),  # the block is open: not closed
        ("<|assistant|></think>", False, False),  # a lone closer, not a FORCED_CLOSED template
    ],
)
def test_prompt_closes_reasoning(prompt: str, forced: bool, closes: bool) -> None:
    assert prompt_closes_reasoning(THINK, prompt, forced) is closes
