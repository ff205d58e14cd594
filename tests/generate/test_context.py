"""What every parser builder shares: marker normalisation, rule names, sequence helpers."""

from __future__ import annotations

import dataclasses

import pytest

from autoparser.analysis.model import (
    ArgumentsAnalysis,
    ContentAnalysis,
    FunctionAnalysis,
    ReasoningAnalysis,
    TemplateAnalysis,
    ToolFormatAnalysis,
    ToolsAnalysis,
)
from autoparser.generate.context import (
    BuildContext,
    argument_rule,
    choice_of,
    closing,
    effective_markers,
    longest_name_first,
    normalize_markers,
    rule_part,
    seq_of,
    string_padding,
    tool_rule,
)
from autoparser.generate.request import Request, ToolSpec
from autoparser.peg import literal, optional, seq

OBJECT = {"type": "object", "properties": {}}


def _ctx(analysis: TemplateAnalysis, *tools: ToolSpec) -> BuildContext:
    return BuildContext(analysis, Request(tools=tools), False, True)


def test_normalised_markers_lose_their_whitespace() -> None:
    analysis = TemplateAnalysis(
        reasoning=ReasoningAnalysis(start="<think>\n", end="\n</think>\n\n"),
        content=ContentAnalysis(start=" <r>", end="</r>\n"),
        tools=ToolsAnalysis(
            format=ToolFormatAnalysis(
                per_call_start="<tool_call>\n", per_call_end="\n</tool_call>"
            ),
            call_separator="\n",
        ),
        end_of_turn=("<|im_end|>\n", "\n"),
    )
    out = normalize_markers(analysis)
    assert (out.reasoning.start, out.reasoning.end) == ("<think>", "</think>")
    assert (out.content.start, out.content.end) == ("<r>", "</r>")
    assert out.tools.format.per_call_start == "<tool_call>"
    assert out.tools.format.per_call_end == "</tool_call>"
    assert out.tools.call_separator == ""  # whitespace-only markers become absent
    assert out.end_of_turn == ("<|im_end|>",)


def test_string_padding_reads_the_markers_as_rendered() -> None:
    def padding(prefix: str, suffix: str) -> tuple[bool, bool]:
        arguments = ArgumentsAnalysis(value_prefix=prefix, value_suffix=suffix)
        return string_padding(TemplateAnalysis(tools=ToolsAnalysis(arguments=arguments)))

    assert padding(">\n", "\n</parameter>") == (True, True)
    assert padding(">", "</parameter>") == (False, False)
    assert padding(">\n", "</parameter>") == (True, False)
    assert padding(">", "") == (True, True)  # no suffix: a value ends at the next marker


@pytest.mark.parametrize(
    ("name", "part"),
    [("get_weather", "get-weather"), ("ns.tool", "ns-tool"), ("__x__", "x"), ("ü", "x")],
)
def test_rule_parts_are_gbnf_safe(name: str, part: str) -> None:
    assert rule_part(name) == part


def test_names_that_sanitise_alike_get_distinct_rules() -> None:
    a, b, c = ToolSpec("get.x", OBJECT), ToolSpec("get_x", OBJECT), ToolSpec("other", OBJECT)
    ctx = _ctx(TemplateAnalysis(), a, b, c)
    assert tool_rule(ctx, c) == "other"
    assert tool_rule(ctx, a).startswith("get-x-") and tool_rule(ctx, a) != tool_rule(ctx, b)
    twins = ToolSpec("f", {"type": "object", "properties": {"a.b": {}, "a_b": {}, "c": {}}})
    ctx = _ctx(TemplateAnalysis(), twins)
    assert argument_rule(ctx, twins, "c") == "f-c"
    assert argument_rule(ctx, twins, "a.b") != argument_rule(ctx, twins, "a_b")
    assert argument_rule(ctx, twins, None) == "f-any"


def test_longest_names_come_first() -> None:
    tools = [ToolSpec(n, OBJECT) for n in ("get", "get_weather", "ge")]
    assert [t.name for t in longest_name_first(tools)] == ["get_weather", "get", "ge"]


def test_sequence_and_choice_helpers() -> None:
    assert repr(seq_of("a", None, "")) == repr(literal("a"))
    assert repr(seq_of("a", literal("b"))) == repr(seq(literal("a"), literal("b")))
    with pytest.raises(ValueError, match="nothing to sequence"):
        seq_of(None, "")
    with pytest.raises(ValueError, match="no alternatives"):
        choice_of([])
    only = literal("x")
    assert choice_of([only]) is only
    assert closing("", strict=True) is None
    assert repr(closing("</x>", strict=True)) == repr(literal("</x>"))
    assert repr(closing("</x>", strict=False)) == repr(optional(literal("</x>")))


def test_a_call_opener_that_is_the_name_prefix_is_not_written_twice() -> None:
    fmt = ToolFormatAnalysis(section_start="[", section_end="]", per_call_start="<f=")
    analysis = TemplateAnalysis(
        tools=ToolsAnalysis(format=fmt, function=FunctionAnalysis(name_prefix="<f="))
    )
    assert effective_markers(_ctx(analysis)) == ("[", "]", "", fmt.per_call_end)
    plain = dataclasses.replace(analysis, tools=ToolsAnalysis(format=fmt))
    assert effective_markers(_ctx(plain)) == ("[", "]", "<f=", fmt.per_call_end)
