"""autoparser's vLLM plugin against the real vLLM package (CPU only, no model weights).

vLLM lives in its own environment (scripts/setup_vllm.sh; ``$AUTOPARSER_VLLM_PYTHON`` or
~/.cache/autoparser/vllm-venv), so these tests run tests/helpers/vllm_driver.py there once
per session: it composes vLLM's parser through ``ParserManager.get_parser`` with the
parsers named ``autoparser``, adjusts the request, parses each round-trip output whole
(``Parser.parse``, as the non-streaming chat endpoint) and streamed in random token-boundary
chunks (``ChatStreamProcessor.step``, as the streaming endpoint), with a tokenizer built from
a byte vocabulary plus the template's markers as special tokens. Each result must equal
``params.parse`` of the same output, the request's ChatParams as autoparser builds it.

The outputs are the round trip's (tests/corpus/test_roundtrip.py: the template's own render of an
assistant turn, for each scenario) on templates of every format family. Without the vLLM
environment the tests are skipped, naming the script that builds it.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers.paths import REPO_ROOT
from helpers.roundtrip import SCENARIOS, USER, call_view, load_template, prepare, template_paths
from helpers.roundtrip import Case as RoundTripCase

from autoparser.errors import AutoparserError

ROOT = REPO_ROOT
DRIVER = ROOT / "tests" / "helpers" / "vllm_driver.py"
XFAIL_FILE = ROOT / "tests" / "data" / "vllm_xfail.json"
VENV_PYTHON = Path(
    os.environ.get(
        "AUTOPARSER_VLLM_PYTHON",
        Path.home() / ".cache" / "autoparser" / "vllm-venv" / "bin" / "python",
    )
)
RANDOM_SPLITS = 3

# One or more templates of each format family (the corpus' names; own templates by stem).
FAMILIES = {
    "json-native": ["meta-llama-Llama-3.1-8B-Instruct", "vllm-tool_chat_template_llama4_json"],
    "json-array": ["mistralai-Mistral-Small-3.1-24B-Instruct-2503"],
    "tag+json": ["NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "Qwen-Qwen2.5-7B-Instruct"],
    "tag+json, reasoning": ["Qwen-Qwen3-0.6B", "HuggingFaceTB-SmolLM3-3B"],
    "tag+tagged": ["Qwen3-Coder", "glm_4_5", "MiniMax-M2"],
    "pythonic": ["vllm-tool_chat_template_llama3.2_pythonic", "fmt_pythonic_like"],
    "reasoning, forced open": [
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "own_forced_open",
        "Qwen-QwQ-32B",
    ],
    "reasoning, tag": ["own_think_tag", "ByteDance-Seed-OSS", "Kimi-K2-Thinking"],
    "special-token calls": ["deepseek-ai-DeepSeek-V3.1", "moonshotai-Kimi-K2"],
}


def _plain_name(stem: str) -> str:
    """A template's name without the own_/fmt_/tpl_ prefix the project's templates had."""
    return re.sub(r"^(own|fmt|tpl)_", "", stem)


def _paths() -> list[Path]:
    """The family representatives first, then every other corpus and own template."""
    every = template_paths()
    by_name = {_plain_name(p.stem): p for p in every}
    chosen = [
        by_name[_plain_name(name)]
        for names in FAMILIES.values()
        for name in names
        if _plain_name(name) in by_name
    ]
    return chosen + [p for p in every if p not in chosen]


def _splits(key: str) -> list[list[int]]:
    rng = random.Random(zlib.crc32(key.encode()))
    out = [[]]  # one chunk: the whole output in one delta
    out.append(list(range(4096)))  # every token boundary: one token per delta
    for _ in range(RANDOM_SPLITS):
        out.append(sorted(rng.sample(range(4096), rng.randint(1, 12))))
    return out


def _prepare(path: Path, scenario: str) -> Any:
    """The round trip's case; a template that does not even load is n/a here."""
    try:
        return prepare(path, scenario)
    except AutoparserError as exc:
        return RoundTripCase(path.stem, scenario, na=f"template does not load: {exc}")


def _case_id(path: Path, scenario: str) -> str:
    return f"{path.stem}-{scenario}"


CASES = [(p, s) for p in _paths() for s in SCENARIOS]
FAMILY_NAMES = {_plain_name(name) for names in FAMILIES.values() for name in names}


