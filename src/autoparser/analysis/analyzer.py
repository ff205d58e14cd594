"""The analysis entry point: run the reasoning, content and tool phases, cache per source."""

from __future__ import annotations

import dataclasses

from autoparser.analysis.content import analyze_content
from autoparser.analysis.diff import tokens_in
from autoparser.analysis.fingerprints import detect_format
from autoparser.analysis.model import (
    ReasoningAnalysis,
    TemplateAnalysis,
    ToolFormat,
    ToolsAnalysis,
)
from autoparser.analysis.reasoning import analyze_reasoning, generation_prompts
from autoparser.analysis.tools import ToolFindings, analyze_tools, taught_format
from autoparser.analysis.workarounds import apply_workarounds
from autoparser.cache import CACHES, Store
from autoparser.template import Renderer
from autoparser.template.caps import detect_caps, detect_quirks
from autoparser.template.probe import TOOLS_PARAMETER_DEFINITIONS, Probe

_ANALYSES: Store[TemplateAnalysis] = CACHES.store("analysis", 512)


def analyze_template(template: Renderer) -> TemplateAnalysis:
    """The differential analysis of a template, cached per (source, bos, eos) and the date
    its renders read (a pinned ``now`` or an injected clock: a template may print the date)."""
    key = (template.source, template.bos_token, template.eos_token, template.now, template.clock)
    return _ANALYSES.get_or_build(key, lambda: run_analysis(template))


def remember_analysis(template: Renderer, analysis: TemplateAnalysis) -> TemplateAnalysis:
    """Store an analysis computed elsewhere (a saved one, read back) as this template's."""
    key = (template.source, template.bos_token, template.eos_token, template.now, template.clock)
    return _ANALYSES.put(key, analysis)


def clear_cache() -> None:
    """Forget every analysis (for tests and benchmarks that measure cold work)."""
    _ANALYSES.clear()


def run_analysis(template: Renderer) -> TemplateAnalysis:
    """Analyse without the cache (for benchmarks and tests)."""
    # Raises TemplateError when no conversation renders at all. The caps (probed once per
    # template text) answer the questions they share with the analysis: tool calls,
    # non-null content, the reasoning field. The analysis' own variants are rendered
    # through a probe of its own, so a run is cold whatever ran before (benchmarks).
    caps = detect_caps(template)
    quirks = detect_quirks(template)
    probe = Probe(
        template,
        caps.thinking_switch,
        quirks.tools_as_functions,
        call_turn_text=quirks.call_turn_text,
        tools_shape=TOOLS_PARAMETER_DEFINITIONS if quirks.tools_as_parameter_definitions else "",
        tools_list=quirks.requires_tools_list,
    )
    # Arguments as ``apply`` passes them: JSON text where objects would print as a Python
    # repr (InternLM2 then writes a JSON call, ``{"name": ..., "arguments": {...}}``).
    probe.args_as_string = quirks.arguments_as_json_string
    prompts = generation_prompts(probe)
    supports_tools = caps.supports_tool_calls
    reasoning, after_reasoning = analyze_reasoning(
        probe, prompts, supports_tools, quirks.reasoning_field
    )
    content, eot = analyze_content(probe, reasoning, after_reasoning, supports_tools)
    findings = (
        analyze_tools(probe, reasoning, eot) if supports_tools else ToolFindings(ToolsAnalysis())
    )
    if supports_tools and findings.tools.format.mode is ToolFormat.NONE:
        findings = _calls_shown_otherwise(probe, reasoning, eot) or findings
    if caps.supports_tools and findings.tools.format.mode is ToolFormat.NONE:
        # No call renders: the format the tool instructions teach, if they show one.
        taught = taught_format(probe)
        findings = ToolFindings(taught, findings.end_of_turn) if taught else findings
    content = dataclasses.replace(content, requires_non_null_content=caps.requires_non_null_content)
    stops = tuple(dict.fromkeys(s for s in (eot, findings.end_of_turn) if s))
    analysis = TemplateAnalysis(
        reasoning=reasoning,
        content=content,
        tools=findings.tools,
        generation_prompt=prompts.default,
        end_of_turn=stops,
        handler=detect_format(template.source),
    )
    analysis = apply_workarounds(template.source, analysis)
    return dataclasses.replace(analysis, preserved_tokens=preserved_tokens(analysis))


def _calls_shown_otherwise(
    probe: Probe, reasoning: ReasoningAnalysis, eot: str
) -> ToolFindings | None:
    """The tool findings of a template whose calls render, but not in the probe's plain
    call turn: only with ids naming the calls (the template writes the id where the name
    goes, and models write ids of that convention, functions.NAME:IDX), or only in
    history, when another message follows the turn (the last turn is a prefill)."""
    for variant in (
        probe.with_named_ids(),
        probe.with_follow_up("tool"),
        probe.with_follow_up("user"),
    ):
        findings = analyze_tools(variant, reasoning, eot)
        if findings.tools.format.mode is not ToolFormat.NONE:
            return findings
    return None


def preserved_tokens(analysis: TemplateAnalysis) -> tuple[str, ...]:
    """Every marker, in a stable order, without duplicates.

    A marker string may hold several tokens or trailing text (``"<|tool_call_start|>["``),
    so each whole ``<...>``/``[...]`` marker inside it is listed; a string that opens a
    tag it does not close (``"<function="``) is listed as it is. Plain punctuation and
    whitespace (``">"``, ``", "``) are not tokens to preserve.
    """
    r, c, t = analysis.reasoning, analysis.content, analysis.tools
    candidates = (
        r.start,
        r.end,
        c.start,
        c.end,
        t.format.section_start,
        t.format.section_end,
        t.format.per_call_start,
        t.format.per_call_end,
        t.format.content_wrap_start,
        t.format.content_wrap_end,
        t.function.name_prefix,
        t.function.name_suffix,
        t.function.close,
        t.function.name_suffix_after_name,
        t.arguments.start,
        t.arguments.end,
        t.arguments.name_prefix,
        t.arguments.name_suffix,
        t.arguments.name_suffix_json,
        t.arguments.separator,
        t.arguments.value_prefix,
        t.arguments.value_suffix,
        t.call_id.prefix,
        t.call_id.suffix,
    )
    tokens: list[str] = []
    for text in candidates:
        found = tokens_in(text)
        tokens.extend(found)
        rest = text.strip()
        if not found and rest[:1] in ("<", "["):
            tokens.append(rest)
    return tuple(dict.fromkeys(tokens))
