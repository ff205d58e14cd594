"""Unit tests for autoparser.peg: every parser in full and partial mode."""

from __future__ import annotations

import json
import random

import pytest
from helpers.peg_example import chat_parser

from autoparser.errors import GrammarError
from autoparser.peg import (
    IncrementalParse,
    Node,
    Parser,
    ParseResult,
    ParseStatus,
    Rules,
    any_char,
    atomic,
    char_class,
    chars,
    choice,
    end,
    json_array,
    json_literal,
    json_number,
    json_object,
    json_scan,
    json_string,
    json_value,
    literal,
    negate,
    one_or_more,
    optional,
    peek,
    repeat,
    rest,
    seq,
    space,
    tag,
    token,
    until,
    until_one_of,
    zero_or_more,
)

OK = ParseStatus.SUCCESS
FAIL = ParseStatus.FAIL
MORE = ParseStatus.NEED_MORE_INPUT


def st(p: Parser, text: str, partial: bool = False) -> tuple[ParseStatus, int]:
    r = p.parse(text, partial=partial)
    return r.status, r.pos


def spans(p: Parser, text: str, partial: bool = False) -> list[tuple[str, str, bool]]:
    r = p.parse(text, partial=partial)
    return [(n.tag, n.text(text), n.complete) for n in r.tree.walk() if n.tag]


# --- literal / token -----------------------------------------------------------------------


@pytest.mark.parametrize("lit", ["<tool_call>", "héllo→", "ab"])
def test_literal_full_and_every_proper_prefix(lit: str) -> None:
    p = literal(lit)
    assert st(p, lit) == (OK, len(lit))
    assert st(p, lit + "tail") == (OK, len(lit))
    for k in range(len(lit)):
        prefix = lit[:k]
        assert st(p, prefix, partial=True) == (MORE, k), prefix
        assert st(p, prefix)[0] is FAIL, prefix
    assert st(p, "x" + lit, partial=True)[0] is FAIL
    assert st(p, lit[:-1] + "x", partial=True)[0] is FAIL


def test_token_matches_like_literal_and_is_marked_for_triggers() -> None:
    p = token("<|tool|>")
    assert st(p, "<|tool|>x") == (OK, 8)
    assert st(p, "<|to", partial=True) == (MORE, 4)
    assert st(p, "<|to")[0] is FAIL
    assert repr(p) == "token('<|tool|>')"


def test_string_operands_are_literals() -> None:
    p = "<a>" + until("</a>") + "</a>"
    assert st(p, "<a>xy</a>") == (OK, 9)
    q = "x" | literal("y")
    assert st(q, "y") == (OK, 1)


# --- characters ----------------------------------------------------------------------------


def test_any_char_unicode_and_end() -> None:
    assert st(any_char(), "é!") == (OK, 1)
    assert st(any_char(), "", partial=True) == (MORE, 0)
    assert st(any_char(), "")[0] is FAIL


@pytest.mark.parametrize(
    ("spec", "inside", "outside"),
    [
        ("a-zA-Z_", "qZ_", "0-é"),
        ("[0-9]", "05", "a"),
        ("^<", "a>é", "<"),
        ("\\-\\]x", "-]x", "a"),
        ("α-ω", "βω", "a"),
        ("\\n\\t", "\n\t", " "),
    ],
)
def test_char_class(spec: str, inside: str, outside: str) -> None:
    p = char_class(spec)
    for ch in inside:
        assert st(p, ch) == (OK, 1), (spec, ch)
    for ch in outside:
        assert st(p, ch)[0] is FAIL, (spec, ch)
    assert st(p, "", partial=True) == (MORE, 0)


def test_char_class_reversed_range_is_an_error() -> None:
    with pytest.raises(GrammarError):
        char_class("z-a")


def test_chars_bounds_full_and_partial() -> None:
    p = chars("a-z", 2, 4)
    assert st(p, "abcdef") == (OK, 4)
    assert st(p, "ab1") == (OK, 2)
    assert st(p, "a1")[0] is FAIL
    assert st(p, "abc") == (OK, 3)
    # Could grow: incomplete in partial mode, even below the minimum.
    assert st(p, "abc", partial=True) == (MORE, 3)
    assert st(p, "a", partial=True) == (MORE, 1)
    # Reached max: complete even at the end of partial input.
    assert st(p, "abcd", partial=True) == (OK, 4)
    assert st(chars("a", 0, -1), "aaab") == (OK, 3)


def test_space() -> None:
    assert st(space() + "x", " \t\r\n x") == (OK, 6)
    assert st(space(), "") == (OK, 0)
    assert st(space() + "x", "  ", partial=True)[0] is MORE