def _xfails(kind: str) -> dict[str, str]:
    """Known differences, by test kind ("parse" / "stream") and case id, with the reason."""
    return dict(json.loads(XFAIL_FILE.read_text(encoding="utf-8"))[kind])


# Request variants run on the family representatives: (scenario, request fields for vLLM,
# ChatTemplate.apply options for the expected parse, whether --reasoning-parser is set).
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any], bool]] = {
    "required": (
        "one_call",
        {"tool_choice": "required"},
        {"tool_choice": "required", "parallel_tool_calls": True},  # vLLM's default
        True,
    ),
    "named": (
        "one_call",
        {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        {
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": True,
        },
        True,
    ),
    "single_call": (
        "parallel_calls",
        {"parallel_tool_calls": False},
        {"parallel_tool_calls": False},
        True,
    ),
    # --tool-call-parser autoparser alone: vLLM leaves reasoning in the content.
    "tool_parser_only": ("reasoning_call", {}, {"reasoning_format": "none"}, False),
}
VARIANT_CASES = [
    (path, name) for path in _paths() if _plain_name(path.stem) in FAMILY_NAMES for name in VARIANTS
]


def caller_switch(path: Path, scenario: str) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The request's messages and chat_template_kwargs as a caller who knows the template's
    reasoning switch sends them to vLLM (the directive in the system message, the variable
    in chat_template_kwargs: what apply() does, which the plugin cannot do inside vLLM);
    None where enable_thinking itself is the switch or the case passes none."""
    case = _prepare(path, scenario)
    if case.na or "enable_thinking" not in case.render_kwargs:
        return None
    switch = load_template(path).analyze().reasoning.switch
    if switch is None or switch.variable == "enable_thinking":
        return None
    kwargs = dict(case.render_kwargs)
    messages = [dict(m) for m in switch.switch([USER], kwargs, bool(kwargs["enable_thinking"]))]
    return messages, kwargs


CALLER_SWITCH_CASES = [(p, s) for p, s in CASES if caller_switch(p, s) is not None]


def _caller_switch_id(path: Path, scenario: str) -> str:
    return f"{_case_id(path, scenario)}-caller_switch"


def _payload(
    path: Path, scenario: str, case_id: str, variant: str = "", switched: bool = False
) -> dict[str, Any]:
    case = _prepare(path, scenario)
    request = _request_of(case)
    reasoning_parser = True
    if variant:
        _, extra, _, reasoning_parser = VARIANTS[variant]
        request["extra"] = {**request["extra"], **extra}
    found = caller_switch(path, scenario) if switched else None
    if found is not None:
        request["messages"], request["chat_template_kwargs"] = found
    return {
        "id": case_id,
        "template": path.read_text(encoding="utf-8"),
        "bos": "<s>",
        "eos": "</s>",
        "request": request,
        "reasoning_parser": reasoning_parser,
        "prompt": case.params.prompt,
        "text": case.text,
        "splits": _splits(case_id),
    }


def _run_driver(payload: list[dict[str, Any]], work: Path) -> dict[str, dict[str, Any]]:
    cases_file, results_file = work / "cases.json", work / "results.json"
    spec = {"cases": payload, "entry_point": _entry_point()}
    cases_file.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [str(VENV_PYTHON), str(DRIVER), str(cases_file), str(results_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vLLM driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    return {r["id"]: r for r in results}


@pytest.fixture(scope="session")
def vllm_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run the driver once in the vLLM environment over every prepared case and variant."""
    if not VENV_PYTHON.exists():
        pytest.skip(f"no vLLM environment at {VENV_PYTHON}: run scripts/setup_vllm.sh")
    try:
        payload = [
            _payload(path, scenario, _case_id(path, scenario))
            for path, scenario in CASES
            if not _prepare(path, scenario).na
        ]
        for path, variant in VARIANT_CASES:
            scenario = VARIANTS[variant][0]
            if not _prepare(path, scenario).na:
                payload.append(_payload(path, scenario, _variant_id(path, variant), variant))
        for path, scenario in CALLER_SWITCH_CASES:
            case_id = _caller_switch_id(path, scenario)
            payload.append(_payload(path, scenario, case_id, switched=True))
        only = os.environ.get("AUTOPARSER_VLLM_ONLY")  # a substring of case ids, to debug
        if only:
            payload = [p for p in payload if only in p["id"]]
        return _run_driver(payload, tmp_path_factory.mktemp("vllm"))
    except Exception as exc:  # reported once per test, not re-run per test
        return {"__error__": {"error": f"{type(exc).__name__}: {exc}"}}


def _entry_point() -> str:
    """The ``vllm.general_plugins`` entry point pyproject.toml declares for autoparser."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(
        r'\[project\.entry-points\."vllm\.general_plugins"\]\s*autoparser\s*=\s*"([^"]+)"', text
    )
    assert found, "pyproject.toml declares no vllm.general_plugins entry point"
    return found.group(1)


def _variant_id(path: Path, variant: str) -> str:
    return f"{path.stem}-{variant}"


def _request_of(case: Any) -> dict[str, Any]:
    """The request prepare() built the params for: the user turn, the tools, its kwargs."""
    return {
        "messages": [USER],
        "tools": case.tools,
        "chat_template_kwargs": dict(case.render_kwargs),
        "extra": {"parallel_tool_calls": True} if case.scenario == "parallel_calls" else {},
    }


def view(reasoning: Any, content: Any, calls: list[dict[str, Any]], ids: bool) -> dict[str, Any]:
    """A message as comparable data: empty fields are None, arguments canonical JSON."""
    out_calls = [call_view(c["id"], c["name"], c["arguments"], ids) for c in calls]
    return {"reasoning": reasoning or None, "content": content or None, "tool_calls": out_calls}


def expected_view(path: Path, scenario: str) -> dict[str, Any]:
    case = _prepare(path, scenario)
    message = case.params.parse(case.text)
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    return view(message.reasoning_content, message.content, calls, case.compare_ids)


def _result(
    results: dict[str, dict[str, Any]], path: Path, scenario: str, result_id: str | None = None
) -> dict[str, Any]:
    """vLLM's result for a round-trip case (by default keyed by the case's own id), skipping
    n/a cases and failing on an error the driver reported."""
    case = _prepare(path, scenario)
    if case.na:
        pytest.skip(f"n/a: {case.na}")
    assert "__error__" not in results, results.get("__error__", {}).get("error")
    key = result_id or _case_id(path, scenario)
    result = results.get(key) or pytest.skip("filtered out")
    assert "error" not in result, result.get("error")
    return result


def _params(kind: str) -> list[Any]:
    xfails = _xfails(kind)
    out = []
    for path, scenario in CASES:
        why = xfails.get(_case_id(path, scenario))
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(path, scenario, id=_case_id(path, scenario), marks=marks))
    return out


@pytest.mark.parametrize(("path", "scenario"), _params("parse"))
def test_vllm_parse(vllm_results: dict[str, dict[str, Any]], path: Path, scenario: str) -> None:
    """Non-streaming: vLLM's Parser.parse with the autoparser parsers equals params.parse."""
    result = _result(vllm_results, path, scenario)
    case = _prepare(path, scenario)
    got = result["parse"]
    assert view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids) == (
        expected_view(path, scenario)
    )
    assert result["skip_special_tokens"] is False
    # vLLM's structured-output engine waits for the end of a reasoning block the prompt
    # opened; a template without reasoning has nothing to wait for.
    if case.params.thinking_forced_open:
        assert result["reasoning_ended_at_start"] is False
    if load_template(path).analyze().reasoning.mode.value == "none":
        assert result["reasoning_ended_at_start"] is True


