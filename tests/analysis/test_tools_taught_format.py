"""A call format the template teaches only in its tool instructions (issue 34 §4).

SmolLM3's template lists the tools and says "For each function call, return a json object
with function name and arguments within <tool_call></tool_call> XML tags:" with an example,
but renders no call turn at all: the format is read from the example in the text the
template adds when tools are given. Inline templates of our own, parsed whole and streamed.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import USER, check_streaming

from autoparser import ChatTemplate
from autoparser.analysis.model import ToolFormat

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _teaching(example: str) -> str:
    """ChatML that lists the tools with ``example`` as the instructions and never renders
    a call (an assistant turn prints its content only)."""
    return (
        "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>"
        "{%- for t in tools %}\n{{ t | tojson }}{%- endfor %}\n</tools>\n\n"
        + "{% raw %}"
        + example
        + "{% endraw %}<|im_end|>\n{%- endif %}"
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n"
        "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
    )


SMOL = _teaching(
    "For each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
TOKENS = _teaching('Call a function as <|call|>{"function": "NAME", "parameters": {...}}<|/call|>.')


@pytest.mark.parametrize(
    ("source", "call"),
    [
        (
            SMOL,
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        ),
        (TOKENS, '<|call|>{"function": "get_weather", "parameters": {"city": "Paris"}}<|/call|>'),
    ],
    ids=["xml-tags", "token-tags"],
)
def test_the_taught_format_reads_calls(source: str, call: str) -> None:
    template = ChatTemplate(source)
    assert template.analyze().tools.format.mode is ToolFormat.JSON_NATIVE
    params = template.apply(USER, tools=[WEATHER], call_id_seed=1)
    text = f"Let me look.\n{call}"
    message = params.parse(text)
    assert message.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    check_streaming(params, text, count=10, seed=4)
    required = template.apply(USER, tools=[WEATHER], tool_choice="required")
    from helpers.gbnf_oracle import accepts

    assert required.grammar is not None and accepts(required.grammar, call)


def test_instructions_without_an_example_teach_nothing() -> None:
    template = ChatTemplate(_teaching("Call functions in XML tags when you need them."))
    assert template.analyze().tools.format.mode is ToolFormat.NONE
    params = template.apply(USER, tools=[WEATHER])
    text = '<tool_call>{"name": "get_weather"}</tool_call>'
    assert params.parse(text).content == text


def test_a_rendered_format_wins_over_the_taught_one() -> None:
    """The instructions are read only where no call turn renders: what renders is what the
    model was trained on."""
    source = SMOL.replace(
        "{{ m.content or '' }}",
        "{{ m.content or '' }}{%- for tc in m.tool_calls or [] %}"
        '<call>{"name": "{{ tc.function.name }}", "arguments": '
        "{{ tc.function.arguments | tojson }}}</call>{%- endfor %}",
    )
    fmt = ChatTemplate(source).analyze().tools.format
    assert fmt.per_call_start.strip() == "<call>"
