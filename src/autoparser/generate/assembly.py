"""The standard assembly: reasoning, content and the tool section into one
``ParserDefinition`` (what every generated format returns).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from autoparser import tags
from autoparser.analysis.model import CallIdPosition, ContentMode, ToolFormat
from autoparser.definition import ParserDefinition
from autoparser.errors import RequestError
from autoparser.generate import json_calls, pythonic, tagged_calls
from autoparser.generate.context import BuildContext, choice_of, longest_name_first, seq_of
from autoparser.generate.reasoning import reasoning_parser
from autoparser.generate.required import required_by_tool
from autoparser.generate.sections import (
    call_opener,
    call_trigger_markers,
    inner_opener,
    name_prefix_triggers,
    tool_section,
)
from autoparser.peg import (
    Parser,
    any_char,
    chars,
    end,
    json_schema,
    literal,
    negate,
    optional,
    rest,
    space,
    tag,
    trigger,
    until,
    until_one_of,
    zero_or_more,
)
from autoparser.peg.gbnf_emit import GrammarTrigger


def content_markers(ctx: BuildContext) -> tuple[str, ...]:
    c = ctx.analysis.content
    if c.mode == ContentMode.PLAIN:
        return ()
    return tuple(m for m in (c.start, c.end) if m)


def lenient_body(ctx: BuildContext, section: Parser | None, triggers: Sequence[str]) -> Parser:
    """``(tool section | dropped marker | content chunk)*``: never fails, keeps all text.

    Content-wrapper markers (and a call turn's content wrapper) are dropped; an
    end-of-turn marker ends the message (the rest is ignored); a trigger that does not
    start a valid call becomes content one character at a time (then up to the next
    delimiter).
    """
    f = ctx.analysis.tools.format
    # A call turn's content wrapper (Llama 4's <|python_start|>..<|python_end|>) is markup
    # wherever a model writes it: around the content or around the calls.
    wrap = (f.content_wrap_start, f.content_wrap_end)
    marks = dict.fromkeys(m for m in (*content_markers(ctx), *wrap) if m)
    wrappers = [m for m in marks if m not in ctx.end_markers]
    dropped = [*wrappers, *ctx.end_markers]
    delims = list(dict.fromkeys([*triggers, *dropped]))
    alts: list[Parser] = []
    if section is not None:
        alts.append(section)
        token = wrapper_token(ctx, triggers)
        if token is not None:
            # A special token the model adds around its calls is markup when a call follows
            # it: dropped, with its partner right after the calls.
            opener, parser = token
            delims.append(opener)
            alts.append(seq_of(parser, space(), section, optional(seq_of(space(), parser))))
    # The end of turn ends the message: whatever a template or engine appends after it
    # (the next turn's header) is not part of it.
    alts.extend(literal(m) + rest() for m in sorted(set(ctx.end_markers), key=len, reverse=True))
    alts.extend(literal(m) for m in sorted(set(wrappers), key=len, reverse=True))
    if delims:
        chunk = any_char() + (until(delims[0]) if len(delims) == 1 else until_one_of(*delims))
        alts.append(tag(tags.CONTENT, chunk))
        return zero_or_more(choice_of(alts))
    # No delimiter at all: content is everything (still after an optional section).
    if section is not None:
        return zero_or_more(section) + tag(tags.CONTENT, rest())
    return tag(tags.CONTENT, rest())


# How special tokens are spelled (``<|python_tag|>``, DeepSeek's ``<｜end▁of▁sentence｜>``):
# two-character brackets that plain text does not write.
_TOKEN_SPELLINGS = (("<|", "|>"), ("<\uff5c", "\uff5c>"))
_TOKEN_NAME = "^ \t\r\n<>|\uff5c"


def wrapper_token(ctx: BuildContext, openers: Sequence[str]) -> tuple[str, Parser] | None:
    """Any special token spelled as the template spells its own, for the lenient parser:
    (the spelling's opener, its parser), None when the template prints no such token.

    Models add tokens around their calls that the template never prints: Llama 3.2's
    ``<|python_tag|>`` before a JSON call, Llama 4's ``<|python_start|>`` ... ``<|python_end|>``
    around a Python list. Which tokens a model knows is its vocabulary's business; how its
    tokens are spelled is read from the ones the template prints (the generation prompt, the
    end of turn, the markers). End-of-turn markers and call openers keep their own meaning.
    """
    a = ctx.analysis
    printed = "".join((a.generation_prompt, *a.end_of_turn, *a.preserved_tokens))
    for opener, closer in _TOKEN_SPELLINGS:
        spelled = re.compile(re.escape(opener) + rf"[{_TOKEN_NAME}]{{1,40}}" + re.escape(closer))
        if spelled.search(printed) is None:
            continue
        # The opener first: the alternative fails at once where no token starts.
        kept = [m[len(opener) :] for m in (*ctx.end_markers, *openers) if m.startswith(opener)]
        name = chars(_TOKEN_NAME, 1, 40)
        if kept:
            name = seq_of(negate(choice_of([literal(m) for m in kept if m])), name)
        return opener, tag(tags.WRAPPER_TOKEN, seq_of(opener, name, closer))
    return None


def _with_call_openers(ctx: BuildContext) -> BuildContext:
    """The context with where calls can start (the lenient parser's content stops there)."""
    if ctx.request.calls_enabled:
        openers = (*call_trigger_markers(ctx), inner_opener(ctx))
        ctx = dataclasses.replace(ctx, call_openers=tuple(m for m in openers if m))
    return ctx


def build_standard(ctx: BuildContext) -> ParserDefinition:
    """The generated parsers for an analysed template (no hand-written handler)."""
    ctx = _with_call_openers(ctx)
    req = ctx.request
    fmt = ctx.analysis.tools.format
    can_call = req.calls_enabled and fmt.mode != ToolFormat.NONE
    triggers = call_trigger_markers(ctx) if can_call else ()
    if can_call and not triggers:
        can_call = False
    if req.tool_choice == "required" and not can_call:
        raise RequestError(
            "tool_choice: the template has no tool-call format the parser can read, "
            "so calls cannot be required"
        )

    opened = can_call and ctx.call_opened
    section = tool_section(ctx, req.tools, strict=False, parallel=True) if can_call else None
    inner = inner_opener(ctx) if can_call else ""
    openers = [*triggers, inner] if inner else list(triggers)
    lenient_reasoning = reasoning_parser(
        ctx,
        strict=False,
        calls=section if req.calls_in_reasoning else None,
        openers=openers,
        ends_at=None if req.calls_in_reasoning else section,
    )
    body = lenient_body(ctx, section, openers)
    first: Parser | None = None
    if opened:
        # The prompt wrote the first call's opener: the output may start inside that call.
        first = optional(
            seq_of(space(), tool_section(ctx, req.tools, strict=False, parallel=True, opened=True))
        )
    parser = seq_of(lenient_reasoning, first, body, end())

    strict_reasoning = reasoning_parser(ctx, strict=True)
    grammar_parser: Parser | None = None
    lazy = False
    c = ctx.analysis.content
    wrapped = c.mode == ContentMode.ALWAYS_WRAPPED and bool(c.start)

    def schema_content() -> Parser:
        assert req.response_schema is not None
        content = tag(tags.CONTENT, json_schema(dict(req.response_schema), "response"))
        return seq_of(c.start if wrapped else None, content, c.end if wrapped else None)

    if can_call:
        strict_section = tool_section(
            ctx, req.grammar_tools, strict=True, parallel=req.parallel_tool_calls, opened=opened
        )
        if req.response_schema is not None and req.tool_choice != "required" and not opened:
            # A response format with tools (as OpenAI and vLLM take it): the answer is the
            # calls or content in the format, constrained as a whole from the first token.
            grammar_parser = seq_of(
                strict_reasoning,
                space(),
                choice_of([strict_section, schema_content()]),
                space(),
                end(),
            )
        elif opened and wrapped and req.tool_choice != "required" and opened_call_triggers(ctx):
            # Content has its own opener, which may take the first call's place right after
            # the prompt (functionary's recipient: ``all\n<|content|>`` is text, a tool's
            # name a call): the grammar stays lazy. It starts at the output's start only on a
            # tool's name there (``opened_call_triggers``), or at a later call's full opener.
            full = tool_section(
                ctx, req.grammar_tools, strict=True, parallel=req.parallel_tool_calls
            )
            lazy = True
            grammar_parser = seq_of(
                strict_reasoning,
                trigger(seq_of(choice_of([strict_section, full]), space(), until(triggers[0]))),
                end(),
            )
        elif opened:
            # The prompt committed the model to a call: no trigger can start the grammar,
            # so it applies from the first byte; text may follow the calls.
            after = until(triggers[0]) if req.tool_choice != "required" else None
            grammar_parser = seq_of(
                strict_reasoning, space(), strict_section, space(), after, end()
            )
        elif req.tool_choice == "required":
            grammar_parser = seq_of(strict_reasoning, space(), strict_section, space(), end())
        else:
            lazy = True
            # Text may follow the calls (some templates write content after them), but
            # never another trigger: a further call must be part of the section.
            after = until(triggers[0]) if triggers else None
            grammar_parser = seq_of(
                strict_reasoning, trigger(seq_of(strict_section, space(), after)), end()
            )
    elif req.response_schema is not None:
        grammar_parser = seq_of(strict_reasoning, space(), schema_content(), space(), end())

    cid = ctx.analysis.tools.call_id
    expects_ids = can_call and (
        cid.position != CallIdPosition.NONE or bool(fmt.id_field or fmt.gen_id_field)
    )
    return ParserDefinition(
        parser=parser,
        grammar_parser=grammar_parser,
        grammar_lazy=lazy,
        expects_call_ids=expects_ids,
        trigger_markers=tuple(triggers),
        grammar_triggers=_lazy_triggers(ctx, triggers, opened) if lazy else (),
        value_converters=(
            pythonic.value_converters(ctx.analysis, req.tools)
            if pythonic.is_pythonic(ctx.analysis)
            else tagged_calls.element_converters(ctx)
        ),
        call_openers=tuple(dict.fromkeys((*triggers, inner))) if inner else tuple(triggers),
        required_arguments=(
            required_by_tool(req.tools)
            if can_call and fmt.mode == ToolFormat.TAG_WITH_TAGGED
            else {}
        ),
    )


def _lazy_triggers(
    ctx: BuildContext, triggers: Sequence[str], opened: bool
) -> tuple[GrammarTrigger, ...]:
    """The lazy grammar's triggers: the format's own, and where the prompt opened a call,
    the pattern for that call first (then the openers as words if the format has none)."""
    found = _grammar_triggers(ctx, triggers)
    first = opened_call_triggers(ctx) if opened else ()
    if not first:
        return found
    return (*first, *(found or tuple(GrammarTrigger("word", m) for m in triggers)))


def opened_call_triggers(ctx: BuildContext) -> tuple[GrammarTrigger, ...]:
    """A pattern for a call the prompt opened: a tool's name (and the name's suffix) at the
    output's very start, where the prompt's opener (the per-call opener or the name
    prefix) leaves off; empty when a tool's name is not what follows the opener."""
    t = ctx.analysis.tools
    f = t.format
    tools = ctx.request.grammar_tools
    opener = call_opener(ctx)
    if not tools or not opener or f.mode == ToolFormat.JSON_NATIVE or f.section_start:
        return ()
    if opener == f.per_call_start:
        prefix = re.escape(t.function.name_prefix)
    elif opener == t.function.name_prefix and not f.per_call_start:
        prefix = ""
    else:
        return ()
    names = "|".join(re.escape(tool.name) for tool in longest_name_first(tools))
    suffix = re.escape(t.function.name_suffix.strip())
    why = (
        "the prompt ends with the call's opener: a tool's name counts only at the output's "
        "very start (anchored, full match), where content's own opener may stand instead"
    )
    name = rf"(?:{names})\s*{suffix}" if suffix else rf"(?:{names})\b"
    return (GrammarTrigger("pattern_full", rf"^(\s*{prefix}{name})[\s\S]*", why),)


def _grammar_triggers(ctx: BuildContext, triggers: Sequence[str]) -> tuple[GrammarTrigger, ...]:
    """The format's own triggers (patterns, names) for its openers, plus the call prefix
    token as a word; empty when plain word triggers on ``triggers`` do."""
    token = ctx.analysis.tools.format.call_prefix_token
    described = ctx.analysis.tools.format.described_start
    openers = [m for m in triggers if m not in (token, described)]
    tools = ctx.request.grammar_tools
    found = (
        pythonic.call_start_triggers(ctx.analysis, openers, tools)
        or json_calls.call_start_triggers(ctx.analysis, openers, tools)
        or name_prefix_triggers(ctx, openers, tools)
    )
    if found and token:
        why = "the special token the template writes before a call"
        found = (*found, GrammarTrigger("word", token, why))
    if found and described and described in triggers:
        why = "the call list's opener the template's tool instructions describe"
        found = (*found, GrammarTrigger("word", described, why))
    return found
