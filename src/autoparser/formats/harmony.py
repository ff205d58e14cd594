"""gpt-oss "harmony": messages on channels, tool calls addressed by a recipient in the header.

After the prompt's ``<|start|>assistant`` the model writes one or more messages, each later
one opened by ``<|start|>assistant`` again:

- ``<|channel|>analysis<|message|>...<|end|>``: reasoning;
- ``<|channel|>commentary<|message|>...<|end|>``: a preamble, shown to the user (content);
- ``<|channel|>final<|message|>...<|return|>``: the answer (content);
- `` to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>``: a tool call; the
  recipient may also follow the channel (``<|channel|>commentary to=functions.NAME json``),
  and the content type may be written ``<|constrain|>json``;
- `` to=browser.search`` (any recipient but ``functions.*``): a call of the model's built-in
  tool of that name, when its message is a JSON object.

``<|end|>`` closes a message, never the turn (no stop string). A marker inside a message
ends it only where the next message starts (or the output ends): quoted in reasoning
(``the <|end|> token``) it is text.

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
    negate,
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


# A built-in tool of the model (``to=python``, ``to=browser.search``): any recipient but
# ``functions.*``; its call is named by the recipient.
_BUILTIN_CHARS = "a-zA-Z0-9_.\\-"


def _lenient_builtin_call() -> Parser:
    """A call to a built-in recipient whose message is a JSON object (``browser.search``
    with ``{"query": ...}``): a call with that name. Other bodies (python's code) are no
    JSON object, so the message stays text."""
    name = tag(tags.TOOL_NAME, negate(literal("functions.")) + chars(_BUILTIN_CHARS, 1, 64))
    recipient = literal(" to=") + name
    channel = literal(CHANNEL) + choice(literal("commentary"), literal("analysis"))
    header = choice(recipient + optional(channel), channel + recipient) + _constraint()
    opened = atomic(header + literal(MESSAGE) + space() + peek(literal("{")))
    args = json_schema({"type": "object"}, "builtin-args")
    return tag(tags.TOOL, opened + tag(tags.TOOL_ARGS, args))


def _channel_header(channel: str) -> Parser:
    return literal(CHANNEL + channel) + _constraint() + literal(MESSAGE)


# What a marker that really ends a message is followed by: the end of the output, or the
# next message's header. A marker followed by anything else is quoted text of the body.
_NEXT = choice(end(), literal(START), literal(CHANNEL))
_HEADER_WORDS = ("analysis", "commentary", "final", "assistant")


def _body_end() -> Parser:
    """Where a message's body ends: an end marker followed by the next message (or the end
    of output), or the next message's header itself (the end marker left out)."""
    ends = [literal(m) + space() + _NEXT for m in (END, RETURN, CALL)]
    heads = [literal(START + "assistant"), literal(START) + end()]
    heads += [literal(CHANNEL + w) for w in _HEADER_WORDS]
    return choice(*ends, *heads)


def _body(tag_name: str) -> Parser:
    """A message's text: a marker quoted inside it (``the <|end|> token``) is text."""
    chunk = negate(_body_end()) + any_char() + until_one_of(*_BODY_STOPS)
    return zero_or_more(tag(tag_name, chunk))


def _analysis(extract: bool) -> Parser:
    header = _channel_header("analysis")
    if extract:
        close = tag(tags.REASONING_CLOSE, literal(END))
        return header + _body(tags.REASONING) + optional(close)
    # Reasoning kept as content: the message as written, markers included (atomic, so a
    # marker is never shown before it is complete).
    return (
        atomic(tag(tags.CONTENT, header))
        + _body(tags.CONTENT)
        + optional(atomic(tag(tags.CONTENT, literal(END))))
    )


def _text_message(channel: str) -> Parser:
    return _channel_header(channel) + _body(tags.CONTENT)


def _cut_header() -> Parser:
    """A message header the output ends inside (``<|channel|>fin``, ``to=functions.get_w``):
    markup, neither content nor a call; the message is truncated."""
    word = chars("a-zA-Z0-9_.= \\-", 1, 64)
    header = zero_or_more(choice(word, literal(CONSTRAIN), literal(CHANNEL)))
    opener = choice(literal(ASSISTANT), literal(START), literal(CHANNEL), literal(" to="))
    return tag(tags.CUT, opener + header + end())


def lenient_parser(tools: Sequence[ToolSpec], extract_reasoning: bool) -> Parser:
    """``(message | marker | stray text)*``: never fails, keeps every character (but for a
    header the output ends inside)."""
    items: list[Parser] = [_cut_header()]
    items += [_lenient_call(t) for t in longest_name_first(tools)]
    if tools:
        items.append(_lenient_builtin_call())
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
        # A call message ends the turn (the tool's result comes next), the final answer
        # with <|return|>; <|end|> closes a channel only (a template variant ends its
        # history turns with it, so the analysis may take it for the end of turn).
        additional_stops=(RETURN, CALL),
        not_stops=(END,),
    )
