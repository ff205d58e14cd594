"""Property tests: random messages rendered by the own templates parse and stream back.

Hypothesis draws content, reasoning and tool arguments (strings full of marker characters,
nested values); each message is rendered by the template, parsed, and streamed in random
splits; everything must give the message back.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers.generate_cases import CASE_BY_NAME, TOOLS, Case, call, expected, normalized
from helpers.streaming import run_stream, splits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ALPHABET = st.characters(
    codec="utf-8",
    categories=("L", "N", "P", "S", "Zs"),
    include_characters="<>/{}[]\"'\\:=|\n",
)


def _markers(case: Case) -> list[str]:
    a = case.analysis
    t = a.tools
    found = [
        a.reasoning.start,
        a.reasoning.end,
        t.format.section_start,
        t.format.section_end,
        t.format.per_call_start,
        t.format.per_call_end,
        t.function.name_prefix,
        t.function.close,
        t.arguments.name_prefix,
        t.arguments.value_prefix,
        t.arguments.value_suffix,
        t.call_id.prefix,
        t.call_id.suffix,
        *a.end_of_turn,
    ]
    return [m.strip() for m in found if m.strip()]


def _text(case: Case, *, min_size: int = 1) -> st.SearchStrategy[str]:
    markers = _markers(case)
    return (
        st.text(ALPHABET, min_size=min_size, max_size=40)
        .map(str.strip)
        .filter(lambda s: len(s) >= min_size and not any(m in s for m in markers))
        .filter(lambda s: not s.startswith("{") and not s.startswith("["))
    )


def _value(case: Case) -> st.SearchStrategy[Any]:
    tagged = case.analysis.tools.format.mode.value == "tag_with_tagged"
    # Tagged formats write strings raw: keep them free of markers (JSON formats escape).
    text = _text(case, min_size=0) if tagged else st.text(ALPHABET, max_size=40)
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), text)
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)
        ),
        max_leaves=6,
    )


def _search_args(case: Case) -> st.SearchStrategy[dict[str, Any]]:
    tagged = case.analysis.tools.format.mode.value == "tag_with_tagged"
    query = _text(case) if tagged else st.text(ALPHABET, min_size=1, max_size=60)
    return st.fixed_dictionaries(
        {"query": query},
        optional={
            "filters": st.dictionaries(_text(case), _value(case), max_size=3),
            "tags": st.lists(st.text(ALPHABET, max_size=10), max_size=3),
            "limit": st.integers(0, 1000),
            "exact": st.booleans(),
        },
    )


def _messages(case: Case) -> st.SearchStrategy[dict[str, Any]]:
    cid = "abcdefghi" if case.ids else ""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if case.reasoning and draw(st.booleans()):
            message["reasoning_content"] = draw(_text(case))
        with_calls = case.calls and draw(st.booleans())
        if not with_calls or (case.content_with_calls and draw(st.booleans())):
            message["content"] = draw(_text(case))
        if with_calls:
            count = draw(st.integers(1, 2 if case.parallel else 1))
            message["tool_calls"] = [
                call("search", draw(_search_args(case)), cid) for _ in range(count)
            ]
        return message

    return build()


PROP_CASES = ["hermes", "qwen3coder", "functionary", "glm", "bracket_callid", "nested", "llama"]


@pytest.mark.parametrize("name", PROP_CASES)
def test_random_messages_round_trip(name: str) -> None:
    case = CASE_BY_NAME[name]
    params = case.params(TOOLS)

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(_messages(case))
    def check(message: dict[str, Any]) -> None:
        text = case.output(message, TOOLS)
        assert normalized(params.parse(text), ids=case.ids) == expected(message, ids=case.ids)
        rng = random.Random(text)
        for chunks in (list(text), splits(text, rng), splits(text, rng)):
            deltas = run_stream(params, chunks)
            for delta in deltas:
                for tc in delta.get("tool_calls", []):
                    assert isinstance(tc["function"]["arguments"], str)
        for c in params.parse(text).tool_calls:
            assert isinstance(json.loads(c.arguments), dict)

    check()
