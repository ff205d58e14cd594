"""Capability probing: what a template can express, learnt by rendering probe conversations.

Each capability is a question answered by rendering a small conversation carrying unique
marker strings (with polyfills off; the conversations and needles are ``template/probe.py``'s)
and checking which markers reach the prompt, or whether the render fails; only the reasoning
switch's candidate variables are read from the source. Tool calls are judged by what the
assistant turn adds: the tools list names every probe tool, so a call counts as rendered only
when changing it (same tools) changes the render. Results are cached per template text
and special tokens, so a template is probed once however often it is loaded, and the
analysis reads them instead of asking again (tool calls, non-null content, reasoning field).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

from autoparser.cache import CACHES, Store
from autoparser.errors import TemplateError, TemplateLimitError
from autoparser.template.messages import CALL_TURN_TEXT, named_call_id
from autoparser.template.probe import (
    ALNUM9_IDS,
    ARG_FIRST,
    FUN_FIRST,
    FUN_SECOND,
    ONE_ARG,
    OPENAI_IDS,
    SPARSE_TOOLS,
    SYSTEM_MSG,
    TOOL_RESULT,
    TOOL_RESULT_SECOND,
    TOOLS,
    TOOLS_PARAMETER_DEFINITIONS,
    USER_MSG,
    VALUE_FIRST,
    VALUE_SECOND,
    Probe,
    bare_functions,
    markup_escaped,
    probe_for,
    tool_call,
    tools_shaped,
)
from autoparser.template.renderer import Renderer
from autoparser.template.switches import (
    SYSTEM_DIRECTIVE,
    PromptEnds,
    SwitchValue,
    ThinkingSwitch,
    find_directive,
    find_switch,
)


@dataclasses.dataclass(frozen=True)
class TemplateCaps:
    """What a template can express, found by rendering probe conversations."""

    supports_system_role: bool = True
    supports_tools: bool = False
    supports_tool_calls: bool = False
    supports_parallel_tool_calls: bool = False
    supports_tool_call_id: bool = False
    supports_tool_responses: bool = False
    requires_object_arguments: bool = False
    requires_non_null_content: bool = False
    requires_typed_content: bool = False
    renders_reasoning: bool = False
    supports_thinking_toggle: bool = False
    # The variable (and its values) that switches reasoning in the generation prompt, when
    # the template has one: ``enable_thinking``, ``thinking``, ``thinking_mode``...
    thinking_switch: ThinkingSwitch | None = None


@dataclasses.dataclass(frozen=True)
class TemplateQuirks:
    """Probed details the polyfills need that are not part of the public capabilities."""

    tool_call_id_alnum9: bool = False  # IDs must be 9 alphanumerics (Mistral)
    arguments_as_json_string: bool = False  # objects would print as Python reprs
    reads_reasoning_key: bool = False  # reasoning read only as ``message.reasoning``
    reasoning_as_thinking_block: bool = False  # reasoning read only as a typed "thinking" part
    # Tools read as bare function objects ({"name", "description", "parameters"}), not
    # under OpenAI's {"type": "function", "function": {...}}.
    tools_as_functions: bool = False
    # Tool fields OpenAI lets callers leave out (description, parameters, a parameter's
    # description or type) break the render: the polyfill fills them in.
    requires_tool_fields: bool = False
    # Where an assistant turn's reasoning is read from: "reasoning_content", "thinking" or
    # "reasoning" (message key), "thinking_block" (a typed content part), or "" (never).
    reasoning_field: str = ""
    # The template writes a call's id where its name goes (Kimi-K2-Thinking): calls need
    # ids naming them, ``functions.NAME:IDX``, the ids models of that family write.
    tool_call_id_names_call: bool = False
    # A call turn renders only with some content, which the template does not print
    # (Command-A reads ``message.content[0]``): the polyfill gives such turns
    # ``CALL_TURN_TEXT``.
    call_turn_text: bool = False
    # Tools read in Cohere's own shape (``tool.name``, ``tool.parameter_definitions``, as
    # Command-R v01 does): the polyfill passes them so.
    tools_as_parameter_definitions: bool = False
    # The template iterates ``tools`` unguarded (raises on none): an empty list is passed.
    requires_tools_list: bool = False
    # Tools are listed only inside a system turn (FunctionGemma): an empty one is added
    # when the conversation has none.
    tools_in_system_turn: bool = False


class _Prober:
    """The caps' view of the shared probe: content typed or not, tools bare or not."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.typed = False
        # Tools passed when a probe passes none: set for tool-only variants that fail without.
        self.default_tools: Sequence[Mapping[str, object]] | None = None
        # The template reads each tool as a bare function object.
        self.bare_tools = False
        # The template reads tools in Cohere's ``parameter_definitions`` shape.
        self.parameter_definitions = False

    def tools(self, count: int = 2) -> Sequence[Mapping[str, object]]:
        """The probe tools, in the shape the template reads."""
        if self.parameter_definitions:
            return tools_shaped(TOOLS[:count], TOOLS_PARAMETER_DEFINITIONS)
        return bare_functions(TOOLS[:count]) if self.bare_tools else TOOLS[:count]

    def content(self, text: str) -> object:
        return [{"type": "text", "text": text}] if self.typed else text

    def render(
        self,
        messages: Sequence[dict[str, object]],
        tools: Sequence[Mapping[str, object]] | None = None,
        add_generation_prompt: bool = False,
        **kwargs: object,
    ) -> str | None:
        return self.probe.messages(
            messages,
            tools if tools is not None else self.default_tools,
            add_generation_prompt,
            **kwargs,
        )

    def user(self) -> dict[str, object]:
        return {"role": "user", "content": self.content(USER_MSG)}


