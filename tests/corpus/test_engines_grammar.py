"""Every grammar autoparser emits, in each engine that runs it: llguidance, xgrammar, llama.cpp.

1. Request grammars: every template (the corpus and the project's own) with a realistic
   request (a flat tool and a nested one: object, array of objects, enums, number, integer
   range, boolean, string array), tool_choice "auto" and "required": the grammar compiles in
   each engine.
2. Recorded outputs: the round-trip renders of assistant turns with calls
   (tests/corpus/test_roundtrip.py makes them from the templates themselves) and, when
   present, the reference model outputs of
   ../shared/bench, each under the grammar of its own request: the text is accepted by each
   engine, for a lazy grammar from the trigger on (``trigger_start``: where llama.cpp's sampler
   switches the grammar on; vLLM and SGLang hand the text after the trigger to xgrammar or
   llguidance the same way).

Engines: llguidance in-process (tests/gbnf_oracle.py); xgrammar in one child process per
batch (tests/xgrammar_oracle.py; skipped with the reason when not installed: the ``grammars``
extra); llama.cpp's ``test-gbnf-validator`` per grammar ($AUTOPARSER_GBNF_VALIDATOR or
~/.cache/autoparser/llama.cpp/bin, built by scripts/build_llamacpp.sh; skipped when absent).
A known failure is a strict xfail listed in tests/data/engines_xfail.json.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import xgrammar_oracle
from helpers.formats import trigger_start
from helpers.gbnf_oracle import accepts, check_grammar
from helpers.paths import TESTS_DIR, bench_dir, corpus_dir
from helpers.roundtrip import CALL_SCENARIOS, expected_view, parsed_view, prepare, template_paths

from autoparser import ChatTemplate
from autoparser.errors import AutoparserError

XFAIL_FILE = TESTS_DIR / "data" / "engines_xfail.json"
ENGINES = ("llguidance", "xgrammar", "llama.cpp")

NESTED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_event",
            "description": "Create a calendar event",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "start": {
                        "type": "object",
                        "properties": {
                            "date": {"type": "string", "description": "YYYY-MM-DD"},
                            "hour": {"type": "integer", "minimum": 0, "maximum": 23},
                        },
                        "required": ["date"],
                    },
                    "attendees": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "role": {"type": "string", "enum": ["host", "guest", "optional"]},
                            },
                            "required": ["name"],
                        },
                    },
                    "duration_hours": {"type": "number"},
                    "priority": {"type": "string", "enum": ["low", "normal", "high"]},
                    "reminder": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
                },
                "required": ["title", "start"],
            },
        },
    },
]
MESSAGES = [
    {
        "role": "user",
        "content": "What's the weather in Paris tomorrow? If it's sunny, book a picnic with Ana.",
    }
]
TOOL_CHOICES = ("auto", "required")


@dataclass(frozen=True)
class GrammarCase:
    """A grammar to compile and, for an output case, the text (from the trigger on) to match."""

    id: str
    grammar: str | None  # None: no grammar (the reason in `na`)
    text: str | None = None
    na: str = ""


# ------------------------------------------------------------------ the cases


@functools.cache
def _template(path: Path) -> ChatTemplate:
    return ChatTemplate(
        path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>", name=path.stem
    )


@functools.cache
def request_case(path: Path, tool_choice: str) -> GrammarCase:
    case_id = f"{path.stem}-{tool_choice}"
    try:
        params = _template(path).apply(MESSAGES, tools=NESTED_TOOLS, tool_choice=tool_choice)
    except AutoparserError as exc:
        return GrammarCase(case_id, None, na=f"no request: {exc}"[:300])
    if not params.grammar:
        return GrammarCase(case_id, None, na="no grammar (the template renders no tools)")
    return GrammarCase(case_id, params.grammar)


@functools.cache
def roundtrip_case(path: Path, scenario: str) -> GrammarCase:
    case_id = f"{path.stem}-{scenario}"
    try:
        case = prepare(path, scenario)
    except AutoparserError as exc:
        return GrammarCase(case_id, None, na=f"template cannot be loaded: {exc}"[:300])
    if case.na:
        return GrammarCase(case_id, None, na=f"n/a: {case.na}")
    params = case.params
    if params.grammar is None:
        return GrammarCase(case_id, None, na="no grammar")
    parsed = parsed_view(params.parse(case.text), case.compare_ids)
    if parsed != expected_view(case.message, case.compare_ids):
        return GrammarCase(case_id, None, na="round trip fails (tests/corpus/test_roundtrip.py)")
    start = trigger_start(params, case.text) if params.grammar_lazy else 0
    if start < 0:
        return GrammarCase(case_id, None, na="no trigger fires (tests/corpus/test_roundtrip.py)")
    return GrammarCase(case_id, params.grammar, case.text[start:])


def bench_names() -> list[str]:
    root = bench_dir()
    if root is None:
        return []
    return sorted(p.name.removesuffix(".meta.json") for p in root.glob("*.meta.json"))


@functools.cache
def bench_case(name: str, tool_choice: str) -> GrammarCase:
    root, templates = bench_dir(), corpus_dir()
    assert root is not None
    case_id = f"{name}-{tool_choice}"
    meta = json.loads((root / f"{name}.meta.json").read_text(encoding="utf-8"))
    path = templates / meta["template"] if templates else None
    if path is None or not path.is_file():
        return GrammarCase(case_id, None, na=f"template {meta['template']} not in the corpus")
    source = path.read_text(encoding="utf-8")
    if meta.get("prompt", "").startswith("<s>"):
        template = ChatTemplate(source, bos_token="<s>", eos_token="</s>", name=path.stem)
    else:
        template = ChatTemplate(source, name=path.stem)
    inputs = meta["inputs"]
    params = template.apply(
        inputs["messages"],
        tools=inputs.get("tools"),
        tool_choice=tool_choice,
        enable_thinking=inputs.get("enable_thinking"),
        reasoning_format=inputs.get("reasoning_format", "auto"),
        parallel_tool_calls=inputs.get("parallel_tool_calls"),
    )
    text = (root / meta["output_file"]).read_text(encoding="utf-8")
    if not params.parse(text).tool_calls:
        return GrammarCase(case_id, None, na="the output makes no tool call")
    if not params.grammar:
        return GrammarCase(case_id, None, na="no grammar")
    start = trigger_start(params, text) if params.grammar_lazy else 0
    if start < 0:
        return GrammarCase(case_id, None, na=f"no trigger of {params.grammar_triggers} fires")
    return GrammarCase(case_id, params.grammar, text[start:])


def all_cases() -> dict[str, list[tuple[str, Callable[[], GrammarCase]]]]:
    """Every case by kind, as (id, builder): building is deferred to the test."""
    paths = template_paths()
    return {
        "request": [
            (f"{p.stem}-{c}", functools.partial(request_case, p, c))
            for p in paths
            for c in TOOL_CHOICES
        ],
        "roundtrip": [
            (f"{p.stem}-{s}", functools.partial(roundtrip_case, p, s))
            for p in paths
            for s in sorted(CALL_SCENARIOS)
        ],
        "bench": [
            # as recorded: tool_choice "auto" (the outputs start with content or reasoning,
            # which a "required" grammar does not allow)
            (f"{n}-auto", functools.partial(bench_case, n, "auto"))
            for n in bench_names()
        ],
    }


CASES = all_cases()


# ------------------------------------------------------------------ the engines


def validator_path() -> Path | None:
    env = os.environ.get("AUTOPARSER_GBNF_VALIDATOR")
    path = (
        Path(env)
        if env
        else Path.home() / ".cache" / "autoparser" / "llama.cpp" / "bin" / "test-gbnf-validator"
    )
    return path if path.is_file() and os.access(path, os.X_OK) else None


def llama_cpp(grammar: str, text: str | None) -> tuple[bool, str]:
    """(grammar parsed and text, if any, accepted; the validator's message)."""
    validator = validator_path()
    assert validator is not None
    with tempfile.TemporaryDirectory() as tmp:
        gpath, tpath = Path(tmp) / "g.gbnf", Path(tmp) / "t.txt"
        gpath.write_text(grammar, encoding="utf-8")
        tpath.write_text(text or "", encoding="utf-8")
        proc = subprocess.run(
            [str(validator), str(gpath), str(tpath)], capture_output=True, check=False
        )
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0 or "Failed to initialize" in out:
        return False, f"grammar rejected: {err.strip()[-500:] or out.strip()[-500:]}"
    if text is None:
        return True, ""
    if "Input string is valid" in out:
        return True, ""
    return False, out.split("\n\nInput string:")[0].strip()


@functools.cache
def xgrammar_results(kind: str) -> dict[str, dict[str, Any]]:
    """One child process for every case of a kind (starting xgrammar costs ~1 s)."""
    built = [(case_id, build()) for case_id, build in CASES[kind]]
    items = [(i, c) for i, c in built if c.grammar is not None]
    results = xgrammar_oracle.check([{"grammar": c.grammar, "text": c.text} for _, c in items])
    return {i: r for (i, _), r in zip(items, results, strict=True)}


def run_engine(engine: str, kind: str, case: GrammarCase) -> tuple[bool, str]:
    """(the grammar compiles and the text, if any, is accepted; why not)."""
    assert case.grammar is not None
    if engine == "llguidance":
        try:
            check_grammar(case.grammar)
        except ValueError as exc:
            return False, str(exc)[:500]
        if case.text is not None and not accepts(case.grammar, case.text):
            return False, "text rejected"
        return True, ""
    if engine == "xgrammar":
        result = xgrammar_results(kind)[case.id]
        if not result["ok"]:
            return False, result["error"]
        if case.text is not None and not result["accepted"]:
            return False, "text rejected"
        return True, ""
    return llama_cpp(case.grammar, case.text)


def engine_unavailable(engine: str) -> str:
    if engine == "xgrammar":
        return xgrammar_oracle.unavailable()
    if engine == "llama.cpp" and validator_path() is None:
        return (
            "llama.cpp's test-gbnf-validator not found: run scripts/build_llamacpp.sh or set "
            "AUTOPARSER_GBNF_VALIDATOR"
        )
    return ""


# ------------------------------------------------------------------ the tests


def _xfails() -> dict[tuple[str, str, str], str]:
    if not XFAIL_FILE.is_file():
        return {}
    entries = json.loads(XFAIL_FILE.read_text(encoding="utf-8"))
    return {(e["engine"], e["kind"], e["case"]): e["reason"] for e in entries}


def _params() -> list[Any]:
    xfails = _xfails()
    params = []
    for kind, cases in CASES.items():
        for engine in ENGINES:
            for case_id, build in cases:
                reason = xfails.get((engine, kind, case_id))
                marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
                params.append(
                    pytest.param(engine, kind, build, marks=marks, id=f"{engine}-{kind}-{case_id}")
                )
    return params


TALLY: dict[tuple[str, str], list[int]] = {}  # (engine, kind) -> [checked, passed]


@pytest.mark.parametrize(("engine", "kind", "build"), _params())
def test_engine_accepts(engine: str, kind: str, build: Callable[[], GrammarCase]) -> None:
    why = engine_unavailable(engine)
    if why:
        pytest.skip(why)
    case = build()
    if case.grammar is None:
        pytest.skip(case.na)
    tally = TALLY.setdefault((engine, kind), [0, 0])
    tally[0] += 1
    ok, problem = run_engine(engine, kind, case)
    tally[1] += ok
    what = "grammar" if case.text is None else f"text {case.text[:300]!r} under the grammar"
    assert ok, f"{engine} rejects the {what}: {problem}\n{case.grammar[:3000]}"


# llama.cpp reads exactly two digits after `\\x`, xgrammar reads on: `\\x2D0` is U+2D0 there.
HEX_DIGIT_AFTER_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\x[0-9A-Fa-f]{2}[0-9A-Fa-f]")


def test_no_hex_digit_after_a_hex_escape() -> None:
    from autoparser.gbnf_text import gbnf_char_class, gbnf_literal

    assert gbnf_literal("\x01AB\x7f9z") == '"\\x01\\x41\\x42\\x7F\\x39z"'
    assert gbnf_char_class([(0x2D, 0x2D), (0x30, 0x39)]) == "[\\x2D\\x30-9]"
    assert gbnf_char_class([(0x5D, 0x5D), (0x61, 0x63)]) == "[\\x5D\\x61-c]"
    assert not HEX_DIGIT_AFTER_ESCAPE.search(gbnf_literal("a\\x41"))  # a backslash, then x41
    found = {}
    for _, build in CASES["request"]:
        case = build()
        hits = HEX_DIGIT_AFTER_ESCAPE.findall(case.grammar or "")
        if hits:
            found[case.id] = sorted(set(hits))
    assert not found


def test_engine_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """Print what the run above checked (the figures the issue asks for)."""
    if not TALLY:
        pytest.skip("no engine case ran in this session")
    lines = []
    for (engine, kind), (checked, passed) in sorted(TALLY.items()):
        what = "grammars compiled" if kind == "request" else f"{kind} outputs accepted"
        lines.append(f"{engine}: {what} {passed}/{checked}")
        assert 0 <= passed <= checked
    with capsys.disabled():
        print("\n" + "\n".join(lines))
