"""The body checks every route runs first: nesting, tool count, tool size.

The depth walk goes level by level over JSON as ``json.loads`` gives it; its verdict is
compared with the plain recursive definition on random bodies. The route-level behaviour
(400/413 before any work) is tests/serve/test_app_production.py's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.distinct_tools import distinct_tools
from hypothesis import given, settings
from hypothesis import strategies as st

from autoparser.serve.limits import InvalidRequest, Limits, check_depth, read_body


def depth_of(value: Any) -> int:
    """How many containers deep ``value`` nests (0 for a scalar), by the definition."""
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON, limit=st.integers(1, 8))
def test_depth_verdict_is_the_definitions(value: Any, limit: int) -> None:
    if depth_of(value) > limit:
        with pytest.raises(InvalidRequest, match=f"nests deeper than {limit} levels"):
            check_depth(value, limit)
    else:
        check_depth(value, limit)


def _nested(levels: int) -> Any:
    """A tool schema whose innermost object sits ``levels`` containers below the tool."""
    node: Any = {"type": "string"}
    for _ in range(levels - 1):
        node = {"type": "object", "properties": {"a": node}}
    return node


def _body(tools: object, **extra: object) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": tools, **extra})


@pytest.mark.parametrize("where", ["tools", "elsewhere"])
def test_the_deepest_allowed_body_passes_and_one_level_more_fails(where: str) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": _nested(10)}}
    if where == "tools":
        body = json.loads(_body([tool]))
    else:
        body = json.loads(_body(None, extra=[{"role": "user", "content": [tool]}]))
    deepest = depth_of(body)
    read_body(json.dumps(body).encode(), Limits(max_depth=deepest))
    with pytest.raises(InvalidRequest, match=f"nests deeper than {deepest - 1} levels"):
        read_body(json.dumps(body).encode(), Limits(max_depth=deepest - 1))


def test_tools_that_are_no_list_are_still_bounded_in_depth() -> None:
    raw = _body({"a": _nested(20)}).encode()
    with pytest.raises(InvalidRequest, match="nests deeper"):
        read_body(raw, Limits(max_depth=10))


def test_count_keywords_are_left_to_the_schema_loosening() -> None:
    """A bound above ``max_schema_count`` passes the body checks: ``Chat.prepare`` leaves
    it open in the grammar, or refuses it naming its pointer with strict schemas
    (tests/serve/test_chat_completions_schemas.py)."""
    tools = distinct_tools(30, 2)
    tools[17]["function"]["parameters"]["properties"]["deep"] = {
        "type": "array",
        "items": {"type": "string", "maxLength": 50_001},
    }
    body = read_body(_body(tools).encode(), Limits(max_tools=100, max_schema_count=50_000))
    assert body["tools"] == tools
    raw = _body(None, response_format={"type": "json_object", "schema": {"maxLength": 10**9}})
    assert read_body(raw.encode(), Limits())["response_format"]


def test_tool_size_is_checked_before_its_count_keywords() -> None:
    big = {"type": "object", "description": "x" * 500, "properties": {"a": {"minItems": 10**7}}}
    tool = {"type": "function", "function": {"name": "f", "parameters": big}}
    with pytest.raises(InvalidRequest, match=r"^tools\[0\]: the tool definition is \d+ bytes"):
        read_body(_body([tool]).encode(), Limits(max_schema_bytes=400))


def test_more_tools_than_the_limit_is_refused_naming_tools() -> None:
    with pytest.raises(InvalidRequest) as info:
        read_body(_body(distinct_tools(6, 1)).encode(), Limits(max_tools=5))
    assert info.value.param == "tools" and str(info.value).startswith("tools: 6 tools")


# ------------------------------------------------------------------------- lone surrogates


@pytest.mark.parametrize(
    ("raw", "param", "point"),
    [
        (
            rb'{"messages": [{"role": "user", "content": "a\ud800b"}]}',
            "messages[0].content",
            "D800",
        ),
        (rb'{"messages": [{"role": "user", "content": "\uDFFF"}]}', "messages[0].content", "DFFF"),
        (rb'{"tools": [{"function": {"name": "\udc00"}}]}', "tools[0].function.name", "DC00"),
        (rb'{"m": {"\udc00": 1}}', "m", "DC00"),
        (rb'{"stop": ["ok", "\ud83d"]}', "stop[1]", "D83D"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_field(raw: bytes, param: str, point: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        read_body(raw, Limits())
    assert raised.value.param == param and raised.value.status == 400
    assert f"U+{point}" in str(raised.value)
    str(raised.value).encode("utf-8")  # the message itself is text


@pytest.mark.parametrize(
    "raw",
    [
        rb'{"content": "\ud83d\ude00 a pair is one character"}',
        rb'{"content": "an escaped backslash: \\ud800"}',
        '{"content": "UTF-8 itself: \U0001f600"}'.encode(),
    ],
)
def test_surrogate_pairs_and_lookalikes_pass(raw: bytes) -> None:
    assert read_body(raw, Limits()) == json.loads(raw)