def _has(text: str | None, *markers: str) -> bool:
    return text is not None and all(m in text for m in markers)


@dataclasses.dataclass(frozen=True)
class _CallProbe:
    """The tool-call conversation shape that rendered, and what it showed.

    ``renders``: the template accepts the conversation in this shape (content, ids, results);
    ``works``: the assistant turn also shows the call. A template may do the first without the
    second (granite 3.3, LFM2), and its content/id needs still matter to the polyfills.
    """

    renders: bool = False
    works: bool = False
    alnum9: bool = False
    non_null: bool = False
    with_result: bool = False
    rendered: str = ""
    # The call showed only with ids that carry its name (``functions.NAME:IDX``): the
    # template writes the id where the name goes (Kimi-K2-Thinking).
    named_ids: bool = False
    # The content the call turn needed: None, "" or ``CALL_TURN_TEXT``.
    content: str | None = None


def _call_conversation(
    prober: _Prober,
    ids: Sequence[str] | None,
    content: str | None,
    as_object: bool,
    with_result: bool,
    parallel: bool = False,
    names: tuple[str, str] = (FUN_FIRST, FUN_SECOND),
    second_value: str = VALUE_FIRST,
) -> list[dict[str, object]]:
    """A [user, assistant(calls), results] conversation; ``ids`` None gives named ids."""
    if ids is None:
        ids = [named_call_id(name, i) for i, name in enumerate(names)]
    calls = [tool_call((names[0], ONE_ARG, ids[0]), as_object)]
    if parallel:
        calls.append(tool_call((names[1], ((ARG_FIRST, second_value),), ids[1]), as_object))
    messages: list[dict[str, object]] = [
        prober.user(),
        {"role": "assistant", "content": content, "tool_calls": calls},
    ]
    if with_result:
        for call, result in zip(calls, (TOOL_RESULT, TOOL_RESULT_SECOND), strict=False):
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": prober.content(result)}
            )
    return messages


