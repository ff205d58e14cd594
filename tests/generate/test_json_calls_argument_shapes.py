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

from autoparser import ChatTemplate, ExportError
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


def test_a_template_printing_the_object_analyses_as_json_calls() -> None:
    """Probed with the arguments as apply passes them (JSON text, quirk
    arguments_as_json_string), the call is a JSON object, not a skeleton of str()'s spacing."""
    tools = ChatTemplate(PRINTS_OBJECT, name="inline").analyze().tools
    assert tools.format.mode.value == "json_native"
    assert tools.format.name_field == "name"


PYTHON_ARGS_XFAIL = (
    "Python-literal arguments in a call a JSON-native format reads: a template printing the "
    "arguments object with str() now analyses JSON-native (probed as apply passes them), and "
    "the Python-literal grammar is recursive, which would keep every JSON format off the one-"
    "shot parse; needs a non-recursive literal reader"
)
PARIS = {"city": "Paris", "days": 2, "metric": True, "hint": None}


@pytest.mark.parametrize(
    "call",
    [
        # The template's own render (str() of the dict) ...
        pytest.param(
            "{\"name\": \"get_weather\", \"arguments\": {'city': 'Paris', 'days': 2, "
            "'metric': True, 'hint': None}}",
            marks=pytest.mark.xfail(strict=True, reason=PYTHON_ARGS_XFAIL),
        ),
        # ... JSON, as models write it ...
        '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "metric": true, '
        '"hint": null}}',
        # ... in another order, other spacing, "parameters" for "arguments", extra members.
        '{"arguments":{"city":"Paris","days":2,"metric":true,"hint":null},"name":"get_weather"}',
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", '
        '"days": 2, "metric": true, "hint": null}}',
        # The whole call in Python's quotes.
        pytest.param(
            "{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 2, 'metric': True, "
            "'hint': None}}",
            marks=pytest.mark.xfail(strict=True, reason=PYTHON_ARGS_XFAIL),
        ),
    ],
)
def test_printed_object_reads_json_and_python_literals(call: str) -> None:
    params = _params(PRINTS_OBJECT)
    text = f"Checking.<tool_call>\n{call}\n</tool_call>"
    assert _calls(params, text) == [("get_weather", PARIS)]
    assert params.parse(text).content == "Checking."


def test_a_python_dict_that_breaks_is_no_call() -> None:
    params = _params(PRINTS_OBJECT)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {\'city\': Paris}}\n</tool_call>'
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


def test_the_grammar_of_a_broken_render_allows_valid_json_too() -> None:
    """The template's own render stays allowed (what it trained on), never alone."""
    params = _params(BROKEN_JSON)
    valid = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    broken = '<tool_call>\n{"name": "get_weather, "arguments": {"city": "Paris"}"}\n</tool_call>'
    assert accepts(params.grammar, valid[lazy_start(params, valid) :])
    assert accepts(params.grammar, broken[lazy_start(params, broken) :])
    # Where the template's skeleton is JSON, the grammar keeps to it.
    own = _params(PRINTS_OBJECT)
    odd = '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>'
    assert not accepts(own.grammar, odd[lazy_start(own, odd) :])


# Kimi-K3-like: each argument an element whose name is an escaped attribute.
ESCAPED_NAMES = """\
{%- macro attr(v) %}{{ v | string | replace('&', '&amp;') | replace('"', '&quot;') }}{% endmacro %}
{%- for message in messages %}
{%- if message.role == 'assistant' %}<|bot|>
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<|open|>call tool="' + attr(tc.function.name) + '"<|sep|>' }}
{%- for k, v in tc.function.arguments | items %}
{{- '<|open|>arg key="' + attr(k) + '"<|sep|>' + (v if v is string else v | tojson) }}
{{- '<|close|>arg<|sep|>' }}
{%- endfor %}
{{- '<|close|>call<|sep|>' }}
{%- endfor %}<|eot|>
{%- else %}<|{{ message.role }}|>{{ message.content }}<|eot|>{% endif %}
{%- endfor %}
{%- if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}
{%- if add_generation_prompt %}<|bot|>{% endif %}"""

ASK = {
    "type": "function",
    "function": {
        "name": "ask",
        "description": "Ask.",
        "parameters": {
            "type": "object",
            "properties": {
                "q&a": {"type": "string"},
                'say "hi"': {"type": "integer"},
                "a<b>": {"type": "string"},
            },
        },
    },
}


def _arg(key: str, value: str) -> str:
    return f'<|open|>arg key="{key}"<|sep|>{value}<|close|>arg<|sep|>'


def test_the_analysis_finds_which_characters_the_template_escapes_in_names() -> None:
    arguments = ChatTemplate(ESCAPED_NAMES, name="inline").analyze().tools.arguments
    assert arguments.name_escapes == (("&", "&amp;"), ('"', "&quot;"))
    # A template writing names as they are has none (and its pin leaves the field out).
    plain = ChatTemplate(PRINTS_OBJECT, name="inline").analyze()
    assert plain.tools.arguments.name_escapes == ()
    assert "name_escapes" not in plain.to_dict()["tools"]["arguments"]


def test_escaped_names_are_decoded_exactly() -> None:
    params = ChatTemplate(ESCAPED_NAMES, name="inline").apply(USER, tools=[ASK], call_id_seed=5)
    call = (
        '<|open|>call tool="ask"<|sep|>'
        + _arg("q&amp;a", "x &amp; y")  # the value is not escaped by the template: kept
        + _arg("say &quot;hi&quot;", "3")
        + _arg("a<b>", "z")  # "<" and ">" are not escaped by the template
        + "<|close|>call<|sep|>"
    )
    assert _calls(params, call) == [("ask", {"q&a": "x &amp; y", 'say "hi"': 3, "a<b>": "z"})]
    # A model writing the name unescaped is still read.
    raw = '<|open|>call tool="ask"<|sep|>' + _arg("q&a", "v") + "<|close|>call<|sep|>"
    assert _calls(params, raw) == [("ask", {"q&a": "v"})]


def test_the_grammar_writes_names_as_the_template_escapes_them() -> None:
    params = ChatTemplate(ESCAPED_NAMES, name="inline").apply(USER, tools=[ASK], call_id_seed=5)
    own = '<|open|>call tool="ask"<|sep|>' + _arg("q&amp;a", "v") + "<|close|>call<|sep|>"
    raw = '<|open|>call tool="ask"<|sep|>' + _arg("q&a", "v") + "<|close|>call<|sep|>"
    assert accepts(params.grammar, own[lazy_start(params, own) :])
    assert not accepts(params.grammar, raw[lazy_start(params, raw) :])


def test_the_export_refuses_names_it_would_read_back_escaped() -> None:
    params = ChatTemplate(ESCAPED_NAMES, name="inline").apply(USER, tools=[ASK], call_id_seed=5)
    with pytest.raises(ExportError, match="escapes argument names"):
        params.to_response_template()
    plain = {**ASK, "function": {**ASK["function"], "parameters": {"type": "object"}}}
    plain["function"]["parameters"]["properties"] = {"qa": {"type": "string"}}
    ok = ChatTemplate(ESCAPED_NAMES, name="inline").apply(USER, tools=[plain], call_id_seed=5)
    assert ok.to_response_template()["fields"]["tool_calls"]
