"""Controlled conversations rendered through a template, with the needles the analysis seeks.

Every variant differs from another in one detail (a reasoning field, a tool call, a function
name, an argument value, a call id...), so diffing two renders isolates how the template
writes that detail. Renders are memoised per variant; a variant the template refuses
(raises, or cannot render) yields ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autoparser.errors import TemplateError, TemplateLimitError
from autoparser.template import Renderer, ThinkingSwitch

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
VALUE_FIRST = "XXXX"
VALUE_SECOND = "YYYY"
VALUE_NUMBER = 918273  # a non-string argument value, written as JSON (or Python) 918273
USER_MSG = "U_USER_MSG Hello END_U"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING = "REASON_PART I am thinking END_R"
TOOL_RESULT = "T_TOOL_RESULT sunny END_T"
CALL_ID = "call00001"
CALL_ID_SECOND = "call00002"
CALL_ID_ALT = "call99999"
# Every placeholder the analysis renders: none may ever end up in a marker.
NEEDLES = (
    FUN_FIRST,
    FUN_SECOND,
    ARG_FIRST,
    ARG_SECOND,
    VALUE_FIRST,
    VALUE_SECOND,
    str(VALUE_NUMBER),
    USER_MSG,
    ASSISTANT_MSG,
    THINKING,
    TOOL_RESULT,
    CALL_ID,
    CALL_ID_SECOND,
    CALL_ID_ALT,
)


def needle_in(text: str) -> bool:
    """Whether text holds a probe placeholder (then it is no marker of the template)."""
    return any(needle in text for needle in NEEDLES)


_PARAMS = {
    "type": "object",
    "properties": {
        ARG_FIRST: {"type": "string", "description": "First argument"},
        ARG_SECOND: {"type": "string", "description": "Second argument"},
    },
    "required": [],
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": FUN_FIRST, "description": "Test function foo", "parameters": _PARAMS},
    },
    {
        "type": "function",
        "function": {"name": FUN_SECOND, "description": "Test function bar", "parameters": _PARAMS},
    },
]

# A call is described by (function name, ((argument, value), ...), call id).
CallSpec = tuple[str, tuple[tuple[str, Any], ...], str]
TWO_ARGS = ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, VALUE_SECOND))
CALL_1: CallSpec = (FUN_FIRST, TWO_ARGS, CALL_ID)
CALL_2: CallSpec = (FUN_SECOND, TWO_ARGS, CALL_ID_SECOND)
# CALL_1 with a number as the second argument: how the template writes a non-string value.
CALL_TYPED: CallSpec = (
    FUN_FIRST,
    ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, VALUE_NUMBER)),
    CALL_ID,
)


class Probe:
    """Renders the analysis variants of one template, memoised."""

    def __init__(
        self,
        template: Renderer,
        switch: ThinkingSwitch | None = None,
        tools_as_functions: bool = False,
    ) -> None:
        self.template = template
        # The tools list in the shape the template reads (bare function objects or OpenAI's).
        self.tools = [t["function"] for t in TOOLS] if tools_as_functions else TOOLS
        # The variable that switches reasoning; ``thinking`` in render() is mapped onto it
        # (``enable_thinking`` is always passed too, as a request would).
        self.switch = switch
        self._cache: dict[Any, str | None] = {}
        # Arguments are passed as objects (what most templates index into); a template
        # that concatenates them as strings gets JSON strings instead.
        self.args_as_string = False

    def _call(self, spec: CallSpec) -> dict[str, Any]:
        name, args, call_id = spec
        arguments: Any = dict(args)
        if self.args_as_string:
            arguments = json.dumps(arguments, ensure_ascii=False)
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    def _assistant(
        self,
        content: str | None,
        reasoning: str | None,
        calls: Sequence[CallSpec],
        reasoning_key: str = "reasoning_content",
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning is not None:
            msg[reasoning_key] = reasoning
        if calls:
            msg["tool_calls"] = [self._call(c) for c in calls]
        return msg

    def render(
        self,
        *,
        assistant: tuple[str | None, str | None, tuple[CallSpec, ...]] | None = None,
        tools: bool = False,
        gen_prompt: bool = False,
        thinking: bool | None = True,
        follow_up: str = "",
        reasoning_key: str = "reasoning_content",
    ) -> str | None:
        """Render [user] or [user, assistant(content, reasoning, calls)], optionally followed
        by a "user" or a "tool" message."""
        key = (
            assistant,
            tools,
            gen_prompt,
            thinking,
            follow_up,
            reasoning_key,
            self.args_as_string,
        )
        if key in self._cache:
            return self._cache[key]
        messages: list[dict[str, Any]] = [{"role": "user", "content": USER_MSG}]
        if assistant is not None:
            messages.append(self._assistant(*assistant, reasoning_key=reasoning_key))
            if follow_up == "user":
                messages.append({"role": "user", "content": USER_MSG})
            elif follow_up == "tool":
                messages.append({"role": "tool", "tool_call_id": CALL_ID, "content": TOOL_RESULT})
        context: dict[str, Any] = {"messages": messages, "add_generation_prompt": gen_prompt}
        if tools:
            context["tools"] = self.tools
        self._set_thinking(context, thinking)
        try:
            out: str | None = self.template.render_raw(context)
        except TemplateLimitError:
            raise  # a hostile template is an error, not a missing capability
        except TemplateError:
            out = None
        self._cache[key] = out
        return out

    def _set_thinking(self, context: dict[str, Any], thinking: bool | None) -> None:
        if thinking is None:
            return
        context["enable_thinking"] = thinking
        if self.switch is not None:
            context[self.switch.variable] = self.switch.value(thinking)

    def turn(
        self,
        content: str | None,
        reasoning: str | None = None,
        calls: tuple[CallSpec, ...] = (),
        *,
        tools: bool = False,
        thinking: bool | None = True,
        reasoning_key: str = "reasoning_content",
    ) -> str | None:
        return self.render(
            assistant=(content, reasoning, calls),
            tools=tools,
            thinking=thinking,
            reasoning_key=reasoning_key,
        )

    def block_turn(self, with_thinking: bool) -> str | None:
        """An assistant turn whose content is typed blocks, optionally with a thinking block
        first (templates that take reasoning only that way, e.g. Mistral's [THINK])."""
        key = ("blocks", with_thinking)
        if key in self._cache:
            return self._cache[key]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": ASSISTANT_MSG}]
        if with_thinking:
            blocks.insert(0, {"type": "thinking", "thinking": THINKING})
        messages = [
            {"role": "user", "content": USER_MSG},
            {"role": "assistant", "content": blocks},
        ]
        try:
            context: dict[str, Any] = {"messages": messages, "add_generation_prompt": False}
            self._set_thinking(context, True)
            out: str | None = self.template.render_raw(context)
        except TemplateLimitError:
            raise  # a hostile template is an error, not a missing capability
        except TemplateError:
            out = None
        self._cache[key] = out
        return out

    def calls(self, calls: tuple[CallSpec, ...], content: str | None = "") -> str | None:
        """Render a tool-call turn, switching to string arguments if objects are refused."""
        out = self.turn(content, None, calls, tools=True)
        if out is None and not self.args_as_string:
            self.args_as_string = True
            out = self.turn(content, None, calls, tools=True)
            if out is None:
                self.args_as_string = False
        return out
