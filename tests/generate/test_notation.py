"""Values quoted by a token (issue 21 §5, FunctionGemma's ``<escape>``), on a small inline
template of our own: ``<start_function_call>call:NAME{key:<escape>value<escape>,...}``,
every value printed with ``str()`` between the tokens. Models of such formats write only
strings quoted, other values bare and nested in the same notation (``n:5``,
``o:{a:<escape>x<escape>,b:[1,true]}``): the parser accepts both, the grammar too. Each
case is parsed whole, streamed (1-character and random chunks) and accepted by llguidance.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.formats import (
    TOOLS,
    check_streaming,
    expected,
    lazy_start,
    model_output,
    normalized,
    scenarios,
)
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.analysis.model import ArgumentsAnalysis
from autoparser.generate.notation import converter, quote_token

ESCAPED = """\
{%- for message in messages %}
{%- if message.role == 'system' %}<start_of_turn>user
{{ message.content }}{% for tool in tools or [] %}
Function: {{ tool.function.name }} {{ tool.function.parameters | tojson }}{% endfor %}<end_of_turn>
{%- elif message.role == 'assistant' %}<start_of_turn>model
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<start_function_call>call:' + tc.function.name + '{' }}
{%- for key, value in tc.function.arguments.items() %}
{{- key }}:<escape>{{ value }}<escape>{% if not loop.last %},{% endif %}
{%- endfor %}}<end_function_call>
{%- endfor %}<end_of_turn>
{%- else %}<start_of_turn>{{ message.role }}
{{ message.content }}<end_of_turn>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<start_of_turn>model{% endif %}"""

USER = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Hi"}]
OPEN, CLOSE = "<start_function_call>call:", "}<end_function_call>"


def _template() -> ChatTemplate:
    return ChatTemplate(ESCAPED, name="escape-quoted")


def test_analysis_finds_the_quote_token() -> None:
    arguments = _template().analyze().tools.arguments
    assert (arguments.name_suffix, arguments.value_suffix) == (":<escape>", "<escape>")
    assert quote_token(arguments) == "<escape>"
    # A quote character, a value prefix or a name suffix that is the token alone is no
    # token-quoted notation.
    assert quote_token(ArgumentsAnalysis(name_suffix="='", value_suffix="'")) == ""
    assert quote_token(ArgumentsAnalysis(name_suffix="<v>", value_suffix="</v>")) == ""
    assert quote_token(ArgumentsAnalysis(name_suffix="<escape>", value_suffix="<escape>")) == ""


SCENARIOS = sorted(n for n in scenarios(CLOSE) if "reasoning" not in n and n != "content_call")


@pytest.mark.parametrize("name", SCENARIOS)
def test_template_renders_parse_stream_and_fit_the_grammar(name: str) -> None:
    template = _template()
    message: dict[str, Any] = scenarios(CLOSE)[name]
    full = template.render([*USER, message], tools=TOOLS, add_generation_prompt=False)
    text = model_output(template, message, TOOLS, ["<end_of_turn>"])
    assert text in full
    params = template.apply(USER, tools=TOOLS)
    assert normalized(params.parse(text)) == expected(message)
    check_streaming(params, text)
    if message.get("tool_calls"):
        assert accepts(params.grammar, text[lazy_start(params, text) :])


NOTATION = [
    ("query:<escape>cats<escape>,limit:5", {"query": "cats", "limit": 5}),
    ("query:<escape>a, b}<escape>,exact:false", {"query": "a, b}", "exact": False}),
    (
        "query:<escape>q<escape>,tags:[<escape>x<escape>,<escape>y<escape>]",
        {"query": "q", "tags": ["x", "y"]},
    ),
    (
        "query:<escape>q<escape>,filters:{max:<escape>x<escape>,n:{d:[1,2.5,null,true]}}",
        {"query": "q", "filters": {"max": "x", "n": {"d": [1, 2.5, None, True]}}},
    ),
    (
        "query:<escape>q<escape>,filters:{<escape>odd key<escape>:-3}",
        {"query": "q", "filters": {"odd key": -3}},
    ),
    ("query:<escape>q<escape>,limit:<escape>7<escape>", {"query": "q", "limit": 7}),
]


@pytest.mark.parametrize(("body", "arguments"), NOTATION, ids=[str(i) for i in range(6)])
def test_model_notation_parses_streams_and_fits_the_grammar(
    body: str, arguments: dict[str, Any]
) -> None:
    params = _template().apply(USER, tools=TOOLS)
    text = f"{OPEN}search{{{body}{CLOSE}"
    message = params.parse(text)
    assert message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("search", arguments)
    ]
    check_streaming(params, text)
    assert accepts(params.grammar, text[lazy_start(params, text) :])


def test_broken_notation_is_no_call() -> None:
    """A bare value that is not one value of the notation leaves the call in content."""
    params = _template().apply(USER, tools=TOOLS)
    text = f"{OPEN}search{{query:<escape>q<escape>,limit:5 6{CLOSE} ok"
    message = params.parse(text)
    assert message.tool_calls == [] and message.content is not None
    assert message.content.endswith("ok")
    check_streaming(params, text)


def test_converter() -> None:
    to_json = converter("<escape>")
    assert (
        to_json("{a:<escape>x, y<escape>,b:[1,true,None]}") == '{"a": "x, y", "b": [1, true, null]}'
    )
    assert to_json("5") == "5"
    assert to_json("5 6") is None
    assert to_json("{a 1}") is None
    assert to_json("[" * 100 + "]" * 100) is None
