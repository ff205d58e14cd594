"""Reasoning rendered only on call turns, read only under the ``reasoning`` key (issue 21,
corpus class).

The template shows an assistant turn's reasoning only when the turn calls tools, and reads
it from ``message.reasoning`` (never ``reasoning_content``). The probe of reasoning in call
turns tries every message key reasoning may come under, so the analysis finds the
tools-only block and the key its history reads.
"""

from __future__ import annotations

import json

from helpers.formats import TOOLS, USER, check_streaming

from autoparser import ChatTemplate
from autoparser.analysis import ReasoningMode

SOURCE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<|assistant|>"
    "{%- if message.reasoning %}<thought>{{ message.reasoning }}</thought>{%- endif %}"
    "{%- for tc in message.tool_calls %}<call>"
    '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments | tojson }}}'
    "</call>{%- endfor %}<|end|>"
    "{%- elif message.role == 'assistant' %}<|assistant|>{{ message.content }}<|end|>"
    "{%- else %}<|{{ message.role }}|>{{ message.content }}<|end|>{%- endif %}{%- endfor %}"
    "{%- if tools %}<|tools|>{{ tools | tojson }}<|end|>{%- endif %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_the_block_and_its_key_are_found() -> None:
    reasoning = ChatTemplate(SOURCE).analyze().reasoning
    assert reasoning.mode == ReasoningMode.TOOLS_ONLY
    assert (reasoning.start, reasoning.end) == ("<thought>", "</thought>")
    assert reasoning.history_field == "reasoning"


def test_reasoning_then_a_call_parses_whole_and_streamed() -> None:
    params = ChatTemplate(SOURCE).apply(USER, tools=TOOLS, call_id_seed=6)
    text = (
        '<thought>Need the weather.</thought><call>{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}</call>'
    )
    message = params.parse(text)
    assert message.reasoning_content == "Need the weather."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    check_streaming(params, text, count=6)
