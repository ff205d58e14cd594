"""GBNF emission: portable syntax, llguidance acceptance, lookahead errors, lazy triggers."""

from __future__ import annotations

import re
from typing import Any

import pytest

from autoparser.errors import GrammarError
from autoparser.peg import (
    Grammar,
    GrammarTrigger,
    Parser,
    ParseStatus,
    Rules,
    any_char,
    char_class,
    chars,
    choice,
    end,
    grammar,
    json_array,
    json_literal,
    json_number,
    json_object,
    json_schema,
    json_string,
    json_value,
    literal,
    negate,
    one_or_more,
    optional,
    peek,
    repeat,
    rest,
    space,
    tag,
    token,
    trigger,
    until,
    until_one_of,
    zero_or_more,
)

gbnf_oracle = pytest.importorskip("helpers.gbnf_oracle", reason="llguidance oracle unavailable")
accepts = gbnf_oracle.accepts


def assert_portable(text: str) -> None:
    """The house rules (helpers.gbnf_oracle), with ``root`` as the first rule."""
    assert text.startswith("root ::= ")
    gbnf_oracle.assert_portable(text)


def agree(p: Parser, accepted: list[str], rejected: list[str]) -> str:
    """Parser (anchored) and grammar agree on these strings; returns the grammar text."""
    anchored = p + end()
    text = grammar(anchored).text
    assert_portable(text)
    for s in accepted:
        assert anchored.parse(s).status is ParseStatus.SUCCESS, s
        assert accepts(text, s), (s, text)
    for s in rejected:
        assert anchored.parse(s).status is not ParseStatus.SUCCESS, s
        assert not accepts(text, s), (s, text)
    return text


def test_literal_and_token_utf8_and_escapes() -> None:
    text = agree(
        literal('héllo "→" \\ \n\t') + token("<|end|>"),
        ['héllo "→" \\ \n\t<|end|>'],
        ["héllo", 'hello "→" \\ \n\t<|end|>'],
    )
    assert "é" in text and "→" in text
    agree(literal(""), [""], ["a"])


def test_char_classes_and_chars() -> None:
    agree(char_class("a-c\\-\\]^") + char_class("^a-z"), ["b!", "-é", "]Z", "^0"], ["ba", "d!"])
    agree(chars("0-9", 2, 3), ["12", "123"], ["1", "1234", "a1"])
    agree(chars("x", 0, -1) + "y", ["y", "xxxy"], ["xx"])
    agree(chars("α-ω", 1), ["αβω"], [""])
    agree(any_char() + any_char(), ["a😀", "\x00\n"], ["a", "abc"])


def test_combinators() -> None:
    p = ("a" + choice("b", "cd")) | "x"
    agree(p, ["ab", "acd", "x"], ["a", "ac", "xb"])
    agree(repeat("ab", 2, 3), ["abab", "ababab"], ["ab", "abababab"])
    agree(optional("a") + one_or_more("b") + zero_or_more("c"), ["b", "abbcc"], ["a", "ac"])
    agree(repeat("a", 0, 0) + "b", ["b"], ["ab"])
    agree(repeat("a", 2, None), ["aa", "aaaa"], ["a"])


def test_space_end_rest() -> None:
    agree("a" + space() + "b", ["ab", "a \t\r\n b"], ["a-b"])
    agree("a" + rest(), ["a", "a anything é"], ["b"])
    with pytest.raises(GrammarError, match="end"):
        grammar(end() + "a")


@pytest.mark.parametrize(
    "delims",
    [
        ("</think>",),
        ("<tool_call>",),
        ("<|im_end|>", "</s>"),
        ("→|",),
        ("aab",),
        ("abab",),
        ("<a", "<ab"),
        ("</f>", "</f>\n"),
    ],
)
def test_until_automaton_is_exact_when_followed_by_its_delimiter(delims: tuple[str, ...]) -> None:
    p = until_one_of(*delims) + choice(*sorted(delims, key=len, reverse=True)) + end()
    text = grammar(p).text
    assert_portable(text)
    candidates = {""}
    for d in delims:
        for k in range(len(d) + 1):
            for filler in ("", "x", "é", d[:k]):
                candidates |= {d[:k] + filler + d, filler + d[:k] + d, d[:k] + d + d, d[:k]}
    accepted = 0
    for s in sorted(candidates):
        ours = p.parse(s).success
        assert ours == accepts(text, s), (s, ours, text)
        accepted += ours
    assert accepted >= 3


