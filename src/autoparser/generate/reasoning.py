"""The reasoning block: its parser and whether reasoning is extracted at all."""

from __future__ import annotations

from collections.abc import Sequence

from autoparser import tags
from autoparser.analysis.model import ReasoningMode, TemplateAnalysis
from autoparser.generate.context import BuildContext
from autoparser.generate.request import Request
from autoparser.peg import (
    Parser,
    any_char,
    atomic,
    char_class,
    choice,
    literal,
    negate,
    optional,
    peek,
    repeat,
    seq,
    space,
    tag,
    until,
    until_one_of,
    zero_or_more,
)


def reasoning_parser(
    ctx: BuildContext,
    strict: bool,
    calls: Parser | None = None,
    openers: Sequence[str] = (),
    ends_at: Parser | None = None,
) -> Parser | None:
    """The reasoning block for the analysis' mode, or None when reasoning is not extracted.

    Forced open (the prompt opened the block, or a DELIMITER template with thinking on):
    everything up to the end marker is reasoning. Otherwise an optional start ... end block
    at the very beginning. The lenient parser also stops reasoning at an end-of-turn marker
    and tolerates a missing end marker (a truncated block); and, reasoning being on, it
    reads a block whose opener the model left out (``opener_left_out``).

    ``calls`` (the lenient tool section, with the ``openers`` that start it): the request
    asked for calls written inside reasoning (``calls_in_reasoning``); the lenient body then
    reads them as calls between pieces of reasoning (a call that does not parse stays
    reasoning text).

    ``ends_at`` (the lenient tool section, by default): a whole call the model writes
    before it closes the block ends the reasoning there (``Let me think<tool_call>...``):
    the reasoning is the text before the call's opener, and the call is read after it, as
    llama.cpp, vLLM and Ollama do. An opener that does not start a valid call stays
    reasoning text; while streaming, the text from an opener is held back until decided. A
    closer written after the calls is dropped, the text before it reasoning; without a
    closer, text after the calls is content.
    """
    r = ctx.analysis.reasoning
    if not ctx.extract_reasoning or not r.end:
        return None
    budget = ctx.request.reasoning_budget
    if strict and not ctx.thinking_forced_open and (ctx.thinking_off or budget == 0):
        # Thinking is off (or has no budget) and the prompt left no block open: the grammar
        # writes none, so a forced call is the first thing the model writes.
        return None
    stops = [r.end] if strict else [r.end, *ctx.end_markers]
    body = tag(tags.REASONING, until(r.end) if len(stops) == 1 else until_one_of(*stops))
    close = tag(tags.REASONING_CLOSE, literal(r.end))
    if strict and budget is not None:
        body = tag(tags.REASONING, bounded_text(r.end, budget))
        close = tag(tags.REASONING_CLOSE, spelled(r.end))
    with_calls: Parser | None = None
    if calls is not None and not strict:
        delims = list(dict.fromkeys([*stops, *openers]))
        text = negate(choice(*[literal(m) for m in stops])) + any_char() + until_one_of(*delims)
        body = with_calls = zero_or_more(choice(calls, tag(tags.REASONING, text)))
    repeated = None if strict else _repeated_markup(ctx)
    if repeated is not None:
        close = close + repeated
    block = body + (close if strict else optional(close))
    opened_block = ctx.thinking_forced_open or bool(r.start)
    if ends_at is not None and with_calls is None and not strict and openers and opened_block:
        # A whole call ends the block; the empty close node says it was not cut off. A
        # closer right after the calls is the block's late end (not content).
        delims = list(dict.fromkeys([*stops, *openers]))
        not_text = negate(choice(*[literal(m) for m in stops], ends_at))
        chunk = tag(tags.REASONING, not_text + any_char() + until_one_of(*delims))
        # After the calls: the block's late end, or the rest of the block, reasoning
        # written after the call up to its closer (``maybe <tool_call>...</tool_call>
        # hmm</think>Answer.``: no raw closer reaches the content); atomic() holds that
        # text back while streaming until the closer decides it.
        # Further calls there are calls (an opener that starts none stays reasoning).
        rest = negate(choice(*[literal(m) for m in stops])) + any_char() + until_one_of(*delims)
        closed = tag(tags.REASONING_CLOSE, literal(r.end))
        resumed = atomic(zero_or_more(choice(ends_at, tag(tags.REASONING, rest))) + closed)
        late = optional(choice(space() + closed, resumed))
        ended = tag(tags.REASONING_CLOSE, peek(ends_at)) + ends_at + late
        block = zero_or_more(chunk) + optional(choice(close, ended))
    if ctx.thinking_forced_open:
        # Some models repeat the start marker the prompt already wrote.
        return (optional(space() + literal(r.start)) + block) if r.start else block
    if not r.start:
        # DELIMITER without a start marker, thinking not forced on: the block is reasoning
        # only if its end delimiter comes; atomic() holds it back until then (no retraction).
        strict_block = body + close
        return optional(atomic(strict_block if not strict else block))
    opened = space() + literal(r.start) + block
    if strict:
        return optional(opened)
    return optional(choice(opened, opener_left_out(ctx, with_calls)))


