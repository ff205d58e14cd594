"""Required arguments of formats that write arguments one by one: the grammar writes each
once, optional ones around them; the parser reads any subset and reports one left out."""

from __future__ import annotations

import json

import pytest
from helpers.formats import own_template
from helpers.gbnf_oracle import accepts

from autoparser.generate.request import ToolSpec
from autoparser.generate.required import required_by_tool, required_names

TRIP = {
    "type": "object",
    "properties": {
        "note": {"type": "string"},
        "city": {"type": "string"},
        "days": {"type": "integer"},
    },
    "required": ["days", "city", "not_described"],
}
TOOL = {"type": "function", "function": {"name": "plan", "parameters": TRIP}}
USER = [{"role": "user", "content": "Plan it."}]


def test_required_names_are_the_described_ones_in_schema_order() -> None:
    tool = ToolSpec("plan", TRIP)
    assert required_names(tool) == ["city", "days"]
    loose = ToolSpec("loose", {"type": "object", "properties": {"a": {}}})
    odd = ToolSpec("odd", {"type": "object", "properties": {"a": {}}, "required": "a"})
    assert required_names(loose) == required_names(odd) == []
    assert required_by_tool([tool, loose, odd]) == {"plan": ("city", "days")}


@pytest.mark.parametrize(
    ("template", "call"),
    [
        ("formats/pythonic_like.jinja", "[plan({args})]"),
        (
            "formats/qwen3coder_like.jinja",
            "<tool_call>\n<function=plan>\n{args}\n</function>\n</tool_call>",
        ),
    ],
    ids=["pythonic", "tagged"],
)
def test_the_grammar_writes_every_required_argument_and_the_parser_reports_one_left_out(
    template: str, call: str
) -> None:
    params = own_template(template).apply(USER, tools=[TOOL])
    pythonic = template.startswith("formats/pythonic")

    def arg(name: str, value: object) -> str:
        if pythonic:
            return f"{name}={json.dumps(value)}"
        text = value if isinstance(value, str) else json.dumps(value)
        return f"<parameter={name}>\n{text}\n</parameter>"

    sep = ", " if pythonic else "\n"
    full = call.format(args=sep.join([arg("note", "x"), arg("city", "Oslo"), arg("days", 3)]))
    short = call.format(args=sep.join([arg("note", "x"), arg("days", 3)]))
    assert accepts(params.grammar, full)
    assert not accepts(params.grammar, short)
    message = params.parse(short)
    [read] = message.tool_calls
    assert json.loads(read.arguments) == {"note": "x", "days": 3}
    assert [(f.kind, f.detail) for f in message.findings] == [("missing_required", "city")]
    assert not params.parse(full).findings