def test_until_at_the_end_is_exact_for_border_free_delimiters() -> None:
    agree(until("</think>"), ["", "abc", "a</thin", "<<//"], ["a</think>", "</think>b"])


def test_exclusion_idiom_becomes_until() -> None:
    p = zero_or_more(negate(literal("*/") | "?>") + any_char()) + "*/"
    text = agree(p, ["abc*/", "*?*/", "?*/"], ["abc", "a*/b*/", "a?>*/"])
    assert "until-" in text


def test_negate_class_difference() -> None:
    p = negate(char_class("aeiou")) + char_class("a-z")
    text = agree(p, ["b", "z"], ["a", "u", "B"])
    assert "[b-df-hj-np-tv-z]" in text
    agree(negate("x") + char_class("^y"), ["a", "é"], ["x", "y"])


def test_untranslatable_lookaheads_name_the_node() -> None:
    with pytest.raises(GrammarError, match=r"peek\(literal\('a'\)\)"):
        grammar(peek("a") + "ab")
    with pytest.raises(GrammarError, match=r"negate\(literal\('ab'\)\)"):
        grammar(negate("ab") + "x")
    with pytest.raises(GrammarError, match="negate"):
        grammar(negate("ab"))


def test_tags_atomic_trigger_are_transparent() -> None:
    p = tag("t", "a" + trigger(token("<x>")) + literal("b").atomic())
    agree(p, ["a<x>b"], ["a<x>"])


def test_rules_become_named_rules_with_sanitised_names() -> None:
    rules = Rules()
    rules["my_rule.Item"] = "(" + zero_or_more(rules.ref("my_rule.Item")) + ")"
    rules["getWeather"] = "w"
    rules["1st"] = "1"
    p = rules.ref("my_rule.Item") + rules.ref("getWeather") + rules.ref("1st")
    text = agree(p, ["()w1", "(()(()))w1"], ["(w1", "()1"])
    assert "my-rule-item ::= " in text
    assert "get-weather ::= " in text
    assert "r-1st ::= " in text


def test_rules_named_root_do_not_clash() -> None:
    rules = Rules()
    rules["root"] = literal("r")
    text = agree(rules.ref("root") + "x", ["rx"], ["x"])
    assert text.count("root ::=") == 1


@pytest.mark.parametrize(
    ("p", "good", "bad"),
    [
        (json_value(), ['{"a": [1, -2.5e3, true, null, "x\\n\\u00e9"]}', "0", '"é"'], ["{", "01"]),
        (json_object(), ["{}", '{ "a" : 1 }'], ["[]", "{'a': 1}"]),
        (json_array(), ["[]", "[ 1 , [ ] ]"], ["{}", "[1,]"]),
        (json_string(), ['"a\\"b"', '""'], ['"a', "'a'"]),
        (json_number(), ["-0.5E+3", "10"], ["-", "1."]),
        (json_literal(), ["true", "null"], ["nil"]),
        (json_value(allow_single_quotes=True), ["{'a': ['b', \"c\"]}", "'it\\'s'"], ["{'a}"]),
    ],
)
def test_json_rules(p: Parser, good: list[str], bad: list[str]) -> None:
    agree(p, good, bad)


def test_json_schema_delegates_to_the_schema_converter() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    p = "<args>" + json_schema(schema, "get_weather") + "</args>"
    text = grammar(p).text
    assert_portable(text)
    assert accepts(text, '<args>{"n": 3}</args>')
    assert not accepts(text, '<args>{"n": "3"}</args>')
    assert not accepts(text, "<args>{}</args>")
    # Parsing is plain JSON (the schema is for the grammar).
    assert p.parse('<args>{"n": "3"}</args>').success


def test_literals_next_to_until_are_split_for_greedy_lexers() -> None:
    rules = Rules()
    rules["close"] = literal("</think>")
    p = "<think>" + until("</think>") + rules.ref("close")
    text = agree(p, ["<think>a</b></thi</think>", "<think></think>"], ["<think>a"])
    assert '"<" "/" "t"' in text


def test_literals_stay_whole_where_no_until_competes() -> None:
    """Readable grammars (issue 13): a literal is split only where an until may run."""
    p = "<tool_call>" + json_object() + "</tool_call>" + until("<tool_call>")
    text = agree(
        p,
        ['<tool_call>{"a": 1}</tool_call>', "<tool_call>{}</tool_call>tail <tool_x> </b>"],
        ['<tool_call>{"a": 1}</tool_call>x<tool_call>'],
    )
    assert '"<tool_call>"' in text and '"</tool_call>"' in text


