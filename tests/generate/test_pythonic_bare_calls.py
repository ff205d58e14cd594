"""Python-style calls with no opener at all (issue 21 §5, corpus class).

A template that writes each call as ``NAME(key='value', n=3)``, calls joined by ``, ``, with
no section or call marker (vLLM's Llama 4 pythonic template of v0.8.5): a call starts with a
tool's name and its parenthesis, so those are where content stops to try a call (and the
lazy grammar's triggers). Models also write the calls as a Python list
(``[get_weather(city="Paris")]``), which the parser reads too. Prose naming a tool without
the parenthesis, or a list that holds no call, is content.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, USER, check_streaming
from helpers.gbnf_oracle import accepts

from autoparser import ChatParams, ChatTemplate
from autoparser.generate.pythonic import is_pythonic

SOURCE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<|assistant|>"
    "{%- for tc in message.tool_calls %}{{ tc.function.name }}("
    "{%- for k, v in tc.function.arguments.items() %}{{ k }}={{ v | tojson }}"
    "{%- if not loop.last %}, {% endif %}{%- endfor %})"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}<|eot|>"
    "{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{%- endif %}"
    "{%- endfor %}"
    "{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{%- endif %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _params(**options: object) -> ChatParams:
    return ChatTemplate(SOURCE).apply(USER, tools=TOOLS, call_id_seed=5, **options)  # type: ignore[arg-type]


def _calls(params: ChatParams, text: str) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ('get_weather(city="Paris")', None),
        ('Let me check. get_weather(city="Paris")', "Let me check."),
        ('[get_weather(city="Paris")]', None),
    ],
)
def test_a_call_starts_with_a_tools_name(text: str, content: str | None) -> None:
    analysis = ChatTemplate(SOURCE).analyze()
    assert is_pythonic(analysis) and not analysis.tools.format.section_start
    assert not analysis.tools.format.per_call_start
    params = _params()
    assert params.parse(text).content == content
    assert _calls(params, text) == [("get_weather", {"city": "Paris"})]
    check_streaming(params, text, count=6)


def test_parallel_calls_joined_or_listed() -> None:
    params = _params()
    expected = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    for text in (
        'get_weather(city="Paris"), get_weather(city="Rome")',
        '[get_weather(city="Paris"), get_weather(city="Rome")]',
    ):
        assert _calls(params, text) == expected
        check_streaming(params, text, count=4)


@pytest.mark.parametrize(
    "text", ["I could use get_weather for that.", "A list [1, 2] and f(x) here.", "search"]
)
def test_prose_is_content(text: str) -> None:
    params = _params()
    message = params.parse(text)
    assert message.tool_calls == [] and message.content == text
    check_streaming(params, text, count=4)


def test_the_grammar_takes_the_templates_own_call() -> None:
    params = _params(tool_choice="required")
    assert params.grammar is not None
    assert accepts(params.grammar, 'get_weather(city="Paris")')
    assert not accepts(params.grammar, 'get_weather(town="Paris")')
