"""functionary v3.2: ``>>>recipient`` segments; ``all`` is text, a function name is a call.

The prompt ends with ``>>>``, so the output starts with a recipient: ``all\\n`` then text,
or ``NAME\\n`` then the JSON arguments. Every later segment starts with ``>>>`` again::

    all\\nLet me check.>>>get_weather\\n{"city": "Paris"}>>>get_time\\n{}

The function name is itself the call's opening delimiter (there is no marker of its own),
which the tag families of the differential analysis cannot express. A segment addressed to
an unknown function, and any text outside the format, stays content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autoparser import tags
from autoparser.definition import ParserDefinition
from autoparser.generate.context import BuildContext, longest_name_first
from autoparser.generate.json_calls import json_args
from autoparser.generate.request import ToolSpec
from autoparser.peg import (
    GrammarTrigger,
    Parser,
    any_char,
    atomic,
    choice,
    end,
    json_schema,
    literal,
    optional,
    peek,
    seq,
    space,
    tag,
    trigger,
    zero_or_more,
)
from autoparser.peg import until_one_of as _until_one_of

RECIPIENT = ">>>"
TEXT = "all\n"  # the recipient of text meant for the user
_DEFAULT_END = "<|eot_id|>"


def _end_markers(ctx: BuildContext) -> tuple[str, ...]:
    return ctx.end_markers or (_DEFAULT_END,)


def _stops(ends: Sequence[str]) -> Parser:
    return _until_one_of(RECIPIENT, *ends)


# --------------------------------------------------------------------------- lenient parser


def _lenient_call(tool: ToolSpec, ends: Sequence[str]) -> Parser:
    """``NAME\\n{...}``: announced once the name, its newline and the ``{`` are there.

    Arguments that break after that make the segment no call: its text is content.
    """
    header = tag(tags.TOOL_NAME, literal(tool.name)) + literal("\n") + space()
    args = tag(tags.TOOL_ARGS, json_args(tool))
    return tag(tags.TOOL, atomic(header + peek(literal("{"))) + args)


def lenient_parser(tools: Sequence[ToolSpec], ends: Sequence[str]) -> Parser:
    """``(segment | end marker | stray text)*``: never fails, keeps every character."""
    text = literal(TEXT) + tag(tags.CONTENT, _stops(ends))
    calls = [_lenient_call(t, ends) + space() for t in longest_name_first(tools)]
    segment = optional(literal(RECIPIENT)) + choice(*calls, text)
    stray = tag(tags.CONTENT, any_char() + _stops(ends))
    return zero_or_more(choice(segment, *[literal(m) for m in ends], stray)) + end()


# --------------------------------------------------------------------------- grammar


def _calls(tools: Sequence[ToolSpec], parallel: bool, *, lazy: bool) -> Parser:
    """The calls. The first follows the prompt's ``>>>`` or, lazily, content's ``>>>``.

    Each alternative starts with a literal of its own (``NAME\\n``, ``>>>NAME\\n``), so the
    lazy grammar's trigger words are exactly the call openings, never ``>>>all``.
    """
    ordered = [(t, json_args(t)) for t in longest_name_first(tools)]
    first_alts = [literal(t.name + "\n") + a for t, a in ordered]
    later_alts = [literal(RECIPIENT + t.name + "\n") + a for t, a in ordered]
    first = choice(*first_alts, *later_alts) if lazy else choice(*first_alts)
    if not parallel:
        return first
    return first + zero_or_more(space() + choice(*later_alts))


def grammar_parser(ctx: BuildContext) -> tuple[Parser | None, bool]:
    """The strict parser the grammar is emitted from, and whether the grammar is lazy."""
    req = ctx.request
    if req.calls_enabled:
        calls = _calls(
            req.grammar_tools, req.parallel_tool_calls, lazy=req.tool_choice != "required"
        )
        if req.tool_choice == "required":
            return seq(calls, end()), False
        return trigger(calls), True
    if req.response_schema is not None:
        answer = json_schema(dict(req.response_schema), "response")
        return seq(literal(TEXT), answer, end()), False
    return None, False


def grammar_triggers(tools: Sequence[ToolSpec]) -> tuple[GrammarTrigger, ...]:
    """Where the lazy grammar switches on: a call right after the prompt, or after ``>>>``.

    The first segment follows the prompt's ``>>>``, so a call there starts the output with
    ``NAME\n``: a full-match pattern anchored at the start (the word ``NAME\n`` could also
    fire on a line of text for the user). Later calls are the words ``>>>NAME\n``.
    """
    if not tools:
        return ()
    ordered = longest_name_first(tools)
    names = "|".join(re.escape(t.name) for t in ordered)
    why = (
        "the first call has no marker of its own (the prompt ends with '>>>'): its name "
        "counts only at the very start of the output"
    )
    first = GrammarTrigger("pattern_full", f"^((?:{names})\\n)[\\s\\S]*", why)
    return (first, *(GrammarTrigger("word", RECIPIENT + t.name + "\n") for t in ordered))


def build(ctx: BuildContext) -> ParserDefinition:
    """Parsers for functionary v3.2 output (see the module docstring)."""
    req = ctx.request
    tools = req.tools if req.calls_enabled else ()
    strict, lazy = grammar_parser(ctx)
    return ParserDefinition(
        parser=lenient_parser(tools, _end_markers(ctx)),
        grammar_parser=strict,
        grammar_lazy=lazy,
        trigger_markers=tuple(RECIPIENT + t.name + "\n" for t in tools),
        # Only ">>>" opens a segment: the name after it is the model's text (output that
        # stops after ">>>NAME\n" was cut inside the call, it did not stop on an opener).
        call_openers=(RECIPIENT,),
        grammar_triggers=grammar_triggers(req.grammar_tools if req.calls_enabled else ()),
    )
