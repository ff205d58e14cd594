"""Fingerprinted fixes for templates that defeat the differential analysis.

Each workaround is one small function: it recognises its template by a distinctive
substring of the source and patches the analysis, with a comment on why the diffs cannot
find what it sets. Fewer is better; every one has a test. Hand-written formats (templates
that are not an instance of the analysed families at all) are recognised by their own
fingerprints in ``autoparser.formats`` and named in ``TemplateAnalysis.handler``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from autoparser.analysis.model import (
    ArgumentsAnalysis,
    ContentAnalysis,
    ContentMode,
    ReasoningAnalysis,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolFormatAnalysis,
    ToolsAnalysis,
)

Workaround = Callable[[str, TemplateAnalysis], TemplateAnalysis | None]


def granite_think_response(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """Granite 3.3: the markers exist only in the system prompt's instructions.

    With ``thinking=True`` the template asks the model (in prose) to write
    ``<think></think>`` then ``<response></response>``, but never renders either around a
    message, so no diff can reveal them.
    """
    fingerprint = "Write your thoughts between <think></think> and write your response between"
    if fingerprint not in source:
        return None
    return dataclasses.replace(
        analysis,
        reasoning=ReasoningAnalysis(
            mode=ReasoningMode.TAG_BASED,
            start="<think>",
            end="</think>",
            renders_last_reasoning=analysis.reasoning.renders_last_reasoning,
        ),
        content=ContentAnalysis(
            mode=ContentMode.WRAPPED_WITH_REASONING, start="<response>", end="</response>"
        ),
    )


def stripped_think_history(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """Old DeepSeek-R1 / QwQ style: reasoning is cut from history and never toggled.

    These templates drop everything up to ``</think>`` from assistant content and have no
    ``reasoning_content`` nor ``enable_thinking``; the generation prompt ends with
    ``<think>\\n`` unconditionally, which no pair of renders can tell apart from a role
    header. Applied only when the analysis found no reasoning at all.
    """
    if "split('</think>')" not in source or analysis.reasoning.mode is not ReasoningMode.NONE:
        return None
    gp = analysis.generation_prompt
    forced = gp.rstrip().endswith("<think>")
    return dataclasses.replace(
        analysis,
        reasoning=ReasoningAnalysis(
            mode=ReasoningMode.FORCED_OPEN if forced else ReasoningMode.TAG_BASED,
            start="<think>",
            end="</think>",
            enabled_prompt_suffix=gp[gp.rfind("<think>") :] if forced else "",
            disabled_prompt_suffix=gp[gp.rfind("<think>") :] if forced else "",
        ),
    )


def _tools_if_none_found(
    source: str, analysis: TemplateAnalysis, fingerprint: str, tools: ToolsAnalysis
) -> TemplateAnalysis | None:
    """``tools`` for a template recognised by ``fingerprint`` whose tool format the diffs
    could not find (its turns never render calls); None for any other template."""
    if fingerprint not in source or analysis.tools.format.mode is not ToolFormat.NONE:
        return None
    return dataclasses.replace(analysis, tools=tools)


def granite_tool_call_list(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """Granite 3.3: the call format exists only in the system prompt's instructions.

    The template tells the model (in prose) to "respond only with <|tool_call|> followed by
    a JSON list of tools used" but never renders an assistant turn's tool_calls, so no diff
    can find the format. The model writes ``<|tool_call|>[{"name": "f", "arguments":
    {...}}, ...]``: the JSON-native, array-wrapped family. Applied only when the analysis
    found no tool format.
    """
    return _tools_if_none_found(
        source,
        analysis,
        "respond only with <|tool_call|> followed by a JSON list of tools used",
        ToolsAnalysis(
            format=ToolFormatAnalysis(
                mode=ToolFormat.JSON_NATIVE,
                section_start="<|tool_call|>",
                name_field="name",
                args_field="arguments",
                field_order=("name", "arguments"),
                tools_array_wrapped=True,
                array_open="[",
                array_close="]",
                json_style="spaced",
            ),
            call_separator=", ",
            parallel_calls=True,
        ),
    )


def command_r_action_list(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """Command-R v01 (tool use): the call format exists only in the closing instructions.

    The template lists the tools (in Cohere's own ``parameter_definitions`` shape) and ends
    every prompt with a system turn telling the model to "Write 'Action:' followed by a
    json-formatted list of actions", with an example list of ``{"tool_name": ...,
    "parameters": ...}`` objects in a json fence; its assistant turns print only their
    content, so no diff can show a call. Set what Cohere's later tool-use template of the
    same family renders and is analysed from (``Action:`` then the fenced, indented list).
    Applied only when no format was found.
    """
    return _tools_if_none_found(
        source,
        analysis,
        "followed by a json-formatted list of actions",
        ToolsAnalysis(
            format=ToolFormatAnalysis(
                mode=ToolFormat.JSON_NATIVE,
                section_start="Action:\n```json\n",
                section_end="```",
                name_field="tool_name",
                args_field="parameters",
                field_order=("tool_name", "parameters"),
                tools_array_wrapped=True,
                array_open="[\n    ",
                array_close="\n]",
                json_style="pretty",
                json_indent=4,
            ),
            call_separator=",\n    ",
            parallel_calls=True,
        ),
    )


def lfm2_pythonic_calls(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """LFM2: the template lists tools but never renders an assistant turn's tool_calls.

    LFM2 models write pythonic calls, ``<|tool_call_start|>[f(city="Paris", n=3),
    g()]<|tool_call_end|>`` (double-quoted strings, other values bare), which no diff of
    this template can show. Set the same tag + tagged representation that LFM2.5 (whose
    template renders calls, with single quotes) is analysed as. The fingerprint is LFM2's
    tool list, "List of tools: " then the list, wrapped in ``<|tool_list_start|>`` (LFM2)
    or bare (LFM2.5-Instruct); applied only when no format was found (LFM2.5-8B-A1B's
    template renders its calls, and is analysed from them).
    """
    lists = ("List of tools: <|tool_list_start|>[", "List of tools: [")
    return _tools_if_none_found(
        source,
        analysis,
        next((fingerprint for fingerprint in lists if fingerprint in source), lists[0]),
        ToolsAnalysis(
            format=ToolFormatAnalysis(
                mode=ToolFormat.TAG_WITH_TAGGED,
                section_start="<|tool_call_start|>[",
                section_end="]<|tool_call_end|>",
            ),
            arguments=ArgumentsAnalysis(
                start="(",
                end=")",
                name_suffix='="',
                value_suffix='"',
                separator=", ",
                name_suffix_json="=",
            ),
            call_separator=", ",
            parallel_calls=True,
        ),
    )


WORKAROUNDS: tuple[Workaround, ...] = (
    granite_think_response,
    stripped_think_history,
    granite_tool_call_list,
    lfm2_pythonic_calls,
    command_r_action_list,
)


def apply_workarounds(source: str, analysis: TemplateAnalysis) -> TemplateAnalysis:
    applied: list[str] = []
    for fix in WORKAROUNDS:
        patched = fix(source, analysis)
        if patched is not None:
            analysis = patched
            applied.append(fix.__name__)
    if applied:
        analysis = dataclasses.replace(analysis, workarounds=tuple(applied))
    return analysis
