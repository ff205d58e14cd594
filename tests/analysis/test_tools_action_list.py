"""Cohere Command-A style calls (issue 21 §5), derived by the analysis from a small inline
template of our own: ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME,
"parameters": {...}}, ...]<|END_ACTION|>`` (JSON keys other than name/arguments, an id the
template generates), in a template whose call turn reads ``message.content[0]`` and so
raises on an empty or null content, as Command-A's reasoning template does. Each scenario
is parsed whole, streamed (1-character and random chunks) and accepted by the grammar in
llguidance.
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
from autoparser.errors import TemplateError

# The call turn evaluates ``message.content[0].plan`` first (as Command-A evaluates
# ``message.content[0].thinking``): "" and None raise, and the content is never printed.
COMMAND_A = """\
{{- '<|SYS|>' }}{% for tool in tools or [] %}{{ tool | tojson }}{% endfor %}{{ '<|EOT|>' }}
{%- for message in messages %}
{%- if message.role == 'assistant' %}{{ '<|BOT|>' }}
{%- if message.tool_calls %}
{%- if message.content[0].plan %}{{ message.content[0].plan }}{% endif %}
{{- '<|START_ACTION|>[' }}
{%- for tc in message.tool_calls %}
{{- '\\n    {"tool_call_id": "' ~ loop.index0 ~ '", "tool_name": "' ~ tc.function.name }}
{{- '", "parameters": ' ~ tc.function.arguments | tojson ~ '}' }}
{%- if not loop.last %},{% endif %}
{%- endfor %}
{{- '\\n]<|END_ACTION|>' }}
{%- else %}{{ '<|START_RESPONSE|>' + message.content + '<|END_RESPONSE|>' }}{% endif %}
{{- '<|EOT|>' }}
{%- else %}{{ '<|' + message.role + '|>' }}{{ message.content }}{{ '<|EOT|>' }}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|BOT|>' }}{% endif %}"""

USER = [{"role": "user", "content": "Hi"}]


def _template() -> ChatTemplate:
    return ChatTemplate(COMMAND_A, name="command-a-like")


def test_call_turn_needs_content_the_template_never_prints() -> None:
    """The template raises on the call turn's empty content; the caps find the quirk and
    ``render`` gives such a turn content it does not print."""
    template = _template()
    message = scenarios("<|END_ACTION|>")["one_call"]
    with pytest.raises(TemplateError):
        ChatTemplate(COMMAND_A, name="raw", polyfills=False).render([*USER, message], tools=TOOLS)
    assert template.quirks.call_turn_text
    assert template.caps.supports_tool_calls and template.caps.supports_parallel_tool_calls
    assert '"tool_name": "get_weather"' in template.render([*USER, message], tools=TOOLS)


def test_analysis_reads_the_json_keys_and_the_generated_id() -> None:
    fmt = _template().analyze().tools.format
    assert fmt.mode is ToolFormat.JSON_NATIVE
    assert (fmt.section_start, fmt.section_end) == ("<|START_ACTION|>", "<|END_ACTION|>")
    assert (fmt.name_field, fmt.args_field, fmt.gen_id_field) == (
        "tool_name",
        "parameters",
        "tool_call_id",
    )
    assert fmt.field_order == ("tool_call_id", "tool_name", "parameters")


# The template has no reasoning and drops a call turn's content: those scenarios are n/a.
SCENARIOS = sorted(n for n in scenarios("<|END_ACTION|>") if "reasoning" not in n)


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "content_call"])
def test_scenarios_parse_stream_and_fit_the_grammar(name: str) -> None:
    template = _template()
    message: dict[str, Any] = scenarios("<|END_ACTION|>")[name]
    text = model_output(template, message, TOOLS, ["<|EOT|>"])
    params = template.apply(USER, tools=TOOLS)
    assert normalized(params.parse(text)) == expected(message)
    check_streaming(params, text)
    if message.get("tool_calls"):
        assert accepts(params.grammar, text[lazy_start(params, text) :])


def test_model_output_with_other_spacing() -> None:
    """A model writes the list compactly, without the template's indentation."""
    params = _template().apply(USER, tools=TOOLS)
    text = (
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Oslo"}}]<|END_ACTION|>'
    )
    message = params.parse(text)
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("get_weather", '{"city": "Oslo"}')
    ]
    check_streaming(params, text)
