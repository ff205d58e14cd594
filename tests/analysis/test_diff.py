"""The diff machinery: common ends of two renders, cut so that no marker is ever split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoparser.analysis.diff import (
    attribute_start,
    common_prefix_len,
    common_suffix_len,
    diff_split,
    ends_with_element,
    last_marker_end,
    markers_in,
    safe_common_prefix,
    safe_common_suffix,
    segmentize,
    split_after_first_close,
    tokens_in,
)

PIECES = st.sampled_from(
    ["a", "b", " ", "\n", "<tool_call>", "</tool_call>", "<|im_end|>", "[TOOL_CALLS]", "{", "x"]
)
TEXTS = st.lists(PIECES, max_size=12).map("".join)


@given(TEXTS, TEXTS)
def test_common_ends_are_the_longest_shared(a: str, b: str) -> None:
    n = common_prefix_len(a, b)
    assert a[:n] == b[:n] and (n == min(len(a), len(b)) or a[n] != b[n])
    m = common_suffix_len(a, b)
    assert a[len(a) - m :] == b[len(b) - m :]
    assert m == min(len(a), len(b)) or a[len(a) - m - 1] != b[len(b) - m - 1]


@given(TEXTS, TEXTS, TEXTS)
def test_a_split_rebuilds_both_texts_and_keeps_markers_whole(head: str, a: str, b: str) -> None:
    left, right = head + a + "</tool_call>", head + b + "</tool_call>"
    split = diff_split(left, right)
    assert split.prefix + split.left + split.suffix == left
    assert split.prefix + split.right + split.suffix == right
    for text in (left, right):
        # every single marker of the text is inside one part, none spans a boundary
        rest = text[len(split.prefix) :]
        assert [*tokens_in(split.prefix), *tokens_in(rest)] == tokens_in(text)
        body, tail = rest[: len(rest) - len(split.suffix)], split.suffix
        assert [*tokens_in(body), *tokens_in(tail)] == tokens_in(rest)


def test_a_boundary_inside_a_marker_moves_before_it() -> None:
    a, b = "x<tool_call>", "x<tool_result>"
    assert common_prefix_len(a, b) == 7  # "x<tool_"
    assert safe_common_prefix(a, b) == "x"
    assert safe_common_suffix("<|im_end|>", "<|eot_id|>") == ""
    assert safe_common_suffix("a</tool_call>", "b</tool_call>") == "</tool_call>"


def test_element_runs_are_one_marker_only_where_every_render_has_one() -> None:
    text = "<|start|>assistant<|channel|>final<|message|>hi"
    assert markers_in(text) == ["<|start|>assistant<|channel|>", "<|message|>"]
    assert tokens_in(text) == ["<|start|>", "<|channel|>", "<|message|>"]
    assert ends_with_element("x<|open|>think<|sep|>")
    assert not ends_with_element("x<|open|>") and not ends_with_element("plain")
    split = diff_split("<|start|>assistant<|channel|>a", "<|start|>assistant to=f")
    assert split.prefix == "<|start|>assistant"


def test_segments_alternate_markers_and_text() -> None:
    segments = segmentize('<tool_call>\n{"a": [1]}</tool_call>tail')
    assert [(s.value, s.is_marker) for s in segments] == [
        ("<tool_call>", True),
        ('\n{"a": [1]}', False),  # a JSON array is no marker
        ("</tool_call>", True),
        ("tail", False),
    ]
    assert last_marker_end("a<b>c[END]d") == len("a<b>c[END]")
    assert last_marker_end("no markers") == 0


def test_an_attribute_key_goes_with_its_value() -> None:
    text = "<|start|>assistant to="
    assert attribute_start(text, len(text)) == text.index("to=")
    assert attribute_start("plain text", 5) == 5


def test_split_after_first_close_keeps_the_whitespace_with_the_closer() -> None:
    assert split_after_first_close("</arg_key>\n<arg_value>") == ("</arg_key>\n", "<arg_value>")
    assert split_after_first_close("no closer") == ("no closer", "")
