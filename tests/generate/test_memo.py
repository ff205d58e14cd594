"""The memo key of what a request builds from the analysis alone."""

from __future__ import annotations

import math

from autoparser.generate.memo import request_key
from autoparser.generate.request import Request, ToolSpec


def test_memo_key_covers_every_request_field() -> None:
    """A request field left out of the memo key would hand one request another's parser."""
    import dataclasses as dc

    from autoparser.generate.memo import request_key
    from autoparser.generate.request import Request, ToolSpec

    base = Request()
    changed = {
        "tools": (ToolSpec("f", {"type": "object", "properties": {}}),),
        "tool_choice": "required",
        "forced_tool": "f",
        "parallel_tool_calls": False,
        "response_schema": {"type": "object"},
        "enable_thinking": True,
        "reasoning_format": "none",
        "calls_in_reasoning": True,
        "reasoning_budget": 100,
    }
    assert set(changed) == {f.name for f in dc.fields(Request)}
    keys = {request_key(base)} | {
        request_key(dc.replace(base, **{k: v})) for k, v in changed.items()
    }
    assert None not in keys and len(keys) == len(changed) + 1


def test_a_request_json_cannot_spell_has_no_key() -> None:
    odd = Request(response_schema={"type": "number", "maximum": math.inf})
    assert request_key(odd) is None
    assert request_key(Request(response_schema={"maximum": 1})) is not None


def test_equal_requests_share_a_key_whatever_the_order_of_schema_keys() -> None:
    one = Request(tools=(ToolSpec("f", {"type": "object", "properties": {"a": {}, "b": {}}}),))
    two = Request(tools=(ToolSpec("f", {"properties": {"b": {}, "a": {}}, "type": "object"}),))
    assert request_key(one) == request_key(two)
