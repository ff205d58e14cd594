"""The transformers response-template export, on the project's own templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.paths import OWN_TEMPLATES, own_path
from helpers.roundtrip import (
    SEARCH,
    TOOLS,
    USER,
    WEATHER,
    canonical_args,
    ours_view,
    transformers_view,
)

from autoparser import ChatTemplate, ExportError
from autoparser.analysis.model import TemplateAnalysis
from autoparser.errors import AutoparserError
from autoparser.formats import format_of
from autoparser.generate.response_template import RESPONSE_TEMPLATE_VERSION, response_template

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing.response_parser")


def test_python_calls_and_hand_written_formats_are_refused_with_the_reason() -> None:
    with pytest.raises(ExportError, match="Python expressions"):
        response_template(TemplateAnalysis(), pythonic_calls=True)
    harmony = TemplateAnalysis(handler="harmony")
    refusal = format_of(harmony).export_refusal
    assert refusal is not None and "harmony" in refusal
    with pytest.raises(ExportError, match="harmony"):
        response_template(harmony, format_refusal=refusal)


def test_a_plain_template_exports_content_only() -> None:
    spec = response_template(TemplateAnalysis())
    assert spec["version"] == RESPONSE_TEMPLATE_VERSION
    assert set(spec["fields"]) == {"content"}  # type: ignore[arg-type]


def test_python_literal_values_refuse_structured_tools() -> None:
    """A template printing values with str() exports for flat tools, not for object/array ones."""
    template = ChatTemplate.from_file(OWN_TEMPLATES / "quirks" / "items_args.jinja")
    assert template.analyze().tools.arguments.values_as_python
    flat = template.apply([USER], tools=[WEATHER]).to_response_template()
    assert "tool_calls" in flat["fields"]
    with pytest.raises(ExportError, match=r"Python literals.*search_records\.filters"):
        template.apply([USER], tools=[WEATHER, SEARCH]).to_response_template()


def test_untyped_tag_parameters_refuse_the_export() -> None:
    """A tag value is decoded by its parameter's declared type only: none, no export."""
    template = ChatTemplate.from_file(OWN_TEMPLATES / "formats" / "qwen3coder_like.jinja")
    ref = {"$ref": "#/$defs/Where", "description": "a place"}
    for schema in ({"description": "anything"}, ref):
        parameters = {
            "type": "object",
            "properties": {"where": schema},
            "$defs": {"Where": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
        tool = {"type": "function", "function": {"name": "go", "parameters": parameters}}
        with pytest.raises(ExportError, match=r"go\.where declares no type"):
            template.apply([USER], tools=[tool]).to_response_template()
    # JSON arguments carry their own types: the same tool exports there.
    hermes = ChatTemplate.from_file(OWN_TEMPLATES / "formats" / "chatml_hermes.jinja")
    assert hermes.apply([USER], tools=[tool]).to_response_template()["fields"]["tool_calls"]


def test_close_marker_inside_a_string_argument_stays_in_the_argument() -> None:
    """A call's closing marker written inside a JSON string (or a tag value) does not end
    the call, also when the output arrives in chunks."""
    for name, text, query in (
        (
            "formats/chatml_hermes",
            '<tool_call>\n{"name": "search_records", "arguments": {"query": "a </tool_call> b"}}'
            "\n</tool_call>",
            "a </tool_call> b",
        ),
        (
            "formats/qwen3coder_like",
            "<tool_call>\n<function=search_records>\n<parameter=query>\na </function> b\n"
            "</parameter>\n</function>\n</tool_call>",
            "a </function> b",
        ),
    ):
        template = ChatTemplate.from_file(OWN_TEMPLATES / f"{name}.jinja")
        params = template.apply([USER], tools=TOOLS)
        ours = ours_view(params.parse(text))
        assert ours["calls"] == [("search_records", canonical_args({"query": query}))]
        spec = params.to_response_template()
        whole = chat_parsing.parse_response(text, spec, prefix=params.prompt, tools=TOOLS)
        assert transformers_view(whole) == ours
        parser = chat_parsing.ResponseParser(spec, prefix=params.prompt, tools=TOOLS)
        for k in range(0, len(text), 3):
            parser.feed(text[k : k + 3])
        streamed, _ = parser.finalize()
        assert transformers_view(streamed) == ours


def test_no_tool_calls_field_when_the_request_allows_none() -> None:
    template = ChatTemplate.from_file(OWN_TEMPLATES / "formats" / "chatml_hermes.jinja")
    assert "tool_calls" in template.apply([USER], tools=TOOLS).to_response_template()["fields"]
    spec = template.apply([USER], tools=TOOLS, tool_choice="none").to_response_template()
    assert "tool_calls" not in spec["fields"]


def test_export_error_names_the_inexpressible_format() -> None:
    template = ChatTemplate.from_file(OWN_TEMPLATES / "handlers/harmony_like.jinja")
    params = template.apply([USER], tools=TOOLS)
    with pytest.raises(ExportError, match="harmony"):
        params.to_response_template()
    assert issubclass(ExportError, AutoparserError)


def test_back_to_back_json_calls_split_at_every_point() -> None:
    """Bare JSON call objects with nothing (or a newline) between them are two calls, whole and
    streamed in two chunks split anywhere (the first call's ``}`` included), with braces
    and a ``"name"`` key inside the arguments left to them."""
    calls = [
        {
            "name": "search_records",
            "parameters": {"query": 'a }{"name": b', "filters": {"k": [1, {"n": None}]}},
        },
        {"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}},
    ]
    for name, joiner in (("llama_like", ""), ("alnum_ids", ""), ("alnum_ids", "\n")):
        text = joiner.join(json.dumps(c) for c in calls) + joiner + "<|eot_id|>"
        template = ChatTemplate.from_file(own_path(name))
        params = template.apply([USER], tools=TOOLS)
        body = (
            text
            if name == "llama_like"
            else "[CALLS]" + text.replace('"parameters"', '"arguments"')
        )
        ours = ours_view(params.parse(body))
        assert [n for n, _ in ours["calls"]] == ["search_records", "get_weather"]
        spec = params.to_response_template()
        whole = chat_parsing.parse_response(body, spec, prefix=params.prompt, tools=TOOLS)
        assert transformers_view(whole) == ours
        for cut in range(1, len(body)):
            parser = chat_parsing.ResponseParser(spec, prefix=params.prompt, tools=TOOLS)
            parser.feed(body[:cut])
            parser.feed(body[cut:])
            streamed, _ = parser.finalize()
            assert transformers_view(streamed) == ours, cut


def test_a_name_written_after_the_arguments_is_read_from_the_close(tmp_path: Path) -> None:
    """``{"parameters": {...}, "name": "f"}``: the name follows the arguments region, so the
    close captures it (transformers >= 5.24 joins a close's captures to the transform)."""
    source = own_path("llama_like").read_text(encoding="utf-8")
    head = """'{"name": "' + fn.name + '", "parameters": ' + (fn.arguments | tojson) + '}'"""
    assert head in source
    swapped = """'{"parameters": ' + (fn.arguments | tojson) + ', "name": "' + fn.name + '"}'"""
    path = tmp_path / "args_first.jinja"
    path.write_text(source.replace(head, swapped), encoding="utf-8")
    template = ChatTemplate.from_file(path)
    assert template.analyze().tools.format.field_order == ("parameters", "name")
    params = template.apply([USER], tools=TOOLS)
    text = (
        '{"parameters": {"query": "x", "filters": {"a": "}"}}, "name": "search_records"}'
        '{"parameters": {"city": "Paris"}, "name": "get_weather"}<|eot_id|>'
    )
    ours = ours_view(params.parse(text))
    assert [n for n, _ in ours["calls"]] == ["search_records", "get_weather"]
    spec = params.to_response_template()
    for cut in range(1, len(text), 7):
        parser = chat_parsing.ResponseParser(spec, prefix=params.prompt, tools=TOOLS)
        parser.feed(text[:cut])
        parser.feed(text[cut:])
        streamed, _ = parser.finalize()
        assert transformers_view(streamed) == ours, cut
