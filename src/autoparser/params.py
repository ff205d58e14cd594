"""Analysis + request -> ChatParams (prompt, parser, grammar, triggers).

Above ``generate`` (the builders), ``formats`` (the handlers, dispatched by name) and
``stream`` (what ``ChatParams.parse`` and ``stream`` run): the one place that puts them
together for a request.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence

from autoparser.analysis.model import ReasoningMode, TemplateAnalysis
from autoparser.cache import CACHES, Store
from autoparser.definition import ParserDefinition
from autoparser.errors import RequestError, SchemaError
from autoparser.formats import format_of
from autoparser.generate.context import BuildContext, normalize_markers, string_padding
from autoparser.generate.memo import request_key
from autoparser.generate.reasoning import should_extract_reasoning
from autoparser.generate.request import Request, normalize_request
from autoparser.generate.sections import call_opener
from autoparser.message import ChatMessage
from autoparser.peg import GrammarTrigger, Parser
from autoparser.stream import CallIdPolicy, CallIds, StreamParser, parse_text
from autoparser.stream.spans import LabelledSpan, labelled_spans


@dataclasses.dataclass(frozen=True, eq=False)
class ChatParams:
    """Everything needed to run one request: the prompt, the grammar and the output parser.

    ``parse`` and ``stream`` share one parser definition and one call-id generator, so a
    stream of the output, however split, ends with the same message ``parse`` returns.
    """

    prompt: str
    # What ``add_generation_prompt`` appended to ``prompt`` (``generation_prompt``), or how
    # to find it: only when first read, since it takes another render of the whole
    # conversation and its tools, which most requests never need.
    generation_prompt_source: str | Callable[[], str] = dataclasses.field(repr=False)
    grammar: str | None
    grammar_lazy: bool
    grammar_triggers: list[GrammarTrigger]
    preserved_tokens: list[str]
    additional_stops: list[str]
    thinking_forced_open: bool
    definition: ParserDefinition = dataclasses.field(repr=False)
    call_ids: CallIdPolicy = dataclasses.field(repr=False)
    # What the export to other engines' formats needs (the parser itself does not).
    analysis: TemplateAnalysis | None = dataclasses.field(default=None, repr=False)
    extract_reasoning: bool = True
    request: Request | None = dataclasses.field(default=None, repr=False)
    # Where the caller's text (message contents, reasoning, tool results) is in ``prompt``,
    # as sorted [start, end) spans; None unless ``apply(..., provenance=True)`` was asked.
    caller_spans: tuple[tuple[int, int], ...] | None = dataclasses.field(default=None, repr=False)

    @property
    def parser(self) -> Parser:
        """The PEG parser of the model's output (what ``parse`` and ``stream`` run)."""
        return self.definition.parser

    @functools.cached_property
    def generation_prompt(self) -> str:
        """What ``add_generation_prompt`` appended to ``prompt`` ("" without it)."""
        source = self.generation_prompt_source
        return source if isinstance(source, str) else source()

    def parse(
        self,
        text: str,
        partial: bool = False,
        *,
        finish_reason: str | None = None,
        tolerance: str = "keep",
    ) -> ChatMessage:
        """The message in ``text``: the model's whole output, or with ``partial`` the
        output so far (a call appears once it is whole and valid, as with ``stream()``).

        ``finish_reason``: the engine's reason for stopping; ``"length"`` (the token limit)
        makes a call the output ends inside a cut call, not a call, even when only its close
        tag is missing (see ``StreamParser.finish``).

        ``tolerance``: ``"keep"`` (default) keeps a call read only by the format's markers
        (an undeclared argument) with a finding; ``"reject"`` refuses it (its text is
        content). What was tolerated or refused is ``ChatMessage.findings``.
        """
        return parse_text(
            self.definition,
            self.call_ids,
            text,
            partial=partial,
            finish_reason=finish_reason,
            tolerance=tolerance,
        )

    def stream(self, tool_call_deltas: str = "whole", *, tolerance: str = "keep") -> StreamParser:
        """A new stream parser for one generation.

        ``tool_call_deltas``: ``"whole"`` (default) sends each tool call in one delta once
        it is complete and valid, so the deltas always add up to ``parse`` of the whole
        text; ``"incremental"`` sends the name, then argument fragments as they are
        written, and a call that then breaks cannot be taken back (see
        ``StreamParser.dropped_calls``). Any other value is a ``RequestError``.
        ``tolerance``: as for ``parse``.
        """
        return StreamParser(
            self.definition, self.call_ids, tool_call_deltas=tool_call_deltas, tolerance=tolerance
        )

    def grammar_fields(self) -> dict[str, object]:
        """The grammar and what an engine needs with it (laziness, triggers, preserved tokens,
        stops, reasoning forced open) as JSON-ready data: `autoparser grammar --json`."""
        return {
            "grammar": self.grammar,
            "grammar_lazy": self.grammar_lazy,
            "grammar_triggers": [t.to_dict() for t in self.grammar_triggers],
            "preserved_tokens": self.preserved_tokens,
            "additional_stops": self.additional_stops,
            "thinking_forced_open": self.thinking_forced_open,
        }

    def trigger_start(self, text: str) -> int:
        """Where a lazy grammar switches on in ``text`` as an engine applies each trigger
        kind (word / token: where it appears; pattern: its search match; pattern_full: the
        whole text must match), from the first capture group if any; -1: never. A grammar
        checker feeds the engine's grammar the text from there."""
        starts: list[int] = []
        for trig in self.grammar_triggers:
            if trig.kind in ("word", "token"):
                at = text.find(trig.value)
            else:
                rx = re.compile(trig.value)
                m = rx.search(text) if trig.kind == "pattern" else rx.fullmatch(text)
                at = -1 if m is None else (m.start(1) if rx.groups else m.start())
            if at >= 0:
                starts.append(at)
        return min(starts, default=-1)

    def labelled_spans(self, text: str) -> tuple[LabelledSpan, ...]:
        """What each span of ``text`` (a model output) is parsed as: reasoning, content, a
        call's name or arguments, or markup; the studio colours an output with it."""
        return labelled_spans(self.parser, text)

    def to_response_template(self) -> dict[str, object]:
        """This request's output format as a transformers response template (version 1).

        Raises :class:`autoparser.errors.ExportError` naming why when the format cannot be
        expressed in it (Python-literal calls, channels, calls without markers...), or
        cannot read back what this request's tools take (object or array arguments a
        template prints as Python literals). See docs/integrations.md.
        """
        from autoparser.errors import ExportError
        from autoparser.generate.pythonic import is_pythonic
        from autoparser.generate.response_template import response_template

        if self.analysis is None:
            raise ExportError("these params were built without an analysis to export")
        generation_prompt = self.generation_prompt if self.generation_prompt in self.prompt else ""
        return response_template(
            self.analysis,
            generation_prompt=generation_prompt,
            extract_reasoning=self.extract_reasoning,
            thinking_forced_open=self.thinking_forced_open,
            pythonic_calls=is_pythonic(self.analysis),
            request=self.request,
            format_refusal=format_of(self.analysis).export_refusal,
        )


