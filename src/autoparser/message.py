"""The OpenAI-shaped result of parsing model output: messages, tool calls and deltas."""

from __future__ import annotations

import dataclasses

from autoparser.jsontypes import MessageDict, ToolCallDict

# The message keys an assistant turn's reasoning may come under (OpenAI-compatible servers
# use all three), in order of preference when a message carries several.
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One function call the model made. ``arguments`` is the JSON text of an object."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> ToolCallDict:
        """The call as an OpenAI ``tool_calls`` entry (``type: function``)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclasses.dataclass(frozen=True)
class ChatMessage:
    """An assistant message as OpenAI's chat completion API returns it.

    ``truncated`` is True when generation ended inside a construct that never closed: a
    tool call (not returned, and not content either: users display content, and raw markup
    there is noise; its raw text is kept in ``truncated_call``), a reasoning block (its
    text kept in ``reasoning_content``), or right after a call opener (dropped). A call
    the output ends inside is never returned partly written. ``tool_calls`` holds
    only whole calls with valid arguments; a malformed one is ``content``. It is a list, as
    the API contract names it; the message is frozen (its fields cannot be reassigned) but,
    holding a list, not hashable.
    """

    role: str = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    truncated: bool = False
    # The raw text of the call the output ended inside (from its opener), else None. Not
    # part of OpenAI's message (``to_openai`` leaves it out).
    truncated_call: str | None = None

    def to_openai(self) -> MessageDict:
        """The message as OpenAI's ``choices[].message`` (absent fields left out)."""
        message: MessageDict = {"role": self.role, "content": self.content}
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message
