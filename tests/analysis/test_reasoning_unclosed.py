"""A reasoning block the generation prompt opens and nothing in the template closes
(issue 21, corpus class: history turns never render reasoning, no closer in the source).

The generation prompt ends in a conventional reasoning opener (``<think>``, ``[THINK]``):
the analysis assumes its conventional closer, so the output starts inside the reasoning
(forced open), as llama.cpp does for ``<think>``. Any other unclosed opener is no reasoning.
"""

from __future__ import annotations

import pytest
from helpers.formats import USER, check_streaming

from autoparser import ChatTemplate
from autoparser.analysis import ReasoningMode


def _source(opener: str) -> str:
    return (
        "{%- for message in messages %}<|{{ message.role }}|>\n{{ message.content }}<|end|>\n"
        "{%- endfor %}{%- if add_generation_prompt %}<|assistant|>\n" + opener + "\n{% endif %}"
    )


@pytest.mark.parametrize(("opener", "closer"), [("<think>", "</think>"), ("[THINK]", "[/THINK]")])
def test_a_conventional_opener_implies_its_closer(opener: str, closer: str) -> None:
    template = ChatTemplate(_source(opener))
    assert closer not in template.source
    reasoning = template.analyze().reasoning
    assert (reasoning.mode, reasoning.start, reasoning.end) == (
        ReasoningMode.FORCED_OPEN,
        opener,
        closer,
    )
    params = template.apply(USER)
    assert params.thinking_forced_open
    text = f"Let me see.\n{closer}\nHello."
    message = params.parse(text)
    assert (message.reasoning_content, message.content) == ("Let me see.", "Hello.")
    check_streaming(params, text, count=6)
    cut = params.parse("Still thinking")
    assert cut.reasoning_content == "Still thinking" and cut.truncated


def test_another_unclosed_opener_is_no_reasoning() -> None:
    template = ChatTemplate(_source("<judge>"))
    assert template.analyze().reasoning.mode == ReasoningMode.NONE
    assert template.apply(USER).parse("Hello.</judge>").content == "Hello.</judge>"
