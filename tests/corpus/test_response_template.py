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
from helpers.paths import OWN_TEMPLATES, TESTS_DIR, corpus_templates, own_templates
from helpers.roundtrip import (
    SCENARIOS,
    TOOLS,
    USER,
    WEATHER,
    expected_view,
    load_template,
    ours_view,
    parsed_view,
    prepare,
    template_paths,
    transformers_view,
)

from autoparser import ExportError
from autoparser.cli import main
from autoparser.errors import AutoparserError

chat_parsing = pytest.importorskip("transformers.utils.chat_parsing.response_parser")

XFAIL_FILE = TESTS_DIR / "data" / "response_template_xfail.json"


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
