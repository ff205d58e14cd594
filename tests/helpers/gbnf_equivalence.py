"""Whether two GBNF grammars are the same grammar up to how they are written.

Each rule body is read into a tree (alternatives of sequences of quantified atoms) and
written in one normal form: groups that only group (``a ( b c ) d``, ``( x | ( y | z ) )``)
are spliced into their parent, and adjacent string literals are one literal (``"T" "r"``
is ``"Tr"``: how a literal is split for llguidance). Then two grammars are the same when,
from ``root``, their normal forms are equal token for token once every rule reference is
replaced by the class of the rule it names, rules being in one class when their bodies are
equal in that sense (the coarsest such classes, refined to a fixed point as when minimising
an automaton). So renaming rules, writing one rule twice under two names, listing rules in
another order, grouping or splitting literals change nothing; any other difference (a
character, an alternative's place, a quantifier) does. Same grammar implies same language:
the oracle for "written another way, the same grammar".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoparser.gbnf_text import gbnf_literal, gbnf_unescape

_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[A-Za-z][A-Za-z0-9-]*|\{\d+(?:,\d*)?\}|[()|*+?]|\s+',
    re.S,
)


@dataclass
class _Item:
    atom: str | list[list[_Item]]  # a token, or a group's alternatives
    quantifier: str = ""


def _parse(tokens: list[str]) -> list[list[_Item]]:
    """Alternatives of sequences of items, from a rule body's tokens."""
    pos = 0

    def alternatives() -> list[list[_Item]]:
        nonlocal pos
        out = [sequence()]
        while pos < len(tokens) and tokens[pos] == "|":
            pos += 1
            out.append(sequence())
        return out

    def sequence() -> list[_Item]:
        nonlocal pos
        items: list[_Item] = []
        while pos < len(tokens) and tokens[pos] not in ("|", ")"):
            token = tokens[pos]
            pos += 1
            if token == "(":
                inner = alternatives()
                assert tokens[pos] == ")", tokens[pos:]
                pos += 1
                item = _Item(inner)
            else:
                item = _Item(token)
            if pos < len(tokens) and (tokens[pos] in "*+?" or tokens[pos].startswith("{")):
                item.quantifier = tokens[pos]
                pos += 1
            items.append(item)
        return items

    found = alternatives()
    assert pos == len(tokens), tokens[pos:]
    return found


def _normal(alts: list[list[_Item]]) -> list[list[_Item]]:
    """Groups that only group spliced, adjacent literals joined (recursively)."""
    out: list[list[_Item]] = []
    for seq in alts:
        items: list[_Item] = []
        for item in seq:
            if isinstance(item.atom, list):
                inner = _normal(item.atom)
                if not item.quantifier and len(inner) == 1:
                    items.extend(inner[0])  # ( a b ) in a sequence: a b
                    continue
                if not item.quantifier and len(seq) == 1:
                    out.extend(inner)  # an alternative that is a group of alternatives
                    items = []
                    break
                item = _Item(inner, item.quantifier)
            if (
                items
                and not item.quantifier
                and not items[-1].quantifier
                and isinstance(item.atom, str)
                and isinstance(items[-1].atom, str)
                and item.atom.startswith('"')
                and items[-1].atom.startswith('"')
            ):
                joined = gbnf_unescape(items[-1].atom) + gbnf_unescape(item.atom)
                items[-1] = _Item(gbnf_literal(joined))
                continue
            items.append(item)
        if items or not seq:
            out.append(items)
    return out


def _text(alts: list[list[_Item]]) -> list[str]:
    tokens: list[str] = []
    for i, seq in enumerate(alts):
        if i:
            tokens.append("|")
        for item in seq:
            if isinstance(item.atom, list):
                tokens += ["(", *_text(item.atom), ")"]
            else:
                tokens.append(item.atom)
            if item.quantifier:
                tokens.append(item.quantifier)
    return tokens


def rules_of(text: str) -> dict[str, list[str]]:
    """name -> the body's tokens in normal form, of a grammar's text."""
    rules: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, body = line.partition(" ::= ")
        assert sep, f"not a rule line: {line[:80]!r}"
        assert name not in rules, f"rule {name!r} defined twice"
        tokens: list[str] = []
        at = 0
        for match in _TOKEN.finditer(body):
            assert match.start() == at, f"unread text in {name}: {body[at : at + 40]!r}"
            at = match.end()
            if not match.group().isspace():
                tokens.append(match.group())
        assert at == len(body), f"unread text in {name}: {body[at : at + 40]!r}"
        rules[name] = _text(_normal(_parse(tokens)))
    return rules


def _classes(rules: dict[str, list[str]]) -> dict[str, str]:
    """Each rule's class after refinement to a fixed point."""
    names = set(rules)
    klass = {n: "0" for n in rules}
    while True:
        signatures = {
            n: (klass[n], tuple(f"@{klass[t]}" if t in names else t for t in body))
            for n, body in rules.items()
        }
        ids: dict[tuple[str, tuple[str, ...]], str] = {}
        new = {n: ids.setdefault(sig, str(len(ids))) for n, sig in signatures.items()}
        if len(set(new.values())) == len(set(klass.values())):
            return new
        klass = new


def same_grammar(a: str, b: str) -> bool:
    """Whether grammars ``a`` and ``b`` are the same up to how they are written (above)."""
    ra, rb = rules_of(a), rules_of(b)
    # Refine both grammars together, so that class ids compare across them.
    merged = {f"a:{n}": [f"a:{t}" if t in ra else t for t in body] for n, body in ra.items()}
    merged |= {f"b:{n}": [f"b:{t}" if t in rb else t for t in body] for n, body in rb.items()}
    classes = _classes(merged)
    return classes["a:root"] == classes["b:root"]
