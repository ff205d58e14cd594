"""Calls whose template prints the arguments object itself (a Python dict) or a broken JSON
call (issue 21 §1): the model writes JSON, so JSON is read there (and Python literals), in
any member order; the template's own shape is read too, and a broken shape is never the
only one, nor what the grammar asks for. Inline templates of our own, parsed whole and
streamed (1-character and random chunks).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import check_streaming, lazy_start
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.params import ChatParams

# Hermes-like, but the arguments printed as they come: a dict prints as Python's str().
PRINTS_OBJECT = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<tool_call>\\n{"name": "' + tc.function.name + '", "arguments": ' }}
{{- tc.function.arguments }}{{ '}\\n</tool_call>' }}
{%- endfor %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

# The name's closing quote misplaced after the arguments: the render is not JSON.
BROKEN_JSON = """\
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<tool_call>\\n{"name": "' + tc.function.name + ', "arguments": ' }}
{{- tc.function.arguments | tojson }}{{ '"}\\n</tool_call>' }}
{%- endfor %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "hint": {"type": ["string", "null"]},
            },
            "required": ["city"],
        },
    },
}
USER = [{"role": "user", "content": "Weather?"}]


def _params(source: str) -> ChatParams:
    return ChatTemplate(source, name="inline").apply(USER, tools=[WEATHER], call_id_seed=5)


def _calls(params: ChatParams, text: str) -> list[tuple[str, dict[str, Any]]]:
    """The parse's calls, after checking every stream folds into it."""
    check_streaming(params, text, count=6, seed=len(text))
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


def test_a_template_printing_the_object_analyses_as_python_dicts() -> None:
    tools = ChatTemplate(PRINTS_OBJECT, name="inline").analyze().tools
    assert tools.format.mode.value == "tag_with_json"
    assert tools.format.uses_python_dicts
    assert tools.function.name_prefix == '{"name": "'


PARIS = {"city": "Paris", "days": 2, "metric": True, "hint": None}


@pytest.mark.parametrize(
    "call",
    [
        # The template's own render (str() of the dict) ...
        "{\"name\": \"get_weather\", \"arguments\": {'city': 'Paris', 'days': 2, "
        "'metric': True, 'hint': None}}",
        # ... JSON, as models write it ...
        '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "metric": true, '
        '"hint": null}}',
        # ... in another order, other spacing, "parameters" for "arguments", extra members.
        '{"arguments":{"city":"Paris","days":2,"metric":true,"hint":null},"name":"get_weather"}',
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", '
        '"days": 2, "metric": true, "hint": null}}',
        # The whole call in Python's quotes.
        "{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 2, 'metric': True, "
        "'hint': None}}",
    ],
)
def test_printed_object_reads_json_and_python_literals(call: str) -> None:
    params = _params(PRINTS_OBJECT)
    text = f"Checking.<tool_call>\n{call}\n</tool_call>"
    assert _calls(params, text) == [("get_weather", PARIS)]
    assert params.parse(text).content == "Checking."


def test_a_python_dict_that_breaks_is_no_call() -> None:
    params = _params(PRINTS_OBJECT)
    text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {'city': Paris}}\n</tool_call>"
    assert _calls(params, text) == []
    assert params.parse(text).content == text


def test_the_grammar_asks_for_json_where_the_template_prints_json() -> None:
    params = _params(PRINTS_OBJECT)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    start = lazy_start(params, text)
    assert accepts(params.grammar, text[start:])


def test_a_broken_render_is_not_the_only_shape_read() -> None:
    params = _params(BROKEN_JSON)
    rendered = ChatTemplate(BROKEN_JSON, name="inline").render(
        [
            *USER,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                    }
                ],
            },
        ],
        tools=[WEATHER],
    )
    start = rendered.index("<tool_call>")
    own = rendered[start : rendered.index("<|eot|>", start)]
    assert '"get_weather, "arguments"' in own  # the template's own shape is not JSON
    valid = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    for text in (own, valid):
        assert _calls(params, text) == [("get_weather", {"city": "Paris"})]


def test_the_grammar_of_a_broken_render_asks_for_valid_json() -> None:
    params = _params(BROKEN_JSON)
    valid = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    broken = '<tool_call>\n{"name": "get_weather, "arguments": {"city": "Paris"}"}\n</tool_call>'
    assert accepts(params.grammar, valid[lazy_start(params, valid) :])
    assert not accepts(params.grammar, broken[lazy_start(params, broken) :])
