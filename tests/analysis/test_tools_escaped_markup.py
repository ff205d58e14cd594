"""Object arguments that make a template HTML-escape its own quotes (issue 21, corpus class).

A template that writes a call as ``'{"name": "' + name + '", "arguments": ' + args + '}'``
with ``args = arguments|tojson|safe`` concatenates a str with a Markup, and Markup escapes
the str: every literal quote of the template renders as ``&#34;`` when the arguments are an
object (transformers renders the same). With the arguments as a JSON string the render is
clean JSON. The analysis must derive the format from the clean render (JSON-native calls),
never pin ``&#34;`` as markers, and the caps must not require object arguments.
"""

from __future__ import annotations

import json

from helpers.formats import TOOLS, USER, check_streaming

from autoparser import ChatTemplate
from autoparser.analysis.model import ToolFormat

SOURCE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<calls>["
    "{%- for tc in message.tool_calls %}"
    "{%- if tc.function.arguments is string %}{%- set args = tc.function.arguments %}"
    "{%- else %}{%- set args = tc.function.arguments | tojson | safe %}{%- endif %}"
    "{{- '{\"name\": \"' + tc.function.name + '\", \"arguments\": ' + args + '}' }}"
    "{%- if not loop.last %}, {% endif %}{%- endfor %}]</s>"
    "{%- elif message.role == 'assistant' %}{{ message.content }}</s>"
    "{%- else %}[{{ message.role }}]{{ message.content }}{%- endif %}"
    "{%- endfor %}"
    "{%- if tools %}[tools]{{ tools | tojson }}{%- endif %}"
)


def test_the_object_render_escapes_the_templates_quotes() -> None:
    """The premise: object arguments escape the template's quotes, strings do not."""
    template = ChatTemplate(SOURCE)
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    as_object = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    rendered = template.render(as_object, polyfills=False)
    assert "&#34;" in rendered
    string_call = {**call, "function": {"name": "f", "arguments": '{"a": 1}'}}
    as_string = [*USER, {"role": "assistant", "content": None, "tool_calls": [string_call]}]
    assert '{"name": "f", "arguments": {"a": 1}}' in template.render(as_string, polyfills=False)


def test_the_analysis_reads_the_clean_render() -> None:
    template = ChatTemplate(SOURCE)
    fmt = template.analyze().tools.format
    assert fmt.mode == ToolFormat.JSON_NATIVE
    assert (fmt.section_start, fmt.name_field, fmt.args_field) == ("<calls>", "name", "arguments")
    assert "&#" not in json.dumps(template.analyze().preserved_tokens)
    assert not template.caps.requires_object_arguments


def test_calls_parse_whole_and_streamed_and_the_prompt_is_clean() -> None:
    template = ChatTemplate(SOURCE)
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {}}}
    call["function"]["arguments"] = {"city": "Paris"}
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": [call]}]
    params = template.apply([*history, *USER], tools=TOOLS, call_id_seed=2)
    assert "&#34;" not in params.prompt
    text = '<calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    message = params.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert message.content is None
    check_streaming(params, text, count=6)
