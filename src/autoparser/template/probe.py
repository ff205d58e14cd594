"""Probe conversations: the one vocabulary of needles, tools and calls that capability
probing (``caps``) and the differential analysis render through a template.

Each conversation carries unique placeholder strings (needles); which of them reach the
prompt, and how two renders that differ in one detail differ, tells what the template does.
A :class:`Probe` renders conversations for one template text, memoised; the caps' probe is
shared per text (``probe_for``), and a question both caps and the analysis need is asked
once, by the caps. A conversation the template refuses (raises) renders as ``None``; a
template that exceeds a render limit is an error, never a missing capability.

Two render paths, because the two users ask different questions: ``messages`` renders as
``apply`` does (``Renderer.render``: ``None`` fields dropped, reasoning under every key),
which is what the caps and the polyfills must know about; ``render``/``turn`` pass the
variables untouched (``render_raw``), so the analysis can tell which message key a template
reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence

from autoparser.cache import CACHES, Store
from autoparser.errors import TemplateError, TemplateLimitError
from autoparser.jsontypes import ToolDict
from autoparser.message import REASONING_KEYS
from autoparser.template.messages import (
    named_call_id,
    parameter_definitions_tool,
    with_call_turn_text,
)
from autoparser.template.renderer import Renderer
from autoparser.template.switches import ThinkingSwitch

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
VALUE_FIRST = "XXXX"
VALUE_SECOND = "YYYY"
VALUE_NUMBER = 918273  # a non-string argument value, written as JSON (or Python) 918273
USER_MSG = "U_USER_MSG Hello END_U"
SYSTEM_MSG = "S_SYSTEM_MSG Be brief END_S"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING = "REASON_PART I am thinking END_R"
TOOL_RESULT = "T_TOOL_RESULT sunny END_T"
TOOL_RESULT_SECOND = "T_TOOL_RESULT cloudy END_T"
# Call ids of nine alphanumerics (what Mistral templates demand, and any other accepts).
CALL_ID = "call00001"
CALL_ID_SECOND = "call00002"
CALL_ID_ALT = "call99999"
# OpenAI-shaped call ids, which a template demanding nine alphanumerics refuses.
OPENAI_IDS = ("call_prb_00001", "call_prb_00002")
ALNUM9_IDS = (CALL_ID, CALL_ID_SECOND)
# Every placeholder a probe renders: none may ever end up in a marker.
NEEDLES = (
    FUN_FIRST,
    FUN_SECOND,
    ARG_FIRST,
    ARG_SECOND,
    VALUE_FIRST,
    VALUE_SECOND,
    str(VALUE_NUMBER),
    USER_MSG,
    SYSTEM_MSG,
    ASSISTANT_MSG,
    THINKING,
    TOOL_RESULT,
    TOOL_RESULT_SECOND,
    CALL_ID,
    CALL_ID_SECOND,
    CALL_ID_ALT,
    *OPENAI_IDS,
)


# What jinja2's Markup escaping makes of quotes: a render holding these where the same
# conversation with string arguments does not escaped the template's own text.
_ENTITIES = ("&#34;", "&#39;", "&quot;", "&#x27;")


def has_entities(text: str) -> bool:
    return any(e in text for e in _ENTITIES)


def markup_escaped(render: str | None, other: str | None) -> bool:
    """Whether ``render`` holds escaped quotes that ``other`` (the same conversation with
    string arguments) does not: the object arguments made a Markup that escaped the
    template's own quotes (``'{"name": "' + name`` where ``arguments|tojson|safe``)."""
    if render is None or other is None:
        return False
    return any(e in render and e not in other for e in _ENTITIES)


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
TOOLS: list[ToolDict] = [
    {
        "type": "function",
        "function": {"name": FUN_FIRST, "description": "Test function foo", "parameters": _PARAMS},
    },
    {
        "type": "function",
        "function": {"name": FUN_SECOND, "description": "Test function bar", "parameters": _PARAMS},
    },
]
# Tools as OpenAI allows them and Pydantic writes them: no description, no parameters; a
# parameter with neither description nor type (``Optional[str]`` is an ``anyOf``).
SPARSE_TOOLS: list[ToolDict] = [
    {"type": "function", "function": {"name": FUN_FIRST}},
    {
        "type": "function",
        "function": {
            "name": FUN_SECOND,
            "description": "Test function bar",
            "parameters": {
                "type": "object",
                "properties": {ARG_FIRST: {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            },
        },
    },
]


def bare_functions(tools: Sequence[ToolDict]) -> list[dict[str, object]]:
    """Tools as the bare function objects some templates read (``tool.name``)."""
    return [dict(t["function"]) for t in tools]


# The shapes a template may read tools in: OpenAI's, the bare function objects, Cohere's
# ``parameter_definitions`` objects.
TOOLS_OPENAI = ""
TOOLS_BARE = "bare"
TOOLS_PARAMETER_DEFINITIONS = "parameter_definitions"


def tools_shaped(tools: Sequence[ToolDict], shape: str) -> list[dict[str, object]]:
    """The probe tools in one of the shapes above."""
    if shape == TOOLS_BARE:
        return bare_functions(tools)
    if shape == TOOLS_PARAMETER_DEFINITIONS:
        return [parameter_definitions_tool(t) for t in tools]
    return [dict(t) for t in tools]


# A call is described by (function name, ((argument, value), ...), call id).
CallSpec = tuple[str, tuple[tuple[str, object], ...], str]
ONE_ARG = ((ARG_FIRST, VALUE_FIRST),)
TWO_ARGS = ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, VALUE_SECOND))
CALL_1: CallSpec = (FUN_FIRST, TWO_ARGS, CALL_ID)
CALL_2: CallSpec = (FUN_SECOND, TWO_ARGS, CALL_ID_SECOND)
# CALL_1 with a number as the second argument: how the template writes a non-string value.
CALL_TYPED: CallSpec = (
    FUN_FIRST,
    ((ARG_FIRST, VALUE_FIRST), (ARG_SECOND, VALUE_NUMBER)),
    CALL_ID,
)


def tool_call(spec: CallSpec, as_object: bool = True) -> dict[str, object]:
    """An OpenAI ``tool_calls`` entry; arguments as an object or as JSON text."""
    name, args, call_id = spec
    arguments: object = dict(args)
    if not as_object:
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _quiet(render: Callable[..., str], *args: object, **kwargs: object) -> str | None:
    """A render, or ``None`` when the template refuses it (never for a hostile template)."""
    try:
        out: str = render(*args, **kwargs)
    except TemplateLimitError:
        raise  # a hostile template is an error, not a missing capability
    except TemplateError:
        return None
    return out


class Probe:
    """Renders probe conversations through one template, memoised.

    ``switch`` is the variable that switches reasoning (``thinking`` in :meth:`render` is
    mapped onto it; ``enable_thinking`` is always passed too, as a request would);
    ``tools_as_functions`` passes the tools as bare function objects, ``tools_shape`` in
    another shape of ``tools_shaped`` (Cohere's ``parameter_definitions``). Probes of one
    template with other settings share the memo (:meth:`with_settings`).
    """

    def __init__(
        self,
        template: Renderer,
        switch: ThinkingSwitch | None = None,
        tools_as_functions: bool = False,
        memo: dict[Hashable, str | None] | None = None,
        call_turn_text: bool = False,
        tools_shape: str = "",
        tools_list: bool = False,
    ) -> None:
        self.template = template
        if tools_as_functions and not tools_shape:
            tools_shape = TOOLS_BARE
        self.tools_shape = tools_shape
        self.tools = tools_shaped(TOOLS, tools_shape)
        self.switch = switch
        # Call turns without content get ``CALL_TURN_TEXT`` (the template refuses an empty
        # one and never prints it), as the polyfill gives them in ``apply``.
        self.call_turn_text = call_turn_text
        self._settings = (switch, tools_as_functions)
        self._shape = tools_shape
        # An empty tools list where a render passes no tools (the template iterates them
        # unguarded), as the polyfill passes it in ``apply``.
        self.tools_list = tools_list
        self._memo: dict[Hashable, str | None] = {} if memo is None else memo
        # Arguments are passed as objects (what most templates index into); a template
        # that concatenates them as strings gets JSON strings instead.
        self.args_as_string = False
        # Calls carry ids naming them (``named_call_id``) instead of the opaque CALL_IDs:
        # for templates that write a call's id where its name goes.
        self.named_ids = False
        # A message rendered after every :meth:`turn` ("user" or "tool"): for templates
        # that show a turn's calls only in history (the last turn is a prefill).
        self.follow_up = ""

    def _variant(self) -> Probe:
        probe = Probe(
            self.template,
            *self._settings,
            memo=self._memo,
            call_turn_text=self.call_turn_text,
            tools_shape=self._shape,
            tools_list=self.tools_list,
        )
        probe.args_as_string = self.args_as_string
        probe.named_ids = self.named_ids
        probe.follow_up = self.follow_up
        return probe

    def with_named_ids(self) -> Probe:
        """This probe with calls whose ids carry their names, sharing the memo."""
        probe = self._variant()
        probe.named_ids = True
        return probe

    def with_follow_up(self, follow_up: str) -> Probe:
        """This probe with a "user" or "tool" message after each turn, sharing the memo."""
        probe = self._variant()
        probe.follow_up = follow_up
        return probe

    def with_settings(
        self, switch: ThinkingSwitch | None, tools_as_functions: bool, tools_shape: str = ""
    ) -> Probe:
        """This template's probe with another switch / tool shape, sharing the memo."""
        return Probe(
            self.template,
            switch,
            tools_as_functions,
            self._memo,
            self.call_turn_text,
            tools_shape,
            self.tools_list,
        )

    def _memoised(self, key: Hashable, render: Callable[..., str], *args: object) -> str | None:
        if key not in self._memo:
            self._memo[key] = _quiet(render, *args)
        return self._memo[key]

    # --------------------------------------------------------- as apply renders (caps)

    def messages(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[Mapping[str, object]] | None = None,
        add_generation_prompt: bool = False,
        **kwargs: object,
    ) -> str | None:
        """A conversation rendered as ``apply`` renders it, or ``None`` if refused."""
        key = (
            "messages",
            json.dumps([messages, tools, add_generation_prompt, kwargs], sort_keys=True),
        )

        def run() -> str:
            return self.template.render(messages, tools, add_generation_prompt, now=None, **kwargs)

        return self._memoised(key, run)

    def raw(self, context: dict[str, object]) -> str | None:
        """Exactly these template variables, or ``None`` if refused."""
        return self._memoised(
            ("raw", json.dumps(context, sort_keys=True)), self.template.render_raw, context
        )

    # ------------------------------------------------- variants of one turn (analysis)

    def _assistant(
        self,
        content: object,
        reasoning: str | None,
        calls: Sequence[CallSpec],
        reasoning_key: str = "reasoning_content",
    ) -> dict[str, object]:
        msg: dict[str, object] = {"role": "assistant", "content": content}
        if reasoning is not None:
            msg[reasoning_key] = reasoning
        if self.named_ids:
            calls = [
                (name, args, named_call_id(name, i)) for i, (name, args, _) in enumerate(calls)
            ]
        if calls:
            msg["tool_calls"] = [tool_call(c, not self.args_as_string) for c in calls]
        return with_call_turn_text(msg) if self.call_turn_text else msg

    def render(
        self,
        *,
        assistant: tuple[object, str | None, tuple[CallSpec, ...]] | None = None,
        tools: bool = False,
        gen_prompt: bool = False,
        thinking: bool | None = True,
        follow_up: str = "",
        reasoning_key: str = "reasoning_content",
    ) -> str | None:
        """Render [user] or [user, assistant(content, reasoning, calls)], optionally followed
        by a "user" or a "tool" message, with the variables untouched."""
        messages: list[dict[str, object]] = [{"role": "user", "content": USER_MSG}]
        if assistant is not None:
            messages.append(self._assistant(*assistant, reasoning_key=reasoning_key))
            if follow_up == "user":
                messages.append({"role": "user", "content": USER_MSG})
            elif follow_up == "tool":
                messages.append({"role": "tool", "tool_call_id": CALL_ID, "content": TOOL_RESULT})
        context: dict[str, object] = {"messages": messages, "add_generation_prompt": gen_prompt}
        if tools:
            context["tools"] = self.tools
        elif self.tools_list:
            context["tools"] = []
        if thinking is not None:
            context["enable_thinking"] = thinking
            if self.switch is not None:
                switched: dict[str, object] = {}  # the switch's value overrides enable_thinking
                context["messages"] = self.switch.switch(messages, switched, thinking)
                context.update(switched)
        return self.raw(context)

    def turn(
        self,
        content: object,
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
            follow_up=self.follow_up,
            reasoning_key=reasoning_key,
        )

    def block_turn(self, with_thinking: bool) -> str | None:
        """An assistant turn whose content is typed blocks, optionally with a thinking block
        first (templates that take reasoning only that way, e.g. Mistral's [THINK])."""
        blocks: list[dict[str, object]] = [{"type": "text", "text": ASSISTANT_MSG}]
        if with_thinking:
            blocks.insert(0, {"type": "thinking", "thinking": THINKING})
        return self.turn(blocks)

    def calls(self, calls: tuple[CallSpec, ...], content: str | None = "") -> str | None:
        """Render a tool-call turn, switching to string arguments if objects are refused,
        or render with their quotes HTML-escaped where strings do not (``str + Markup``)."""
        out = self.turn(content, None, calls, tools=True)
        if self.args_as_string or (out is not None and not has_entities(out)):
            return out
        self.args_as_string = True
        as_string = self.turn(content, None, calls, tools=True)
        if as_string is not None and (out is None or markup_escaped(out, as_string)):
            return as_string
        self.args_as_string = False
        return out

    # ------------------------------------------------------------------ questions

    def reasoning_field(self) -> str:
        """Where the template reads an assistant turn's reasoning from: a message key of
        ``REASONING_KEYS`` (the first it shows, in their order), ``"thinking_block"`` (a
        typed ``{"type": "thinking"}`` content part), or ``""`` (never shown)."""
        without = self.turn(ASSISTANT_MSG)
        if without is None:
            return ""
        for key in REASONING_KEYS:
            shown = self.turn(ASSISTANT_MSG, THINKING, reasoning_key=key)
            if shown is not None and THINKING in shown:
                return key
        # Typed parts only for templates that understand them: a text part renders exactly
        # like string content, and the thinking part as reasoning, not as a dump of the
        # part (``{'type': 'thinking', ...}``).
        plain, blocks = self.block_turn(False), self.block_turn(True)
        if plain != without or blocks is None or THINKING not in blocks:
            return ""
        if blocks[blocks.find(THINKING) - 1] in "\"'":
            return ""
        return "thinking_block"


_PROBES: Store[Probe] = CACHES.store("probe", 256)


def probe_for(template: Renderer) -> Probe:
    """The probe of this template text and tokens, shared by every renderer with them
    (its renderer is unnamed: errors name ``<template>``)."""
    tokens = tuple(sorted(template.special_tokens.items()))
    key = (template.source, template.bos_token, template.eos_token, tokens)
    return _PROBES.get_or_build(
        key,
        lambda: Probe(
            Renderer(
                template.source,
                bos_token=template.bos_token,
                eos_token=template.eos_token,
                special_tokens=dict(tokens),
            )
        ),
    )
