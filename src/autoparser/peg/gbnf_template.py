"""A family's grammar written once and filled in per member (see ``peg.core.Family``).

The emitter writes the representative of a family (the parser built for placeholders
instead of names) as usual, then this module turns that text into a ``Template``: the
expression and the rules with a slot wherever a placeholder stands, of one of three kinds:

- in a string literal (a tool's name, a JSON key ``"\\"city\\""``): the literal is
  written again around the member's ``Name.text``, escaped as any literal is;
- written one character per string (``"c" "i" "t" "y"``, where llguidance needs it): the
  member's text, one character per string;
- in a rule name (``weather-args``): the member's ``Name.rule``;
- where a stand-in for one of the member's parts was written (``slot_mark``): the part,
  written by the emitter at that place (a rule body that is the part alone is unwrapped,
  as the emitter writes any rule body).

A rule whose body depends on a member (it holds a slot, or names such a rule) is the
member's own: a name without a placeholder gets the member's first name appended. Rules
that depend on no member (the JSON primitives, an ``until`` automaton) are shared.

A placeholder anywhere else (a character class, a fragment of one in a rule name cut
short, one of its letters alone) means the grammar's form depended on the characters of
a name, not only on the name as text: ``extract`` returns None and the emitter builds each
member on its own. Filling a template costs a few string joins per slot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from autoparser.gbnf_text import gbnf_literal, gbnf_unescape, unwrap
from autoparser.peg.core import PLACEHOLDER_LETTERS, Name

Piece = str | int
# Where a part was written: (the member's part index, tail, where).
Place = tuple[int, bool, tuple[bool, bool]]
# Writes a member's part at a place (the emitter's expression for it).
PartWriter = Callable[[int, bool, tuple[bool, bool]], str]


class _Member:
    """What a slot writes from: a member's names, its parts as written, and what each
    slot wrote (a name stands in several slots: written once)."""

    __slots__ = ("cache", "names", "written")

    def __init__(self, names: Sequence[Name], written: list[str]) -> None:
        self.names = names
        self.written = written
        self.cache: dict[Slot, str] = {}


# A slot: what it writes for a member.
Slot = Callable[[_Member], str]
Part = str | Slot


@dataclass(frozen=True)
class Text:
    """A piece of a template's grammar: its plain text with ``%s`` where a slot goes
    (``%`` doubled), and the slots, so that filling it is one ``%`` format."""

    form: str
    slots: tuple[Slot, ...]

    def write(self, member: _Member) -> str:
        if not self.slots:
            return self.form
        cache = member.cache
        values: list[str] = []
        for slot in self.slots:
            found = cache.get(slot)
            if found is None:
                found = cache[slot] = slot(member)
            values.append(found)
        return self.form % tuple(values)


def _text(parts: Sequence[Part]) -> Text:
    """The parts as a ``Text``."""
    form = "".join(p.replace("%", "%%") if isinstance(p, str) else "%s" for p in parts)
    return Text(form, tuple(p for p in parts if not isinstance(p, str)))


def _literal_slot(pieces: tuple[Piece, ...]) -> Slot:
    if len(pieces) == 1 and isinstance(pieces[0], int):
        index = pieces[0]  # the name alone: written once per member

        def name_literal(member: _Member) -> str:
            return gbnf_literal(member.names[index].text)

        return name_literal

    def literal(member: _Member) -> str:
        names = member.names
        return gbnf_literal("".join(p if type(p) is str else names[p].text for p in pieces))  # type: ignore[index]

    return literal


def _split_slot(index: int) -> Slot:
    def split(member: _Member) -> str:
        return " ".join(gbnf_literal(c) for c in member.names[index].text)

    return split


def _ident_slot(pieces: tuple[Piece, ...]) -> Slot:
    def ident(member: _Member) -> str:
        names = member.names
        text = "".join(p if type(p) is str else names[p].rule for p in pieces)  # type: ignore[index]
        return "r-" + text if text[:1].isdigit() else text

    return ident


def _part_slot(place: int, bare: bool) -> Slot:
    def part(member: _Member) -> str:
        text = member.written[place]
        return unwrap(text) if bare else text

    return part


_MARK = "qjw"  # what every placeholder starts with ("qjwq"), and its letters
_TOKEN = re.compile(
    r'\x00\d+\x00|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[A-Za-z0-9][A-Za-z0-9-]*|\s+|.',
    re.DOTALL,
)
_IDENT_RX = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
_LETTERS = frozenset(PLACEHOLDER_LETTERS)
_SLOT = re.compile(r"qjwx(\d+)xwjq")


def slot_mark(index: int) -> str:
    """What a template's emitter writes for the ``index``-th place of a part: a rule
    name to every GBNF helper (one atom), never one a grammar has."""
    return f"qjwx{index}xwjq"


@dataclass(frozen=True)
class Filled:
    """One member's grammar: its expression and its own rules (name -> body)."""

    expr: str
    rules: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Template:
    """A family's expression and rules with slots for a member's names.

    ``rules`` keeps the order the representative's were made in (a member's own rules, as
    ``Text`` pairs, among the shared ones, as plain pairs), so that a member's grammar is
    written as the member's own parser would be."""

    expr: Text
    rules: tuple[tuple[Text, Text] | tuple[str, str], ...]
    schemas: frozenset[str]  # schema keys the representative's grammar converted
    places: tuple[Place, ...] = ()  # where the member's parts go
    # The ``until`` automata among the shared rules (delimiters, first rule's name).
    untils: tuple[tuple[tuple[str, ...], str], ...] = ()
    # (part index, where) of each part that is a rule's whole body here.
    rule_places: tuple[tuple[int, tuple[bool, bool]], ...] = ()

    def fill(
        self, names: Sequence[Name], write: PartWriter | None = None, shared: bool = True
    ) -> Filled:
        """The grammar of the member with these names, its parts written by ``write``;
        without the shared rules unless ``shared`` (a grammar that has them already)."""
        written = [write(*place) for place in self.places] if write is not None else []
        member = _Member(names, written)
        rules: list[tuple[str, str]] = []
        for name, body in self.rules:
            if isinstance(name, Text) and isinstance(body, Text):
                rules.append((name.write(member), body.write(member)))
            elif shared and isinstance(name, str) and isinstance(body, str):
                rules.append((name, body))
        return Filled(self.expr.write(member), tuple(rules))


