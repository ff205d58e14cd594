"""The shared boundary types (autoparser.jsontypes): the shapes they declare are the shapes
the package writes, and the root exports them for the outward faces."""

from __future__ import annotations

import json
import typing

import autoparser
from autoparser import ChatMessage, ToolCall
from autoparser import jsontypes as jt


def _keys(kind: type) -> set[str]:
    return set(typing.get_type_hints(kind))


def test_the_root_exports_every_boundary_type() -> None:
    for name in ("JsonValue", "JsonObject", "JsonMapping", "JsonSchema", "MessageDict",
                 "ToolCallDict", "ToolDict", "FunctionDict"):  # fmt: skip
        assert getattr(autoparser, name) is getattr(jt, name), name
        assert name in autoparser.__all__


def test_a_message_written_has_only_the_declared_keys() -> None:
    calls = [ToolCall("call_1", "get_weather", '{"city": "Paris"}')]
    full = ChatMessage(content="ok", reasoning_content="think", tool_calls=calls)
    for message in (ChatMessage(), ChatMessage(content="hi"), full):
        written = message.to_openai()
        assert set(written) <= _keys(jt.MessageDict)
        for call in written.get("tool_calls", []):
            assert set(call) == _keys(jt.ToolCallDict)
            assert set(call["function"]) == _keys(jt.FunctionCallDict)
            assert call["type"] in typing.get_args(_hint(jt.ToolCallDict, "type"))
        assert json.loads(json.dumps(written)) == written  # plain JSON, as JsonValue says


def _hint(kind: type, key: str) -> object:
    return typing.get_type_hints(kind)[key]
