"""Model outputs per format family for issue 21 §1/§2 on the real corpus templates: what
models write around or instead of the template's own call form (Llama 4's
``<|python_start|>``, DeepSeek's self-closed DSML invoke, Gemma 4's repeated channel
markup, Kimi-K3's escaped names, Python-dict and broken-JSON templates). Parsed whole and
streamed (1-character and random chunks); skipped when the corpus is absent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet
from helpers.formats import check_streaming, corpus_template

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SUBMIT = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": "Submit.",
        "parameters": {"type": "object", "properties": {}},
    },
}
ASK = {
    "type": "function",
    "function": {
        "name": "ask",
        "description": "Ask.",
        "parameters": {"type": "object", "properties": {"q&a": {"type": "string"}}},
    },
}
USER = [{"role": "user", "content": "Go."}]
PARIS = ("get_weather", {"city": "Paris"})

CASES: list[tuple[str, list[dict[str, Any]], bool | None, str, str | None, Any]] = [
    # (template file, tools, enable_thinking, output, content, calls)
    (
        "axolotl-llama4.jinja",
        [WEATHER],
        None,
        '<|python_start|>Checking.<|python_end|>{"name": "get_weather", "parameters": '
        '{"city": "Paris"}}',
        "Checking.",
        [PARIS],
    ),
    (
        "axolotl-llama4.jinja",
        [WEATHER],
        None,
        '<|python_start|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|python_end|>',
        None,
        [PARIS],
    ),
    (
        "DeepSeek-V3.2.jinja",
        [WEATHER, SUBMIT],
        False,
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="submit"/>\n</｜DSML｜function_calls>',
        None,
        [("submit", {})],
    ),
    (
        "google-gemma-4-31B-it.jinja",
        [WEATHER],
        True,
        "<|channel>thought\nHmm.<channel|><|channel>thought\n<channel|>Sunny.",
        "Sunny.",
        [],
    ),
    (
        "google-gemma-4-31B-it.jinja",
        [WEATHER],
        True,
        '<|channel>thought\nHmm.<channel|><channel|><|tool_call>call:get_weather{city:<|"|>'
        'Paris<|"|>}<tool_call|>',
        None,
        [PARIS],
    ),
    (
        "Kimi-K3.jinja",
        [ASK],
        False,
        '<|open|>tools<|sep|><|open|>call tool="ask" index="1"<|sep|><|open|>argument '
        'key="q&amp;a" type="string"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|>'
        "<|close|>tools<|sep|>",
        None,
        [("ask", {"q&a": "x"})],
    ),
    pytest.param(
        "vllm-tool_chat_template_phi4_mini.jinja",
        [WEATHER],
        None,
        '{"name": "get_weather", "arguments": {\'city\': \'Paris\'}}',
        None,
        [PARIS],
        marks=pytest.mark.xfail(
            strict=True,
            reason="Python-literal arguments in a JSON-native call are not read yet "
            "(tests/generate/test_json_calls_argument_shapes.py says why)",
        ),
    ),
    (
        "xinference-qwen2-hermes-tools.jinja",
        [WEATHER],
        None,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        None,
        [PARIS],
    ),
    (
        "xinference-deepseek-v3.jinja",
        [WEATHER],
        None,
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{"parameters": {"city": "Paris"}, '
        '"name": "get_weather"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        None,
        [PARIS],
    ),
]


@pytest.mark.parametrize(
    ("filename", "tools", "thinking", "text", "content", "calls"),
    CASES,
    ids=[
        f"{(c.values if isinstance(c, ParameterSet) else c)[0].removesuffix('.jinja')}-{i}"
        for i, c in enumerate(CASES)
    ],
)
def test_real_templates_read_what_models_write(
    filename: str,
    tools: list[dict[str, Any]],
    thinking: bool | None,
    text: str,
    content: str | None,
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    template = corpus_template(filename, filename)
    params = template.apply(USER, tools=tools, enable_thinking=thinking, call_id_seed=1)
    check_streaming(params, text, count=6, seed=len(text))
    message = params.parse(text)
    assert message.content == content
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == calls