def test_a_literal_repeated_next_to_free_text_is_split_only_there() -> None:
    """After a call either another call or free text may follow: there (and only there)
    the opener is written one character per string, and llguidance still reads text that
    starts like the opener and then differs."""
    rules = Rules()
    rules["call"] = literal("<tool_call>") + json_object() + literal("</tool_call>")
    call = rules.ref("call")
    p = trigger(literal("<call>") + zero_or_more(literal("<call>")) + until("<call>"))
    g = grammar(p, lazy=True)
    root = g.text.splitlines()[0]
    assert root.startswith('root ::= "<call>"'), root
    assert '"<" "c" "a" "l" "l" ">"' in root, root
    for ok in ("<call>", "<call><call>", "<call>text <ca> <cx </c", "<call><call><cal"):
        assert accepts(g.text, ok), ok
    assert not accepts(g.text, "<call>a<call>")
    # A rule used only where nothing competes keeps its literals whole.
    q = trigger(call + zero_or_more(call)) + end()
    assert '"<tool_call>"' in grammar(q, lazy=True).text


def test_lazy_grammar_triggers() -> None:
    call = trigger(token("<tool_call>") + json_object() + "</tool_call>")
    alt = trigger(space() + literal("[TOOL_CALLS]") + json_array())
    p = until_one_of("<tool_call>", "[TOOL_CALLS]") + zero_or_more(call | alt)
    g = grammar(p, lazy=True)
    assert isinstance(g, Grammar)
    assert g.triggers == (
        GrammarTrigger("token", "<tool_call>"),
        GrammarTrigger("word", "[TOOL_CALLS]"),
    )
    assert_portable(g.text)
    assert accepts(g.text, '<tool_call>{"a": 1}</tool_call>')
    assert accepts(g.text, " [TOOL_CALLS][1]")
    assert not accepts(g.text, 'hello <tool_call>{"a": 1}</tool_call>')
    full = grammar(p)
    assert full.triggers == ()
    assert accepts(full.text, 'hello <tool_call>{"a": 1}</tool_call>')
    # No trigger marked: the lazy grammar is the full grammar.
    assert grammar(until("x"), lazy=True).text == grammar(until("x")).text
    with pytest.raises(GrammarError, match="trigger"):
        grammar(trigger(json_object()), lazy=True)
    # No leading literal: a regex pattern up to the first literal.
    named = trigger(chars("a-z_", 1, 20) + "(" + json_object() + ")")
    g = grammar(until("x") + named, lazy=True)
    assert g.triggers == (GrammarTrigger("pattern", "[_a-z]{1,20}\\("),)
    assert re.search(g.triggers[0].value, "call get_weather({})")
    assert accepts(g.text, 'get_weather({"a": 1})')
    assert str(full) == full.text


def test_a_family_of_few_members_is_written_member_by_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two members of one form: each written itself (a template costs about two members'
    writes); three: the third from the family's template, made once. Either way the grammar
    of the calls built alone, accepting and rejecting the same text (llguidance)."""
    from helpers.gbnf_equivalence import same_grammar
    from helpers.gbnf_oracle import accepts

    from autoparser.gbnf_text import name_part
    from autoparser.peg import gbnf_template
    from autoparser.peg.core import Family, Lazy, Name, placeholder, seq

    made: list[int] = []
    extract = gbnf_template.extract

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return extract(*args, **kwargs)

    monkeypatch.setattr(gbnf_template, "extract", counted)

    def call(tool: str, arg: str) -> Parser:
        schema = {"type": "object", "properties": {arg: {"type": "integer"}}, "required": [arg]}
        rule = f"{name_part(tool)}-args"
        return seq('<call name="', literal(tool), '">', json_schema(schema, rule), "</call>")

    holders = (placeholder(0), placeholder(1))
    for count, templates in ((2, 0), (3, 1)):
        family = Family(f"few-{count}", holders, lambda slots: call(*holders))
        names = [(f"tool_{i}", f"arg_{i}") for i in range(count)]
        members = [
            Lazy(
                lambda t=t, a=a: call(t, a),
                family=family,
                names=(Name(t, name_part(t)), Name(a, name_part(a))),
            )
            for t, a in names
        ]
        made.clear()
        text = grammar(choice(*members)).text
        assert len(made) == templates, count
        assert same_grammar(text, grammar(choice(*[call(t, a) for t, a in names])).text)
        assert accepts(text, '<call name="tool_1">{"arg_1": 3}</call>')
        assert not accepts(text, '<call name="tool_1">{"arg_0": 3}</call>')
