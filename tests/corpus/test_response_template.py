"""The transformers response-template export reads the round-trip outputs as autoparser does.

For every template (the corpus and the project's own) and round-trip scenario where
autoparser's own parse is right (tests/corpus/test_roundtrip.py checks that) and the export exists,
``transformers.utils.chat_parsing.response_parser.parse_response(text, spec,
prefix=params.prompt, tools=tools)`` must give the same message: content, reasoning, call
names and arguments. A format the export cannot express raises ExportError (n/a here, and
counted by the coverage test); a known disagreement is a strict xfail listed in
tests/data/response_template_xfail.json with its reason.

Normalisation: transformers' text regions strip surrounding whitespace, so content and
reasoning are compared stripped, an empty region as absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import OWN_TEMPLATES, TESTS_DIR, corpus_templates, own_path, own_templates
from helpers.roundtrip import (
    SCENARIOS,
    SEARCH,
    TOOLS,
    USER,
    WEATHER,
    canonical_args,
    expected_view,
    load_template,
    parsed_view,
    prepare,
    template_paths,
)

from autoparser import ChatTemplate, ExportError
from autoparser.cli import main
from autoparser.errors import AutoparserError

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing.response_parser")

XFAIL_FILE = TESTS_DIR / "data" / "response_template_xfail.json"


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def ours_view(parsed: Any) -> dict[str, Any]:
    return {
        "content": _text(parsed.content),
        "reasoning": _text(parsed.reasoning_content),
        "calls": [(c.name, canonical_args(c.arguments)) for c in parsed.tool_calls],
    }


def transformers_view(message: dict[str, Any]) -> dict[str, Any]:
    reasoning = message.get("reasoning_content", message.get("thinking"))
    calls = [
        (c["function"]["name"], canonical_args(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    return {"content": _text(message.get("content")), "reasoning": _text(reasoning), "calls": calls}


def _xfails() -> dict[tuple[str, str], str]:
    entries = json.loads(XFAIL_FILE.read_text(encoding="utf-8"))
    return {(e["template"], e["scenario"]): e["reason"] for e in entries}


def _params() -> list[Any]:
    xfails = _xfails()
    out: list[Any] = []
    for path in template_paths():
        for scenario in SCENARIOS:
            reason = xfails.get((path.stem, scenario))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            out.append(pytest.param(path, scenario, marks=marks, id=f"{path.stem}-{scenario}"))
    return out


def _outcome(path: Path, scenario: str) -> tuple[str, str, Any]:
    """("na"|"noexport"|"compare", reason, (ours, theirs))."""
    try:
        case = prepare(path, scenario)
        parsed = None if case.na else case.params.parse(case.text)
    except AutoparserError as exc:
        return (
            "na",
            f"autoparser fails on this template (see tests/corpus/test_roundtrip.py): {exc}",
            None,
        )
    if case.na or parsed is None:
        return "na", case.na, None
    if parsed_view(parsed, case.compare_ids) != expected_view(case.message, case.compare_ids):
        return (
            "na",
            "autoparser's own parse is wrong here (see tests/corpus/test_roundtrip.py)",
            None,
        )
    try:
        spec = case.params.to_response_template()
    except ExportError as exc:
        return "noexport", str(exc), None
    try:
        message = chat_parsing.parse_response(
            case.text, spec, prefix=case.params.prompt, tools=TOOLS
        )
        theirs = transformers_view(message)
    except (ValueError, KeyError, TypeError) as exc:
        theirs = {"error": f"{type(exc).__name__}: {exc}"}
    return "compare", "", (ours_view(parsed), theirs)


@pytest.mark.parametrize(("path", "scenario"), _params())
def test_export_agrees_with_parse(path: Path, scenario: str) -> None:
    kind, reason, views = _outcome(path, scenario)
    if kind != "compare":
        pytest.skip(f"{kind}: {reason}")
    ours, theirs = views
    assert theirs == ours


def _plain_export(path: Path) -> str:
    """ "" when the template exports for a plain request (one flat tool), else why not."""
    try:
        params = load_template(path).apply([USER], tools=[WEATHER])
        params.to_response_template()
    except AutoparserError as exc:
        return str(exc)
    return ""


def test_export_coverage_and_agreement() -> None:
    """Export for >= 70% of tool-capable templates (a plain request), agreement on >= 95% of
    the round-trip cases where autoparser is right and the export exists.

    A case whose request has tools the export cannot read back (ExportError for these
    tools, though a plain request exports) is "no export for the tools": counted apart.
    """
    capable = plain = exported = compared = agreed = by_tools = 0
    for path in template_paths():
        outcomes = [_outcome(path, s) for s in SCENARIOS]
        if not any(k != "na" for k, _, _ in outcomes):
            continue
        if any("does not render tool calls" in why for _, why, _ in outcomes):
            continue
        capable += 1
        plain_ok = not _plain_export(path)
        plain += plain_ok
        if any(k == "compare" for k, _, _ in outcomes):
            exported += 1
        for kind, _, views in outcomes:
            if kind == "compare":
                compared += 1
                agreed += views[0] == views[1]
            by_tools += kind == "noexport" and plain_ok
    print(
        f"\nresponse-template export for {plain} of {capable} tool-capable templates with a "
        f"plain request ({plain / capable:.0%}; {exported} with the round-trip tools); "
        f"agreement on {agreed} of {compared} cases ({agreed / compared:.1%}); "
        f"{by_tools} cases without an export for their tools"
    )
    assert plain / capable >= 0.70
    assert agreed / compared >= 0.95
    # Every disagreement is a listed strict xfail (the parametrized test checks which).
    assert compared - agreed <= len(_xfails())


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


def test_cli_prints_the_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    template = OWN_TEMPLATES / "formats/chatml_hermes.jinja"
    assert main(["export-response-template", str(template), "--tools", str(tools)]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["version"] == 1 and "tool_calls" in spec["fields"]
    harmony = OWN_TEMPLATES / "handlers/harmony_like.jinja"
    assert main(["export-response-template", str(harmony), "--tools", str(tools)]) == 2
    assert "harmony" in capsys.readouterr().err


def test_corpus_is_covered_when_present() -> None:
    if not corpus_templates():
        pytest.skip("no corpus: the own templates above still run")
    assert len(template_paths()) > len(own_templates())


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
