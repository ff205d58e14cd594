"""Harmony-style channels (issue 21 §3): what closes a message, who is called, where the
output was cut.

An inline template of our own in the harmony style whose history turns all end with
``<|end|>`` (as a real variant does), so the analysis takes ``<|end|>`` for the end of turn:
it must still never be a stop string. Built-in recipients (``to=browser.search``) are calls
with that name; a marker quoted inside a message is text; output cut inside a header is
truncated, not content. Each case is parsed whole and streamed (1-char and random chunks).
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, USER, check_streaming

from autoparser import ChatParams, ChatTemplate

SOURCE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}"
    "{%- if message.reasoning_content %}<|start|>assistant<|channel|>analysis<|message|>"
    "{{ message.reasoning_content }}<|end|>{%- endif %}"
    "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}"
    "<|start|>assistant to=functions.{{ tc.function.name }}<|channel|>commentary json"
    "<|message|>{{ tc.function.arguments | tojson }}<|call|>{%- endfor %}"
    "{%- else %}<|start|>assistant<|channel|>final<|message|>{{ message.content }}<|end|>"
    "{%- endif %}"
    "{%- else %}<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|start|>assistant{% endif %}"
)
HEAD = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant"


def _params(tools: bool = True) -> ChatParams:
    return ChatTemplate(SOURCE).apply(USER, tools=TOOLS if tools else None, call_id_seed=3)


def test_end_closes_a_channel_and_is_never_a_stop() -> None:
    template = ChatTemplate(SOURCE)
    assert template.analyze().handler == "harmony"
    for params in (_params(), _params(tools=False)):
        assert "<|end|>" not in params.additional_stops
        assert "<|return|>" in params.additional_stops
    text = HEAD + "<|channel|>final<|message|>The answer.<|end|>"
    message = _params().parse(text)
    assert (message.reasoning_content, message.content) == ("Think.", "The answer.")
    check_streaming(_params(), text, count=6)


@pytest.mark.parametrize(
    "header",
    [
        "<|channel|>analysis to=browser.search code<|message|>",
        " to=browser.search<|channel|>analysis code<|message|>",
        "<|channel|>commentary to=container.exec <|constrain|>json<|message|>",
    ],
)
def test_a_built_in_recipient_is_a_call_with_that_name(header: str) -> None:
    text = HEAD + header + '{"query": "weather Paris", "topn": 3}<|call|>'
    params = _params()
    message = params.parse(text)
    name = header.split("to=")[1].split("<")[0].split(" ")[0]
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        (name, {"query": "weather Paris", "topn": 3})
    ]
    assert message.content is None and message.reasoning_content == "Think."
    check_streaming(params, text, count=6)


def test_a_built_in_recipient_is_no_call_without_tools_or_json() -> None:
    """tool_choice none (no tools): the message stays text; a body that is no JSON object
    (python's code) is not a call either."""
    builtin = '<|channel|>analysis to=browser.search code<|message|>{"query": "x"}<|call|>'
    assert _params(tools=False).parse(HEAD + builtin).tool_calls == []
    code = "<|channel|>analysis to=python code<|message|>print(1)<|call|>"
    assert _params().parse(HEAD + code).tool_calls == []


@pytest.mark.parametrize("quoted", ["<|end|>", "<|channel|>", "<|call|>", "<|return|>"])
def test_a_marker_quoted_inside_reasoning_does_not_end_it(quoted: str) -> None:
    reasoning = f"The {quoted} token ends a message; I must not write {quoted} here."
    text = (
        f"<|channel|>analysis<|message|>{reasoning}<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done."
    )
    params = _params()
    message = params.parse(text)
    assert (message.reasoning_content, message.content) == (reasoning, "Done.")
    assert not message.truncated
    check_streaming(params, text, count=6)


@pytest.mark.parametrize(
    "cut",
    [
        "<|channel|>fin",
        "<|channel|>final<|constrain|>",
        " to=functions.get_wea",
        "<|channel|>commentary to=functions.get_weather json",
        "<|channel|>analysis to=browser.se",
    ],
)
def test_output_cut_inside_a_header_is_truncated_not_content(cut: str) -> None:
    text = HEAD + cut
    params = _params()
    message = params.parse(text)
    assert (message.content, message.reasoning_content) == (None, "Think.")
    assert message.tool_calls == [] and message.truncated
    check_streaming(params, text, count=6)
