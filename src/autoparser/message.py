"""The OpenAI-shaped result of parsing model output: messages, tool calls and deltas."""

from __future__ import annotations

import dataclasses
from typing import Literal

from autoparser.jsontypes import MessageDict, ToolCallDict

# Makes an instance without running ``__init__``: see ``ChatMessage.of``.
_new = object.__new__

# The message keys an assistant turn's reasoning may come under (OpenAI-compatible servers
# use all three), in order of preference when a message carries several.
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


FindingKind = Literal[
    "undeclared_argument",
    "type_mismatch",
    "missing_required",
    "invalid_arguments",
    "call_in_reasoning",
    "truncated",
    "wrapper_token",
]
"""What a parse tolerated or refused: an argument the tool's schema does not declare (read
by the format's markers alone), an argument whose value did not read as its schema's
type (kept as the text written, a string), a required argument the call leaves out,
a call whose arguments did not read (its text
kept as content), a call written inside reasoning (its text kept as reasoning), output cut off, a
special token the model wrote around its calls that the template never prints (dropped as
markup; ``detail`` is its text)."""

FINDING_KINDS: tuple[FindingKind, ...] = (
    "undeclared_argument",
    "type_mismatch",
    "missing_required",
    "invalid_arguments",
    "call_in_reasoning",
    "truncated",
    "wrapper_token",
)

FindingOutcome = Literal["kept", "refused", "cut", "dropped"]
"""What became of the text a finding is about: a call kept (``kept``), a call refused and
its text kept where it was written (``refused``), the output's cut-off tail (``cut``), or
markup left out of every field (``dropped``: the finding keeps its text)."""

TOLERANCES = ("keep", "reject")
"""What the parser does with a call it reads only by the format's markers (an undeclared
argument, a value not of its type, a required argument left out): keep it with a finding
(the default, as vLLM and SGLang do), or refuse it (its text stays content, with a
finding)."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """Something of the model's output the parse tolerated or refused, and why.

    ``output[start:end]`` is the text it is about (a call, or the tail cut off); ``detail``
    names what (the argument, the marker); ``call`` is the index in ``tool_calls`` of the
    call it was kept as, else None. Data for the faces: the CLI prints it, the studio shows
    it next to the span, serve logs and counts it.
    """

    kind: FindingKind
    outcome: FindingOutcome
    start: int
    end: int
    detail: str = ""
    call: int | None = None

    def describe(self) -> str:
        """One line for a person: what, where, what became of it."""
        what = f"{self.kind.replace('_', ' ')}"
        if self.detail:
            what += f" {self.detail!r}"
        return f"{what} at {self.start}-{self.end}: {self.outcome}"

    def to_dict(self) -> dict[str, str | int | None]:
        """The finding as JSON-ready data."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One function call the model made. ``arguments`` is the JSON text of an object."""

    id: str
    name: str
    arguments: str

    @classmethod
    def of(cls, call_id: str, name: str, arguments: str) -> ToolCall:
        """The parser's own constructor, as ``ChatMessage.of``: the fields written straight
        into the new instance (the frozen ``__init__`` costs a call's worth of parsing)."""
        call = _new(cls)
        fields = call.__dict__
        fields["id"] = call_id
        fields["name"] = name
        fields["arguments"] = arguments
        return call

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
    # What the parse tolerated or refused, in output order (``Finding``); not part of
    # OpenAI's message either.
    findings: tuple[Finding, ...] = ()

    @classmethod
    def of(
        cls,
        content: str | None,
        reasoning_content: str | None,
        tool_calls: list[ToolCall],
        truncated: bool,
        truncated_call: str | None,
        findings: tuple[Finding, ...],
    ) -> ChatMessage:
        """The parser's own constructor: every field written straight into the new
        instance, where the frozen dataclass's ``__init__`` pays one ``object.__setattr__``
        per field (about 2 µs, a twentieth of parsing a short output)."""
        message = _new(cls)
        fields = message.__dict__
        fields["role"] = "assistant"
        fields["content"] = content
        fields["reasoning_content"] = reasoning_content
        fields["tool_calls"] = tool_calls
        fields["truncated"] = truncated
        fields["truncated_call"] = truncated_call
        fields["findings"] = findings
        return message

    @property
    def refused(self) -> bool:
        """Whether a call was refused or cut off (what ``autoparser parse --strict`` fails
        on); a reasoning block left open cuts no call."""
        return any(
            f.outcome == "refused" or (f.outcome == "cut" and f.detail != "reasoning")
            for f in self.findings
        )

    def to_openai(self) -> MessageDict:
        """The message as OpenAI's ``choices[].message`` (absent fields left out)."""
        message: MessageDict = {"role": self.role, "content": self.content}
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message