# llama.cpp refuses a repetition over 2000 times; longer budgets are written in blocks.
_BLOCK = 1000
# How many of the end marker's first character may stand in a row (``<<`` and ``<<<`` in
# code) inside one piece of bounded text.
_RUN = 8


def bounded_text(end: str, budget: int) -> Parser:
    """At most ``budget`` pieces of text that never hold ``end`` (the grammar's reasoning
    under ``reasoning_budget``).

    GBNF has no bounded "anything but this marker", so the text is spelled in pieces: a
    character other than the marker's first, or a run of the marker's first character and
    the rest of a proper prefix of the marker, followed by a character that neither
    continues it nor starts it again (``</th`` + ``x``). Most pieces are one character, a
    partial marker is one piece; the text may end in a partial marker. Past ``_BLOCK``
    pieces the count is written as whole blocks and a rest, each count spelled one way
    only (no ambiguity for the engine). A marker whose first character comes again inside
    it (``]]>``) gets the safe subset: that character never stands in the text.
    """
    first = end[0]
    pieces: list[Parser] = [char_class("^" + _class_char(first))]
    partials: list[Parser] = []
    if first not in end[1:]:
        run = repeat(literal(first), 1, _RUN)
        for i in range(1, len(end)):
            prefix = run + spelled(end[1:i]) if i > 1 else run
            stop = "".join(_class_char(c) for c in (end[i], first))
            pieces.append(prefix + char_class("^" + stop))
            partials.append(prefix)
    piece = choice(*pieces)
    if budget <= _BLOCK:
        text = repeat(piece, 0, budget)
    else:
        # k pieces are k // _BLOCK whole blocks and k % _BLOCK more: all blocks and at most
        # the budget's rest, or fewer blocks and fewer than a block more.
        blocks, rest_count = divmod(budget, _BLOCK)
        block = repeat(piece, _BLOCK, _BLOCK)
        full = repeat(block, blocks, blocks)
        if rest_count:
            full = seq(full, repeat(piece, 0, rest_count))
        text = choice(full, seq(repeat(block, 0, blocks - 1), repeat(piece, 0, _BLOCK - 1)))
    if partials and budget:
        text = seq(text, optional(choice(*partials)))
    return text


def spelled(text: str) -> Parser:
    """A literal written one character per string: llguidance lexes a string as one greedy
    token, which must not commit to a marker where the bounded text's pieces may stand
    (``</th`` then a space, then ``</think>``)."""
    return seq(*(literal(c) for c in text))


def _class_char(ch: str) -> str:
    """A character as a class spec writes it (escaped where the spec reads it)."""
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else ch


def _repeated_markup(ctx: BuildContext) -> Parser | None:
    """What models repeat right after the block closes, for the lenient parser: a second,
    empty block or a stray closer (Gemma 4's ``<channel|><|channel>thought\n<channel|>``
    or ``<channel|><channel|>``). Markup, neither content nor reasoning; only where the
    markers are markup (a closer after more text stays content as written)."""
    r = ctx.analysis.reasoning
    end, start = r.end.strip(), r.start.strip()
    if len(end) < 3 or end[0] not in "<[|":
        return None
    again: Parser = literal(end)
    if len(start) >= 3 and start[0] in "<[|":
        again = choice(literal(start) + space() + literal(end), again)
    return zero_or_more(space() + again)


def opener_left_out(ctx: BuildContext, with_calls: Parser | None = None) -> Parser:
    """A reasoning block closed without its opener, for the lenient parser.

    Models trained with the opener in the prompt (R1-style, MiniMax's ``</mm:think>``)
    write only the end marker. A bare end marker at the start is an empty block. Text
    before the end marker is reasoning only when the request turned reasoning on
    (``enable_thinking=True``), and only once the end marker comes: atomic() holds that
    text back while streaming (a plain answer then streams only at its end, the cost that
    keeps this off by default). A call opener or the end of the turn ends the wait, so a
    format whose call openers the context does not list (``ctx.call_openers_listed``
    false: a hand-written one) keeps to the empty block. ``with_calls``: the body that
    reads calls inside reasoning (``calls_in_reasoning``); a call then does not end the
    wait.
    """
    r = ctx.analysis.reasoning
    close = tag(tags.REASONING_CLOSE, literal(r.end))
    empty = space() + close
    if ctx.request.enable_thinking is not True or not ctx.call_openers_listed:
        return empty
    if with_calls is not None:
        return choice(empty, atomic(with_calls + close))
    stops = [r.end, *ctx.end_markers, *ctx.call_openers]
    body = until_one_of(*dict.fromkeys(stops)) if len(stops) > 1 else until(r.end)
    return choice(empty, atomic(tag(tags.REASONING, body) + close))


def should_extract_reasoning(analysis: TemplateAnalysis, request: Request, forced: bool) -> bool:
    r = analysis.reasoning
    if request.reasoning_format == "none" or r.mode == ReasoningMode.NONE or not r.end:
        return False
    return forced or bool(r.start) or r.mode == ReasoningMode.DELIMITER
