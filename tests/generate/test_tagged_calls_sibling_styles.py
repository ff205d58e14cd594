"""A call of a tagged-arguments format written with a JSON body (issue 34 §4): DeepSeek
V3.2's template writes ``<｜DSML｜invoke name="f">`` then one tagged element per argument,
and its models also write the arguments as one JSON object inside the invoke element. Where
the arguments open with markup (never ``{``) and the call has a closer, the two are told
apart without doubt: the lenient parser reads both, the grammar keeps the template's own.
Inline templates of our own, parsed whole and streamed.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import USER, check_streaming
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
INVOKE = (
    "{%- if tools %}<|system|>{{ tools | tojson }}<|end|>{%- endif %}"
    "{%- for m in messages %}<|{{ m.role }}|>"
    "{%- if m.tool_calls %}<calls>\n{%- for tc in m.tool_calls %}"
    '<invoke name="{{ tc.function.name }}">\n'
    "{%- for k, v in tc.function.arguments.items() %}"
    '<parameter name="{{ k }}">{{ v if v is string else v | tojson }}</parameter>\n'
    "{%- endfor %}</invoke>\n{%- endfor %}</calls>{%- endif %}"
    "{{ m.content or '' }}<|end|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{%- endif %}"
)
TAGGED = (
    '<calls>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
    '<parameter name="days">2</parameter>\n</invoke>\n</calls>'
)
JSON_BODY = (
    '<calls>\n<invoke name="get_weather">\n{"city": "Paris", "days": 2}\n</invoke>\n</calls>'
)


@pytest.mark.parametrize("text", [TAGGED, JSON_BODY], ids=["tagged", "json-body"])
def test_both_bodies_are_read(text: str) -> None:
    params = ChatTemplate(INVOKE).apply(USER, tools=[WEATHER], call_id_seed=1)
    message = params.parse(f"Sure.{text}")
    assert message.content == "Sure."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": 2})
    ]
    check_streaming(params, f"Sure.{text}", count=10, seed=7)


def test_a_body_that_is_no_json_object_stays_content() -> None:
    params = ChatTemplate(INVOKE).apply(USER, tools=[WEATHER])
    text = '<calls>\n<invoke name="get_weather">\n{"city": Paris}\n</invoke>\n</calls>'
    message = params.parse(text)
    assert not message.tool_calls
    assert message.content == text


def test_the_grammar_keeps_the_templates_body() -> None:
    params = ChatTemplate(INVOKE).apply(USER, tools=[WEATHER], tool_choice="required")
    assert params.grammar is not None
    assert accepts(params.grammar, TAGGED)
    assert not accepts(params.grammar, JSON_BODY)
