"""JSON calls a template writes by string concatenation with the arguments printed through
``|string`` (issue 21 §5, InternLM2's ``<|action_start|><|plugin|>\\n{"name": ...,
"arguments": ...}<|action_end|>``), on a small inline template of our own.

Objects print as a Python repr there, so the caps find the quirk ``arguments_as_json_string``
and ``apply`` passes arguments as JSON text; the analysis renders its probe calls the same
way, sees a JSON call and records it as JSON-native (not as a tag skeleton of the exact
spacing), so compact JSON and the ``parameters`` key models also write parse. Each scenario
is parsed whole, streamed (1-character and random chunks) and accepted by the grammar.
"""

from __future__ import annotations

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
from autoparser.analysis.model import ToolFormat

PLUGIN = """\
{%- if tools %}{{ '<|im_start|>system name=<|plugin|>\\n' + tools | tojson + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'assistant' %}{{ '<|im_start|>assistant\\n' }}
{%- if message.content %}{{ message.content }}{% endif %}
{%- for tc in message.tool_calls or [] %}
{{- '<|action_start|><|plugin|>\\n{"name": "' + tc.function.name + '", ' }}
{{- '"arguments": ' + tc.function.arguments | string + '}<|action_end|>' }}
{%- endfor %}{{ '<|im_end|>\\n' }}
{%- else %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"""

USER = [{"role": "user", "content": "Hi"}]
END = "<|action_end|>"


def _template() -> ChatTemplate:
    return ChatTemplate(PLUGIN, name="plugin-like")


def test_analysis_sees_a_json_call() -> None:
    template = _template()
    assert template.quirks.arguments_as_json_string
    tools = template.analyze().tools
    assert tools.format.mode is ToolFormat.JSON_NATIVE
    assert (tools.format.per_call_start, tools.format.per_call_end) == (
        "<|action_start|><|plugin|>\n",
        END,
    )
    assert (tools.format.name_field, tools.format.args_field) == ("name", "arguments")
    assert tools.parallel_calls


SCENARIOS = sorted(n for n in scenarios(END) if "reasoning" not in n)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenarios_parse_stream_and_fit_the_grammar(name: str) -> None:
    template = _template()
    message: dict[str, Any] = scenarios(END)[name]
    text = model_output(template, message, TOOLS, ["<|im_end|>\n", "<|im_end|>"])
    params = template.apply(USER, tools=TOOLS)
    assert normalized(params.parse(text)) == expected(message)
    check_streaming(params, text)
    if message.get("tool_calls"):
        assert accepts(params.grammar, text[lazy_start(params, text) :])


@pytest.mark.parametrize(
    "call",
    [
        '{"name":"get_weather","arguments":{"city":"Oslo"}}',
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        '{\n  "name": "get_weather",\n  "arguments": {"city": "Oslo"}\n}',
    ],
    ids=["compact", "parameters_key", "pretty"],
)
def test_model_output_in_other_json_spellings(call: str) -> None:
    params = _template().apply(USER, tools=TOOLS)
    text = f"<|action_start|><|plugin|>\n{call}{END}"
    message = params.parse(text)
    assert message.content is None
    assert [(c.name, c.arguments.replace(" ", "")) for c in message.tool_calls] == [
        ("get_weather", '{"city":"Oslo"}')
    ]
    check_streaming(params, text)