def _find_call_shape(prober: _Prober) -> _CallProbe:
    fallback = _CallProbe()
    for with_result in (True, False):
        # Ids naming the call last: a template may write the id in place of the name.
        id_kinds: tuple[tuple[bool, Sequence[str] | None], ...] = (
            (False, OPENAI_IDS),
            (True, ALNUM9_IDS),
            (False, None),
        )
        for alnum9, ids in id_kinds:
            for non_null, content in ((False, None), (True, ""), (True, CALL_TURN_TEXT)):
                for as_object in (True, False):
                    messages = _call_conversation(prober, ids, content, as_object, with_result)
                    text = prober.render(messages, prober.tools(), with_result)
                    if text is None:
                        continue
                    # The tools list names every probe tool, so finding FUN_FIRST proves
                    # nothing: the call is rendered only if calling the other tool changes
                    # the render.
                    swapped = _call_conversation(
                        prober, ids, content, as_object, with_result, names=(FUN_SECOND, FUN_FIRST)
                    )
                    other = prober.render(swapped, prober.tools(), with_result)
                    if _has(text, FUN_FIRST) and other is not None and other != text:
                        return _CallProbe(
                            True, True, alnum9, non_null, with_result, text, ids is None, content
                        )
                    # Else keep the first shape showing both the tools and the results: the
                    # template takes part in tool conversations without showing calls, and
                    # how it wants their messages (content, ids) still counts.
                    if not fallback.renders and with_result and _has(text, FUN_FIRST, TOOL_RESULT):
                        fallback = _CallProbe(
                            True, False, alnum9, non_null, with_result, text, content=content
                        )
    return fallback


def _prompt_ends(prober: _Prober, variable: str, value: SwitchValue) -> PromptEnds | None:
    """What the prompt ends with after the user turn, with ``variable`` set: with the
    generation prompt, and without it.

    The text after the user's message, not the whole render: a variable that only changes
    the system prompt (gpt-oss's ``reasoning_effort``) switches no reasoning on or off,
    while one that appends an empty block after the turn (even outside the generation
    prompt's own branch) does.
    """
    ends: list[str] = []
    for add_generation_prompt in (True, False):
        text = prober.render([prober.user()], None, add_generation_prompt, **{variable: value})
        if text is None:
            return None
        at = text.rfind(USER_MSG)
        ends.append(text[at + len(USER_MSG) :] if at >= 0 else text)
    return ends[0], ends[1]


def _directive_prompt_ends(prober: _Prober, directive: str) -> PromptEnds | None:
    """What the prompt ends with after the user turn, below a system message ``directive``."""
    system = {"role": "system", "content": prober.content(directive)}
    ends: list[str] = []
    for add_generation_prompt in (True, False):
        text = prober.render([system, prober.user()], None, add_generation_prompt)
        if text is None:
            return None
        at = text.rfind(USER_MSG)
        ends.append(text[at + len(USER_MSG) :] if at >= 0 else text)
    return ends[0], ends[1]


def _switched(prober: _Prober, switch: ThinkingSwitch | None, enabled: bool) -> str | None:
    """The generation prompt after a user turn with reasoning switched on or off."""
    if switch is not None and switch.kind == SYSTEM_DIRECTIVE:
        system = {"role": "system", "content": prober.content(str(switch.value(enabled)))}
        return prober.render([system, prober.user()], None, True)
    variable = switch.variable if switch else "enable_thinking"
    value: SwitchValue = switch.value(enabled) if switch else enabled
    return prober.render([prober.user()], None, True, **{variable: value})


