"""The differential analysis: diff helpers, expected analyses of own and corpus templates,
workarounds, handlers, caching, serialisation and the ``analyze`` CLI."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import (
    CORPUS_SKIP_REASON,
    OWN_TEMPLATES,
    TESTS_DIR,
    analysed_own_templates,
    corpus_params,
    corpus_templates,
)

from autoparser import ChatTemplate
from autoparser.analysis import (
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.analysis.analyzer import analyze_template, clear_cache, run_analysis
from autoparser.analysis.diff import (
    diff_split,
    markers_in,
    safe_common_prefix,
    safe_common_suffix,
    segmentize,
)
from autoparser.analysis.workarounds import (
    WORKAROUNDS,
    granite_think_response,
    granite_tool_call_list,
    lfm2_pythonic_calls,
    stripped_think_history,
)
from autoparser.cli import main
from autoparser.errors import TemplateError
from autoparser.formats import detect_format

DATA = TESTS_DIR / "data" / "analysis"
# The date templates print (from strftime_now), pinned: a template that writes it into a
# marker (vllm-muse_glimmer's generation prompt) then pins the same analysis every day.
FIXED_NOW = dt.datetime(2025, 3, 14, 15, 9, 26)


def fixed_clock() -> dt.datetime:
    """The clock every analysis here renders with (injected: ``ChatTemplate(clock=...)``)."""
    return FIXED_NOW


def _load(path: Path) -> ChatTemplate:
    source = path.read_text(encoding="utf-8")
    return ChatTemplate(source, bos_token="<s>", eos_token="</s>", clock=fixed_clock)


def _expected(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _field(analysis: dict[str, Any], dotted: str) -> Any:
    value: Any = analysis
    for key in dotted.split("."):
        value = value[key]
    return value


# --- diff machinery -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "left", "right"),
    [
        # The common prefix "<tool_" must not split the marker.
        ("x<tool_call>y", "x<tool_result>y", "<tool_call>", "<tool_result>"),
        ("[TOOL_CALLS]a", "[TOOL_RESULTS]a", "[TOOL_CALLS]", "[TOOL_RESULTS]"),
        ("<|im_end|>\n", "<|im_sep|>\n", "<|im_end|>", "<|im_sep|>"),
        (
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
        ),
        # Common suffix "_call>" is pulled back so both markers stay whole.
        ("A<tool_call>", "B<func_call>", "A<tool_call>", "B<func_call>"),
        # Plain text is split at the first difference.
        ("hello world", "hello there", "world", "there"),
    ],
)
def test_diff_split_keeps_markers_whole(a: str, b: str, left: str, right: str) -> None:
    d = diff_split(a, b)
    assert d.prefix + d.left + d.suffix == a
    assert d.prefix + d.right + d.suffix == b
    assert (d.left, d.right) == (left, right)


def test_diff_split_identical_and_disjoint() -> None:
    d = diff_split("same", "same")
    assert (d.prefix, d.left, d.right, d.suffix) == ("same", "", "", "")
    d = diff_split("abc", "xyz")
    assert (d.prefix, d.left, d.right, d.suffix) == ("", "abc", "xyz", "")


def test_safe_common_affixes() -> None:
    assert safe_common_prefix("</parameter>\n<parameter=", "</parameter>\n</function>") == (
        "</parameter>\n"
    )
    assert safe_common_suffix("</parameter>\n<parameter=", ">\n<parameter=") == "\n<parameter="


def test_segmentize_and_markers() -> None:
    text = '<tool_call>\n{"a": [1]}[ARGS]x<|im_end|>'
    segs = segmentize(text)
    assert "".join(s.value for s in segs) == text
    assert [s.value for s in segs if s.is_marker] == ["<tool_call>", "[ARGS]", "<|im_end|>"]
    # JSON arrays are not markers.
    assert markers_in('["a", "b"] [{"x": 1}]') == []
    assert markers_in("[BEGIN FINAL RESPONSE] [/THINK]") == ["[BEGIN FINAL RESPONSE]", "[/THINK]"]


# --- expected analyses ------------------------------------------------------------------


OWN_PATHS = analysed_own_templates()


def _own_expectation(path: Path) -> Path:
    """tests/data/analysis/own/<folder>/<name>.json for tests/templates/<folder>/<name>.jinja."""
    return DATA / "own" / path.relative_to(OWN_TEMPLATES).with_suffix(".json")


@pytest.mark.parametrize("path", OWN_PATHS, ids=lambda p: p.stem)
def test_own_template_analysis(path: Path) -> None:
    expected = _expected(_own_expectation(path))
    assert run_analysis(_load(path)).to_dict() == expected["analysis"]


def test_own_templates_cover_every_family_and_mode() -> None:
    found = [_expected(_own_expectation(p))["analysis"] for p in OWN_PATHS]
    tool_modes = {a["tools"]["format"]["mode"] for a in found}
    reasoning_modes = {a["reasoning"]["mode"] for a in found}
    assert tool_modes == {m.value for m in ToolFormat}
    assert reasoning_modes == {m.value for m in ReasoningMode}


def _expectation_file(path: Path) -> Path:
    return DATA / f"{path.stem}.json"


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_template_analysis(path: Path) -> None:
    """The analysis of each corpus template equals its pinned, hand-checked expectation; a
    template jinja2 cannot compile is pinned as the error it raises."""
    file = _expectation_file(path)
    if not file.is_file():
        pytest.fail(f"no expected analysis for {path.stem}: write {file.relative_to(DATA.parent)}")
    expected = _expected(file)
    if "error" in expected:
        with pytest.raises(TemplateError) as raised:
            run_analysis(_load(path))
        assert expected["error"] in str(raised.value)
        return
    assert run_analysis(_load(path)).to_dict() == expected["analysis"]


def test_every_corpus_template_has_an_expected_analysis() -> None:
    """Lists every corpus template without an expectation file, and every file without one."""
    names = {p.stem for p in corpus_templates()}
    if not names:
        pytest.skip(CORPUS_SKIP_REASON)
    files = {p.stem for p in DATA.glob("*.json")}
    assert sorted(names - files) == [], "corpus templates without an expected analysis"
    assert sorted(files - names) == [], "expected analyses without a corpus template"


def _xfail_params() -> list[Any]:
    params = []
    for p in corpus_params():
        path = p.values[0]  # type: ignore[attr-defined]
        if path is None:
            params.append(pytest.param(None, None, marks=p.marks, id="no-corpus"))  # type: ignore[attr-defined]
            continue
        file = _expectation_file(path)
        xfail = _expected(file).get("xfail") if file.is_file() else None
        if xfail:
            mark = pytest.mark.xfail(reason=xfail["reason"], strict=True)
            params.append(pytest.param(path, xfail["expected_fields"], marks=mark, id=path.stem))
    return params


@pytest.mark.parametrize(("path", "fields"), _xfail_params())
def test_corpus_known_gaps(path: Path, fields: dict[str, Any]) -> None:
    """What the analysis should find but does not (strict xfail: fixing one flags it)."""
    actual = run_analysis(_load(path)).to_dict()
    for dotted, value in fields.items():
        assert _field(actual, dotted) == value, dotted


def test_expected_data_has_no_strays() -> None:
    """Every expected-analysis file names an existing own template (corpus files are
    checked against the corpus when it is present)."""
    own = {_own_expectation(p) for p in OWN_PATHS}
    assert set((DATA / "own").rglob("*.json")) == own


# --- workarounds and handlers -----------------------------------------------------------


def test_workaround_count() -> None:
    # Fewer is better: adding one must be deliberate (update this count and the report).
    assert len(WORKAROUNDS) == 5


def test_granite_think_response_workaround() -> None:
    source = (
        "... Write your thoughts between <think></think> and write your response between"
        " <response></response> ..."
    )
    patched = granite_think_response(source, TemplateAnalysis())
    assert patched is not None
    assert (patched.reasoning.start, patched.reasoning.end) == ("<think>", "</think>")
    assert (patched.content.start, patched.content.end) == ("<response>", "</response>")
    assert granite_think_response("{{ messages }}", TemplateAnalysis()) is None


def test_stripped_think_history_workaround() -> None:
    source = "{% set content = content.split('</think>')[-1] %}"
    base = TemplateAnalysis(generation_prompt="<|Assistant|><think>\n")
    patched = stripped_think_history(source, base)
    assert patched is not None
    assert patched.reasoning.mode is ReasoningMode.FORCED_OPEN
    assert patched.reasoning.enabled_prompt_suffix == "<think>\n"
    # Not applied when the diffs already found reasoning, nor without the fingerprint.
    found = dataclasses.replace(
        base, reasoning=ReasoningAnalysis(mode=ReasoningMode.TAG_BASED, start="<t>", end="</t>")
    )
    assert stripped_think_history(source, found) is None
    assert stripped_think_history("{{ content }}", base) is None


def test_granite_tool_call_list_workaround() -> None:
    source = "... respond only with <|tool_call|> followed by a JSON list of tools used. If a tool"
    patched = granite_tool_call_list(source, TemplateAnalysis())
    assert patched is not None
    fmt = patched.tools.format
    assert (fmt.mode, fmt.section_start) == (ToolFormat.JSON_NATIVE, "<|tool_call|>")
    assert (fmt.name_field, fmt.args_field, fmt.tools_array_wrapped) == ("name", "arguments", True)
    assert patched.tools.parallel_calls
    # Not applied when the diffs found a format, nor without the fingerprint.
    assert granite_tool_call_list(source, patched) is None
    assert granite_tool_call_list("{{ messages }}", TemplateAnalysis()) is None


def test_lfm2_pythonic_calls_workaround() -> None:
    source = '{%- set p = p + "List of tools: <|tool_list_start|>[" -%}'
    patched = lfm2_pythonic_calls(source, TemplateAnalysis())
    assert patched is not None
    tools = patched.tools
    assert tools.format.mode is ToolFormat.TAG_WITH_TAGGED
    assert (tools.format.section_start, tools.format.section_end) == (
        "<|tool_call_start|>[",
        "]<|tool_call_end|>",
    )
    args = tools.arguments
    assert (args.start, args.name_suffix, args.value_suffix, args.end) == ("(", '="', '"', ")")
    assert lfm2_pythonic_calls(source, patched) is None
    # LFM2.5-Instruct's list has no <|tool_list_start|> and its turns render no calls.
    assert lfm2_pythonic_calls('"List of tools: ["', TemplateAnalysis()) is not None
    # A template that renders its calls keeps the format analysed from them (LFM2.5-8B).
    assert lfm2_pythonic_calls('"List of tools: ["', patched) is None
    assert lfm2_pythonic_calls('"Tools: ["', TemplateAnalysis()) is None


def test_workarounds_applied_are_named_in_the_analysis() -> None:
    source = (
        "{{ bos_token }}{% for m in messages %}{{ m.content.split('</think>')[-1] }}{% endfor %}"
        "{% if add_generation_prompt %}<|A|>{% endif %}"
    )
    analysis = run_analysis(ChatTemplate(source))
    assert analysis.workarounds == ("stripped_think_history",)
    assert analysis.reasoning.mode is ReasoningMode.TAG_BASED
    assert "<think>" in analysis.preserved_tokens
    # A prompt ending in the conventional opener needs no workaround: the analysis itself
    # assumes its closer (forced open).
    forced = run_analysis(ChatTemplate(source.replace("<|A|>", "<|A|><think>\n")))
    assert forced.workarounds == ()
    assert forced.reasoning.mode is ReasoningMode.FORCED_OPEN


def test_handlers_by_fingerprint() -> None:
    assert detect_format("{{ '<|start|>assistant<|channel|>final<|message|>' }}") == "harmony"
    assert detect_format("Respond in this format:\n>>>${recipient}\n${content}") == (
        "functionary_v3_2"
    )
    assert detect_format("{{ messages }}") == ""


# --- caching and serialisation -----------------------------------------------------------


def test_analyze_is_cached_per_source_and_tokens() -> None:
    clear_cache()
    source = (OWN_TEMPLATES / "formats/chatml_hermes.jinja").read_text(encoding="utf-8")
    first = ChatTemplate(source).analyze()
    assert ChatTemplate(source).analyze() is first
    assert analyze_template(ChatTemplate(source, eos_token="</s>")) is not first


@pytest.mark.parametrize("path", OWN_PATHS, ids=lambda p: p.stem)
def test_analysis_serialisation_round_trips(path: Path) -> None:
    analysis = run_analysis(_load(path))
    again = TemplateAnalysis.from_dict(json.loads(analysis.to_json()))
    assert again == analysis


def test_preserved_tokens_are_markers() -> None:
    analysis = run_analysis(_load(OWN_TEMPLATES / "formats/qwen3coder_like.jinja"))
    assert analysis.preserved_tokens == (
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    )


def test_template_without_tools_or_reasoning_says_so() -> None:
    analysis = run_analysis(_load(OWN_TEMPLATES / "formats/plain.jinja"))
    assert analysis.tools.format.mode is ToolFormat.NONE
    assert analysis.reasoning.mode is ReasoningMode.NONE
    assert analysis.end_of_turn == ("<end_of_turn>",)
    assert analysis.generation_prompt == "<start_of_turn>model\n"


# --- CLI ----------------------------------------------------------------------------------


def test_cli_analyze_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = OWN_TEMPLATES / "formats/qwen3coder_like.jinja"
    assert main(["analyze", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == ChatTemplate.from_file(path).analyze().to_dict()


def test_cli_analyze_readable(capsys: pytest.CaptureFixture[str]) -> None:
    path = OWN_TEMPLATES / "formats/qwen3coder_like.jinja"
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tools: tag_with_tagged" in out
    assert repr("<tool_call>\n") in out  # escapes visible
    assert "generation_prompt" in out and repr("<|im_start|>assistant\n") in out
    assert "end_of_turn" in out and "'<|im_end|>'" in out


# Calls that render, but not in the probe's plain call turn.
ID_AS_NAME = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content or '' }}{% for tc in m.tool_calls or [] %}"
    "<call>{{ tc.id }}<args>{{ tc.function.arguments | tojson }}</call>{% endfor %}</turn>"
    "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
)
LAST_TURN_PREFILL = (
    "{% set last = messages[-1] if messages[-1].role == 'assistant' else none %}"
    "{% for m in (messages[:-1] if last else messages) %}<{{ m.role }}>{{ m.content or '' }}"
    "{% for tc in m.tool_calls or [] %}<call>{{ tc.function | tojson }}</call>{% endfor %}"
    "</turn>{% endfor %}{% if last %}<assistant>{{ last.content }}{% endif %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_calls_found_where_the_template_writes_the_id_as_the_name() -> None:
    tools = run_analysis(ChatTemplate(ID_AS_NAME)).tools
    assert tools.format.mode is ToolFormat.TAG_WITH_JSON
    assert (tools.format.per_call_start, tools.function.name_prefix) == ("<call>", "functions.")
    assert tools.call_id.generated and tools.call_id.prefix == ":"


def test_calls_found_where_only_history_turns_show_them() -> None:
    tools = run_analysis(ChatTemplate(LAST_TURN_PREFILL)).tools
    assert tools.format.mode is ToolFormat.JSON_NATIVE
    assert (tools.format.per_call_start, tools.format.per_call_end) == ("<call>", "</call>")
