"""Tool formats set by workarounds (the template never renders an assistant's tool calls).

Granite 3.3 writes ``<|tool_call|>[{"name": ..., "arguments": {...}}]`` and LFM2 writes
pythonic ``<|tool_call_start|>[f(a="v", n=3)]<|tool_call_end|>``; neither template shows
it, so these tests use model outputs written by hand in each model's style. Each template is
the corpus one when present, else a small stand-in carrying the same fingerprint, so the
suite is meaningful without the corpus.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import check_streaming, trigger_start
from helpers.gbnf_oracle import accepts
from helpers.paths import corpus_dir

from autoparser import ChatTemplate
from autoparser.params import ChatParams

GRANITE = "ibm-granite-granite-3.3-2B-Instruct"
LFM2 = "LFM2-8B-A1B"
# LFM2.5's instruct template: the tool list without <|tool_list_start|>, no calls either.
LFM25 = "LFM2.5-Instruct"

# Stand-ins: only the fingerprint and the turn layout of the real templates.
STAND_INS = {
    GRANITE: (
        "{%- if tools %}<|start_of_role|>system<|end_of_role|>You are a helpful assistant with"
        " access to the following tools. When a tool is required to answer the user's query,"
        " respond only with <|tool_call|> followed by a JSON list of tools used.<|end_of_text|>\n"
        "{%- endif %}"
        "{%- for m in messages %}<|start_of_role|>{{ m.role }}<|end_of_role|>{{ m.content }}"
        "<|end_of_text|>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}"
    ),
    LFM2: (
        "{%- if tools %}<|im_start|>system\nList of tools: <|tool_list_start|>["
        "{{ tools | map('tojson') | join(', ') }}]<|tool_list_end|><|im_end|>\n{% endif %}"
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    LFM25: (
        "{%- if tools %}<|im_start|>system\nList of tools: ["
        "{{ tools | map('tojson') | join(', ') }}]<|im_end|>\n{% endif %}"
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "hours": {"type": "array", "items": {"type": "number"}},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]
USER = [{"role": "user", "content": "What's the weather in Paris?"}]

# (model output, content, [(name, arguments)]) in each model's own style.
Case = tuple[str, str | None, list[tuple[str, dict[str, Any]]]]
OUTPUTS: dict[str, list[Case]] = {
    GRANITE: [
        (
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
            None,
            [("get_weather", {"city": "Paris", "days": 3})],
        ),
        (
            'Let me check both.<|tool_call|>[{"name": "get_weather", "arguments": {"city":'
            ' "São Paulo", "metric": true, "hours": [1.5, 2]}}, {"name": "get_time",'
            ' "arguments": {}}]<|end_of_text|>',
            "Let me check both.",
            [
                ("get_weather", {"city": "São Paulo", "metric": True, "hours": [1.5, 2]}),
                ("get_time", {}),
            ],
        ),
        (
            '<|tool_call|>[{"name":"get_weather","arguments":{"city":"say \\"hi\\" ]}"}}]',
            None,
            [("get_weather", {"city": 'say "hi" ]}'})],
        ),
        ("It is sunny in Paris.<|end_of_text|>", "It is sunny in Paris.", []),
    ],
    LFM2: [
        (
            '<|tool_call_start|>[get_weather(city="Paris", days=3)]<|tool_call_end|>',
            None,
            [("get_weather", {"city": "Paris", "days": 3})],
        ),
        (
            'Checking.<|tool_call_start|>[get_weather(city="Zürich", metric=true,'
            " hours=[1.5, 2]), get_time()]<|tool_call_end|><|im_end|>",
            "Checking.",
            [
                ("get_weather", {"city": "Zürich", "metric": True, "hours": [1.5, 2]}),
                ("get_time", {}),
            ],
        ),
        (
            '<|tool_call_start|>[get_weather(city="New York, NY")]<|tool_call_end|>',
            None,
            [("get_weather", {"city": "New York, NY"})],
        ),
        ("It is sunny in Paris.<|im_end|>", "It is sunny in Paris.", []),
    ],
}
OUTPUTS[LFM25] = OUTPUTS[LFM2]  # the same models' call style

CASES = [
    pytest.param(name, i, id=f"{name}-{i}") for name in OUTPUTS for i in range(len(OUTPUTS[name]))
]


def _template(name: str) -> ChatTemplate:
    root = corpus_dir()
    path = root / f"{name}.jinja" if root else None
    source = path.read_text(encoding="utf-8") if path and path.is_file() else STAND_INS[name]
    return ChatTemplate(source, bos_token="<s>", eos_token="</s>", name=name)


def _params(name: str, **kwargs: Any) -> ChatParams:
    return _template(name).apply(USER, tools=TOOLS, parallel_tool_calls=True, **kwargs)


@pytest.mark.parametrize("name", list(STAND_INS))
def test_stand_in_analyses_like_the_corpus_template(name: str) -> None:
    stand_in = ChatTemplate(STAND_INS[name], name=name).analyze()
    assert stand_in.workarounds and stand_in.tools.format.mode.value != "none"
    root = corpus_dir()
    if root is None:
        pytest.skip("template corpus not found")
    real = _template(name).analyze()
    assert real.tools == stand_in.tools
    assert set(stand_in.workarounds) <= set(real.workarounds)


@pytest.mark.parametrize(("name", "index"), CASES)
def test_parse(name: str, index: int) -> None:
    text, content, calls = OUTPUTS[name][index]
    message = _params(name).parse(text)
    assert message.content == content
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == calls


@pytest.mark.parametrize(("name", "index"), CASES)
def test_stream_equals_parse(name: str, index: int) -> None:
    check_streaming(_params(name), OUTPUTS[name][index][0], count=20, seed=index)


@pytest.mark.parametrize(("name", "index"), CASES)
def test_lazy_grammar_accepts_the_calls(name: str, index: int) -> None:
    text, _, calls = OUTPUTS[name][index]
    params = _params(name)
    assert params.grammar is not None and params.grammar_lazy
    start = trigger_start(params, text)
    if not calls:
        assert start == -1, "content alone must not trigger the grammar"
        return
    tail = text[start:]
    for stop in _template(name).analyze().end_of_turn:
        tail = tail.removesuffix(stop)
    assert accepts(params.grammar, tail), tail


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_required_grammar_rejects_plain_content(name: str) -> None:
    params = _params(name, tool_choice="required")
    assert params.grammar is not None and not params.grammar_lazy
    assert accepts(params.grammar, OUTPUTS[name][0][0])
    assert not accepts(params.grammar, "It is sunny in Paris.")


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_grammar_rejects_an_unknown_function(name: str) -> None:
    params = _params(name, tool_choice="required")
    assert params.grammar is not None
    bad = OUTPUTS[name][0][0].replace("get_weather", "get_wether")
    assert not accepts(params.grammar, bad)
