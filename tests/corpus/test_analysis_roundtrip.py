"""Property: writing tool calls with the analysed markers reproduces the template's render.

For every template that supports tool calls, one call (and two, when the template renders
parallel calls) with names, arguments and ids unlike the analysis' own needles are rendered
by the template; the text built from the analysis alone must appear in that render. So
must a call with a number argument (tagged formats write it after the typed name suffix).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import analysed_own_templates, corpus_params, corpus_templates

from autoparser import ChatTemplate
from autoparser.analysis import TemplateAnalysis, ToolFormat
from autoparser.analysis.model import CallIdPosition
from autoparser.errors import TemplateError
from autoparser.template.caps import detect_quirks
from autoparser.template.messages import CALL_TURN_TEXT, named_call_id

# (name, arguments, id): names, argument names and values the analysis never used.
CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": "Paris", "unit": "celsius"}, "a1b2c3d4e"),
    ("get_time", {"timezone": "Europe/Rome"}, "f5g6h7i8j"),
]

# Workarounds that set the whole tool format of a template that never renders calls.
TOOL_FORMAT_WORKAROUNDS = frozenset(
    {"granite_tool_call_list", "lfm2_pythonic_calls", "command_r_action_list"}
)

TYPED_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("get_weather", {"city": "Paris", "days": 3}, "a1b2c3d4e"),
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "description": "celsius or fahrenheit"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Time in a zone",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "IANA zone"}},
                "required": ["timezone"],
            },
        },
    },
]

# Corpus templates whose analysed markers do not reproduce the render (strict xfails: fixing
# the analysis flags them). Each reason says what goes wrong.
COMPILE = "jinja2 cannot compile the template (transformers cannot render it either)"
ROUNDTRIP_XFAIL: dict[str, str] = {
    "vllm-tool_chat_template_hermes": "the template writes '{ \"arguments\": ' (a space after"
    " the brace) which no json_style reproduces",
    "MiroThinker-v1": COMPILE,
    "vllm-template_vicuna": COMPILE,
    "vllm-tool_chat_template_deepseekv31": COMPILE,
    "llamacpp-test-gigachat-20b-a3b-instruct": "every render fails: the template reads"
    " additional_special_tokens (a tokenizer-config list nobody passes), as in transformers",
    "hfjs-cohere-command-r-v01": "no probe renders: the template loops over `tools` unguarded"
    " ('NoneType' object is not iterable) and reads Cohere-style tool.name (transformers fails"
    " too)",
    "hfjs-fireworks-firefunction-v1": "no probe renders: the template raises unless a"
    " 'functions' message comes first (transformers fails too)",
}


def _set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        obj = obj.setdefault(key, {})
    obj[leaf] = value


def _json_obj(a: TemplateAnalysis, index: int, call: tuple[str, dict[str, Any], str]) -> Any:
    fmt = a.tools.format
    name, args, call_id = call
    constants = dict(fmt.constant_fields)
    obj: dict[str, Any] = {name: args} if fmt.fun_name_is_key else {}
    for path in fmt.field_order:
        leaf = path.rsplit(".", 1)[-1]
        if leaf == fmt.name_field:
            _set_path(obj, path, name)
        elif leaf == fmt.args_field:
            _set_path(obj, path, json.dumps(args) if fmt.arguments_as_string else args)
        elif fmt.id_field and leaf == fmt.id_field:
            _set_path(obj, path, call_id)
        elif fmt.gen_id_field and leaf == fmt.gen_id_field:
            _set_path(obj, path, str(index))
        else:
            _set_path(obj, path, json.loads(constants[path]))
    return obj


def _dump(a: TemplateAnalysis, value: Any) -> str:
    fmt = a.tools.format
    if fmt.json_indent:
        text = json.dumps(value, ensure_ascii=False, indent=fmt.json_indent)
    else:
        seps = (",", ":") if fmt.json_style == "compact" else (", ", ": ")
        text = json.dumps(value, ensure_ascii=False, separators=seps)
    return text.replace('"', "'") if fmt.uses_python_dicts else text


def _tagged_args(a: TemplateAnalysis, args: dict[str, Any]) -> str:
    """Tagged arguments: strings raw; other values JSON, after the typed name suffix (and
    bare, when the string suffix is the typed one plus the strings' quote)."""
    ar = a.tools.arguments
    typed = ar.name_suffix_json or ar.name_suffix
    bare = typed != ar.name_suffix and typed + ar.value_suffix == ar.name_suffix
    parts = []
    for k, v in args.items():
        # An XML-style closer repeats the argument's name (MiniMax-M3's "</NAME>").
        again = k + ar.value_suffix_after_name if ar.value_suffix_after_name else ""
        closer = ar.value_suffix + again
        if isinstance(v, str):
            parts.append(ar.name_prefix + k + ar.name_suffix + ar.value_prefix + v + closer)
        else:
            tail = "" if bare else closer
            parts.append(ar.name_prefix + k + typed + ar.value_prefix + json.dumps(v) + tail)
    return ar.start + ar.separator.join(parts) + ar.end


def _tag_call(a: TemplateAnalysis, index: int, call: tuple[str, dict[str, Any], str]) -> str:
    t = a.tools
    name, args, call_id = call
    cid = str(index + t.call_id.index_base) if t.call_id.generated else call_id
    id_text = t.call_id.prefix + cid + t.call_id.suffix
    if t.format.mode is ToolFormat.TAG_WITH_JSON:
        body = json.dumps(args, ensure_ascii=False)
        if t.format.uses_python_dicts:
            body = body.replace('"', "'")
    else:
        body = _tagged_args(a, args)
    pos = t.call_id.position
    return (
        t.format.per_call_start
        + (id_text if pos is CallIdPosition.PRE_FUNC_NAME else "")
        + t.function.name_prefix
        + name
        + t.function.name_suffix
        + (name + t.function.name_suffix_after_name if t.function.name_suffix_after_name else "")
        + (id_text if pos is CallIdPosition.BETWEEN_FUNC_AND_ARGS else "")
        + body
        + t.function.close
        + (id_text if pos is CallIdPosition.POST_ARGS else "")
        + t.format.per_call_end
    )


def render_calls(a: TemplateAnalysis, calls: list[tuple[str, dict[str, Any], str]]) -> str:
    """The tool section for ``calls``, written from the analysis alone."""
    fmt = a.tools.format
    if fmt.mode is ToolFormat.JSON_NATIVE:
        values = [_json_obj(a, i, c) for i, c in enumerate(calls)]
        objs = [_dump(a, v) for v in values]
        if fmt.tools_array_wrapped and fmt.json_indent:
            inner = _dump(a, values)  # the whole array is laid out by one indent
        elif fmt.tools_array_wrapped:
            inner = fmt.array_open + a.tools.call_separator.join(objs) + fmt.array_close
        else:
            inner = a.tools.call_separator.join(
                fmt.per_call_start + o + fmt.per_call_end for o in objs
            )
    else:
        inner = a.tools.call_separator.join(_tag_call(a, i, c) for i, c in enumerate(calls))
    return fmt.section_start + inner + fmt.section_end


def template_render(template: ChatTemplate, calls: list[tuple[str, dict[str, Any], str]]) -> str:
    """The template's own render of a turn with ``calls`` (object arguments, else strings).

    A template that writes the call's id where its name goes gets ids naming the calls
    (``functions.NAME:IDX``), as requests through ``apply`` do."""
    quirks = detect_quirks(template.renderer)
    if quirks.tool_call_id_names_call:
        calls = [(n, a, named_call_id(n, i)) for i, (n, a, _) in enumerate(calls)]
    # Arguments and call-turn content as apply passes them (and the analysis renders them):
    # JSON text first where objects print as a Python repr; a space where the template
    # refuses an empty call turn it never prints.
    orders = (True, False) if quirks.arguments_as_json_string else (False, True)
    content = CALL_TURN_TEXT if quirks.call_turn_text else ""
    escaped: str | None = None
    for as_string in orders:
        tool_calls = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(a) if as_string else a},
            }
            for n, a, cid in calls
        ]
        messages = [
            {"role": "user", "content": "What is the weather?"},
            {"role": "assistant", "content": content, "tool_calls": tool_calls},
        ]
        # A template that renders the last turn as a prefill shows calls only in history:
        # then the turn is followed by its results.
        results = [{"role": "tool", "tool_call_id": cid, "content": "ok"} for _, _, cid in calls]
        try:
            rendered = template.render_raw(
                {"messages": messages, "tools": TOOLS, "add_generation_prompt": False}
            )
            if calls and calls[0][0] not in rendered.rsplit("What is the weather?", 1)[-1]:
                rendered = template.render_raw(
                    {"messages": messages + results, "tools": TOOLS, "add_generation_prompt": False}
                )
        except TemplateError:
            continue
        # A template whose object arguments come out HTML-escaped (``str + Markup`` turns its
        # own quotes into &#34;) renders clean JSON from string arguments: the analysis reads
        # that render (what a model writes), so the round trip does too.
        entities = rendered.count("&#34;") + rendered.count("&#39;")
        if not as_string and entities:
            escaped = rendered
            continue
        if as_string and escaped is not None:
            cleaner = entities < escaped.count("&#34;") + escaped.count("&#39;")
            return rendered if cleaner else escaped
        return rendered
    if escaped is not None:
        return escaped
    raise AssertionError("the template renders no tool-call turn")


