"""The reasoning block: its parser and whether reasoning is extracted at all."""

from __future__ import annotations

from autoparser import tags
from autoparser.analysis.model import ReasoningMode, TemplateAnalysis
from autoparser.generate.context import BuildContext
from autoparser.generate.request import Request
from autoparser.peg import Parser, atomic, literal, optional, space, tag, until, until_one_of


def reasoning_parser(ctx: BuildContext, strict: bool) -> Parser | None:
    """The reasoning block for the analysis' mode, or None when reasoning is not extracted.

    Forced open (the prompt opened the block, or a DELIMITER template with thinking on):
    everything up to the end marker is reasoning. Otherwise an optional start ... end block
    at the very beginning. The lenient parser also stops reasoning at an end-of-turn marker
    and tolerates a missing end marker (a truncated block).
    """
    r = ctx.analysis.reasoning
    if not ctx.extract_reasoning or not r.end:
        return None
    stops = [r.end] if strict else [r.end, *ctx.end_markers]
    body = tag(tags.REASONING, until(r.end) if len(stops) == 1 else until_one_of(*stops))
    close = tag(tags.REASONING_CLOSE, literal(r.end))
    block = body + (close if strict else optional(close))
    if ctx.thinking_forced_open:
        # Some models repeat the start marker the prompt already wrote.
        return (optional(space() + literal(r.start)) + block) if r.start else block
    if not r.start:
        # DELIMITER without a start marker, thinking not forced on: the block is reasoning
        # only if its end delimiter comes; atomic() holds it back until then (no retraction).
        strict_block = body + close
        return optional(atomic(strict_block if not strict else block))
    return optional(space() + literal(r.start) + block)


def should_extract_reasoning(analysis: TemplateAnalysis, request: Request, forced: bool) -> bool:
    r = analysis.reasoning
    if request.reasoning_format == "none" or r.mode == ReasoningMode.NONE or not r.end:
        return False
    return forced or bool(r.start) or r.mode == ReasoningMode.DELIMITER