# --- combinators ---------------------------------------------------------------------------


def test_seq_choice_and_flattening() -> None:
    p = seq("a", "b") + "c"
    assert p.children() == p.children()[:3] and len(p.children()) == 3
    assert st(p, "abc") == (OK, 3)
    assert st(p, "abx")[0] is FAIL
    assert st(p, "ab", partial=True) == (MORE, 2)
    c = choice("ab", "ac") | "b"
    assert len(c.children()) == 3
    assert st(c, "ac") == (OK, 2)
    assert st(c, "b") == (OK, 1)
    assert st(c, "x")[0] is FAIL
    assert st(c, "a", partial=True) == (MORE, 1)


def test_ordered_choice_takes_first_success() -> None:
    assert st(choice("a", "ab"), "ab") == (OK, 1)
    assert st(choice("a", "ab") + end(), "ab")[0] is FAIL


def test_repetitions() -> None:
    ab = literal("ab")
    assert st(zero_or_more(ab), "ababa") == (OK, 4)
    assert st(zero_or_more(ab), "ababa", partial=True) == (MORE, 5)
    assert st(one_or_more(ab), "x")[0] is FAIL
    assert st(optional(ab), "x") == (OK, 0)
    assert st(repeat(ab, 2, 3), "abababab") == (OK, 6)
    assert st(repeat(ab, 2, 3), "ab")[0] is FAIL
    assert st(ab.repeat(1, 1), "abab") == (OK, 2)
    assert st(ab.optional() + "x", "x") == (OK, 1)
    # An empty-matching body does not loop forever.
    assert st(zero_or_more(optional("a")), "aab") == (OK, 2)
    assert st(repeat(space(), 3, 5), "") == (OK, 0)


def test_repeat_of_char_class_becomes_a_single_regex() -> None:
    p = zero_or_more(char_class("0-9"))
    assert "chars" in repr(p)
    assert st(p, "123x") == (OK, 3)


def test_lookaheads() -> None:
    p = peek("ab") + "a"
    assert st(p, "ab") == (OK, 1)
    assert st(p, "ac")[0] is FAIL
    assert st(p, "a", partial=True) == (MORE, 0)
    q = negate("</") + any_char()
    assert st(q, "<a") == (OK, 1)
    assert st(q, "</")[0] is FAIL
    assert st(q, "<", partial=True) == (MORE, 0)
    assert st(q, "<") == (OK, 1)
    assert st(~literal("x") + "y", "y") == (OK, 1)


def test_end_and_rest() -> None:
    assert st("a" + end(), "a") == (OK, 1)
    assert st("a" + end(), "ab")[0] is FAIL
    assert st("a" + end(), "a", partial=True) == (OK, 1)
    assert st("a" + rest(), "abc") == (OK, 3)
    assert st("a" + rest(), "abc", partial=True) == (MORE, 3)


# --- until ---------------------------------------------------------------------------------


def test_until_full_mode() -> None:
    p = until("</think>")
    assert st(p, "abc</think>x") == (OK, 3)
    assert st(p, "abc") == (OK, 3)
    assert st(p, "") == (OK, 0)


@pytest.mark.parametrize("delim", ["</think>", "→end", "<|im_end|>"])
def test_until_holds_back_every_delimiter_prefix(delim: str) -> None:
    p = tag("body", until(delim))
    body = "héllo <b> wörld"
    for k in range(1, len(delim)):
        text = body + delim[:k]
        r = p.parse(text, partial=True)
        assert (r.status, r.pos) == (MORE, len(body)), text
        assert spans(p, text, partial=True) == [("body", body, False)]
    r = p.parse(body + delim + "x", partial=True)
    assert (r.status, r.pos) == (OK, len(body))
    assert spans(p, body + delim, partial=True) == [("body", body, True)]


def test_until_one_of_earliest_and_hold_back() -> None:
    p = until_one_of("</a>", "<b>")
    assert st(p, "xx<b>yy</a>") == (OK, 2)
    assert st(p, "xx</a><b>") == (OK, 2)
    assert st(p, "xx</", partial=True) == (MORE, 2)
    assert st(p, "xx<", partial=True) == (MORE, 2)
    assert st(p, "xx<c", partial=True) == (MORE, 4)
    with pytest.raises(GrammarError):
        until("")