# Tool schemas (canonical JSON) known to convert whole: formats that convert each argument
# on its own would otherwise convert every tool's schema a second time, on every new set.
_CONVERTIBLE: Store[bool] = CACHES.store("convertible_schemas", 8192)


def _check_tool_schemas(request: Request, converted: frozenset[str] = frozenset()) -> None:
    """Each tool's (and the response format's) schema converts, or a RequestError names
    it; schemas the grammar already converted whole (``converted``) are not converted again."""
    from autoparser.peg.gbnf_emit import schema_key
    from autoparser.schema import schema_rules

    for i, tool in enumerate(request.tools):
        key = schema_key(dict(tool.parameters))
        if key in converted or _CONVERTIBLE.get(key) is not None:
            continue
        try:
            schema_rules(dict(tool.parameters), f"check-{i}")
        except SchemaError as exc:
            raise RequestError(f"tools[{i}].function.parameters: {exc}") from exc
        _CONVERTIBLE.put(key, True)
    response = request.response_schema
    if response is not None and schema_key(dict(response)) not in converted:
        try:
            schema_rules(dict(response), "check-response")
        except SchemaError as exc:
            raise RequestError(f"response_format: {exc}") from exc


def _after_reasoning(triggers: list[GrammarTrigger], reasoning_end: str) -> list[GrammarTrigger]:
    r"""Triggers that fire only after the reasoning block the prompt opened has closed.

    A call marker the model mentions while thinking must not switch the grammar on, so
    word triggers become patterns: the end marker, then the first call marker after it
    (its start is the first capture group, where the grammar takes over). A search, not
    a whole-output match: an engine rescans its triggers over the whole output at every
    token, and a full match that starts with ``[\s\S]*?`` costs llama.cpp's std::regex
    about five times a word's scan; this pattern costs about what the word does.
    """
    out = []
    for t in triggers:
        if t.kind == "word":
            body = re.escape(t.value)
        elif t.kind == "pattern":
            body = t.value
        else:
            out.append(t)
            continue
        pattern = rf"{re.escape(reasoning_end)}[\s\S]*?({body})"
        why = (
            f"the prompt opened reasoning: a call marker written before {reasoning_end!r} "
            "must not start the grammar, so the trigger is that marker after the end of "
            "the reasoning (a word trigger on the call marker would fire inside the "
            f"reasoning; one on {reasoning_end!r} would put every answer, with or without "
            "a call, under the grammar)"
        )
        out.append(GrammarTrigger("pattern", pattern, why))
    return out


