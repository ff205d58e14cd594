"""Command-R v01 style tool use (issue 21 §5), on a small inline template of our own: the
template iterates ``tools`` unguarded (it raises on none), reads Cohere's own tool shape
(``tool.name``, ``tool.parameter_definitions``) instead of OpenAI's, prints only the content
of assistant turns, and gives the call format only in closing instructions ("Write
'Action:' followed by a json-formatted list of actions ..."). The caps find both needs
(quirks ``requires_tools_list``, ``tools_as_parameter_definitions``), the polyfills supply
them, and the call format comes from the instructions (workaround ``command_r_action_list``).
Model output is parsed whole, streamed (1-character and random chunks) and accepted by the
grammar in llguidance.
"""

from __future__ import annotations

import json

import pytest
from helpers.formats import TOOLS, check_streaming, lazy_start
from helpers.gbnf_oracle import accepts

from autoparser import ChatTemplate
from autoparser.analysis.model import ToolFormat
from autoparser.errors import TemplateError
from autoparser.template.messages import parameter_definitions_tool

COMMAND_R = (
    """\
{{- '<BOS><|SYS|>## Tools\\n' }}
{%- for tool in tools %}
{{- 'def ' + tool.name + '(' }}
{%- for name, p in tool.parameter_definitions.items() %}
{%- if not loop.first %}, {% endif %}{{ name + ': ' }}
{{- p.type if p.required else 'Optional[' + p.type + ']' }}
{%- endfor %}{{ '):\\n    """
    " + tool.description + "
    """\\n' }}
{%- endfor %}{{ '<|EOT|>' }}
{%- for message in messages %}
{{- '<|' + message.role + '|>' + message.content + '<|EOT|>' }}
{%- endfor %}
{{- "<|SYS|>Write 'Action:' followed by a json-formatted list of actions to perform" }}
{{- ", each with a tool_name and its parameters.<|EOT|>" }}
{%- if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"""
)

USER = [{"role": "user", "content": "Hi"}]


def _template() -> ChatTemplate:
    return ChatTemplate(COMMAND_R, name="command-r-like")


def test_caps_find_the_tool_shape_and_the_unguarded_loop() -> None:
    template = _template()
    raw = ChatTemplate(COMMAND_R, name="raw", polyfills=False)
    with pytest.raises(TemplateError):
        raw.render(USER, add_generation_prompt=True)
    with pytest.raises(TemplateError):
        raw.render(USER, tools=TOOLS, add_generation_prompt=True)
    assert template.quirks.requires_tools_list and template.quirks.tools_as_parameter_definitions
    assert template.caps.supports_tools and not template.caps.supports_tool_calls
    assert template.render(USER, add_generation_prompt=True).endswith("<|assistant|>")
    prompt = template.render(USER, tools=TOOLS, add_generation_prompt=True)
    assert "def get_weather(city: str, unit: Optional[str]):" in prompt
    assert "tags: Optional[List[str]]" in prompt and "cursor: Optional[Union[str, None]]" in prompt


def test_parameter_definitions_tool() -> None:
    tool = parameter_definitions_tool(TOOLS[1])
    assert tool["name"] == "search" and tool["description"] == "Search the web"
    assert tool["parameter_definitions"]["query"] == {
        "description": "",
        "type": "str",
        "required": True,
    }
    assert tool["parameter_definitions"]["filters"]["type"] == "dict"
    assert parameter_definitions_tool(TOOLS[2])["parameter_definitions"] == {}
    assert parameter_definitions_tool({"type": "other"}) == {"type": "other"}


def test_call_format_comes_from_the_instructions() -> None:
    analysis = _template().analyze()
    assert analysis.workarounds == ("command_r_action_list",)
    fmt = analysis.tools.format
    assert fmt.mode is ToolFormat.JSON_NATIVE
    assert (fmt.name_field, fmt.args_field) == ("tool_name", "parameters")
    assert fmt.section_start == "Action:\n```json\n" and fmt.tools_array_wrapped


def _action(*calls: tuple[str, dict[str, object]]) -> str:
    items = [{"tool_name": name, "parameters": args} for name, args in calls]
    return "Action:\n```json\n" + json.dumps(items, indent=4) + "```"


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (_action(("get_weather", {"city": "Paris"})), [("get_weather", {"city": "Paris"})]),
        (
            _action(("get_weather", {"city": "Paris"}), ("search", {"query": "```", "limit": 1})),
            [("get_weather", {"city": "Paris"}), ("search", {"query": "```", "limit": 1})],
        ),
        (_action(("ping", {})), [("ping", {})]),
    ],
    ids=["one", "two", "no_params"],
)
def test_actions_parse_stream_and_fit_the_grammar(
    text: str, calls: list[tuple[str, dict[str, object]]]
) -> None:
    params = _template().apply(USER, tools=TOOLS)
    message = params.parse(text)
    assert message.content is None
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == calls
    check_streaming(params, text)
    assert accepts(params.grammar, text[lazy_start(params, text) :])


def test_plain_answer_stays_content() -> None:
    params = _template().apply(USER, tools=TOOLS)
    text = "Paris is sunny today."
    assert params.parse(text).content == text
    assert params.parse(text).tool_calls == []
    check_streaming(params, text)