def _check(path: Path) -> None:
    template = ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")
    analysis = template.analyze()
    if analysis.tools.format.mode is ToolFormat.NONE:
        # "No tool support" must mean the template really writes no call.
        try:
            rendered = template_render(template, CALLS[:1])
        except AssertionError:
            return  # no tool-call turn renders at all
        assert "Paris" not in rendered, "analysis says NONE but the call is rendered"
        return
    if analysis.handler:
        pytest.skip(f"hand-written format {analysis.handler!r}, not analysed markers")
    set_by = sorted(TOOL_FORMAT_WORKAROUNDS.intersection(analysis.workarounds))
    if set_by:
        # The workaround exists because the template writes no call: check that it does not
        # (tests/analysis/test_workarounds.py checks the format against the model's outputs).
        try:
            rendered = template_render(template, CALLS[:1])
        except AssertionError:
            rendered = ""  # no tool-call turn renders at all
        assert "Paris" not in rendered, "the template renders calls"
        pytest.skip(f"tool format set by workaround {set_by[0]}: the template renders no call")
    if not template.caps.supports_tool_calls:
        # The format is the one the tool instructions teach (``taught_format``): the template
        # itself renders no call to read back.
        try:
            rendered = template_render(template, CALLS[:1])
        except AssertionError:
            rendered = ""
        assert "Paris" not in rendered, "the template renders calls"
        pytest.skip("n/a: a format taught in the tool instructions; no call turn renders")
    counts = [1, 2] if analysis.tools.parallel_calls else [1]
    for n in counts:
        calls = CALLS[:n]
        expected = render_calls(analysis, calls)
        rendered = template_render(template, calls)
        assert expected in rendered, f"{n} call(s): {expected!r} not in render"
    # A number argument: written after the typed name suffix where the template has one.
    expected = render_calls(analysis, TYPED_CALLS)
    rendered = template_render(template, TYPED_CALLS)
    assert expected in rendered, f"typed call: {expected!r} not in render"


@pytest.mark.parametrize("path", analysed_own_templates(), ids=lambda p: p.stem)
def test_own_template_calls_roundtrip(path: Path) -> None:
    _check(path)


def _corpus_params() -> list[Any]:
    params: list[Any] = []
    for p in corpus_params():
        path = p.values[0]  # type: ignore[attr-defined]
        reason = ROUNDTRIP_XFAIL.get(path.stem) if path is not None else None
        if reason:
            mark = pytest.mark.xfail(reason=reason, strict=True)
            p = pytest.param(path, marks=mark, id=path.stem)
        params.append(p)
    return params


def test_xfails_name_corpus_templates() -> None:
    names = {p.stem for p in corpus_templates()}
    if not names:
        pytest.skip("template corpus not found")
    assert sorted(set(ROUNDTRIP_XFAIL) - names) == []


@pytest.mark.parametrize("path", _corpus_params())
def test_corpus_template_calls_roundtrip(path: Path) -> None:
    _check(path)
