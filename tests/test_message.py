"""The OpenAI-shaped result of a parse: messages, calls, and the findings that travel with it."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from autoparser.message import (
    FINDING_KINDS,
    ChatMessage,
    Finding,
    FindingKind,
    FindingOutcome,
    ToolCall,
)

CALL = ToolCall(id="call_1", name="f", arguments='{"a": 1}')


def test_the_kinds_tuple_is_the_literal() -> None:
    assert typing.get_args(FindingKind) == FINDING_KINDS
    assert set(typing.get_args(FindingOutcome)) == {"kept", "refused", "cut", "dropped"}


def test_to_openai_leaves_absent_fields_out() -> None:
    assert ChatMessage(content="hi").to_openai() == {"role": "assistant", "content": "hi"}
    full = ChatMessage(
        content=None, reasoning_content="r", tool_calls=[CALL], truncated_call="<tool_call>"
    ).to_openai()
    assert full == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "r",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
    }


@pytest.mark.parametrize(
    ("findings", "refused"),
    [
        ((), False),
        ((Finding("undeclared_argument", "kept", 0, 9, "x", 0),), False),
        ((Finding("invalid_arguments", "refused", 0, 9),), True),
        ((Finding("truncated", "cut", 4, 9, "call"),), True),
        ((Finding("truncated", "cut", 4, 9, "reasoning"),), False),  # no call was cut
        ((Finding("wrapper_token", "dropped", 0, 5, "<|x|>"),), False),
    ],
)
def test_refused_means_a_call_was_lost(findings: tuple[Finding, ...], refused: bool) -> None:
    assert ChatMessage(content="x", findings=findings).refused is refused


def test_findings_describe_themselves_and_are_plain_data() -> None:
    finding = Finding("undeclared_argument", "kept", 3, 40, "colour", 0)
    assert finding.describe() == "undeclared argument 'colour' at 3-40: kept"
    assert finding.to_dict() == {
        "kind": "undeclared_argument",
        "outcome": "kept",
        "start": 3,
        "end": 40,
        "detail": "colour",
        "call": 0,
    }
    assert Finding("truncated", "cut", 0, 1).describe() == "truncated at 0-1: cut"


def test_messages_are_frozen() -> None:
    message = ChatMessage(content="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "y"  # type: ignore[misc]


FOUND = Finding("truncated", "cut", 3, 9, "call")


@pytest.mark.parametrize(
    "fields",
    [
        (None, None, [], False, None, ()),
        ("Hi.", "Think.", [CALL], True, "<tool_call>{", (FOUND,)),
    ],
)
def test_the_parsers_constructor_builds_the_same_value(fields: tuple[object, ...]) -> None:
    """``ChatMessage.of`` (the parser's constructor) makes the dataclass's own value."""
    fast = ChatMessage.of(*fields)  # type: ignore[arg-type]
    slow = ChatMessage(*("assistant", *fields))  # type: ignore[arg-type]
    assert fast == slow and repr(fast) == repr(slow)
    assert fast.to_openai() == slow.to_openai() and fast.refused == slow.refused
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(ChatMessage)}
    assert dataclasses.replace(fast, content="x") == dataclasses.replace(slow, content="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.content = "x"  # type: ignore[misc]


def test_the_parsers_tool_call_constructor_builds_the_same_value() -> None:
    """``ToolCall.of`` (the parser's constructor) makes the dataclass's own value."""
    fast = ToolCall.of("call_1", "get_weather", '{"city": "Paris"}')
    slow = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    assert fast == slow and repr(fast) == repr(slow) and hash(fast) == hash(slow)
    assert fast.to_openai() == slow.to_openai()
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(ToolCall)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "x"  # type: ignore[misc]
