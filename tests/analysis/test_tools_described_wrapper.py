"""A call list the tool instructions describe but the template never renders (issue 21 §5).

Phi-4-mini's template tells the model to write ``functools[{"name": ..., "arguments": ...},
...]`` in its system prompt, yet renders a call turn as the bare objects joined by ``,``.
The analysis reads the wrapper from the instructions (``described_start``/``described_end``):
the parser takes the calls inside it (closer optional, as the instructions say "no closing
marker required") or bare, as the template renders them, and the opener starts a call (and
the lazy grammar). A template whose renders have an opener of their own keeps it alone.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, USER, check_streaming, corpus_template, lazy_start
from helpers.gbnf_oracle import accepts

from autoparser import ChatParams, ChatTemplate, TemplateAnalysis

INSTRUCTIONS = (
    "If you call functions, prefix them with the calls marker: "
    'calls[{"name": [function name], "arguments": [arguments as JSON]}, ...]\\n'
)
SOURCE = (
    "{%- if tools %}<|system|>" + INSTRUCTIONS + "{{ tools | tojson }}<|end|>{%- endif %}"
    "{%- for message in messages %}<|{{ message.role }}|>"
    "{%- if message.tool_calls %}"
    "{%- for call in message.tool_calls %}"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "{%- if not loop.last %},{% endif %}{%- endfor %}"
    "{%- else %}{{ message.content }}{%- endif %}<|end|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)
# The same template with the instructions showing the per-call markers it renders.
RENDERED_OPENER = (
    "{%- if tools %}<|system|>Write <|call|>"
    '{"name": "foo", "arguments": {}}<|/call|><|end|>{%- endif %}'
    "{%- for message in messages %}<|{{ message.role }}|>"
    "{%- for call in message.tool_calls or [] %}"
    "<|call|>{{ call.function | tojson }}<|/call|>{%- endfor %}"
    "{%- if not message.tool_calls %}{{ message.content }}{%- endif %}<|end|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)

PARIS = ("get_weather", {"city": "Paris"})
ROME = ("get_weather", {"city": "Rome"})


def _params(source: str = SOURCE, **options: object) -> ChatParams:
    return ChatTemplate(source).apply(USER, tools=TOOLS, **options)  # type: ignore[arg-type]


def _calls(params: ChatParams, text: str) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


def test_the_wrapper_comes_from_the_instructions() -> None:
    fmt = ChatTemplate(SOURCE).analyze().tools.format
    assert (fmt.section_start, fmt.per_call_start) == ("", "")
    assert (fmt.described_start, fmt.described_end) == ("calls[", "]")


def test_a_rendered_opener_is_not_replaced() -> None:
    fmt = ChatTemplate(RENDERED_OPENER).analyze().tools.format
    assert fmt.per_call_start == "<|call|>"
    assert (fmt.described_start, fmt.described_end) == ("", "")


def test_the_pin_is_absent_when_nothing_is_described() -> None:
    data = ChatTemplate(RENDERED_OPENER).analyze().to_dict()
    assert "described_start" not in data["tools"]["format"]
    analysis = ChatTemplate(SOURCE).analyze()
    assert analysis.to_dict()["tools"]["format"]["described_start"] == "calls["
    assert TemplateAnalysis.from_dict(analysis.to_dict()).tools.format == analysis.tools.format


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ('calls[{"name": "get_weather", "arguments": {"city": "Paris"}}]', None, [PARIS]),
        (
            'calls[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "get_weather", "arguments": {"city": "Rome"}}]',
            None,
            [PARIS, ROME],
        ),
        (
            'Let me look. calls[\n  {"name": "get_weather", "arguments": {"city": "Paris"}}\n]',
            "Let me look.",
            [PARIS],
        ),
        # "no closing marker required"
        ('calls[{"name": "get_weather", "arguments": {"city": "Paris"}}', None, [PARIS]),
        # the template's own render
        (
            '{"name": "get_weather", "arguments": {"city": "Paris"}},'
            '{"name": "get_weather", "arguments": {"city": "Rome"}}',
            None,
            [PARIS, ROME],
        ),
    ],
)
def test_calls_inside_the_wrapper_or_bare(
    text: str, content: str | None, calls: list[tuple[str, object]]
) -> None:
    params = _params()
    assert params.parse(text).content == content
    assert _calls(params, text) == calls
    check_streaming(params, text, count=8)


@pytest.mark.parametrize("text", ["The calls[] list is empty.", "Use calls[0] here", "calls"])
def test_the_word_alone_is_content(text: str) -> None:
    params = _params()
    message = params.parse(text)
    assert message.tool_calls == [] and message.content == text
    check_streaming(params, text, count=4)


def test_the_grammar_takes_both_forms() -> None:
    params = _params(tool_choice="required")
    assert params.grammar is not None
    wrapped = 'calls[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    bare = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert accepts(params.grammar, wrapped)
    assert accepts(params.grammar, bare)
    assert not accepts(params.grammar, 'calls[{"name": "nope", "arguments": {}}]')


def test_the_wrapper_triggers_the_lazy_grammar() -> None:
    params = _params()
    assert params.grammar is not None and params.grammar_lazy
    text = 'Sure. calls[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    start = lazy_start(params, text)
    assert text[start:].startswith("calls[")
    assert accepts(params.grammar, text[start:])


def test_phi4_mini_corpus_template() -> None:
    template = corpus_template("vllm-tool_chat_template_phi4_mini.jinja", "Phi-4-mini (vLLM)")
    params = template.apply(USER, tools=TOOLS)
    text = (
        'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "ping", "arguments": {}}]'
    )
    message = params.parse(text)
    assert message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        PARIS,
        ("ping", {}),
    ]
    check_streaming(params, text, count=4)
