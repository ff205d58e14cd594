"""What each stretch of an output was parsed as: consecutive spans covering all of it."""

from __future__ import annotations

import itertools

import pytest
from helpers.formats import TOOLS, USER, own_template

from autoparser.params import ChatParams
from autoparser.stream.spans import LabelledSpan, labelled_spans


@pytest.fixture(scope="module")
def params() -> ChatParams:
    return own_template("formats/chatml_hermes.jinja").apply(USER, tools=TOOLS)


def _covers(spans: tuple[LabelledSpan, ...], text: str) -> None:
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for before, after in itertools.pairwise(spans):
        assert before.end == after.start  # consecutive: nothing skipped, nothing twice
        assert before.kind != after.kind  # neighbours of one kind are one span


def test_content_and_a_call_are_labelled_part_by_part(params: ChatParams) -> None:
    text = 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    spans = labelled_spans(params.parser, text)
    _covers(spans, text)
    found = {s.kind: text[s.start : s.end] for s in spans}
    assert found["content"] == "Sure."
    assert found["tool-name"] == "get_weather"
    assert found["tool-args"] == '{"city": "Paris"}'
    assert "tool" in found  # the call's own markup
    assert params.labelled_spans(text) == spans


def test_text_the_parse_stopped_before_is_unparsed_never_lost(params: ChatParams) -> None:
    text = "Plain answer."
    spans = labelled_spans(params.parser, text)
    _covers(spans, text)
    assert "".join(text[s.start : s.end] for s in spans) == text


def test_neighbouring_spans_of_one_kind_are_merged() -> None:
    spans = labelled_spans(own_template("formats/chatml_hermes.jinja").apply(USER).parser, "a b c")
    assert [s.kind for s in spans] == ["content"]
