"""A streaming delta as typed data: what ``StreamParser.feed_deltas`` returns.

The mapper builds these values (``Mapper.take_deltas``); servers, their Responses and
Messages builders and engine plug-ins read them by attribute, and the OpenAI ``delta`` dict
is written only at the wire, by ``to_openai()`` (``StreamParser.feed`` returns those dicts).
This is the one module that writes or reads a delta as a dict (tests/project/
test_architecture.py). The model is llama.cpp's ``common_chat_msg_diff``: only what was
appended since the last delta.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# Makes an instance without running ``__init__``: see ``StreamDelta.of``.
_new = object.__new__


@dataclasses.dataclass(frozen=True)
class ToolCallDelta:
    """A piece of call ``index``: the call announced (``name`` and ``id`` set, with the
    arguments written so far) or more of its arguments' JSON text (``name`` None)."""

    index: int
    arguments: str = ""
    id: str | None = None
    name: str | None = None

    @classmethod
    def of(
        cls, index: int, arguments: str, id: str | None = None, name: str | None = None
    ) -> ToolCallDelta:
        """``ToolCallDelta(index, arguments, id, name)`` for the stream's hot path (see
        ``StreamDelta.of``)."""
        delta = _new(cls)
        fields = delta.__dict__
        fields["index"] = index
        fields["arguments"] = arguments
        fields["id"] = id
        fields["name"] = name
        return delta

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry of a chunk's delta."""
        if self.name is None:
            return {"index": self.index, "function": {"arguments": self.arguments}}
        return {
            "index": self.index,
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclasses.dataclass(frozen=True)
class StreamDelta:
    """Text appended to ``content`` or ``reasoning_content``, or pieces of tool calls."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()

    @classmethod
    def from_openai(cls, delta: Mapping[str, Any]) -> StreamDelta:
        """The typed form of one of ``StreamParser.feed``'s delta dicts."""
        calls = tuple(
            ToolCallDelta(
                index=call["index"],
                arguments=call["function"]["arguments"],
                id=call.get("id"),
                name=call["function"].get("name"),
            )
            for call in delta.get("tool_calls", ())
        )
        return cls(delta.get("content"), delta.get("reasoning_content"), calls)

    @classmethod
    def of(
        cls,
        content: str | None,
        reasoning_content: str | None = None,
        tool_calls: tuple[ToolCallDelta, ...] = (),
    ) -> StreamDelta:
        """``StreamDelta(content, reasoning_content, tool_calls)`` for the stream's hot path:
        the fields written straight into the new instance, where the frozen dataclass's
        ``__init__`` pays one ``object.__setattr__`` per field (most feeds make one delta,
        and that cost was a tenth of the feed)."""
        delta = _new(cls)
        fields = delta.__dict__
        fields["content"] = content
        fields["reasoning_content"] = reasoning_content
        fields["tool_calls"] = tool_calls
        return delta

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``delta`` of a ``chat.completion.chunk`` (only the fields set)."""
        content, reasoning, calls = self.content, self.reasoning_content, self.tool_calls
        if not calls and (content is None or reasoning is None):
            # One text field, as most deltas are: the dict in one step.
            if content is not None:
                return {"content": content}
            return {} if reasoning is None else {"reasoning_content": reasoning}
        out: dict[str, Any] = {}
        if content is not None:
            out["content"] = content
        if reasoning is not None:
            out["reasoning_content"] = reasoning
        if calls:
            out["tool_calls"] = (
                [calls[0].to_openai()] if len(calls) == 1 else [call.to_openai() for call in calls]
            )
        return out
