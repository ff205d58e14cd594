"""Element markup the analysis reads: special-token elements with attributes and typed
argument headers (Kimi-K3 style), and fence tokens before every tag with XML closers that
repeat the argument name (MiniMax-M3 style). Own templates, then the corpus ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.paths import corpus_templates, own_path

from autoparser import ChatTemplate
from autoparser.analysis.analyzer import run_analysis
from autoparser.analysis.diff import diff_split, segmentize
from autoparser.template.probe import NEEDLES

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "exact": {"type": "boolean"},
                "opts": {"type": "object"},
            },
            "required": ["city"],
        },
    },
}
ARGS = {"city": "Paris", "days": 3, "exact": True, "opts": {"a": [1, None]}}


def _load(stem: str) -> ChatTemplate:
    path = own_path(stem)
    return ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")


def _round_trip(template: ChatTemplate, arguments: dict[str, Any]) -> None:
    """Render a two-call turn, cut it after the generation prompt, parse it back."""
    user = {"role": "user", "content": "hi"}
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
        for i in range(2)
    ]
    turn = {"role": "assistant", "content": "", "tool_calls": calls}
    prompt = template.render([user], tools=[WEATHER], add_generation_prompt=True)
    full = template.render([user, turn], tools=[WEATHER])
    analysis = template.analyze()
    text = full[len(prompt) :] if full.startswith(prompt) else full
    for marker in analysis.end_of_turn:
        text = text.split(marker)[0]
    params = template.apply([user], tools=[WEATHER], parallel_tool_calls=True)
    parsed = params.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("get_weather", arguments)
    ] * 2, text


def test_element_runs_are_one_marker() -> None:
    segs = segmentize('<|open|>think<|sep|>x<|open|>call tool="f"<|sep|>')
    assert [s.value for s in segs if s.is_marker] == ["<|open|>think<|sep|>", "<|open|>", "<|sep|>"]


def test_diff_keeps_an_element_whole_only_when_both_sides_have_one() -> None:
    d = diff_split("a<|close|>think<|sep|>z", "a<|close|>tools<|sep|>z")
    assert (d.left, d.right) == ("<|close|>think<|sep|>", "<|close|>tools<|sep|>")
    # A token followed by different text: the boundary stays after the token.
    d = diff_split("<|start|>assistant<|channel|>x", "<|start|>assistant to=f<|channel|>x")
    assert d.prefix == "<|start|>assistant"


def test_attribute_elements_analysis() -> None:
    a = run_analysis(_load("attr_elements"))
    assert (a.reasoning.mode.value, a.reasoning.start, a.reasoning.end) == (
        "forced_open",
        "<|open|>think<|sep|>",
        "<|close|>think<|sep|>",
    )
    assert (a.content.start, a.content.end) == ("<|open|>answer<|sep|>", "<|close|>answer<|sep|>")
    t = a.tools
    assert (t.format.section_start, t.format.section_end) == (
        "<|open|>calls<|sep|>",
        "<|close|>calls<|sep|>",
    )
    assert t.arguments.value_suffix == "<|close|>arg<|sep|>"
    assert t.arguments.name_prefix == '<|open|>arg key="'
    assert dict(t.arguments.name_suffix_by_type)["boolean"] == '" type="boolean"<|sep|>'
    assert dict(t.arguments.name_suffix_by_type)["integer"] == '" type="number"<|sep|>'
    # index="1", index="2": the call's position, written by the template.
    assert t.call_id.generated and t.call_id.prefix == '" index="'


def test_attribute_elements_round_trip() -> None:
    _round_trip(_load("attr_elements"), ARGS)


def test_fenced_elements_analysis() -> None:
    a = run_analysis(_load("fenced_elements"))
    t = a.tools
    fence = "}~[fence]~{"
    assert t.format.section_start == fence + "<calls>"
    assert t.function.name_prefix == fence + '<invoke name="'
    assert (t.arguments.name_prefix, t.arguments.name_suffix) == (fence + "<", ">")
    assert (t.arguments.value_suffix, t.arguments.value_suffix_after_name) == (fence + "</", ">")


def test_fenced_elements_round_trip() -> None:
    _round_trip(_load("fenced_elements"), {"city": "Paris", "days": 3})


CORPUS = {p.stem: p for p in corpus_templates()}


@pytest.mark.parametrize("stem", ["Kimi-K3", "MiniMax-M3"])
def test_corpus_markers_hold_no_probe_needle(stem: str) -> None:
    if stem not in CORPUS:
        pytest.skip("corpus template not available")
    path = CORPUS[stem]
    template = ChatTemplate(path.read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")
    a = run_analysis(template)
    assert a.tools.format.mode.value == "tag_with_tagged"
    for token in a.preserved_tokens:
        assert not any(n in token for n in NEEDLES), token
