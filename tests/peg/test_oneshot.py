"""The one-shot parse (``ChatParams.parse``) is the stream's final message, exactly.

``parse`` does not run a stream: the definition's parser, compiled once for whole texts
(``peg/oneshot.py``), gives the partial- and full-mode trees a stream's feed and finish
would, and the mapper maps them. These tests hold both halves to what they replace:

- the compiled parser's trees equal the memoised driver's (``Parser.parse``), in both
  modes, on every cut of the own templates' outputs and on random grammars, alone or with
  the second run resuming from the first;
- ``parse(text)`` equals the message of a stream fed the whole text at once and in random
  chunks, on every cut of every scenario output of the own templates (cut calls and
  reasoning, openers at the end: issue 10's rules), and ``parse(text, partial=True)`` the
  message of a stream not yet finished.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers.generate_cases import SCENARIOS, TOOLS, Case
from helpers.peg_grammars import SETTINGS, anchored, grammars, mutated
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autoparser import ChatMessage, ChatParams
from autoparser.peg import (
    Parser,
    ParseStatus,
    Rules,
    chars,
    choice,
    end,
    literal,
    negate,
    oneshot,
    optional,
    peek,
    seq,
    tag,
    zero_or_more,
)
from autoparser.peg.oneshot import Shared, compiled
from autoparser.peg.status import STATUSES
from autoparser.stream.repair import json_object_text


def _cuts(text: str) -> list[int]:
    """Every cut of a short text; of a longer one every third, and the last ten."""
    step = 1 if len(text) <= 120 else 3
    return sorted({*range(0, len(text) + 1, step), *range(max(0, len(text) - 10), len(text) + 1)})


def _same_trees(parser: Parser, text: str) -> None:
    shot = compiled(parser)
    assert shot is not None
    for order in ((False, True), (True, False)):
        shared = Shared()
        for partial in order:
            want = parser.parse(text, partial=partial)
            for got in (shot.parse(text, partial), shot.parse(text, partial, shared)):
                assert STATUSES[got[0]] is want.status, (text, partial, order)
                if want.status is not ParseStatus.FAIL:
                    assert got[1] == want.tree, (text, partial, order)


def _stream_message(params: ChatParams, chunks: list[str], *, finish: bool = True) -> ChatMessage:
    stream = params.stream()
    for chunk in chunks:
        stream.feed(chunk)
    if finish:
        stream.finish()
    return stream.message


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_compiled_parser_gives_the_memoised_trees(
    case: Case, scenario: str, message: dict[str, Any]
) -> None:
    parser = case.params(case.request_tools).definition.parser
    text = case.output(message, TOOLS)
    for cut in _cuts(text):
        _same_trees(parser, text[:cut])


@pytest.mark.parametrize(("case", "scenario", "message"), SCENARIOS)
def test_parse_is_the_streams_message_on_every_cut(
    case: Case, scenario: str, message: dict[str, Any]
) -> None:
    params = case.params(case.request_tools)
    text = case.output(message, TOOLS)
    rng = random.Random(text)
    for cut in _cuts(text):
        prefix = text[:cut]
        parsed = params.parse(prefix)
        assert parsed == _stream_message(params, [prefix]), prefix
        chunks = [prefix[i : i + 3] for i in range(0, len(prefix), 3)]
        assert parsed == _stream_message(params, chunks), prefix
        split = rng.randrange(len(prefix) + 1)
        assert parsed == _stream_message(params, [prefix[:split], prefix[split:]]), prefix
        partial = _stream_message(params, [prefix], finish=False)
        assert params.parse(prefix, partial=True) == partial, prefix


@settings(
    SETTINGS, suppress_health_check=[*SETTINGS.suppress_health_check, HealthCheck.filter_too_much]
)
@given(data=st.data())
def test_compiled_parser_on_random_grammars(data: st.DataObject) -> None:
    g = data.draw(grammars())
    parser = anchored(g)
    assume(compiled(parser) is not None)  # named rules: see test_named_rules_are_not_compiled
    s = g.sample(data.draw)
    if data.draw(st.booleans()):
        s = data.draw(mutated(s))
    for k in range(len(s) + 1):
        _same_trees(parser, s[:k])


def test_lookaheads_and_nested_tags() -> None:
    """Nodes the generated formats seldom use: a lookahead whose child depends on the end
    of the input, tags inside tags taken back when their sequence fails."""
    parser = seq(
        tag("a", seq(tag("b", literal("x")), negate(literal("yz")), peek(literal("y")))),
        literal("y"),
    ) | tag("c", literal("x"))
    for text in ("", "x", "xy", "xyz", "xyy", "xq", "q"):
        for k in range(len(text) + 1):
            _same_trees(parser, text[:k])


def test_runs_with_choices_repetitions_and_the_end_are_one_regex() -> None:
    """A header cut off at the end of the output (harmony's): an ordered choice, a
    repetition of a choice and the end, matched as one regex and decided at once where a
    character none of them reads follows; near the end item by item, as the driver."""
    word = chars("a-z =.", 1, 8)
    opener = choice(literal("<|start|>a"), literal("<|start|>"), literal("<|ch|>"))
    cut = tag(
        "cut", seq(opener, zero_or_more(choice(word, literal("<|c|>"), literal("<|ch|>"))), end())
    )
    negated = tag("neg", seq(literal("<|"), chars("^>", 1, None), optional(literal(">")), end()))
    parser = zero_or_more(
        choice(cut, negated, literal("<|start|>a"), tag("t", chars("^<", 1, None)))
    )
    texts = ("<|start|>a<|ch|>an al<|m|>x, y", "x<|start|>a to=f.g<|ch|>co js", "<|ch|>fin", "<|x")
    for text in texts:
        for k in range(len(text) + 1):
            _same_trees(parser, text[:k])
    shot = compiled(parser)
    assert shot is not None
    assert shot.parse("<|start|>a<|ch|>fin", False)[1].children[0].tag == "cut"


def test_a_choice_skips_an_alternative_by_every_text_it_may_start_with() -> None:
    """An alternative that starts with one of several texts (a message opened by a header
    in either order) is skipped by one ``startswith``, but tried where the input ends
    inside one of them (its outcome depends on what follows)."""
    call = tag("call", seq(choice(literal("<|ch|>c to=f"), literal(" to=f<|ch|>c")), literal("{}")))
    parser = zero_or_more(choice(call, literal("<|end|>"), tag("t", chars("^<", 1, None))))
    assert oneshot._first_texts(call) == ("<|ch|>c to=f", " to=f<|ch|>c")
    assert oneshot._first_texts(zero_or_more(call)) is None
    for text in ("a<|end|> to=f<|ch|>c{}<|ch|>c to=f{}", "<|ch|>c to", " to=f<|"):
        for k in range(len(text) + 1):
            _same_trees(parser, text[:k])


def test_named_rules_are_not_compiled() -> None:
    """Recursion keeps the memoised driver (its nesting budget); parse() still works."""
    rules = Rules()
    rules["r"] = literal("(") + rules.ref("r").optional() + literal(")")
    assert compiled(rules.ref("r")) is None


@given(st.text(alphabet=' \t\n\r{}[]":,0123456789.eE-+tfnrulasNIy\\\ufeff', max_size=30))
def test_json_object_check_is_json_loads(text: str) -> None:
    try:
        want = isinstance(json.loads(text), dict)
    except ValueError:
        want = False
    assert json_object_text(text) is want
