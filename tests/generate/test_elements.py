"""Object and array values written as nested elements of the argument markup (MiniMax-M3's
encoding, own template formats/nested_elements.jinja): detection, reading typed by the
tool's schema, what is not the schema's data, streaming and the grammar."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers.formats import own_template
from helpers.gbnf_oracle import accepts

TOOL = {
    "type": "function",
    "function": {
        "name": "plan",
        "description": "Plan a trip.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "codes": {"type": "array", "items": {"type": "string"}},
                "counts": {"type": "array", "items": {"type": "integer"}},
                "window": {
                    "type": "object",
                    "properties": {"start": {"type": "string"}, "days": {"type": "number"}},
                },
                "extra": {},
            },
            "required": ["city"],
        },
    },
}
USER = [{"role": "user", "content": "Plan it."}]


def _params() -> Any:
    return own_template("formats/nested_elements.jinja").apply(USER, tools=[TOOL])


def _call(arguments: str) -> str:
    return f'<calls>\n<call name="plan">{arguments}</call>\n</calls>'


def test_the_item_name_is_found_by_probing() -> None:
    assert (
        own_template("formats/nested_elements.jinja").analyze().tools.arguments.value_item_name
        == "li"
    )
    # A template writing object values as JSON has no element encoding.
    assert (
        own_template("formats/qwen3coder_like.jinja").analyze().tools.arguments.value_item_name
        == ""
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        # The schema types the leaves: "42" stays a string where strings are asked for.
        (
            "<city>Oslo</city><codes><li>42</li><li>true</li></codes>",
            {"city": "Oslo", "codes": ["42", "true"]},
        ),
        (
            "<city>Oslo</city><counts><li>4</li><li>-2</li></counts>",
            {"city": "Oslo", "counts": [4, -2]},
        ),
        (
            "<city>Oslo</city><window><start>07</start><days>1.5</days></window>",
            {"city": "Oslo", "window": {"start": "07", "days": 1.5}},
        ),
        # Untyped: JSON scalars where they are one, text otherwise, an empty element null,
        # members named like the item an array, others an object.
        (
            "<city>Oslo</city><extra><a><li>1</li><li></li><li>x y</li></a><b>false</b></extra>",
            {"city": "Oslo", "extra": {"a": [1, None, "x y"], "b": False}},
        ),
        ("<city>Oslo</city><codes></codes>", {"city": "Oslo", "codes": []}),
    ],
)
def test_element_values_read_typed_by_the_schema(arguments: str, expected: dict[str, Any]) -> None:
    params = _params()
    text = _call(arguments)
    message = params.parse(text)
    assert [json.loads(c.arguments) for c in message.tool_calls] == [expected]
    assert not message.content
    # The same in random chunks, and the grammar allows what the schema describes.
    rng = random.Random(7)
    stream = params.stream()
    at = 0
    while at < len(text):
        step = rng.randint(1, 9)
        stream.feed(text[at : at + step])
        at += step
    stream.finish()
    assert stream.message.tool_calls == message.tool_calls
    assert accepts(params.grammar, text[text.find("<calls>") :])


def test_a_value_written_as_json_is_read_too() -> None:
    """The parser also reads JSON where the template writes elements; the grammar keeps the
    template's way."""
    params = _params()
    text = _call("<city>Oslo</city><counts>[1, 2]</counts>")
    message = params.parse(text)
    assert [json.loads(c.arguments) for c in message.tool_calls] == [
        {"city": "Oslo", "counts": [1, 2]}
    ]
    assert not accepts(params.grammar, text)


@pytest.mark.parametrize(
    ("arguments", "name", "written"),
    [
        ("<city>Oslo</city><counts><li>four</li></counts>", "counts", "<li>four</li>"),
        ("<city>Oslo</city><window>soon</window>", "window", "soon"),  # not an object
    ],
)
def test_values_the_schema_rejects_are_kept_as_text_with_a_finding(
    arguments: str, name: str, written: str
) -> None:
    """One value not of its type does not cost the call: it is kept as the text written,
    reported as a ``type_mismatch``; ``tolerance="reject"`` refuses the call instead. The
    grammar never writes it."""
    params = _params()
    text = _call(arguments)
    message = params.parse(text)
    [call] = message.tool_calls
    assert json.loads(call.arguments)[name] == written
    assert [(f.kind, f.outcome, f.detail, f.call) for f in message.findings] == [
        ("type_mismatch", "kept", name, 0)
    ]
    streamed = params.stream()
    for piece in (text[i : i + 3] for i in range(0, len(text), 3)):
        streamed.feed(piece)
    streamed.finish()
    assert [(c.name, c.arguments) for c in streamed.message.tool_calls] == [
        (call.name, call.arguments)
    ]
    assert [f.kind for f in streamed.message.findings] == ["type_mismatch"]
    refused = params.parse(text, tolerance="reject")
    assert refused.tool_calls == [] and refused.content == text
    assert [(f.kind, f.outcome) for f in refused.findings] == [("type_mismatch", "refused")]
    assert not accepts(params.grammar, text)