class _Unfit(Exception):
    """The representative's grammar uses a placeholder other than as text."""


def extract(
    expr: str,
    rules: Mapping[str, str],
    placeholders: Sequence[str],
    schemas: frozenset[str],
    places: Sequence[Place] = (),
    untils: tuple[tuple[tuple[str, ...], str], ...] = (),
) -> Template | None:
    """The template of a representative's grammar (``expr`` and the rules it made, with
    ``slot_mark(i)`` where ``places[i]`` says a part goes), or None when a placeholder
    stands anywhere but in a literal or a rule name."""
    index = {p: i for i, p in enumerate(placeholders)}
    split_forms = {" ".join(gbnf_literal(c) for c in p): i for i, p in enumerate(placeholders)}
    split_rx = re.compile("|".join(re.escape(f) for f in sorted(split_forms, key=len)[::-1]))
    names_rx = re.compile("|".join(re.escape(p) for p in sorted(index, key=len)[::-1]))

    def marked(text: str) -> str:
        """Split spellings of a placeholder as sentinel tokens."""
        return split_rx.sub(lambda m: f"\x00{split_forms[m.group()]}\x00", text)

    # The member's own rules: those naming or holding a placeholder, and (to a fixpoint)
    # those that name one of the member's own rules.
    own = {
        n
        for n, body in rules.items()
        if _MARK in n or _MARK in body or split_rx.search(body) is not None
    }  # (a part's mark holds the marker too: a rule holding a part is the member's own)
    while True:
        more = {
            n
            for n, body in rules.items()
            if n not in own and any(t in own for t in _IDENT_RX.findall(body))
        }
        if not more:
            break
        own |= more
    renamed: dict[str, tuple[Piece, ...]] = {n: (f"{n}-", 0) for n in own if _MARK not in n}

    rule_places: list[tuple[int, tuple[bool, bool]]] = []
    made: dict[tuple[object, ...], Slot] = {}

    def slot(make: Callable[..., Slot], *args: object) -> Slot:
        """One slot per kind and argument: what it writes is written once per member."""
        key = (make, *args)
        found = made.get(key)
        if found is None:
            found = made[key] = make(*args)
        return found

    def parts(text: str, body: bool = False) -> tuple[Part, ...]:
        alone = _SLOT.fullmatch(text)
        if alone is not None:  # a rule body that is a part alone: unwrapped when filled
            place = int(alone.group(1))
            if body:
                rule_places.append((places[place][0], places[place][2]))
            return (slot(_part_slot, place, body),)
        out: list[Part] = []
        for match in _TOKEN.finditer(marked(text)):
            token = match.group()
            first = token[0]
            if first == "\x00":
                out.append(slot(_split_slot, int(token[1:-1])))
            elif first == '"':
                if _MARK in token:
                    out.append(slot(_literal_slot, _pieces(gbnf_unescape(token), names_rx, index)))
                elif len(token) == 3 and token[1] in _LETTERS:
                    raise _Unfit(token)  # a placeholder's letter, one per string
                else:
                    out.append(token)
            elif first == "[":
                if _LETTERS.intersection(token):
                    raise _Unfit(token)  # a class built from a name's characters
                out.append(token)
            elif token in renamed:
                out.append(slot(_ident_slot, renamed[token]))
            elif (mark := _SLOT.fullmatch(token)) is not None:
                out.append(slot(_part_slot, int(mark.group(1)), False))
            elif _MARK in token and _IDENT_RX.fullmatch(token):
                out.append(slot(_ident_slot, _pieces(token, names_rx, index)))
            elif _MARK in token or "\x00" in token:
                raise _Unfit(token)
            else:
                out.append(token)
        return _joined(out)

    try:
        expr_text = _text(parts(expr))
        written = tuple(
            (_text(parts(n)), _text(parts(body, body=True))) if n in own else (n, body)
            for n, body in rules.items()
        )
    except _Unfit:
        return None
    shared_untils = tuple((key, name) for key, name in untils if name not in own)
    return Template(expr_text, written, schemas, tuple(places), shared_untils, tuple(rule_places))


def _pieces(text: str, names_rx: re.Pattern[str], index: Mapping[str, int]) -> tuple[Piece, ...]:
    """``text`` as plain pieces and name indexes; _Unfit if a placeholder's fragment is left."""
    out: list[Piece] = []
    at = 0
    for match in names_rx.finditer(text):
        if match.start() > at:
            out.append(text[at : match.start()])
        out.append(index[match.group()])
        at = match.end()
    if at < len(text):
        out.append(text[at:])
    if any(isinstance(p, str) and (_MARK in p or "wjq" in p) for p in out):
        raise _Unfit(text)
    return tuple(out)


def _joined(parts: list[Part]) -> tuple[Part, ...]:
    """Adjacent plain strings as one."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        else:
            out.append(part)
    return tuple(out)