def test_until_a_delimiter_inside_the_unfinished_tail_of_an_earlier_one_waits() -> None:
    """Leftmost wins, partial input as whole: ``<|`` complete inside ``all\n<|con`` (a
    prefix of the earlier-starting ``all\n<|content|>``) does not end the span yet."""
    p = until_one_of("all\n<|content|>", "<|")
    assert st(p, "x all\n<|con", partial=True) == (MORE, 2)
    assert st(p, "x all\n<|content|>") == (OK, 2)
    assert st(p, "x all\n<|cox|>", partial=True) == (OK, 6)
    assert st(p, "x al<|", partial=True) == (OK, 4)
    # Random splits of a text holding both: the stream's spans are the whole text's.
    text = "say all\n<|content|>hi <| there"
    whole = st(p, text)
    for k in range(len(text) + 1):
        status, end = st(p, text[:k], partial=True)
        assert end <= whole[1] or status is OK, (k, status, end)


def test_until_prefix_inside_text_is_not_held_back() -> None:
    assert st(until("</think>"), "a</thb", partial=True) == (MORE, 6)


@pytest.mark.parametrize(
    "delims", [("aab",), ("abab", "ba"), ("a.b*", "b+"), ("<|im_end|>", "<|tool|>", "|")]
)
def test_until_holds_back_the_longest_delimiter_prefix(delims: tuple[str, ...]) -> None:
    """Random texts over the delimiters' characters: the held-back tail is the longest
    proper prefix of any delimiter that ends the text (computed here by definition)."""
    rng = random.Random(14)
    alphabet = "".join(sorted(set("".join(delims)))) + "x"
    p = until_one_of(*delims)
    checked = 0
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if any(d in text for d in delims):
            continue
        hold = max((k for d in delims for k in range(1, len(d)) if text.endswith(d[:k])), default=0)
        assert st(p, text, partial=True) == (MORE, len(text) - hold), text
        checked += 1
    assert checked > 50


# --- rules ---------------------------------------------------------------------------------


def test_rules_recursion_and_undefined_reference() -> None:
    rules = Rules()
    rules["parens"] = "(" + rules.ref("parens").optional() + ")"
    p = rules.ref("parens") + end()
    assert st(p, "((()))") == (OK, 6)
    assert st(p, "(()")[0] is FAIL
    assert st(p, "((", partial=True)[0] is MORE
    assert "parens" in rules and list(rules) == ["parens"] and len(rules) == 1
    with pytest.raises(GrammarError):
        Rules().ref("missing").parse("x")


def test_deep_grammar_recursion_fails_cleanly() -> None:
    rules = Rules()
    rules["v"] = "[" + rules.ref("v").optional() + "]"
    deep = "[" * 100_000 + "]" * 100_000
    r = rules.ref("v").parse(deep)
    assert r.status is FAIL and r.error
    r = rules.ref("v").parse(deep[:50_000], partial=True)
    assert r.status is FAIL and r.error


# --- tags ----------------------------------------------------------------------------------


def test_tags_build_a_nested_tree() -> None:
    name = tag("name", chars("a-z"))
    call = tag("call", "<" + name + ">" + tag("args", json_object()) + "</>")
    p = tag("content", until("<")) + zero_or_more(call)
    text = 'hi <f>{"a": 1}</><g>{}</>'
    r = p.parse(text)
    assert r.status is OK and r.pos == len(text)
    calls = r.tree.find_all("call")
    assert [c.find("name").text(text) for c in calls if c.find("name")] == ["f", "g"]
    assert r.tree.find("content") == Node("content", 0, 3, True)
    assert r.tree.find("missing") is None
    assert all(n.complete for n in r.tree.walk())


def test_partial_tree_marks_incomplete_and_atomic_hides() -> None:
    p = tag("open", literal("<tool_call>")) + tag("args", json_value())
    r = p.parse('<tool_call>{"a": [1', partial=True)
    assert r.status is MORE
    args = r.tree.find("args")
    assert args is not None and not args.complete and args.closer == "]}"
    r = p.parse("<tool", partial=True)
    assert [(n.tag, n.complete) for n in r.tree.children] == [("open", False)]
    q = atomic(tag("open", literal("<tool_call>")))
    assert q.parse("<tool", partial=True).tree.children == ()
    assert q.parse("<tool_call>", partial=True).tree.children[0].complete
    assert literal("x").tag("t").atomic().parse("x").tree.find("t") is not None


# --- JSON ----------------------------------------------------------------------------------

DOCS = [
    {"a": [1, 2.5, -3e-2, True, False, None], "b": {"c": 'é\n"\\/\u0001'}},
    [],
    {},
    "just a string",
    0,
    -12.5e3,
    [[[[{"x": [{}]}]]]],
    {"emoji": "😀", "esc": "\ud83d\ude00"},
]


def dumps_variants(doc: object) -> list[str]:
    return [
        json.dumps(doc),
        json.dumps(doc, indent=2),
        json.dumps(doc, separators=(",", ":"), ensure_ascii=False),
    ]