def test_vllm_parse_loses_nothing(vllm_results: dict[str, dict[str, Any]]) -> None:
    """Whatever vLLM's prompt and apply()'s disagree on (the xfails), the output's text
    stays in the message: as reasoning, content or calls, never dropped, and the whole
    parse equals the stream."""
    assert "__error__" not in vllm_results, vllm_results.get("__error__", {}).get("error")
    lost, split = [], []
    for path, scenario in CASES:
        result = vllm_results.get(_case_id(path, scenario))
        if result is None or "error" in result:
            continue
        got = result["parse"]
        if not (got["reasoning"] or got["content"] or got["tool_calls"]):
            lost.append(_case_id(path, scenario))
        whole = view(got["reasoning"], got["content"], got["tool_calls"], False)
        streams = [
            view(g["reasoning"], g["content"], g["tool_calls"], False) for g in result["streams"]
        ]
        if any(stream != whole for stream in streams):
            split.append(_case_id(path, scenario))
    assert lost == [], "output lost"
    # No exception left: harmony's channels split as the whole parse does since the split
    # is the library's own parse (issue 32), so their xfails went.
    assert split == [], "whole parse differs from the stream"


@pytest.mark.parametrize(("path", "scenario"), _params("stream"))
def test_vllm_stream(vllm_results: dict[str, dict[str, Any]], path: Path, scenario: str) -> None:
    """Streaming in whole, one-token and random chunks: the accumulated deltas equal
    params.parse."""
    result = _result(vllm_results, path, scenario)
    case = _prepare(path, scenario)
    want = expected_view(path, scenario)
    for n, got in enumerate(result["streams"]):
        seen = view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids)
        assert seen == want, f"split {n}"


