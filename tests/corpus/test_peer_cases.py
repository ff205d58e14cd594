"""Other engines' own parser test suites as a held-out check (issue 21).

``tests/data/peer_cases.json`` holds cases transcribed as facts (model output; the content,
reasoning and tool calls the peer expects) from vLLM ``tests/tool_parsers`` and
``tests/reasoning`` and Ollama ``model/parsers``, each with its source (repository, path,
test name) and mapped to a corpus template of the same family. Tools use the peer's schemas
where its test gives one; where it gives none, the parameters are typed as the peer
returns them (a value the peer keeps as a string is declared a string). Each case is
parsed whole and streamed in 1-character chunks with our parser for that template: the
stream must fold into the parse, and the parse must give the peer's expectation.

Content and reasoning are compared without surrounding whitespace (ours is trimmed,
docs/streaming.md), ``None`` and empty alike. Where the peer's expectation is its own
policy that we deliberately differ on (docs/streaming.md, "Peers' policies we differ
on"), the case names the fields not compared and why (``policy``): counted, never a
failure; the other fields still are. A case we get wrong is a strict xfail with its
reason (``xfail``), counted and printed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import pytest
from helpers.formats import USER, corpus_template, stream
from helpers.generate_cases import accumulate
from helpers.generate_cases import message_dict as as_dict
from helpers.paths import TESTS_DIR

from autoparser import ChatTemplate
from autoparser.message import ChatMessage
from autoparser.params import ChatParams

DATA = json.loads((TESTS_DIR / "data" / "peer_cases.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = DATA["cases"]
TOOLS: dict[str, dict[str, Any]] = DATA["tools"]
FIELDS = ("content", "reasoning", "calls")


@cache
def _template(name: str) -> ChatTemplate:
    return corpus_template(name, name)


def _params(case: Mapping[str, Any]) -> ChatParams:
    tools = [TOOLS[name] for name in case.get("tools", [])] or None
    options: dict[str, Any] = case.get("options", {})
    return _template(case["template"]).apply(USER, tools=tools, call_id_seed=1, **options)


def _text(value: str | None) -> str | None:
    return (value or "").strip() or None


def _ours(message: ChatMessage) -> dict[str, Any]:
    return {
        "content": _text(message.content),
        "reasoning": _text(message.reasoning_content),
        "calls": [(c.name, json.loads(c.arguments)) for c in message.tool_calls],
    }


def _peers(case: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "content": _text(case["content"]),
        "reasoning": _text(case["reasoning"]),
        "calls": [(c["name"], c["arguments"]) for c in case["calls"]],
    }


def _compared(case: Mapping[str, Any]) -> tuple[str, ...]:
    skipped = case.get("policy", {}).get("fields", [])
    return tuple(f for f in FIELDS if f not in skipped)


def _param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if case.get("xfail") else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_peer_case_parses_to_the_peers_expectation(case: dict[str, Any]) -> None:
    params = _params(case)
    message = params.parse(case["output"])
    ours, peers = _ours(message), _peers(case)
    for field in _compared(case):
        assert ours[field] == peers[field], (field, case["source"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES])
def test_peer_case_streamed_folds_into_the_parse(case: dict[str, Any]) -> None:
    params = _params(case)
    whole = as_dict(params.parse(case["output"]))
    deltas, message = stream(params, list(case["output"]))
    assert accumulate(deltas) == whole
    assert as_dict(message) == whole


def test_the_data_is_broad_and_every_case_is_sourced(capsys: pytest.CaptureFixture[str]) -> None:
    families = {c["family"] for c in CASES}
    assert len(CASES) >= 100 and len(families) >= 8
    ids = [c["id"] for c in CASES]
    assert len(set(ids)) == len(ids)
    for case in CASES:
        assert {"repo", "path", "test"} <= set(case["source"]), case["id"]
        assert set(case.get("tools", [])) <= set(TOOLS), case["id"]
        policy = case.get("policy")
        if policy:
            assert policy["reason"] and set(policy["fields"]) <= set(FIELDS), case["id"]
    policy = sum(1 for c in CASES if c.get("policy"))
    failing = [c for c in CASES if c.get("xfail")]
    with capsys.disabled():
        print(
            f"\npeer cases: {len(CASES)} in {len(families)} families; "
            f"{len(CASES) - len(failing)} pass ({policy} with a peer policy field not "
            f"compared), {len(failing)} strict xfail"
        )
        for case in failing:
            print(f"  xfail {case['id']}: {case['xfail']}")
