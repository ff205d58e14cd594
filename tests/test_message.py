"""The message model: ``ChatMessage.of`` (the parser's constructor) makes the dataclass's
own value."""

from __future__ import annotations

import dataclasses

import pytest

from autoparser import ChatMessage, Finding, ToolCall

CALL = ToolCall(id="c1", name="f", arguments="{}")
FOUND = Finding("truncated", "cut", 3, 9, "call")


@pytest.mark.parametrize(
    "fields",
    [
        (None, None, [], False, None, ()),
        ("Hi.", "Think.", [CALL], True, "<tool_call>{", (FOUND,)),
    ],
)
def test_the_parsers_constructor_builds_the_same_value(fields: tuple[object, ...]) -> None:
    fast = ChatMessage.of(*fields)  # type: ignore[arg-type]
    slow = ChatMessage(*("assistant", *fields))  # type: ignore[arg-type]
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.to_openai() == slow.to_openai() and fast.refused == slow.refused
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(ChatMessage)}
    assert dataclasses.replace(fast, content="x") == dataclasses.replace(slow, content="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.content = "x"  # type: ignore[misc]
