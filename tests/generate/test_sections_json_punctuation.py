"""Bare JSON calls joined by a list's punctuation (issue 21, from vLLM's Llama 3 JSON tests).

A template that writes parallel bare JSON calls apart by whitespace only: models join them
with ``;`` (Llama 3.x) or ``,``. The lenient parser reads those as separators (the calls are
calls, the punctuation is not content); the grammar keeps the template's own form. Checked
whole and streamed (1-character and random chunks).
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import check_streaming

from autoparser import ChatTemplate
from autoparser.params import ChatParams

TEMPLATE = """{{- bos_token }}
{%- if tools %}{{ '<|system|>Call tools as JSON {"name": ..., "parameters": ...}.\\n' }}
{%- for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}{{ '<|end|>' }}{% endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' and message.tool_calls %}{{ '<|assistant|>' }}
{%- for call in message.tool_calls %}{% if not loop.first %}{{ '\\n' }}{% endif %}
{{- '{"name": "' + call.function.name + '", "parameters": ' }}
{{- (call.function.arguments | tojson) + '}' }}
{%- endfor %}{{ '<|end|>' }}
{%- else %}{{ '<|' + message.role + '|>' + message.content + '<|end|>' }}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"""


def _tool(name: str, **props: str) -> dict[str, object]:
    properties = {k: {"type": v} for k, v in props.items()}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
    }


TOOLS = [_tool("search", query="string"), _tool("ping")]
USER = [{"role": "user", "content": "Hi"}]
SEARCH = '{"name": "search", "parameters": {"query": "cats"}}'
PING = '{"name": "ping", "parameters": {}}'


def _params() -> ChatParams:
    template = ChatTemplate(TEMPLATE, bos_token="<s>", name="bare-json")
    return template.apply(USER, tools=TOOLS, call_id_seed=1)


def _calls(params: ChatParams, text: str) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in params.parse(text).tool_calls]


@pytest.mark.parametrize("joint", ["\n", "; ", ";", ";\n", " ; ", ", ", ","])
def test_parallel_bare_json_calls_joined_by_punctuation(joint: str) -> None:
    params = _params()
    text = SEARCH + joint + PING
    message = params.parse(text)
    assert _calls(params, text) == [("search", {"query": "cats"}), ("ping", {})]
    assert message.content is None
    check_streaming(params, text, count=5, seed=len(joint))


def test_punctuation_after_the_last_call_stays_content() -> None:
    params = _params()
    text = SEARCH + "; done"
    assert _calls(params, text) == [("search", {"query": "cats"})]
    assert params.parse(text).content == "; done"
    check_streaming(params, text, count=5, seed=1)


def test_other_joints_are_not_separators() -> None:
    """Only a list's punctuation joins calls; other text between them is content."""
    params = _params()
    text = SEARCH + " and " + PING
    message = params.parse(text)
    assert "and" in (message.content or "")
    check_streaming(params, text, count=5, seed=2)


def test_the_grammar_keeps_the_templates_form() -> None:
    grammar = _params().grammar or ""
    assert '";"' not in grammar