@pytest.mark.parametrize("doc", DOCS)
def test_json_value_full(doc: object) -> None:
    for text in dumps_variants(doc):
        assert st(json_value(), text) == (OK, len(text))
        assert st(json_value() + "!", text + "!") == (OK, len(text) + 1)
        # The scanner agrees with the fast path on complete documents.
        for fast in (True, False):
            r = json_scan.scan(text, 0, "value", False, False, fast=fast)
            assert (r.status, r.end) == (json_scan.OK, len(text))
            r = json_scan.scan(text + "]", 0, "value", True, False, fast=fast)
            assert (r.status, r.end) == (json_scan.OK, len(text))


@pytest.mark.parametrize("doc", DOCS)
def test_json_every_prefix_closes_to_valid_json(doc: object) -> None:
    p = tag("v", json_value())
    for text in dumps_variants(doc):
        for k in range(len(text)):
            prefix = text[:k]
            r = p.parse(prefix, partial=True)
            assert r.status is MORE, prefix
            node = r.tree.find("v")
            assert node is not None and not node.complete
            json.loads(prefix + node.closer)  # raises if the closer is wrong


def test_json_scanner_without_fast_path_closes_every_prefix() -> None:
    text = json.dumps(DOCS[0], indent=1)
    for k in range(len(text)):
        r = json_scan.scan(text[:k], 0, "value", True, False, fast=False)
        assert r.status == json_scan.MORE
        json.loads(text[:k] + r.closer)


@pytest.mark.parametrize(
    "bad",
    [
        '{"a" 1}',
        "[1,]",
        "{,}",
        '{"a":1,}',
        "[01]",
        '"\\x"',
        '"a\nb"',
        "tru ",
        "NaN",
        "-Infinity",
        "[1 2]",
        "{'a': 1}",
        '{"a":1]',
        "+1",
        ".5",
    ],
)
def test_json_invalid(bad: str) -> None:
    p = json_value() + end()
    assert p.parse(bad).status is FAIL
    assert p.parse(bad, partial=True).status is FAIL


def test_json_number_boundaries() -> None:
    assert st(json_value(), "0") == (OK, 1)
    assert st(json_value(), "12", partial=True) == (MORE, 2)
    assert st(json_value(), "1.", partial=True) == (MORE, 2)
    assert st(json_value(), "1.x") == (OK, 1)
    assert st(json_value(), "1e5x") == (OK, 3)
    big = "9" * 5000
    assert st(json_value(), f"[{big}]") == (OK, len(big) + 2)


def test_json_kinds() -> None:
    assert st(json_object(), "{}") == (OK, 2)
    assert st(json_object(), "[]")[0] is FAIL
    assert st(json_array(), "[1]") == (OK, 3)
    assert st(json_array(), "{}")[0] is FAIL
    assert st(json_string(), '"a\\"b"x') == (OK, 6)
    assert st(json_string(), "1")[0] is FAIL
    assert st(json_number(), "-1.5 ") == (OK, 4)
    assert st(json_number(), '"1"')[0] is FAIL
    assert st(json_literal(), "null") == (OK, 4)
    assert st(json_literal(), "nu", partial=True) == (MORE, 2)
    assert st(json_literal(), "[]")[0] is FAIL


def test_json_single_quotes_option() -> None:
    text = "{'a': ['b', \"c\"], 'd\\'e': 1}"
    assert st(json_value(), text)[0] is FAIL
    assert st(json_value(allow_single_quotes=True), text) == (OK, len(text))
    r = tag("v", json_value(allow_single_quotes=True)).parse("{'a': 'x", partial=True)
    node = r.tree.find("v")
    assert node is not None and node.closer == "'}"


def test_json_deep_nesting_never_recurses() -> None:
    deep = "[" * 100_000
    r = tag("v", json_value()).parse(deep, partial=True)
    assert r.status is MORE
    node = r.tree.find("v")
    assert node is not None and node.closer == "]" * 100_000
    assert json_value().parse(deep).status is FAIL
    full = deep + "]" * 100_000
    assert st(json_value(), full) == (OK, len(full))
    assert st(json_value(), '{"a":' * 50_000 + "1" + "}" * 50_000)[0] is OK


# --- incremental ---------------------------------------------------------------------------