def _merged(found: Sequence[str], added: Sequence[str]) -> list[str]:
    """The analysis' markers, then those a hand-written format adds; no empties, no repeats."""
    return list(dict.fromkeys(m for m in (*found, *added) if m))


def is_forced_open(analysis: TemplateAnalysis, prompt: str, enable_thinking: bool | None) -> bool:
    """Does the output start inside a reasoning block? (``TemplateAnalysis.
    prompt_opens_reasoning``, the one rule.)"""
    return analysis.prompt_opens_reasoning(prompt, enable_thinking)


def prompt_closes_reasoning(analysis: TemplateAnalysis, prompt: str, forced: bool) -> bool:
    """Does the prompt end with a closed reasoning block? Then thinking is off for this
    request: an empty block (a template's thinking-off prompt, ``<think>\n\n</think>\n``),
    or the closer alone where the template's thinking-off prompt writes it so (DeepSeek's
    ``<｜Assistant｜></think>``). A closer that is also the turn header the generation
    prompt writes (HyperCLOVA X's ``<|im_end|>\n<|im_start|>assistant``) is neither."""
    r = analysis.reasoning
    end, start = r.end.strip(), r.start.strip()
    text = prompt.rstrip()
    if forced or not end or not text.endswith(end):
        return False
    if start and text[: -len(end)].rstrip().endswith(start):
        return True
    return r.mode is ReasoningMode.FORCED_CLOSED and end in r.disabled_prompt_suffix


def build_params(
    analysis: TemplateAnalysis,
    *,
    prompt: str = "",
    generation_prompt: str = "",
    tools: Sequence[Mapping[str, object]] | None = None,
    tool_choice: object = "auto",
    parallel_tool_calls: bool | None = None,
    response_format: Mapping[str, object] | None = None,
    enable_thinking: bool | None = None,
    reasoning_format: str = "auto",
    call_id_seed: int | None = None,
    calls_in_reasoning: bool = False,
    reasoning_budget: int | None = None,
) -> ChatParams:
    """ChatParams from an analysis and an already rendered prompt (no template needed)."""
    request = normalize_request(
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        response_format=response_format,
        enable_thinking=enable_thinking,
        reasoning_format=reasoning_format,
        template_supports_parallel=analysis.tools.parallel_calls,
        calls_in_reasoning=calls_in_reasoning,
        reasoning_budget=reasoning_budget,
    )
    return params_for_request(
        analysis,
        request,
        prompt=prompt,
        generation_prompt=generation_prompt,
        call_id_seed=call_id_seed,
    )


@dataclasses.dataclass(frozen=True)
class _Built:
    """What a request builds that does not depend on the prompt's text itself."""

    ctx: BuildContext
    definition: ParserDefinition
    grammar: str | None
    lazy: bool
    triggers: tuple[GrammarTrigger, ...]


# Keyed by (id(analysis), request key, prompt facts, with_grammar); see generate/memo.py.
_CONTEXTS: Store[tuple[BuildContext, str]] = CACHES.store("request_contexts", 256)
_BUILT: Store[_Built] = CACHES.store("request_builds", 256)


def _detached(request: Request) -> Request:
    """The request with copies of its schemas (what a memo keeps must not change when the
    caller later changes its tool dicts): a JSON round trip, which a request whose key is
    JSON takes, several times faster than ``copy.deepcopy`` for a thousand tools."""
    schemas = json.loads(
        json.dumps([[t.parameters for t in request.tools], request.response_schema])
    )
    tools = tuple(
        dataclasses.replace(t, parameters=p) for t, p in zip(request.tools, schemas[0], strict=True)
    )
    return dataclasses.replace(request, tools=tools, response_schema=schemas[1])


