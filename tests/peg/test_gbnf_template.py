"""A family's grammar written once and filled in per member (peg.gbnf_template, the
emitter's use of it): the same grammar as writing each member on its own, whatever the
names (escapes, one character per string, rule names starting with a digit), with parts,
and where a template cannot be (a name's characters shape the grammar, a rule name is
taken), each member written on its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.gbnf_equivalence import rules_of, same_grammar
from helpers.gbnf_oracle import accepts

from autoparser.gbnf_text import gbnf_literal, gbnf_unescape, name_part
from autoparser.peg import core
from autoparser.peg.core import Family, Lazy, Name, Parser, placeholder
from autoparser.peg.gbnf_emit import grammar
from autoparser.peg.gbnf_template import extract

H0, H1 = placeholder(0), placeholder(1)

NAMES = [
    ("get_weather", "city"),
    ("Search.Files-2", "maxCount"),
    ('say "hi" \\o/', "text"),  # quotes and a backslash in a literal
    ("3d_print", "x"),  # a rule name starting with a digit
    ("héllo", "ünit"),  # non-ASCII text
    ("a", "b"),
]


def _call(tool: str, arg: str) -> Parser:
    schema = {"type": "object", "properties": {arg: {"type": "integer"}}, "required": [arg]}
    return core.seq(
        '<call name="',
        core.literal(tool),
        '">',
        core.json_schema(schema, f"{name_part(tool) or 'x'}-args"),
        "</call>",
    )


def _names(tool: str, arg: str) -> tuple[Name, Name]:
    return (Name(tool, name_part(tool) or "x"), Name(arg, name_part(arg) or "x"))


def _family(key: str, builder: Callable[[str, str], Parser]) -> Family:
    return Family(key, (H0, H1), lambda slots: builder(H0, H1))


def _members(family: Family, builder: Callable[[str, str], Parser]) -> list[Parser]:
    return [
        Lazy(lambda t=t, a=a: builder(t, a), family=family, names=_names(t, a)) for t, a in NAMES
    ]


def _both(builder: Callable[[str, str], Parser], wrap: Callable[[Parser], Parser]) -> None:
    family = _family(f"f-{id(builder)}-{id(wrap)}", builder)
    members = grammar(wrap(core.choice(*_members(family, builder)))).text
    alone = grammar(wrap(core.choice(*[builder(t, a) for t, a in NAMES]))).text
    assert same_grammar(members, alone), (members, alone)


def test_members_make_the_grammar_of_their_calls() -> None:
    _both(_call, lambda p: p)
    text = grammar(core.choice(*_members(_family("calls", _call), _call))).text
    assert '"say \\"hi\\" \\\\o/"' in text  # the name escaped as any literal
    assert "r-3d-print-args" in rules_of(text)  # a rule name starts with a letter
    assert accepts(text, '<call name="héllo">{"ünit": 3}</call>')
    assert not accepts(text, '<call name="héllo">{"x": 3}</call>')


def test_names_written_one_character_per_string() -> None:
    """Where free text may run, llguidance needs literals split: a member's name too."""

    def bare(tool: str, arg: str) -> Parser:
        return core.seq(core.literal(tool), "(", core.literal(arg), "=1)")

    _both(bare, lambda p: core.seq(core.until("("), p))
    text = grammar(core.seq(core.until("("), core.choice(*_members(_family("bare", bare), bare))))
    assert '"g" "e" "t" "_" "w"' in text.text


def test_a_grammar_shaped_by_a_names_characters_is_written_member_by_member() -> None:
    """An ``until`` ending at the argument's name: its automaton is built from the name's
    characters, which no template can fill in."""

    def closer(tool: str, arg: str) -> Parser:
        return core.seq("<", core.literal(arg), ">", core.until(f"</{arg}>"), f"</{arg}>")

    family = _family("closer", closer)
    representative = family.representative()
    emitted = grammar(representative).text
    rules = rules_of(emitted)
    assert extract(" ".join(rules["root"]), {}, (H0, H1), frozenset()) is not None
    body = {n: " ".join(b) for n, b in rules.items() if n != "root"}
    assert extract(" ".join(rules["root"]), body, (H0, H1), frozenset()) is None
    _both(closer, lambda p: p)


def test_a_taken_rule_name_writes_the_member_itself() -> None:
    """A member whose rule would take a name the grammar holds with another body."""
    family = _family("taken", _call)
    member = Lazy(lambda: _call("json", "b"), family=family, names=_names("json", "b"))
    clash = core.json_schema({"type": "string"}, "json-args")  # another "json-args" rule
    members = grammar(core.seq(clash, core.choice(member, *_members(family, _call)))).text
    alone = grammar(
        core.seq(clash, core.choice(_call("json", "b"), *[_call(t, a) for t, a in NAMES]))
    ).text
    assert same_grammar(members, alone)
    assert member.built  # written on its own


def test_parts_are_written_in_their_places() -> None:
    """A call whose argument is a part: the call's family writes the argument's place, the
    argument's family the argument (a rule of its own, used twice)."""

    def argument(tool: str, arg: str) -> Parser:
        return core.seq("<", core.literal(arg), ">", core.json_value(), "</>")

    def call(tool: str, part: Parser) -> Parser:
        rules = core.Rules()
        ref = rules.define(f"{name_part(tool) or 'x'}-arg", part)
        return core.seq("[", core.literal(tool), "]", ref, core.zero_or_more(core.seq(",", ref)))

    arguments = Family("argument", (H0, H1), lambda slots: argument(H0, H1))
    calls = Family("call", (H0,), lambda slots: call(H0, slots[0]))
    members = []
    for tool, arg in NAMES:
        part = Lazy(lambda t=tool, a=arg: argument(t, a), family=arguments, names=_names(tool, arg))
        members.append(
            Lazy(
                lambda t=tool, p=part: call(t, p),  # its own call holds its part
                family=calls,
                names=(Name(tool, name_part(tool) or "x"),),
                parts=(part,),
            )
        )
    written = grammar(core.choice(*members)).text
    alone = grammar(core.choice(*[call(t, argument(t, a)) for t, a in NAMES])).text
    assert same_grammar(written, alone)
    # The first call is written on its own (as a family's first member is), built from its
    # part; the others come from the template and were never built.
    assert [m.built for m in members] == [True] + [False] * (len(members) - 1)


def test_unescape_reverses_the_literal() -> None:
    for text in ["plain", 'a"b\\c', "\n\t\r\x00\x1f\x7f", "x\x01a", "é", ""]:
        assert gbnf_unescape(gbnf_literal(text)) == text
    with pytest.raises(core.GrammarError):
        gbnf_unescape("nope")


def test_the_equivalence_oracle_tells_grammars_apart() -> None:
    a = 'root ::= x x\nx ::= "a" | y\ny ::= "b"\n'
    renamed = 'root ::= q q2\nq ::= "a" | z\nq2 ::= "a" | z2\nz ::= "b"\nz2 ::= "b"\n'
    other = 'root ::= x x\nx ::= "a" | y\ny ::= "c"\n'
    reordered = 'root ::= x x\nx ::= y | "a"\ny ::= "b"\n'
    assert same_grammar(a, renamed)
    assert not same_grammar(a, other)
    assert not same_grammar(a, reordered)  # another order of alternatives is another text