def feed_in_random_chunks(
    p: Parser, text: str, rng: random.Random, longest: int
) -> tuple[IncrementalParse, list[tuple[str, ParseResult]]]:
    """Feed `text` in chunks of 1..longest characters, checking every result against a
    one-shot partial parse of the same prefix; the parse and (prefix, result) per chunk."""
    inc = p.incremental()
    steps: list[tuple[str, ParseResult]] = []
    i = 0
    while i < len(text):
        j = min(len(text), i + rng.randint(1, longest))
        got = inc.feed(text[i:j])
        assert got == p.parse(text[:j], partial=True), text[:j]
        steps.append((text[:j], got))
        i = j
    return inc, steps


def test_incremental_equals_one_shot_for_random_splits() -> None:
    p = chat_parser()
    text = (
        '<think>plan: é → ok</think>Hello <b>wörld</b>\n<tool_call>{"name": "f", '
        '"arguments": {"x": [1, 2, {"y": "a\\"b"}], "z": -1.5e3}}</tool_call>\n'
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    )
    rng = random.Random(7)
    for _ in range(20):
        inc, _steps = feed_in_random_chunks(p, text, rng, 9)
        assert inc.text == text
        final = inc.finish()
        assert final == p.parse(text)
        assert final.status is OK


def test_incremental_finish_on_truncated_input() -> None:
    p = chat_parser()
    inc = p.incremental()
    inc.feed('<tool_call>{"a": ')
    assert inc.finish() == p.parse('<tool_call>{"a": ')


@pytest.mark.parametrize("limit", [None, 3])
def test_incremental_repetition_resumes_with_tags_and_bounds(limit: int | None) -> None:
    item = tag("item", "<" + tag("n", chars("0-9")) + ">" + json_object()) + "\n"
    p = tag("all", repeat(item, 1, limit)) + until("$") + end()
    text = "".join(f'<{i}>{{"k": [{i}, "é"]}}\n' for i in range(5)) + "tail"
    inc = p.incremental()
    for i, ch in enumerate(text):
        assert inc.feed(ch) == p.parse(text[: i + 1], partial=True), text[: i + 1]
    final = inc.finish()
    assert final == p.parse(text) and final.success
    assert len(final.tree.find_all("item")) == (limit or 5)


def test_incremental_until_resumes_across_delimiter_split() -> None:
    p = tag("a", until_one_of("</think>", "<|end|>")) + choice("</think>", "<|end|>") + rest()
    text = "x" * 50 + "</thi" + "y" * 10 + "<|en" + "d|>" + "after"
    for step in (1, 2, 3, 7):
        inc = p.incremental()
        for i in range(0, len(text), step):
            got = inc.feed(text[i : i + step])
            assert got == p.parse(text[: i + step], partial=True)
        node = inc.finish().tree.find("a")
        assert node is not None and node.text(text) == "x" * 50 + "</thi" + "y" * 10


def test_incremental_json_closers_across_pushes_and_pops() -> None:
    p = tag("v", json_value())
    rng = random.Random(3)
    doc = '{"a": [1, {"b": [[], {"c": "x"}]}, [[[2]]]], "d": {"e": [{"f": null}]}}'
    text = "[" * 300 + doc + "]" * 300
    for _ in range(5):
        _inc, steps = feed_in_random_chunks(p, text, rng, 6)
        for prefix, got in steps:
            node = got.tree.find("v")
            assert node is not None
            json.loads(prefix + node.closer if not node.complete else prefix)


def test_incremental_bytes_hold_split_utf8_characters() -> None:
    p = tag("c", until("→end")) + "→end"
    data = "héllo 😀 wörld→end".encode()
    inc = p.incremental()
    for i in range(len(data)):
        got = inc.feed_bytes(data[i : i + 1])
        assert got == p.parse(inc.text, partial=True)
        assert data.startswith(inc.text.encode())
    assert inc.text == data.decode()
    final = inc.finish()
    assert final.success and final.tree.find("c") == Node("c", 0, 13, True)
    broken = p.incremental()
    broken.feed_bytes(b"a\xff" + "é".encode()[:1])
    assert broken.text == "a\ufffd"
    assert broken.finish().status is FAIL  # no delimiter; but nothing raised
    assert broken.text == "a\ufffd\ufffd"


def test_a_choice_skips_an_alternative_alike_before_and_after_all_its_first_text_arrived() -> None:
    # "AB<" is the first text of the first alternative; "A<" already differs from it, so
    # the alternative is skipped there as it is once "A<a" has arrived: a feed's result,
    # failure position included, is the one-shot parse's (hypothesis found the difference).
    rep = one_or_more(seq("B<", space()))
    parser = seq(choice(seq("A", rep, "a"), "C", "D"), end())
    inc = parser.incremental()
    for cut, chunk in ((2, "A<"), (3, "a")):
        assert inc.feed(chunk) == parser.parse("A<a"[:cut], partial=True)