def _probe(probe: Probe) -> tuple[TemplateCaps, TemplateQuirks]:
    prober = _Prober(probe)
    template = probe.template
    plain = prober.render([prober.user()], add_generation_prompt=True)
    if plain is None and prober.render([prober.user()], TOOLS[:1], True) is not None:
        prober.default_tools = TOOLS[:1]
        plain = prober.render([prober.user()], add_generation_prompt=True)
    if plain is None and prober.render([prober.user()], [], True) is not None:
        # ``tools`` iterated unguarded (Command-R v01): an empty list renders.
        prober.default_tools = []
        plain = prober.render([prober.user()], add_generation_prompt=True)
    prober.typed = True
    typed = prober.render([prober.user()], add_generation_prompt=True)
    if plain is None and typed is None:
        # Nothing renders at all: report the template's own error, not "supports nothing".
        template.render([{"role": "user", "content": USER_MSG}])
    requires_typed = not _has(plain, USER_MSG) and _has(typed, USER_MSG)
    prober.typed = requires_typed

    system = prober.render(
        [{"role": "system", "content": prober.content(SYSTEM_MSG)}, prober.user()],
        add_generation_prompt=True,
    )
    with_tools = prober.render([prober.user()], prober.tools(1), True)
    if not _has(with_tools, FUN_FIRST):
        # Some templates read a tool as the bare function object (``tool.name``).
        prober.bare_tools = True
        bare = prober.render([prober.user()], prober.tools(1), True)
        if _has(bare, FUN_FIRST):
            with_tools = bare
        else:
            prober.bare_tools = False
    if not _has(with_tools, FUN_FIRST):
        # Or in Cohere's own shape (``tool.parameter_definitions``, Command-R v01).
        prober.parameter_definitions = True
        cohere = prober.render([prober.user()], prober.tools(1), True)
        if _has(cohere, FUN_FIRST):
            with_tools = cohere
        else:
            prober.parameter_definitions = False
    tools_in_system = False
    if not _has(with_tools, FUN_FIRST):
        # Or only inside a system turn (FunctionGemma lists them after its content).
        system_first = {"role": "system", "content": prober.content(SYSTEM_MSG)}
        in_system = prober.render([system_first, prober.user()], prober.tools(1), True)
        tools_in_system = _has(in_system, FUN_FIRST) and not _has(
            prober.render([system_first, prober.user()], [], True), FUN_FIRST
        )
        if tools_in_system:
            with_tools = in_system
    sparse: Sequence[Mapping[str, object]] = SPARSE_TOOLS
    if prober.parameter_definitions:
        sparse = tools_shaped(SPARSE_TOOLS, TOOLS_PARAMETER_DEFINITIONS)
    lead = [{"role": "system", "content": prober.content(SYSTEM_MSG)}] if tools_in_system else []
    sparse_tools = prober.render([*lead, prober.user()], sparse, True)

    shape = _find_call_shape(prober)
    ids: Sequence[str] | None = ALNUM9_IDS if shape.alnum9 else OPENAI_IDS
    if shape.named_ids:
        ids = None
    content = shape.content
    requires_object = arguments_as_string = parallel = False
    if shape.works:
        as_obj = prober.render(
            _call_conversation(prober, ids, content, True, shape.with_result),
            prober.tools(),
            shape.with_result,
        )
        as_str = prober.render(
            _call_conversation(prober, ids, content, False, shape.with_result),
            prober.tools(),
            shape.with_result,
        )
        # Objects are the transformers convention: prefer them whenever they render well and
        # differently from strings (double-encoded JSON, or a native non-JSON format).
        # (Markers pair key and value: tool definitions also mention the key, never the value.)
        python_repr = f"'{ARG_FIRST}': '{VALUE_FIRST}'"
        double_encoded = f'\\"{ARG_FIRST}\\": \\"{VALUE_FIRST}\\"'
        object_ok = _has(as_obj, ARG_FIRST, VALUE_FIRST) and python_repr not in (as_obj or "")
        # Objects whose Markup escaped the template's own quotes (`&#34;`) render badly.
        object_ok = object_ok and not markup_escaped(as_obj, as_str)
        string_ok = _has(as_str, ARG_FIRST, VALUE_FIRST) and double_encoded not in (as_str or "")
        requires_object = object_ok and (not string_ok or as_obj != as_str)
        # Objects print as Python reprs or break the render, while JSON strings work.
        arguments_as_string = string_ok and not object_ok
        # The second call must show itself: changing its name and arguments (tools unchanged)
        # must change the render, else the template drops every call after the first.
        renders = [
            prober.render(
                _call_conversation(
                    prober,
                    ids,
                    content,
                    not arguments_as_string,
                    shape.with_result,
                    True,
                    names,
                    value,
                ),
                prober.tools(),
                shape.with_result,
            )
            for names, value in (
                ((FUN_FIRST, FUN_SECOND), VALUE_FIRST),
                ((FUN_FIRST, FUN_FIRST), VALUE_SECOND),
            )
        ]
        parallel = _has(renders[0], FUN_FIRST, FUN_SECOND) and None not in renders
        parallel = parallel and renders[0] != renders[1]

    switch = find_switch(template.source, functools.partial(_prompt_ends, prober))
    if switch is None:
        switch = find_directive(functools.partial(_directive_prompt_ends, prober))
    thinking_on = _switched(prober, switch, True)
    thinking_off = _switched(prober, switch, False)
    tools_shape = TOOLS_PARAMETER_DEFINITIONS if prober.parameter_definitions else ""
    shaped = probe.with_settings(switch, prober.bare_tools, tools_shape)
    shaped.tools_list = prober.default_tools == []
    reasoning_field = shaped.reasoning_field()

    caps = TemplateCaps(
        supports_system_role=_has(system, SYSTEM_MSG),
        supports_tools=_has(with_tools, FUN_FIRST),
        supports_tool_calls=shape.works,
        supports_parallel_tool_calls=parallel,
        supports_tool_call_id=shape.works and (ids is None or ids[0] in shape.rendered),
        supports_tool_responses=shape.with_result and TOOL_RESULT in shape.rendered,
        requires_object_arguments=requires_object,
        requires_non_null_content=shape.renders and shape.non_null,
        requires_typed_content=requires_typed,
        # Native, or under the other name / content shape the polyfills then supply.
        renders_reasoning=bool(reasoning_field),
        supports_thinking_toggle=(
            thinking_on is not None and thinking_off is not None and thinking_on != thinking_off
        ),
        thinking_switch=switch,
    )
    quirks = TemplateQuirks(
        tool_call_id_alnum9=shape.renders and shape.alnum9,
        arguments_as_json_string=arguments_as_string,
        reads_reasoning_key=reasoning_field == "reasoning",
        reasoning_as_thinking_block=reasoning_field == "thinking_block",
        tools_as_functions=prober.bare_tools,
        requires_tool_fields=with_tools is not None and sparse_tools is None,
        reasoning_field=reasoning_field,
        tool_call_id_names_call=shape.works and shape.named_ids,
        call_turn_text=shape.renders and shape.content == CALL_TURN_TEXT,
        tools_as_parameter_definitions=prober.parameter_definitions,
        requires_tools_list=prober.default_tools == [],
        tools_in_system_turn=tools_in_system,
    )
    return caps, quirks


