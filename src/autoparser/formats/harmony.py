"""gpt-oss "harmony": messages on channels, tool calls addressed by a recipient in the header.

After the prompt's ``<|start|>assistant`` the model writes one or more messages, each later
one opened by ``<|start|>assistant`` again:

- ``<|channel|>analysis<|message|>...<|end|>``: reasoning;
- ``<|channel|>commentary<|message|>...<|end|>``: a preamble, shown to the user (content);
- ``<|channel|>final<|message|>...<|return|>``: the answer (content);
- `` to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>``: a tool call; the
  recipient may also follow the channel (``<|channel|>commentary to=functions.NAME json``),
  and the content type may be written ``<|constrain|>json``.

The name of the called function sits inside the message header rather than between markers
of its own, which the tag families of the differential analysis cannot express. Messages
addressed to unknown recipients, unknown channels and stray text stay content, markers
included, so nothing the model wrote is lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from autoparser import tags
from autoparser.definition import ParserDefinition
from autoparser.generate.context import BuildContext, longest_name_first
from autoparser.generate.json_calls import json_args
from autoparser.generate.request import ToolSpec
from autoparser.peg import (
    Parser,
    any_char,
    atomic,
    chars,
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
    until,
    until_one_of,
    zero_or_more,
)

START = "<|start|>"
ASSISTANT = "<|start|>assistant"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
CONSTRAIN = "<|constrain|>"
END = "<|end|>"
RETURN = "<|return|>"
CALL = "<|call|>"
RECIPIENT = " to=functions."

# The special tokens of the format (preserved when the template uses them).
_VOCABULARY = (START, CHANNEL, MESSAGE, END, RETURN, CALL)
# Where the body of a message stops: its own end, or the start of anything else.
_BODY_STOPS = (END, RETURN, CALL, START, CHANNEL)
# Markers between messages, dropped from the output.
_DROPPED = (ASSISTANT, END, RETURN, CALL)
_TYPE_CHARS = "a-zA-Z0-9_\\-"


def _constraint() -> Parser:
    """The optional content type after a channel or recipient: `` json``, `` <|constrain|>json``."""
    lead = choice(literal(" ") + optional(literal(CONSTRAIN)), literal(CONSTRAIN))
    return optional(lead + chars(_TYPE_CHARS, 1, 32))


# --------------------------------------------------------------------------- lenient parser


def _lenient_call(tool: ToolSpec) -> Parser:
    """One call message; the header (with the name) appears only once it is complete."""
    name = tag(tags.TOOL_NAME, literal(tool.name))
    channel = literal(CHANNEL) + choice(literal("commentary"), literal("analysis"))
    recipient_first = literal(RECIPIENT) + name + channel + _constraint()
    channel_first = channel + literal(RECIPIENT) + name + _constraint()
    header = choice(recipient_first, channel_first) + literal(MESSAGE) + space()
    opened = atomic(header + peek(literal("{")))
    # Arguments that break make the message no call: its text is content.
    return tag(tags.TOOL, opened + tag(tags.TOOL_ARGS, json_args(tool)))


def _channel_header(channel: str) -> Parser:
    return literal(CHANNEL + channel) + _constraint() + literal(MESSAGE)


def _analysis(extract: bool) -> Parser:
    header = _channel_header("analysis")
    body = until_one_of(*_BODY_STOPS)
    if extract:
        close = tag(tags.REASONING_CLOSE, literal(END))
        return header + tag(tags.REASONING, body) + optional(close)
    # Reasoning kept as content: the message as written, markers included (atomic, so a
    # marker is never shown before it is complete).
    return (
        atomic(tag(tags.CONTENT, header))
        + tag(tags.CONTENT, body)
        + optional(atomic(tag(tags.CONTENT, literal(END))))
    )


def _text_message(channel: str) -> Parser:
    return _channel_header(channel) + tag(tags.CONTENT, until_one_of(*_BODY_STOPS))


def lenient_parser(tools: Sequence[ToolSpec], extract_reasoning: bool) -> Parser:
    """``(message | marker | stray text)*``: never fails, keeps every character."""
    items: list[Parser] = [_lenient_call(t) for t in longest_name_first(tools)]
    items += [_analysis(extract_reasoning), _text_message("final"), _text_message("commentary")]
    items += [literal(m) for m in _DROPPED]
    items.append(tag(tags.CONTENT, any_char() + until_one_of(*_BODY_STOPS)))
    return zero_or_more(choice(*items)) + end()


# --------------------------------------------------------------------------- grammar


def _after_recipient(tool: ToolSpec, args: Parser, channel_follows: bool) -> Parser:
    """From the function name to the end of the arguments, as the template writes it."""
    parts: list[Parser] = [literal(tool.name)]
    if channel_follows:
        parts.append(literal(CHANNEL + "commentary"))
    parts += [_constraint(), literal(MESSAGE), args]
    return seq(*parts)


def _call_message(tools: Sequence[tuple[ToolSpec, Parser]]) -> Parser:
    """A whole call header and arguments, after ``<|start|>assistant``."""
    recipient_first = literal(RECIPIENT) + choice(*[_after_recipient(t, a, True) for t, a in tools])
    channel_first = literal(CHANNEL + "commentary" + RECIPIENT) + choice(
        *[_after_recipient(t, a, False) for t, a in tools]
    )
    return choice(recipient_first, channel_first)


def _calls(tools: Sequence[ToolSpec], parallel: bool, *, lazy: bool) -> Parser:
    """The calls: the first, then (parallel) more call messages, then ``<|call|>``.

    Lazy: the grammar starts at the trigger, the first recipient, so the first call's header
    may have begun before it (``<|channel|>commentary`` when the recipient follows the
    channel); both header orders continue from there.
    """
    ordered = [(t, json_args(t)) for t in longest_name_first(tools)]
    if lazy:
        first = literal(RECIPIENT) + choice(
            *[_after_recipient(t, a, True) for t, a in ordered],
            *[_after_recipient(t, a, False) for t, a in ordered],
        )
    else:
        first = _call_message(ordered)
    first = first + optional(literal(CALL))
    if not parallel:
        return first
    return first + zero_or_more(
        literal(ASSISTANT) + _call_message(ordered) + optional(literal(CALL))
    )


def _reasoning_prefix() -> Parser:
    """An optional analysis message, then the header of the next message."""
    return optional(literal(CHANNEL + "analysis" + MESSAGE) + until(END) + literal(END + ASSISTANT))


def grammar_parser(ctx: BuildContext) -> tuple[Parser | None, bool]:
    """The strict parser the grammar is emitted from, and whether the grammar is lazy."""
    req = ctx.request
    if req.calls_enabled:
        tools = req.grammar_tools
        if req.tool_choice == "required":
            calls = _calls(tools, req.parallel_tool_calls, lazy=False)
            return seq(_reasoning_prefix(), calls, end()), False
        return trigger(_calls(tools, req.parallel_tool_calls, lazy=True)), True
    if req.response_schema is not None:
        answer = json_schema(dict(req.response_schema), "response")
        final = literal(CHANNEL + "final") + _constraint() + literal(MESSAGE)
        ending = optional(choice(literal(RETURN), literal(END)))
        return seq(_reasoning_prefix(), final, answer, ending, end()), False
    return None, False


def preserved_tokens(ctx: BuildContext) -> tuple[str, ...]:
    """The harmony markers the template uses, as its analysis shows them.

    The analysis lists only the markers its diffs isolated; the generation prompt
    (``<|start|>assistant``) and the end of turn (``<|return|>``) hold the others.
    ``<|constrain|>`` is added whenever a call or a JSON answer may be written: the model
    writes it in those headers (``<|constrain|>json``) although templates never render it.
    """
    a = ctx.analysis
    used = "".join([a.generation_prompt, *a.end_of_turn, *a.preserved_tokens])
    tokens = [m for m in _VOCABULARY if m in used]
    if ctx.request.calls_enabled or ctx.request.response_schema is not None:
        tokens.append(CONSTRAIN)
    return tuple(tokens)


def build(ctx: BuildContext) -> ParserDefinition:
    """Parsers for gpt-oss output (see the module docstring)."""
    req = ctx.request
    tools = req.tools if req.calls_enabled else ()
    extract = req.reasoning_format != "none"
    strict, lazy = grammar_parser(ctx)
    return ParserDefinition(
        parser=lenient_parser(tools, extract),
        grammar_parser=strict,
        grammar_lazy=lazy,
        trigger_markers=(RECIPIENT,) if tools else (),
        # What a call message's header is written with: output ending on these alone
        # stopped on an opener, which is dropped.
        call_openers=(START + "assistant", CHANNEL + "commentary", RECIPIENT, START, CHANNEL)
        if tools
        else (),
        preserved_tokens=preserved_tokens(ctx),
        # A call message ends the turn: the tool's result comes next.
        additional_stops=(CALL,),
    )