@pytest.mark.parametrize(
    ("path", "scenario"),
    [pytest.param(p, s, id=_caller_switch_id(p, s)) for p, s in CALLER_SWITCH_CASES],
)
def test_vllm_caller_switch(
    vllm_results: dict[str, dict[str, Any]], path: Path, scenario: str
) -> None:
    """Templates switched by their own variable or a system-message directive: the plugin
    cannot map enable_thinking onto it inside vLLM (vLLM renders before any parser hook;
    docs/integrations.md), but a request that passes the switch the template's way gets
    vLLM's prompt and parse equal to apply()'s, whole and streamed."""
    result = _result(vllm_results, path, scenario, _caller_switch_id(path, scenario))
    case = _prepare(path, scenario)
    want = expected_view(path, scenario)
    got = result["parse"]
    assert view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids) == want
    for n, got in enumerate(result["streams"]):
        seen = view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids)
        assert seen == want, f"split {n}"
    # vLLM's prompt is apply()'s (without polyfills, which vLLM does not apply).
    raw = load_template(path).apply(
        [USER], tools=case.tools, polyfills=False, call_id_seed=1234, **case.render_kwargs
    )
    assert result["prompt"] == raw.prompt


def test_plugin_package_imports_without_vllm() -> None:
    """The plugin package imports without vLLM (only the parsers module needs it)."""
    code = "import autoparser.integrations.vllm as m, sys; print('vllm' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("path", "variant"), [pytest.param(p, v, id=_variant_id(p, v)) for p, v in VARIANT_CASES]
)
def test_vllm_request_variants(
    vllm_results: dict[str, dict[str, Any]], path: Path, variant: str
) -> None:
    """tool_choice required / named (a grammar constrains the call), parallel_tool_calls
    false, and the tool parser without the reasoning parser: vLLM's parse and stream equal
    params.parse of the same request."""
    scenario, _, options, _ = VARIANTS[variant]
    result = _result(vllm_results, path, scenario, _variant_id(path, variant))
    case = _prepare(path, scenario)
    params = load_template(path).apply(
        [USER], tools=case.tools, call_id_seed=1, **case.render_kwargs, **options
    )
    message = params.parse(case.text)
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    if variant == "single_call":
        calls = calls[:1]  # parallel_tool_calls=false: the first call only
    want = view(message.reasoning_content, message.content, calls, case.compare_ids)
    got = result["parse"]
    assert view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids) == want
    for n, got in enumerate(result["streams"]):
        seen = view(got["reasoning"], got["content"], got["tool_calls"], case.compare_ids)
        assert seen == want, f"split {n}"
    if variant in ("required", "named"):
        # The request carries the whole output's grammar, applied from the first token.
        assert result["grammar"] == params.grammar and not params.grammar_lazy
        assert result["grammar_error"] is None
        assert result["reasoning_ended_at_start"] is True


def test_vllm_loads_the_plugin(vllm_results: dict[str, dict[str, Any]]) -> None:
    """vLLM's load_general_plugins finds the parsers through the declared entry point
    (nothing registered them before); the --tool-parser-plugin module path works too."""
    assert "__error__" not in vllm_results, vllm_results.get("__error__", {}).get("error")
    assert vllm_results["__plugin__"] == {
        "id": "__plugin__",
        "before": False,
        "entry_point": True,
        "plugin_module": True,
    }
