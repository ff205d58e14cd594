"""Reasoning markers a template writes only in its thinking-off render (issue 34 §4).

Hunyuan-A13B appends ``<think>\\n\\n</think>\\n`` to every render when ``enable_thinking``
is false, outside the generation prompt (which is empty both ways): the markers show only
in the render's tail. They are the block the model writes itself when thinking is on, so
``<think>…</think>`` output is reasoning. Inline templates of our own, written like it.
"""

from __future__ import annotations

import pytest
from helpers.formats import TOOLS, USER, check_streaming
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.analysis.model import ReasoningMode

_TURNS = (
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}<|startoftext|>{{ message.content }}<|extra_0|>"
    "{%- else %}{{ message.content }}<|eos|>{%- endif %}{%- endfor %}"
)
# The thinking-off block at the very end of every render, generation prompt or not.
AT_THE_END = (
    _TURNS + "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n' }}{%- endif %}"
)
# The same with [THINK] markers, and only under the generation prompt's flag (the usual
# place, found before: the rule must agree).
BRACKETS = (
    _TURNS + "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '[THINK]\\n\\n[/THINK]\\n' }}{%- endif %}"
)
# A template whose thinking-off text is not at the end (a system note): no reasoning markers.
NOT_AT_THE_END = (
    "{%- if enable_thinking is defined and enable_thinking is false %}<note>no</note>"
    "{%- endif %}" + _TURNS
)


@pytest.mark.parametrize(
    ("source", "start", "end"),
    [(AT_THE_END, "<think>", "</think>"), (BRACKETS, "[THINK]", "[/THINK]")],
    ids=["think", "brackets"],
)
def test_markers_from_the_thinking_off_render(source: str, start: str, end: str) -> None:
    template = ChatTemplate(source)
    reasoning = template.analyze().reasoning
    assert (reasoning.mode, reasoning.start, reasoning.end) == (
        ReasoningMode.TAG_BASED,
        start,
        end,
    )
    params = template.apply(USER, enable_thinking=True)
    text = f"{start}\nLet me see.\n{end}\nHello!"
    message = params.parse(text)
    assert (message.reasoning_content, message.content) == ("Let me see.", "Hello!")
    check_streaming(params, text, count=10, seed=3)
    # Thinking off: the prompt closed the block; a plain answer is content.
    off = template.apply(USER, enable_thinking=False)
    assert off.prompt.rstrip().endswith(end)
    assert off.parse("Hello!").content == "Hello!"


def test_thinking_off_text_inside_the_conversation_is_not_a_marker() -> None:
    reasoning = ChatTemplate(NOT_AT_THE_END).analyze().reasoning
    assert reasoning.mode is ReasoningMode.NONE


def test_forced_call_with_thinking_off_has_no_block() -> None:
    """The tail the template writes with thinking off closes the block: a forced call's
    grammar then starts with the call."""
    source = AT_THE_END + (
        "{%- if tools %}{%- for t in [] %}{%- endfor %}{%- endif %}"
        "{%- for message in messages %}{%- for tc in message.tool_calls or [] %}"
        '<tool_call>{"name": "{{ tc.function.name }}", "arguments": '
        "{{ tc.function.arguments | tojson }}}</tool_call>{%- endfor %}{%- endfor %}"
    )
    template = ChatTemplate(source)
    if template.analyze().tools.format.mode.value == "none":
        pytest.skip("the probe finds no call format in this minimal template")
    tools = [t for t in TOOLS if t["function"]["parameters"]]
    params = template.apply(USER, tools=tools, tool_choice="required", enable_thinking=False)
    assert params.grammar is not None
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert accepts(params.grammar, call)
    assert not accepts(params.grammar, "<think>x</think>" + call)
