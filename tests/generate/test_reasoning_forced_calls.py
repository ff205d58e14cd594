"""Forced calls are forced (issue 34 §5): with ``tool_choice="required"`` or a named tool the
grammar ends in a call. Thinking off (asked, or the prompt closed the block): no reasoning
block at all; thinking on: reasoning bounded by ``reasoning_budget`` (characters) when given.

Checked with llguidance (byte tokenizer) on inline templates of our own: one whose model
opens ``<think>`` itself and whose thinking-off prompt closes an empty block, and one whose
generation prompt opens the block.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.formats import THINK_CHATML, TOOLS, USER
from helpers.gbnf_oracle import accepts

from autoparser import ChatParams, ChatTemplate
from autoparser.errors import RequestError
from autoparser.generate.reasoning import bounded_text, spelled
from autoparser.peg import end, grammar, literal, seq

# The generation prompt opens the block.
FORCED_OPEN = THINK_CHATML.replace(
    "{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{%- endif %}",
    "<think>\n",
)
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def _params(source: str, **options: Any) -> ChatParams:
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    return ChatTemplate(source).apply(USER, tools=tools, **{"tool_choice": "required", **options})


def _grammar(params: ChatParams) -> str:
    assert params.grammar is not None and not params.grammar_lazy
    return params.grammar


@pytest.mark.parametrize("thinking", [None, True])
def test_thinking_on_allows_a_block_before_the_call(thinking: bool | None) -> None:
    grammar_text = _grammar(_params(THINK_CHATML, enable_thinking=thinking))
    assert accepts(grammar_text, CALL)
    assert accepts(grammar_text, "<think>\nHmm, weather.\n</think>\n\n" + CALL)
    assert not accepts(grammar_text, "<think>\nHmm.\n</think>\n\nJust text.")


def test_thinking_off_allows_no_block() -> None:
    params = _params(THINK_CHATML, enable_thinking=False)
    assert params.prompt.rstrip().endswith("</think>")
    grammar_text = _grammar(params)
    assert accepts(grammar_text, CALL)
    assert not accepts(grammar_text, "<think>\nHmm.\n</think>\n\n" + CALL)
    # A named tool is forced alike.
    named = {"type": "function", "function": {"name": "get_weather"}}
    forced = _grammar(_params(THINK_CHATML, enable_thinking=False, tool_choice=named))
    assert accepts(forced, CALL)
    assert not accepts(forced, "<think>\nHmm.\n</think>\n\n" + CALL)


def test_a_prompt_that_closed_the_block_is_thinking_off() -> None:
    """No ``enable_thinking`` given, but the prompt ends with the closed block (as when the
    caller set the template's variable itself): thinking is off for the grammar."""
    closed = ChatTemplate(THINK_CHATML.replace("enable_thinking is defined and", "true and"))
    params = closed.apply(
        USER, tools=[t for t in TOOLS if t["function"]["parameters"]], tool_choice="required"
    )
    assert params.prompt.rstrip().endswith("</think>")
    assert not accepts(_grammar(params), "<think>\nHmm.\n</think>\n\n" + CALL)
    assert accepts(_grammar(params), CALL)


@pytest.mark.parametrize("budget", [0, 5, 40])
def test_budget_bounds_the_reasoning(budget: int) -> None:
    grammar_text = _grammar(_params(THINK_CHATML, enable_thinking=True, reasoning_budget=budget))
    assert accepts(grammar_text, CALL)
    inside = "x" * budget
    assert accepts(grammar_text, f"<think>{inside}</think>{CALL}") == (budget > 0)
    assert not accepts(grammar_text, f"<think>{inside}y</think>{CALL}")


@pytest.mark.parametrize("budget", [0, 7])
def test_budget_with_the_block_opened_by_the_prompt(budget: int) -> None:
    params = _params(FORCED_OPEN, reasoning_budget=budget)
    assert params.thinking_forced_open
    grammar_text = _grammar(params)
    assert accepts(grammar_text, "x" * budget + "</think>" + CALL)
    assert not accepts(grammar_text, "x" * (budget + 1) + "</think>" + CALL)
    # The block must close: a call straight away is not allowed.
    assert not accepts(grammar_text, CALL)


def test_no_budget_leaves_reasoning_unbounded() -> None:
    grammar_text = _grammar(_params(FORCED_OPEN))
    assert accepts(grammar_text, "x" * 500 + "</think>" + CALL)


@pytest.mark.parametrize(
    "budget",
    [0, 1, 999, 1000, 1001, 2000, 2500],
)
def test_bounded_text_counts_exactly(budget: int) -> None:
    """Up to the budget and no further, also past the block size the count is spelled in."""
    text = grammar(seq(literal("<a>"), bounded_text("</a>", budget), spelled("</a>"), end())).text
    assert accepts(text, "<a>" + "x" * budget + "</a>")
    assert not accepts(text, "<a>" + "x" * (budget + 1) + "</a>")
    if budget >= 3:
        assert accepts(text, "<a>" + "</" + "x" * (budget - 2) + "</a>")


@pytest.mark.parametrize("marker", ["</think>", "[/THINK]", "<channel|>", "◁/think▷"])
def test_bounded_text_never_holds_the_end_marker(marker: str) -> None:
    text = grammar(seq(literal("S"), bounded_text(marker, 60), spelled(marker), end())).text
    half = marker[: len(marker) // 2]
    assert accepts(text, f"S a {half} b {marker[0]}{marker[0]}x {half}{marker}")
    assert not accepts(text, f"S a {marker} b {marker}")
    assert not accepts(text, f"S a {marker[0]}{marker} b {marker}")


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_a_bad_budget_is_a_request_error(bad: object) -> None:
    with pytest.raises(RequestError, match="reasoning_budget"):
        _params(THINK_CHATML, reasoning_budget=bad)


def test_the_parser_still_reads_reasoning_beyond_the_budget() -> None:
    """The budget constrains the grammar only: what a model writes is still read whole."""
    params = _params(THINK_CHATML, enable_thinking=True, reasoning_budget=3)
    message = params.parse("<think>a long thought</think>" + CALL)
    assert message.reasoning_content == "a long thought"
    assert [c.name for c in message.tool_calls] == ["get_weather"]
