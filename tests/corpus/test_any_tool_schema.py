"""Any tool schema OpenAI allows works on every template (issue 10 §4), and lazy grammar
triggers are specific and cheap (issue 10 §6).

Tools as Pydantic's ``model_json_schema()`` writes them (``$defs`` + ``$ref``, ``anyOf`` with
null, ``default``, ``title``) and tools without ``description`` or ``parameters`` must build
a prompt, a grammar and a parser wherever a plain tool does. Recursive schemas give
recursive grammars, or a SchemaError naming the cycle when a value would have to contain
itself before any of its own text. A corpus template with a known gap is a strict xfail in
``ANY_SCHEMA_XFAIL``, with its reason.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from helpers.gbnf_oracle import accepts
from helpers.paths import corpus_templates

from autoparser import ChatTemplate
from autoparser.errors import AutoparserError, SchemaError
from autoparser.schema import schema_rules, schema_to_gbnf
from autoparser.schema.argument_types import parameter_is_string, value_types
from autoparser.template.polyfill import complete_tools


class OrderItem(pydantic.BaseModel):
    name: str
    quantity: int = 1


class Order(pydantic.BaseModel):
    customer: str
    items: list[OrderItem]
    note: str | None = None
    rush: OrderItem | None = None


class TreeNode(pydantic.BaseModel):
    label: str
    children: list[TreeNode] = []


PLAIN = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City"}},
            "required": ["city"],
        },
    },
}
PYDANTIC = {
    "type": "function",
    "function": {
        "name": "place_order",
        "description": "Place an order.",
        "parameters": Order.model_json_schema(),
    },
}
RECURSIVE = {
    "type": "function",
    "function": {"name": "make_tree", "parameters": TreeNode.model_json_schema()},
}
# The same shapes written plainly (nested object, array of objects): a template that cannot
# render these cannot render the Pydantic tool either, whatever the polyfills do.
NESTED = {
    "type": "function",
    "function": {
        "name": "place_plain_order",
        "description": "Place an order.",
        "parameters": {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "description": "Items",
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "rush": {
                    "type": "object",
                    "description": "Rush item",
                    "properties": {"name": {"type": "string"}},
                },
            },
        },
    },
}
NO_DESCRIPTION = {
    "type": "function",
    "function": {
        "name": "lookup_code",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    },
}
NO_PARAMETERS = {"type": "function", "function": {"name": "ping_server"}}
USER = [{"role": "user", "content": "Hello there."}]


# ------------------------------------------------------------------ schema units


def test_pydantic_schema_has_the_shapes_this_module_is_about() -> None:
    schema = Order.model_json_schema()
    assert "$defs" in schema
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/OrderItem"}
    assert {"type": "null"} in schema["properties"]["note"]["anyOf"]


def test_parameter_refs_resolve_in_the_tool_document() -> None:
    document = Order.model_json_schema()
    items = document["properties"]["items"]
    with pytest.raises(SchemaError, match="points to nothing"):
        schema_rules(items, "p")  # alone, the $ref has nowhere to point
    rules = schema_rules(items, "p", document=document)
    grammar = f"root ::= {rules.root}\n{rules.gbnf()}"
    assert accepts(grammar, '[{"name": "tea", "quantity": 2}, {"name": "cake"}]')
    assert not accepts(grammar, '[{"quantity": 2}]')


def test_value_types_follow_refs() -> None:
    document = Order.model_json_schema()
    rush = document["properties"]["rush"]
    assert value_types(rush, document) == {"object", "null"}
    assert value_types(document["properties"]["note"], document) == {"string", "null"}
    assert parameter_is_string(document["properties"]["note"], document)
    assert not parameter_is_string(rush, document)
    assert value_types({"enum": [1, 2.5, True, None]}) == {"integer", "number", "boolean", "null"}


@pytest.mark.parametrize(
    ("schema", "cycle"),
    [
        ({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}, "#/$defs/A -> #/$defs/A"),
        (
            {
                "$defs": {
                    "A": {"$ref": "#/$defs/B"},
                    "B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]},
                },
                "$ref": "#/$defs/A",
            },
            "#/$defs/A -> #/$defs/B -> #/$defs/A",
        ),
        ({"anyOf": [{"$ref": "#"}, {"type": "string"}]}, "# -> #"),
    ],
)
def test_cycle_without_text_is_a_schema_error_naming_it(schema: Any, cycle: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(cycle)):
        schema_to_gbnf(schema)


def _rule_bodies(grammar: str) -> dict[str, str]:
    out = {}
    for line in grammar.splitlines():
        name, sep, body = line.partition(" ::= ")
        if sep:
            out[name] = body.strip()
    return out


@pytest.mark.parametrize(
    "schema",
    [
        TreeNode.model_json_schema(),
        {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
        {
            "$defs": {
                "N": {
                    "type": "object",
                    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}},
                }
            },
            "$ref": "#/$defs/N",
        },
    ],
)
def test_recursion_through_text_gives_a_recursive_grammar(schema: Any) -> None:
    grammar = schema_to_gbnf(schema)
    bodies = _rule_bodies(grammar)
    assert all(body != name for name, body in bodies.items()), grammar  # no X ::= X
    nested = {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}
    if "label" in str(schema):
        import json

        assert accepts(grammar, json.dumps(nested))
        assert not accepts(grammar, json.dumps({"children": []}))


def test_complete_tools_fills_only_what_is_missing() -> None:
    filled = complete_tools([NO_PARAMETERS, PYDANTIC, PLAIN])
    assert filled[0]["function"]["description"] == ""
    assert filled[0]["function"]["parameters"] == {"type": "object", "properties": {}}
    properties = filled[1]["function"]["parameters"]["properties"]
    # Optional[str]: a nullable string; Optional[OrderItem]: the item object, nullable.
    assert (properties["note"]["type"], properties["note"]["nullable"]) == ("string", True)
    assert properties["note"]["description"] == ""
    rush = properties["rush"]
    assert (rush["type"], rush["nullable"]) == ("object", True)
    assert set(rush["properties"]) == {"name", "quantity"}
    assert properties["items"]["items"]["properties"]["quantity"]["type"] == "integer"
    assert filled[2] == PLAIN
    # A recursive schema is spelled out once per path, not forever.
    tree = complete_tools([RECURSIVE])[0]["function"]["parameters"]
    assert tree["type"] == "object"
    assert tree["properties"]["children"]["items"] == {
        "$ref": "#/$defs/TreeNode",
        "description": "",
        "type": "object",
    }
    assert "description" not in NO_PARAMETERS["function"]  # inputs are not mutated


# ------------------------------------------------------------------ every corpus template


@functools.cache
def _template(path: Path) -> ChatTemplate:
    return ChatTemplate.from_file(path)


def _works(path: Path, *tools: dict[str, Any]) -> bool:
    try:
        _template(path).apply(USER, tools=list(tools))
    except AutoparserError:
        return False
    return True


def _plain_works(path: Path) -> bool:
    return _works(path, PLAIN)


TEMPLATES = corpus_templates()
# Corpus templates that render a plain tool but fail on some allowed tool (strict xfails:
# fixing the gap flags them). Each reason says what goes wrong.
ANY_SCHEMA_XFAIL: dict[str, str] = {}


def _any_schema_params() -> list[Any]:
    return [
        pytest.param(
            p,
            id=p.stem,
            marks=[pytest.mark.xfail(reason=ANY_SCHEMA_XFAIL[p.stem], strict=True)]
            if p.stem in ANY_SCHEMA_XFAIL
            else [],
        )
        for p in TEMPLATES
    ]


@pytest.mark.parametrize("path", _any_schema_params())
def test_any_tool_schema_builds_wherever_a_plain_tool_does(path: Path) -> None:
    if not _plain_works(path):
        pytest.skip("n/a: the template cannot render a plain tool either")
    template = _template(path)
    plain = template.apply(USER, tools=[PLAIN]).parse("Just text.")
    cases = [[NO_DESCRIPTION, NO_PARAMETERS, PLAIN]]
    if _works(path, PLAIN, NESTED):
        cases += [[PLAIN, PYDANTIC], [PLAIN, RECURSIVE]]
    for tools in cases:
        params = template.apply(USER, tools=tools)
        # Output without calls parses as it does with a plain tool, whatever the tools.
        parsed = params.parse("Just text.")
        assert (parsed.content, parsed.reasoning_content) == (
            plain.content,
            plain.reasoning_content,
        )
        assert "Just text." in f"{parsed.content}{parsed.reasoning_content}"
        if template.caps.supports_tools:
            for tool in tools:
                assert tool["function"]["name"] in params.prompt


# ------------------------------------------------------------------ triggers (§6)


def _strings(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _strings(getattr(obj, f.name))
    elif isinstance(obj, tuple | list):
        for item in obj:
            yield from _strings(item)


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_triggers_are_specific_and_cheap(path: Path) -> None:
    if not _plain_works(path):
        pytest.skip("n/a: the template cannot render a plain tool")
    template = _template(path)
    tools = [PLAIN, PYDANTIC] if _works(path, PLAIN, NESTED) else [PLAIN]
    markers = {s.strip() for s in _strings(template.analyze()) if len(s.strip()) >= 2}
    for thinking in (None, True, False):
        kwargs = {} if thinking is None else {"enable_thinking": thinking}
        params = template.apply(USER, tools=tools, **kwargs)
        for trigger in params.grammar_triggers:
            value = trigger.value
            if trigger.kind == "pattern_full":
                assert trigger.reason, f"pattern_full trigger without a reason: {value!r}"
            elif trigger.kind == "pattern":
                assert re.search(r"[A-Za-z0-9_]", value), f"pattern without a word: {value!r}"
                assert trigger.reason, f"pattern trigger without a reason: {value!r}"
                assert not re.fullmatch(re.escape(value.strip()), "{"), value
            else:
                word = value.strip()
                assert len(word) >= 2, f"a bare character as trigger word: {value!r}"
                assert word in markers or any(word.startswith(m) for m in markers), (
                    f"trigger word {value!r} is not a marker of the analysis"
                )


@pytest.mark.parametrize(
    "name",
    ["meta-llama-Llama-3.1-8B-Instruct", "vllm-tool_chat_template_xlam_llama"],
)
def test_bare_json_calls_do_not_trigger_on_ordinary_braces(name: str) -> None:
    paths = [p for p in TEMPLATES if p.stem == name]
    if not paths:
        pytest.skip("n/a: template not in the corpus")
    params = _template(paths[0]).apply(USER, tools=[PLAIN, PYDANTIC])
    assert params.grammar_lazy
    # Patterns that need the call's start; a word only for the special token the template
    # declares before calls (Llama 3.x's <|python_tag|>), never a bare brace.
    prefix = params.analysis.tools.format.call_prefix_token if params.analysis else ""
    words = [t.value for t in params.grammar_triggers if t.kind == "word"]
    assert words == ([prefix] if prefix else [])
    patterns = [
        re.compile(t.value if t.kind == "pattern" else re.escape(t.value))
        for t in params.grammar_triggers
    ]
    assert all(t.kind in ("pattern", "word") for t in params.grammar_triggers)
    ordinary = 'Use {"a": 1} or [1, 2] in JSON; {"name": "Ada"} is a person.'
    assert not any(p.search(ordinary) for p in patterns)
    call = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    if "xlam" in name:
        call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    assert any(p.search(call) for p in patterns)
