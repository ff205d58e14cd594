"""One call of any family, and the tool-call section around one or more calls (openers,
separators, trigger markers).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence

from autoparser import tags
from autoparser.analysis.model import ToolFormat, ToolFormatAnalysis, ToolsAnalysis
from autoparser.cache import CACHES, Store
from autoparser.cancel import checkpoint
from autoparser.generate import families
from autoparser.generate.context import (
    BuildContext,
    ToolGroup,
    choice_of,
    closing,
    effective_markers,
    longest_name_first,
    seq_of,
    tool_rule,
)
from autoparser.generate.json_calls import json_native_call, tag_json_call
from autoparser.generate.pythonic import is_pythonic
from autoparser.generate.request import ToolSpec
from autoparser.generate.tagged_calls import is_markup, python_value, tag_tagged_call
from autoparser.peg import (
    Parser,
    Rules,
    choice,
    lazy,
    literal,
    optional,
    space,
    tag,
    zero_or_more,
)
from autoparser.peg.gbnf_emit import GrammarTrigger


def single_call(ctx: BuildContext, tool: ToolSpec, strict: bool) -> Parser:
    mode = ctx.analysis.tools.format.mode
    if mode == ToolFormat.JSON_NATIVE:
        return json_native_call(ctx, tool, strict)
    if mode == ToolFormat.TAG_WITH_JSON:
        # Python-literal arguments only where the template prints them so: the literal
        # grammar is recursive (named rules), which keeps a parser off the one-shot path.
        python = not strict and ctx.analysis.tools.format.uses_python_dicts
        return tag_json_call(ctx, tool, strict, python_value() if python else None)
    if mode == ToolFormat.TAG_WITH_TAGGED:
        return tag_tagged_call(ctx, tool, strict)
    raise ValueError(f"no call parser for tool format {mode.value}")


def call_opener(ctx: BuildContext) -> str:
    """The marker that opens the calls (section, per-call or name prefix), "" if none.

    A prompt ending with it has opened the first call itself (``call_opened``). Array-wrapped
    JSON whose section start holds the bracket is left out: its first call is not a unit.
    """
    f = ctx.analysis.tools.format
    if f.mode == ToolFormat.NONE:
        return ""
    section_start, _, call_start, _ = effective_markers(ctx)
    if section_start:
        array = f.mode == ToolFormat.JSON_NATIVE and f.tools_array_wrapped
        return "" if array and section_start.endswith("[") else section_start
    if call_start:
        return call_start
    return ctx.analysis.tools.function.name_prefix if f.mode != ToolFormat.JSON_NATIVE else ""


def _opened_context(ctx: BuildContext) -> BuildContext:
    """The context for a call whose opener the prompt already wrote: that marker removed."""
    opener = call_opener(ctx)
    t = ctx.analysis.tools

    def drop(marker: str) -> str:
        return "" if marker == opener else marker

    tools = dataclasses.replace(
        t,
        format=dataclasses.replace(
            t.format,
            section_start=drop(t.format.section_start),
            per_call_start=drop(t.format.per_call_start),
        ),
        function=dataclasses.replace(t.function, name_prefix=drop(t.function.name_prefix)),
    )
    analysis = dataclasses.replace(ctx.analysis, tools=tools)
    return dataclasses.replace(ctx, analysis=analysis, call_opened=False)


def call_trigger_markers(ctx: BuildContext) -> tuple[str, ...]:
    """Where a tool call can begin in the output (content stops there to try a call)."""
    f = ctx.analysis.tools.format
    section_start, _, call_start, _ = effective_markers(ctx)
    first = section_start or call_start
    if not first and f.mode != ToolFormat.JSON_NATIVE:
        first = ctx.analysis.tools.function.name_prefix
    if not first and f.mode == ToolFormat.JSON_NATIVE:
        first = "[" if f.tools_array_wrapped else "{"
    if not first and is_pythonic(ctx.analysis):
        # Python calls with no opener at all (``get_weather(city="Paris")``): a call starts
        # with a tool's name and the parenthesis, as llama.cpp's pythonic parser reads it.
        # Models also write them as a Python list (``[get_weather(city="Paris")]``).
        paren = ctx.analysis.tools.arguments.start.strip()
        names = [t.name + paren for t in longest_name_first(ctx.request.tools)]
        return (*names, *("[" + n for n in names))
    token = f.call_prefix_token
    markers = (first,) if first else ()
    markers = (*markers, token) if token and token not in markers else markers
    described = f.described_start if not section_start else ""
    return (*markers, described) if described and described not in markers else markers


def name_prefix_triggers(
    ctx: BuildContext, markers: Sequence[str], tools: Sequence[ToolSpec]
) -> tuple[GrammarTrigger, ...]:
    """Word triggers naming the tool, where a call opens with a plain-text name prefix.

    A prefix that is no markup (a recipient header's ``to=``) also starts turns that hold
    no call (``to=user``, ``to=self`` for reasoning): a lazy grammar firing on it would
    force a call there. The prefix with a tool's name only starts a call. Empty (the word
    triggers stand) for any other opener.
    """
    prefix = ctx.analysis.tools.function.name_prefix.strip()
    if not tools or not prefix or tuple(markers) != (prefix,) or is_markup(prefix):
        return ()
    return tuple(GrammarTrigger("word", prefix + t.name) for t in longest_name_first(tools))


def inner_opener(ctx: BuildContext) -> str:
    """The markup opening a call inside its outer markers (the per-call opener inside a
    section, ``<function=`` inside ``<tool_call>``), "" when there is none.

    Models sometimes leave the outer opener out; the lenient parser then starts a call
    at this marker too (markup only: a bare name or ``{`` is ordinary text).
    """
    f = ctx.analysis.tools.format
    section_start, _, call_start, _ = effective_markers(ctx)
    prefix = "" if f.mode == ToolFormat.JSON_NATIVE else ctx.analysis.tools.function.name_prefix
    first = call_trigger_markers(ctx)
    for marker in (call_start if section_start else "", prefix):
        if is_markup(marker) and marker not in first:
            return marker
    return ""


def _outer(marker: str, ctx: BuildContext, strict: bool) -> Parser | None:
    """An opener before the inner one: optional in the lenient parser."""
    if not marker:
        return None
    inner = inner_opener(ctx)
    if strict or not inner or marker == inner:
        return literal(marker)
    return optional(literal(marker) + space())


# One tool's call parser, by (what the builders read of the context, strict, the tool's
# rule name, the tool as canonical JSON): a request that adds a tool to a set seen before,
# or sends a subset of it, builds only the calls it has not built yet. Parsers are
# immutable, so two requests' definitions can share them.
_CALLS: Store[Parser] = CACHES.store("tool_calls", 4096)


def _context_key(ctx: BuildContext, strict: bool) -> str:
    """Everything a call builder reads of ``ctx`` besides the tool itself, as text (the
    analysis' dataclass repr spells every field): computed once per section, not per tool.
    The request's tools count only through each tool's rule name (``tool_rule``) and,
    for call openers made of tool names, through ``call_openers`` and the trigger markers."""
    # Every field, read from the dataclass itself: one added to BuildContext later is in
    # the key too (the request's by its repr, every field but the tools).
    fields = tuple(
        dataclasses.replace(ctx.request, tools=()) if f.name == "request" else getattr(ctx, f.name)
        for f in dataclasses.fields(ctx)
    )
    return repr((fields, call_trigger_markers(ctx), strict))


def _tool_key(tool: ToolSpec) -> str | None:
    """The tool as canonical JSON, or None when it holds a value JSON cannot spell (then
    its call is not cached: a key must never equate two different tools)."""
    fields = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    try:
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None


def _calls(ctx: BuildContext, tools: Sequence[ToolSpec], strict: bool) -> list[Parser]:
    """Each tool's call parser: in the grammar, a member of its tool family (written once
    per family, ``generate.families``); in the lenient parser, one call for any tool where
    only the name tells calls apart, else each call built when the output first makes it
    (``peg.Lazy``). Calls of tools that join no family are built at once, from the
    per-tool cache where they were built before."""
    if not strict and _names_only(ctx):
        return [single_call(ctx, ToolGroup("", {}, names=_longest_first(tools)), strict)]
    context = _context_key(ctx, strict)
    calls: list[Parser] = []
    for tool in tools:
        checkpoint()  # a request with thousands of tools stops here once its client left
        if strict:
            member = families.call_member(ctx, context, tool, _strict_call)
            if member is not None:
                calls.append(member)
                continue
        else:
            first = families.first_text(ctx, context, tool, _lenient_call)
            calls.append(lazy(functools.partial(single_call, ctx, tool, False), first))
            continue
        calls.append(_built_call(ctx, context, tool, strict))
    return calls


def _strict_call(ctx: BuildContext, tool: ToolSpec) -> Parser:
    return single_call(ctx, tool, True)


def _lenient_call(ctx: BuildContext, tool: ToolSpec) -> Parser:
    return single_call(ctx, tool, False)


def _built_call(ctx: BuildContext, context: str, tool: ToolSpec, strict: bool) -> Parser:
    """The tool's call, built now (or found in the per-tool cache)."""
    found = _tool_key(tool)
    if found is None:
        return single_call(ctx, tool, strict)
    key = (context, tool_rule(ctx, tool), found)
    call = _CALLS.get(key)
    if call is None:
        call = _CALLS.put(key, single_call(ctx, tool, strict))
    return call


def _names_only(ctx: BuildContext) -> bool:
    """Whether a call's lenient parser reads nothing of its tool but the name: formats
    whose arguments are one JSON value (read as any JSON), where the name is written once."""
    t = ctx.analysis.tools
    mode = t.format.mode
    return (
        mode in (ToolFormat.JSON_NATIVE, ToolFormat.TAG_WITH_JSON)
        and not is_pythonic(ctx.analysis)
        and not t.function.name_suffix_after_name
    )


def _longest_first(tools: Sequence[ToolSpec]) -> tuple[str, ...]:
    return tuple(t.name for t in longest_name_first(tools))


def _one_call(ctx: BuildContext, tools: Sequence[ToolSpec], strict: bool) -> Parser:
    """One call to any of ``tools``, with its per-call markers."""
    _, _, call_start, call_end = effective_markers(ctx)
    inner = choice_of(_calls(ctx, longest_name_first(tools), strict))
    return tag(
        tags.TOOL,
        seq_of(
            _outer(call_start, ctx, strict),
            space() if call_start else None,
            inner,
            space() if call_end else None,
            closing(call_end, strict),
        ),
    )


# The call object JSON formats write (``{"name": ..., "arguments": {...}}``), as a sibling
# style a model of a Python-call format also writes.
_JSON_CALL = ToolFormatAnalysis(
    mode=ToolFormat.JSON_NATIVE,
    name_field="name",
    args_field="arguments",
    field_order=("name", "arguments"),
    json_style="spaced",
)


def _json_sibling(ctx: BuildContext, tools: Sequence[ToolSpec]) -> Parser | None:
    """For the lenient parser of a Python-call format, a call written as a JSON object
    inside the format's section (LFM2 writes ``[{"name": "f", "arguments": {...}}]`` where
    its template teaches ``[f(a=1)]``): the other style of the same family, told apart
    without doubt (a Python call starts with a name, this one with ``{``). None elsewhere."""
    if not is_pythonic(ctx.analysis):
        return None
    tools_analysis = ToolsAnalysis(format=_JSON_CALL)
    json_ctx = dataclasses.replace(
        ctx, analysis=dataclasses.replace(ctx.analysis, tools=tools_analysis)
    )
    return _one_call(json_ctx, tools, strict=False)


def _section_end(marker: str) -> Parser | None:
    """The lenient parser's section closer: optional, tagged ``TOOL_SECTION_END``."""
    return optional(tag(tags.TOOL_SECTION_END, literal(marker))) if marker else None


def tool_section(
    ctx: BuildContext,
    tools: Sequence[ToolSpec],
    *,
    strict: bool,
    parallel: bool,
    opened: bool = False,
) -> Parser:
    """One section of calls: section markers, per-call markers, separators, array wrapping.

    With ``opened`` the prompt wrote the opener (``call_opener``): the section starts after
    it; where the opener is per call, only the first call lacks it.
    """
    first_ctx = _opened_context(ctx) if opened else ctx
    if opened and effective_markers(ctx)[0]:
        ctx = first_ctx  # the prompt opened the whole section
    f = ctx.analysis.tools.format
    section_start, section_end, call_start, _ = effective_markers(ctx)
    call = _one_call(ctx, tools, strict)
    first = _one_call(first_ctx, tools, strict) if first_ctx is not ctx else call
    sibling = None if strict else _json_sibling(ctx, tools)
    if sibling is not None:
        call = choice(call, sibling)
        first = call if first_ctx is ctx else choice(first, sibling)
    if strict and parallel:
        # One grammar rule for a call to any tool, used by the first call and the next ones:
        # written inline, every tool's alternative was emitted (and sent to the engine) twice.
        rules = Rules()
        one = rules.define("tool-call", call)
        first = one if first is call else first
        call = one
    array = f.mode == ToolFormat.JSON_NATIVE and f.tools_array_wrapped
    sep_text = "," if array else ctx.analysis.tools.call_separator.strip()
    sep: Parser = space() + literal(sep_text) + space() if sep_text else space()
    bare = not (section_start or call_start or f.call_prefix_token)
    if not strict and not sep_text and bare and f.mode == ToolFormat.JSON_NATIVE:
        # Bare JSON calls the template writes apart by whitespace only: models join
        # parallel ones with the punctuation of a list (``{...}; {...}``), as a sentence
        # would. Reading it is not writing it: the grammar keeps the whitespace.
        sep = space() + optional(choice(literal(";"), literal(","))) + space()
    calls = first + zero_or_more(sep + call) if parallel else first
    if array:
        open_b = "" if section_start.endswith("[") else (f.array_open or "[")
        close_b = "" if section_end.startswith("]") else (f.array_close or "]")
        calls = seq_of(
            open_b, space(), calls, space(), closing(close_b, strict) if close_b else None
        )
    if not strict and not section_start and is_pythonic(ctx.analysis):
        # No opener: the calls may also come as a Python list (see call_trigger_markers).
        listed = literal("[") + space() + calls + space() + literal("]")
        calls = choice(listed, calls)
    if f.described_start and not section_start:
        # The wrapper the tool instructions describe (``functools[...]``), which models
        # write although the template renders bare calls: the calls inside it, or bare.
        described = seq_of(
            literal(f.described_start),
            space(),
            calls,
            space(),
            closing(f.described_end, strict),
        )
        calls = choice(described, calls)
    token = f.call_prefix_token
    section = seq_of(
        optional(literal(token) + space()) if token else None,
        _outer(section_start, ctx, strict),
        space() if section_start else None,
        calls,
        space() if section_end else None,
        # Tagged for the mapper: content after a call that is content (``TOOL_SECTION_END``).
        closing(section_end, strict) if strict else _section_end(section_end),
    )
    if strict or opened or not (is_markup(section_start) and is_markup(section_end)):
        return section
    # A section holding no call (``<|tool_calls_section_begin|><|tool_calls_section_end|>``):
    # no call, and its markers are not content either.
    empty = seq_of(
        optional(literal(token) + space()) if token else None,
        section_start,
        space(),
        section_end,
    )
    return choice_of([section, empty])