_CAPS: Store[tuple[TemplateCaps, TemplateQuirks]] = CACHES.store("caps", 256)


def _probe_cached(template: Renderer) -> tuple[TemplateCaps, TemplateQuirks]:
    """Probed once per template text and tokens (the probe is shared per text)."""
    probe = probe_for(template)
    return _CAPS.get_or_build(id(probe), lambda: _probe(probe), owner=probe)


def remember_probed(template: Renderer, caps: TemplateCaps, quirks: TemplateQuirks) -> None:
    """Store probe results found elsewhere (a saved analysis, read back) as this text's."""
    probe = probe_for(template)
    _CAPS.put(id(probe), (caps, quirks), owner=probe)


_UNNAMED = "<template>"  # the name of the shared probe renderer (Renderer's default)


def _probed(template: Renderer) -> tuple[TemplateCaps, TemplateQuirks]:
    """The probe results of this template text, shared by every template with that text;
    a probe's error is raised naming this template."""
    try:
        return _probe_cached(template)
    except TemplateError as exc:
        message = str(exc)
        if not message.startswith(_UNNAMED):
            raise
        renamed = template.name + message[len(_UNNAMED) :]
        if isinstance(exc, TemplateLimitError):
            raise TemplateLimitError(exc.limit, renamed) from exc
        raise TemplateError(renamed) from exc


def detect_caps(template: Renderer) -> TemplateCaps:
    """The capabilities of exactly this template text (not its other named variants)."""
    return _probed(template)[0]


def detect_quirks(template: Renderer) -> TemplateQuirks:
    """The polyfill-relevant details of exactly this template text."""
    return _probed(template)[1]


def template_caps(default: Renderer, tool_use: Renderer | None = None) -> TemplateCaps:
    """Caps of a template; tool-related fields from its ``tool_use`` variant when it has one."""
    own = detect_caps(default)
    if tool_use is None:
        return own
    tool = detect_caps(tool_use)
    return dataclasses.replace(
        own,
        supports_tools=tool.supports_tools,
        supports_tool_calls=tool.supports_tool_calls,
        supports_parallel_tool_calls=tool.supports_parallel_tool_calls,
        supports_tool_call_id=tool.supports_tool_call_id,
        supports_tool_responses=tool.supports_tool_responses,
        requires_object_arguments=tool.requires_object_arguments,
    )