def _context(
    analysis: TemplateAnalysis, request: Request, forced: bool
) -> tuple[BuildContext, str]:
    """The build context of a request before its prompt is looked at, and the call opener a
    prompt may end with (a format that continues a call the prompt started)."""
    ctx = BuildContext(
        analysis=normalize_markers(analysis),
        request=request,
        thinking_forced_open=forced,
        extract_reasoning=should_extract_reasoning(analysis, request, forced),
        string_padding=string_padding(analysis),
        call_openers_listed=format_of(analysis).call_openers_listed,
    )
    return ctx, call_opener(ctx)


def _build(ctx: BuildContext, with_grammar: bool) -> _Built:
    from autoparser.peg import grammar as emit_grammar

    # The analysis names a hand-written format, or "" (STANDARD): the generated one.
    definition = format_of(ctx.analysis)(ctx)
    request = ctx.request
    grammar_text: str | None = None
    triggers: list[GrammarTrigger] = []
    lazy = False
    if with_grammar and definition.grammar_parser is not None:
        try:
            g = emit_grammar(definition.grammar_parser, lazy=definition.grammar_lazy)
        except SchemaError as exc:
            _check_tool_schemas(request)  # names the tool whose schema fails, if one does
            raise RequestError(f"tools: schema not expressible as a grammar: {exc}") from exc
        _check_tool_schemas(request, g.schemas)
        grammar_text = g.text
        lazy = definition.grammar_lazy
        if lazy:
            triggers = list(definition.grammar_triggers or g.triggers)
            if not triggers:
                triggers = [GrammarTrigger("word", m) for m in definition.trigger_markers]
            if not triggers:
                lazy = False
            elif ctx.thinking_forced_open and ctx.extract_reasoning:
                triggers = _after_reasoning(triggers, ctx.analysis.reasoning.end)
    return _Built(ctx, definition, grammar_text, lazy, tuple(triggers))


def params_for_request(
    analysis: TemplateAnalysis,
    request: Request,
    *,
    prompt: str = "",
    generation_prompt: str | Callable[[], str] = "",
    call_id_seed: int | None = None,
    with_grammar: bool = True,
) -> ChatParams:
    """ChatParams from an analysis, a validated request and its rendered prompt.

    ``with_grammar=False`` builds only the parser (``grammar`` None, no triggers): for
    callers that parse and never constrain, like the analysis' self-check. What does not
    depend on the prompt's text is built once per (analysis, request) and reused.
    """
    forced = is_forced_open(analysis, prompt, request.enable_thinking)
    key = request_key(request)
    if key is None:
        ctx, opener = _context(analysis, request, forced)
    else:
        # Built from a copy, so that a caller changing its tool dicts later cannot change
        # what the memo hands to the next request with the original tools.
        ctx, opener = _CONTEXTS.get_or_build(
            (id(analysis), key, forced),
            lambda: _context(analysis, _detached(request), forced),
            owner=analysis,
        )
    # Like a forced-open reasoning block: a prompt ending with the call opener has already
    # started the first call (e.g. a ">>>name\n{args}" format whose prompt ends with ">>>").
    # That fact is all builders see of the prompt, so what they build is memoised across
    # prompts.
    opened = bool(opener) and not forced and prompt.rstrip().endswith(opener)
    off = request.enable_thinking is False or prompt_closes_reasoning(analysis, prompt, forced)
    ctx = dataclasses.replace(ctx, call_opened=opened, thinking_off=off)
    if key is None:
        built = _build(ctx, with_grammar)
    else:
        built = _BUILT.get_or_build(
            (id(analysis), key, forced, opened, off, with_grammar),
            lambda: _build(ctx, with_grammar),
            owner=analysis,
        )
    ctx, definition = built.ctx, built.definition

    call_ids = CallIdPolicy(
        expects_call_ids=definition.expects_call_ids,
        call_ids=CallIds(call_id_seed),
        model_ids=not analysis.tools.call_id.generated,
    )
    return ChatParams(
        prompt=prompt,
        generation_prompt_source=generation_prompt,
        grammar=built.grammar,
        grammar_lazy=built.lazy,
        grammar_triggers=list(built.triggers),
        preserved_tokens=_merged(analysis.preserved_tokens, definition.preserved_tokens),
        additional_stops=_merged(
            tuple(m for m in analysis.end_of_turn if m not in definition.not_stops),
            definition.additional_stops,
        ),
        thinking_forced_open=forced,
        definition=definition,
        call_ids=call_ids,
        analysis=ctx.analysis,
        extract_reasoning=ctx.extract_reasoning,
        request=request,
    )
