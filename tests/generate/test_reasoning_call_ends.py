"""A call opener before the reasoning closes ends the reasoning (issue 21 §3).

``Let me think<tool_call>{...}</tool_call>`` after a prompt that opened ``<think>``: the
reasoning is the text before the opener and the call is a call (llama.cpp, vLLM and Ollama
do the same). ``calls_in_reasoning=True`` keeps reading calls inside the reasoning instead.
Inline templates of our own: a ChatML one whose generation prompt opens ``<think>``, and
one whose model writes ``<think>`` itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.formats import TOOLS, USER, check_streaming

from autoparser import ChatParams, ChatTemplate

_CALLS = (
    "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}"
    '<tool_call>\n{"name": "{{ tc.function.name }}", "arguments": '
    "{{ tc.function.arguments | tojson }}}\n</tool_call>{%- endfor %}{%- endif %}"
)
_HISTORY = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}<|im_start|>assistant\n"
    "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    "{%- endif %}{{ message.content or '' }}" + _CALLS + "<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if tools %}<|im_start|>system\ntools: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
)
# The generation prompt opens the block: the output starts inside the reasoning.
FORCED_OPEN = _HISTORY + "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>{% endif %}"
# The model opens the block itself.
MODEL_OPENS = _HISTORY + "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


def _params(source: str, **options: Any) -> ChatParams:
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    return ChatTemplate(source).apply(USER, tools=tools, call_id_seed=1, **options)


def _calls(params: ChatParams, text: str) -> list[dict[str, Any]]:
    import json

    return [
        {"name": c.name, "arguments": json.loads(c.arguments)}
        for c in params.parse(text).tool_calls
    ]


@pytest.mark.parametrize(
    ("source", "lead"), [(FORCED_OPEN, ""), (MODEL_OPENS, "<think>")], ids=["forced", "model"]
)
def test_a_call_before_the_closer_ends_the_reasoning(source: str, lead: str) -> None:
    params = _params(source)
    assert params.prompt.endswith("<think>") == (lead == "")
    text = f"{lead}Let me think{CALL}"
    message = params.parse(text)
    assert message.reasoning_content == "Let me think"
    assert message.content is None and not message.truncated
    assert _calls(params, text) == [WEATHER_CALL]
    check_streaming(params, text, count=8, seed=1)


@pytest.mark.parametrize("source", [FORCED_OPEN, MODEL_OPENS], ids=["forced", "model"])
def test_text_after_the_call_is_content_and_a_late_closer_is_dropped(source: str) -> None:
    """The closer after the calls ends the block late: text before it is reasoning (no raw
    closer reaches the content, issue 34); without a closer, later text is content."""
    params = _params(source)
    lead = "" if params.prompt.endswith("<think>") else "<think>"
    for after, reasoning, content in (
        ("\n</think>\nAnswer.", "Checking.", "Answer."),
        ("\nDone.</think>\nAnswer.", "Checking.\n\nDone.", "Answer."),
        ("\nAnswer.", "Checking.", "Answer."),
    ):
        text = f"{lead}Checking.\n{CALL}{after}"
        message = params.parse(text)
        assert message.reasoning_content == reasoning
        assert message.content == content and not message.truncated
        assert [f.kind for f in message.findings] == ["call_in_reasoning"]
        assert _calls(params, text) == [WEATHER_CALL]
        check_streaming(params, text, count=8, seed=2)


def test_an_opener_that_starts_no_call_stays_reasoning() -> None:
    """Prose quoting the opener, or a call of an unknown tool, is reasoning text."""
    params = _params(FORCED_OPEN)
    for text in (
        "I write <tool_call> tags later.</think>Fine.",
        'Maybe <tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call> no.</think>Fine.',
    ):
        message = params.parse(text)
        assert message.tool_calls == [] and message.content == "Fine."
        assert message.reasoning_content == text[: text.index("</think>")]
        check_streaming(params, text, count=6, seed=3)


def test_the_switch_keeps_calls_inside_the_reasoning() -> None:
    """``calls_in_reasoning=True``: the call is read and the reasoning goes on after it."""
    params = _params(FORCED_OPEN, calls_in_reasoning=True)
    text = f"Checking.\n{CALL}\nDone.</think>\nAnswer."
    message = params.parse(text)
    assert message.reasoning_content == "Checking.\n\nDone."
    assert message.content == "Answer."
    assert _calls(params, text) == [WEATHER_CALL]
    check_streaming(params, text, count=6, seed=4)


def test_output_cut_inside_the_reasoning_is_still_truncated() -> None:
    params = _params(FORCED_OPEN)
    message = params.parse("Let me think about Paris")
    assert message.reasoning_content == "Let me think about Paris" and message.truncated
    closed = params.parse(f"Let me think{CALL}")
    assert not closed.truncated
