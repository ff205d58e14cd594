"""GBNF emission: the grammar that accepts what a parser accepts, from the same definition.

PEG and CFG differ (ordered choice, greedy repetition, lookahead); the translation is exact
for the fragment where they agree (see docs/peg.md). `until` becomes an exclusion automaton
with one rule per state, lookaheads are translated only in forms a CFG can express, and
anything else raises GrammarError naming the node.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from autoparser.errors import GrammarError
from autoparser.gbnf_text import (
    ANY_CHAR,
    JSON_CHAR,
    JSON_NUMBER,
    alternatives,
    fresh_name,
    gbnf_literal,
    gbnf_repeat,
    group,
    rule_name,
    rules_text,
    sequence,
    subtract_ranges,
    unwrap,
)
from autoparser.peg import facts, gbnf_template
from autoparser.peg.charclass import CharSet
from autoparser.peg.core import (
    Atomic,
    Chars,
    Choice,
    End,
    Family,
    Json,
    JsonSchema,
    Lazy,
    Literal,
    Name,
    Negate,
    NodeVisitor,
    Parser,
    Peek,
    Ref,
    Repeat,
    Rest,
    Seq,
    Space,
    Tag,
    Token,
    TriggerMark,
    Until,
    as_parser,
)

# How engines apply a lazy-grammar trigger: ``word`` (the grammar applies from where the
# word appears), ``token`` (the same for a special token), ``pattern`` (a regex searched in
# the output; the grammar applies from its first capture group, else from the match),
# ``pattern_full`` (a regex the whole output so far must match; the grammar applies from
# its first capture group, else from the start).
TRIGGER_KINDS = ("word", "pattern", "pattern_full", "token")


@dataclass(frozen=True)
class GrammarTrigger:
    """When a lazy grammar switches on: a word, a regex (prefix / full match) or a token.

    The one trigger type: the emitter derives them, hand-written formats declare them, and
    ``ChatParams.grammar_triggers`` reports them (public as ``autoparser.GrammarTrigger``).
    A ``pattern_full`` trigger makes the engine rescan the whole output at every token, so
    one must say in ``reason`` why a word or token trigger would not be correct; the
    generated ``pattern`` triggers say why too.
    """

    kind: str
    value: str
    reason: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in TRIGGER_KINDS:
            raise ValueError(f"GrammarTrigger.kind must be one of {TRIGGER_KINDS}: {self.kind!r}")

    def to_dict(self) -> dict[str, str]:
        """The trigger as plain JSON-ready data: ``kind``, ``value`` and any ``reason``."""
        out = {"kind": self.kind, "value": self.value}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Grammar:
    """GBNF text (root rule ``root``) and, for lazy grammars, the trigger words/patterns."""

    text: str
    triggers: tuple[GrammarTrigger, ...] = ()
    # Every whole JSON Schema converted into the grammar (``schema_key`` of each): a caller
    # that must validate schemas need not convert these a second time.
    schemas: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.text


def grammar(parser: Parser | str, lazy: bool = False) -> Grammar:
    """The GBNF grammar of `parser`; lazy: rooted at the parts marked with `trigger()`."""
    root = as_parser(parser)
    triggers = _find_triggers(root) if lazy else []
    emitter = _Emitter(_SplitFinder([t.child for t in triggers] or [root]))
    if lazy and triggers:
        bodies = [emitter.expr(t.child, tail=True) for t in triggers]
        emitter.rules["root"] = " | ".join(dict.fromkeys(bodies))
        words: list[GrammarTrigger] = []
        for t in triggers:
            try:
                words.extend(_LeadingWords(t).visit(t.child))
            except GrammarError:
                pattern = _leading_pattern(t.child)
                if pattern is None:
                    raise
                words.append(GrammarTrigger("pattern", pattern))
        return Grammar(emitter.render(), tuple(dict.fromkeys(words)), frozenset(emitter.schemas))
    emitter.rules["root"] = emitter.expr(root, tail=True)
    return Grammar(emitter.render(), schemas=frozenset(emitter.schemas))


def schema_key(schema: object) -> str:
    """A JSON Schema as canonical text, to recognise it again."""
    return json.dumps(schema, sort_keys=True, default=str)


def _part_form(part: Parser, finder: _SplitFinder | None = None) -> tuple[bool, ...]:
    """What the grammar around a member's part depends on of the part: whether it can
    match nothing, start or end where free text runs, be one llguidance lexeme (kept with
    the part's family: every member of it has the same)."""

    def make() -> tuple[bool, ...]:
        # The facts are a node's own, wherever it is: the emitter's finder, when given,
        # keeps them for the walk that writes the part.
        found = finder or _SplitFinder()
        node = _form_of(part, found)
        return (
            found.nullable(node),
            found.starts_free(node),
            found.ends_free(node, False),
            found.ends_free(node, True),
            _is_lexeme(node, found),
        )

    family = part.family if isinstance(part, Lazy) else None
    if family is None:
        return make()
    assert isinstance(part, Lazy)
    key = ("facts", tuple(_part_form(p, finder) for p in part.parts)) if part.parts else "facts"
    form = family.kept(key, make)
    assert isinstance(form, tuple)
    return form


# Which of a lazy node's facts (``_part_form``) each analysis reads.
_NULLABLE, _STARTS_FREE, _ENDS_FREE, _ENDS_FREE_AFTER_FREE, _LEXEME = range(5)


def _form_of(node: Parser, finder: _SplitFinder | None = None) -> Parser:
    """The parser whose form stands for ``node``: a member's (the first of its family's
    members asked for, for parts of its parts' forms), a stand-in's part's, what a lazy
    node builds, or the node itself."""
    if not isinstance(node, Lazy):
        return node
    family = node.family
    if family is None:
        return node.target()
    if node.slot >= 0:  # a stand-in for a part (of a family of members without parts)
        found = family.kept(("form", ()), family.representative)
    else:
        # Any member's parser has the family's form (for parts of one form): the first one
        # asked for (which is written on its own, so built anyway) serves them all.
        forms = tuple(_part_form(p, finder) for p in node.parts)
        found = family.kept(("form", forms), node.target)
    assert isinstance(found, Parser)
    return found


def _representative(member: Lazy, forms: tuple[tuple[bool, ...], ...]) -> Parser:
    """The representative of a member's family for parts of these forms (built once per
    forms, from this member's parts as the stand-ins)."""
    family = member.family
    assert family is not None

    def make() -> Parser:
        slots = tuple(_stand_in(k, part) for k, part in enumerate(member.parts))
        return family.build(slots)

    found = family.kept(("representative", forms), make)
    assert isinstance(found, Parser)
    return found


def _stand_in(index: int, part: Parser) -> Lazy:
    """The stand-in for a member's ``index``-th part in its family's representative: of the
    part's family (a family of its own for a part that has none), so its form is known."""
    family = part.family if isinstance(part, Lazy) else None
    if family is None:
        family = Family(("part", part._uid), (), lambda slots: part)
    names = tuple(Name(p, p) for p in family.placeholders)
    return Lazy(None, family=family, names=names, slot=index)


def _in_place(part: Parser, where: _Where) -> bool:
    """Whether a rule whose body is ``part``, used at ``where``, is written in place: a
    rule llguidance would read as one lexeme that holds a literal split for it (see
    ``_Emitter.ref``). Kept with the part's family."""

    def make() -> bool:
        if not _part_form(part)[_LEXEME]:
            return False
        form = _form_of(part)
        finder = _SplitFinder()
        finder.walk(form, where)
        return any(isinstance(n, Literal) and n._uid in finder.split for n in _walk(form))

    family = part.family if isinstance(part, Lazy) else None
    if family is None:
        return make()
    found = family.kept(("in place", where), make)
    assert isinstance(found, bool)
    return found


def _template(
    member: Lazy, tail: bool, where: _Where, finder: _SplitFinder | None = None
) -> gbnf_template.Template | None:
    """The grammar of the member's family at this place for parts of the member's forms,
    written from the representative once (None: its form depends on more than its names
    as text; each member is written itself)."""
    family = member.family
    assert family is not None
    forms = tuple(_part_form(p, finder) for p in member.parts)

    def make() -> gbnf_template.Template | None:
        representative = _representative(member, forms) if member.parts else family.representative()
        emitter = _Emitter(places=[])
        emitter.finder.walk(representative, where)
        expr = emitter.expr(representative, tail, where)
        if emitter.unfit:
            return None
        return gbnf_template.extract(
            expr,
            emitter.rules,
            family.placeholders,
            frozenset(emitter.schemas),
            emitter.places or (),
            tuple(emitter.untils.items()),
        )

    found = family.kept(("template", forms, tail, where), make)
    assert found is None or isinstance(found, gbnf_template.Template)
    return found


# The most whitespace the grammar allows where the parser skips any (``space()``): more than
# any template renders between two markers (a blank line plus deep indentation).
MAX_GRAMMAR_SPACE = 20


# --- JSON rules (RFC 8259, any whitespace between tokens) ----------------------------------

_JSON_RULES = """\
{p}value ::= {p}object | {p}array | {p}string | {p}number | {p}literal
{p}object ::= "{{" {p}ws ( {p}member ( "," {p}ws {p}member )* )? "}}"
{p}member ::= {p}string {p}ws ":" {p}ws {p}value {p}ws
{p}array ::= "[" {p}ws ( {p}value {p}ws ( "," {p}ws {p}value {p}ws )* )? "]"
{p}string ::= {dq}{sq}
{p}char ::= {char}
{p}number ::= {number}
{p}literal ::= "true" | "false" | "null"
{p}ws ::= [ \\t\\n\\r]*
"""
_SQ_RULE = """\
{p}sqchar ::= [^'\\\\\\x00-\\x1F] | "\\\\" ( ['"\\\\/bfnrt] | "u" [0-9a-fA-F]{{4}} )
"""


def _json_rules(single_quotes: bool) -> dict[str, str]:
    p = "rfc-pyjson-" if single_quotes else "rfc-json-"
    dq = f'"\\"" {p}char* "\\""'
    sq = f' | "\'" {p}sqchar* "\'"' if single_quotes else ""
    text = _JSON_RULES.format(p=p, dq=dq, sq=sq, char=JSON_CHAR, number=JSON_NUMBER)
    if single_quotes:
        text += _SQ_RULE.format(p=p)
    rules: dict[str, str] = {}
    for line in text.splitlines():
        name, body = line.split(" ::= ", 1)
        rules[name] = body
    return rules


# --- the emitter ---------------------------------------------------------------------------


# Where a node is emitted, for _SplitFinder: (a free-text token may be read where it starts,
# one may be read right after it).
_Where = tuple[bool, bool]
_NOWHERE: _Where = (False, False)


class _Emitter(NodeVisitor[str]):
    """Writes the GBNF rules of a parser: one method per node kind."""

    def __init__(
        self,
        finder: _SplitFinder | None = None,
        places: list[gbnf_template.Place] | None = None,
    ) -> None:
        # Which literals to write one character per string, where (see _SplitFinder).
        self.finder = finder or _SplitFinder()
        # A template's emitter: where each part of a member goes (see visit_Lazy), and
        # whether the grammar around them depends on more than their forms.
        self.places = places
        self.unfit = False
        self._sightings: set[tuple[Family, bool, _Where]] = set()
        # Templates whose shared rules this grammar has (by id; the value keeps it alive).
        self._filled: dict[int, gbnf_template.Template] = {}
        self.rules: dict[str, str] = {}
        self._ref_names: dict[tuple[int, str], str] = {}
        # The ``until`` automata written, by delimiters: their first rule's name.
        self.untils: dict[tuple[str, ...], str] = {}
        self._schema_names: dict[int, str] = {}
        self.schemas: set[str] = set()  # schema_key of each whole schema converted

    def render(self) -> str:
        return rules_text({"root": self.rules["root"], **self.rules})

    def fresh(self, base: str) -> str:
        name = fresh_name(rule_name(base), lambda n: n in self.rules or n == "root")
        self.rules[name] = ""  # reserve
        return name

    def add_rules(self, rules: Mapping[str, str], origin: str) -> None:
        for name, body in rules.items():
            if name in self.rules and self.rules[name] != body:
                raise GrammarError(f"{origin}: rule {name!r} conflicts with another definition")
            self.rules[name] = body

    # Expressions: one visit_<Kind> per node kind (NodeVisitor), each given `tail` (the
    # node ends the grammar) and `where` (see _SplitFinder).
    def expr(self, node: Parser, tail: bool, where: _Where = _NOWHERE) -> str:
        return self.visit(node, tail, where)

    def visit_Literal(self, node: Literal, tail: bool, where: _Where) -> str:  # and Token
        return self.literal(node, where[0])

    def visit_Space(self, node: Space, tail: bool, where: _Where) -> str:
        # Bounded in the grammar (the parser stays lenient): an engine must not be able
        # to sample whitespace between markers forever, as a weak or random model will.
        return gbnf_repeat(node.charset.gbnf(), 0, MAX_GRAMMAR_SPACE)

    def visit_Chars(self, node: Chars, tail: bool, where: _Where) -> str:
        return gbnf_repeat(node.charset.gbnf(), node.min, node.max)

    def visit_Seq(self, node: Seq, tail: bool, where: _Where) -> str:
        return self.seq(node.items, tail, where)

    def visit_Choice(self, node: Choice, tail: bool, where: _Where) -> str:
        alts = node.alternatives
        return alternatives(
            [
                self.expr(a, tail, self.finder.choice_where(alts, i, where))
                for i, a in enumerate(alts)
            ]
        )

    def visit_Repeat(self, node: Repeat, tail: bool, where: _Where) -> str:
        body = _exclusion_body(node.child)
        if body is not None and node.min == 0 and node.max is None:
            return self.until(body)
        inner = self.expr(node.child, False, self.finder.repeat_where(node, where))
        times = node.max if node.max is not None else max(node.min, 1)
        if _expanded_size(inner) * times > _MAX_EXPANSION and not _is_lexeme(
            node.child, self.finder
        ):
            # llama.cpp refuses to repeat a group that expands to too many rules (over
            # 2000, counting each `{0,20}` as 20): a rule of its own counts as one.
            tag = next((n.name for n in _walk(node.child) if isinstance(n, Tag)), "part")
            name = self.fresh(f"{tag}s" if node.max != 1 else f"optional-{tag}")
            self.rules[name] = unwrap(inner)
            inner = name
        return gbnf_repeat(inner, node.min, node.max)

    def transparent(self, node: Tag | Atomic | TriggerMark, tail: bool, where: _Where) -> str:
        """Wrappers that match exactly what their child does."""
        return self.expr(node.child, tail, where)

    visit_Tag = visit_Atomic = visit_TriggerMark = transparent

    def visit_Ref(self, node: Ref, tail: bool, where: _Where) -> str:
        return self.ref(node, where)

    def visit_Lazy(self, node: Lazy, tail: bool, where: _Where) -> str:
        # A family member: its family's grammar, written once for this place (and the
        # forms of its parts), with its names and parts put in. The first member of a
        # family a grammar writes at a place is written itself (many families have one
        # member; its parser, built from its parts, writes those from their families),
        # the others from the template. Where a template cannot be (a form that depends
        # on a name's characters, a rule name taken with another body) or would not pay
        # (``few``), the member is written itself.
        if node.slot >= 0:
            return self.place(node, tail, where)
        family = node.family
        if family is not None and self.seen(family, tail, where) and not self.few(node):
            template = _template(node, tail, where, self.finder)
            if template is not None and not any(
                _in_place(node.parts[k], w) for k, w in template.rule_places
            ):
                parts = node.parts
                # A template's shared rules are merged with its first member filled here:
                # the later ones add their own rules only.
                shared = id(template) not in self._filled
                filled = template.fill(
                    node.names, lambda k, t, w: self.expr(parts[k], t, w), shared
                )
                if self.merge(filled.rules):
                    if shared:
                        self._filled[id(template)] = template
                    self.schemas.update(template.schemas)
                    for key, name in template.untils:
                        self.untils.setdefault(key, name)
                    return filled.expr
        target = node.target()
        self.finder.walk(target, where)
        return self.expr(target, tail, where)

    def few(self, member: Lazy) -> bool:
        """Whether this grammar has too few members of ``member``'s family and form for a
        template to pay: making one costs about what writing two members does. Counted
        by the finder's walk of the grammar's roots, so that the grammar depends on itself
        alone; a member it did not count (in a template's representative) is not few."""
        return 0 < self.finder.members.get(self.finder.form_key(member), 0) < _TEMPLATE_MIN_MEMBERS

    def seen(self, family: Family, tail: bool, where: _Where) -> bool:
        """Whether a member of ``family`` was written at such a place before, in this
        grammar (so that a grammar is the same whatever other requests wrote before)."""
        key = (family, tail, where)
        if key in self._sightings:
            return True
        self._sightings.add(key)
        return False

    def place(self, node: Lazy, tail: bool, where: _Where) -> str:
        """A stand-in for a member's part, in a template's emitter: where the part goes."""
        if self.places is None:
            raise GrammarError(f"{node!r}: a stand-in outside a family's representative")
        self.places.append((node.slot, tail, where))
        return gbnf_template.slot_mark(len(self.places) - 1)

    def merge(self, rules: tuple[tuple[str, str], ...]) -> bool:
        """Add rules written elsewhere, unless a name is taken with another body."""
        have = self.rules
        if any(have.get(name, body) != body for name, body in rules):
            return False
        for name, body in rules:
            have[name] = body
        return True

    def visit_Until(self, node: Until, tail: bool, where: _Where) -> str:
        return self.until(node.delimiters)

    def visit_JsonSchema(self, node: JsonSchema, tail: bool, where: _Where) -> str:
        return self.schema(node)

    def visit_Json(self, node: Json, tail: bool, where: _Where) -> str:
        self.add_rules(_json_rules(node.single_quotes), repr(node))
        prefix = "rfc-pyjson-" if node.single_quotes else "rfc-json-"
        return prefix + node.kind

    def visit_Rest(self, node: Rest, tail: bool, where: _Where) -> str:
        return gbnf_repeat(ANY_CHAR, 0, None)

    def visit_End(self, node: End, tail: bool, where: _Where) -> str:
        if tail:
            return '""'
        raise GrammarError(f"{node!r} is only expressible in GBNF at the end of the grammar")

    def lookahead(self, node: Peek | Negate, tail: bool, where: _Where) -> str:
        raise GrammarError(
            f"lookahead {node!r} cannot be expressed in GBNF; use until()/until_one_of() "
            "or negate(...) + char_class(...) for a character exclusion"
        )

    visit_Peek = visit_Negate = lookahead

    def foreign(self, node: Parser, *args: object) -> str:
        raise GrammarError(f"no GBNF translation for {node!r}")

    def literal(self, node: Literal, before: bool) -> str:
        if before and len(node.value) > 1:
            return " ".join(gbnf_literal(ch) for ch in node.value)
        return gbnf_literal(node.value)

    def seq(self, items: tuple[Parser, ...], tail: bool, where: _Where = _NOWHERE) -> str:
        parts: list[str] = []
        before, after = self.finder.seq_wheres(items, where)
        i = 0
        last = len(items) - 1
        while i <= last:
            item = items[i]
            if isinstance(item, Negate) and i < last:
                # negate(single chars) + char class: a class difference.
                diff = _class_difference(item.child, items[i + 1])
                if diff is None:
                    raise GrammarError(
                        f"lookahead {item!r} followed by {items[i + 1]!r} cannot be expressed "
                        "in GBNF (only a character exclusion such as negate(char_class) + "
                        "char_class, or zero_or_more(negate(literals) + any_char()))"
                    )
                parts.append(diff)
                i += 2
                continue
            parts.append(self.expr(item, tail and i == last, (before[i], after[i])))
            i += 1
        return sequence(parts)

    def ref(self, node: Ref, where: _Where = _NOWHERE) -> str:
        key = (id(node.rules), node.name)
        name = self._ref_names.get(key)
        if name is None:
            target = node.target()
            if isinstance(target, Lazy) and target.slot >= 0:
                # A part that is a rule of its own here (the template holds it so; a member
                # whose part would be written in place is written itself, see visit_Lazy).
                if _in_place(target, self.finder.ref_where(node)):
                    self.unfit = True
            elif _is_lexeme(target, self.finder) and self._has_split(target):
                # llguidance would turn an all-terminal rule back into one greedy token.
                return group(self.expr(target, False, where))
            name = self.fresh(node.name)
            self._ref_names[key] = name
            # One rule for every place it is used: written for all of them at once.
            self.rules[name] = unwrap(self.expr(target, False, self.finder.ref_where(node)))
        return name

    def _has_split(self, node: Parser) -> bool:
        """Whether a literal reachable from node is written one character per string."""
        return any(isinstance(n, Literal) and n._uid in self.finder.split for n in _walk(node))

    def until(self, delimiters: tuple[str, ...]) -> str:
        key = tuple(sorted(set(delimiters)))
        name = self.untils.get(key)
        if name is None:
            # A name whose automaton's rules (the name, then name-1, name-2... per state)
            # are all free: ``until-x`` has a state ``until-x-2``, which is also what
            # ``until('</x_2>')`` would be called.
            stem = rule_name("until-" + "-".join(rule_name(d) for d in key)[:40])
            counter = 1
            while True:
                name = stem if counter == 1 else f"{stem}-{counter}"
                rules = _exclusion_rules(key, name)
                if not any(n in self.rules or n == "root" for n in rules):
                    break
                counter += 1
            self.untils[key] = name
            self.add_rules(rules, f"until{key!r}")
        return name

    def schema(self, node: JsonSchema) -> str:
        name = self._schema_names.get(node._uid)
        if name is not None:
            return name
        from autoparser.schema import schema_rules  # imported late: optional at import time

        prefix = self.fresh(node.name)
        del self.rules[prefix]
        result: Any = schema_rules(node.schema, prefix, document=node.document)
        if isinstance(result, tuple):
            root, rules = result
        else:
            root, rules = result.root, result.rules
        self.add_rules(rules, repr(node))
        self._schema_names[node._uid] = str(root)
        if node.document is None:
            self.schemas.add(schema_key(node.schema))
        return str(root)


# A family with fewer members in a grammar is written member by member (``_Emitter.few``).
_TEMPLATE_MIN_MEMBERS = 3

# What an inline group under a quantifier may expand to in llama.cpp (its limit is 2000).
_MAX_EXPANSION = 500
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')
_BOUNDS = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def _expanded_size(expr: str) -> int:
    """About how many rules llama.cpp makes of ``expr``: a group or quantifier one, a
    ``{m,n}`` repetition n (literals and classes left out)."""
    bare = _QUOTED.sub("", expr)
    bounded = sum(max(int(m.group(2) or 0), int(m.group(1))) for m in _BOUNDS.finditer(bare))
    return 1 + bare.count("(") + bare.count("*") + bare.count("+") + bare.count("?") + bounded


class _SingleChars(NodeVisitor["CharSet | None"]):
    """The set of characters a node matches when it always matches exactly one character."""

    __slots__ = ()

    def visit_Chars(self, node: Chars) -> CharSet | None:
        return node.charset if node.min == 1 and node.max == 1 else None

    def visit_Literal(self, node: Literal) -> CharSet | None:
        if len(node.value) != 1:
            return None
        cp = ord(node.value)
        return CharSet(((cp, cp),))

    def visit_Choice(self, node: Choice) -> CharSet | None:
        sets = [self.visit(a) for a in node.alternatives]
        if any(s is None or s.negated for s in sets):
            return None
        return CharSet.union(r for s in sets if s for r in s.ranges)

    def not_single(self, node: Parser, *args: object) -> CharSet | None:
        return None

    visit_End = visit_Rest = visit_Until = visit_Json = visit_Seq = visit_Repeat = not_single
    visit_Peek = visit_Negate = visit_Tag = visit_Atomic = visit_TriggerMark = not_single
    visit_Ref = visit_Lazy = foreign = not_single


_single_chars = _SingleChars().visit


def _class_difference(excluded: Parser, following: Parser) -> str | None:
    ex = _single_chars(excluded)
    base = _single_chars(following)
    if ex is None or base is None or ex.negated:
        return None
    if base.negated:
        return CharSet.union([*base.ranges, *ex.ranges], negated=True).gbnf()
    kept = subtract_ranges(base.ranges, ex.ranges)
    if not kept:
        raise GrammarError(f"negate({excluded!r}) + {following!r} matches nothing")
    return CharSet(tuple(kept)).gbnf()


def _exclusion_body(node: Parser) -> tuple[str, ...] | None:
    """Delimiters when node is ``negate(literal | ...) + any_char()`` (the until idiom)."""
    if not (isinstance(node, Seq) and len(node.items) == 2):
        return None
    look, anything = node.items
    if not isinstance(look, Negate) or not isinstance(anything, Chars):
        return None
    if not (anything.charset == CharSet((), negated=True) and anything.min == anything.max == 1):
        return None
    child = look.child
    alts = child.alternatives if isinstance(child, Choice) else (child,)
    if all(isinstance(a, Literal) and a.value for a in alts):
        return tuple(a.value for a in alts if isinstance(a, Literal))
    return None


def _char_choice(chs: list[str]) -> str:
    if len(chs) == 1:
        return gbnf_literal(chs[0])
    return CharSet.union((ord(c), ord(c)) for c in chs).gbnf()


def _exclusion_rules(delims: tuple[str, ...], base: str) -> dict[str, str]:
    """Rules for strings containing none of `delims` (an Aho-Corasick automaton).

    One rule per live automaton state, right-recursive (a tail call in every engine).
    A state accepts when no delimiter appended to the content completes an occurrence that
    starts inside the content, which makes ``until(d) d`` exact (for delimiter sets where
    none is a substring of another, except as a prefix); for border-free delimiters every
    state accepts, so ``until(d)`` at the end is exact too.
    """
    goto: list[dict[str, int]] = [{}]
    terminal = [False]
    for d in delims:
        s = 0
        for ch in d:
            nxt = goto[s].get(ch)
            if nxt is None:
                goto.append({})
                terminal.append(False)
                nxt = len(goto) - 1
                goto[s][ch] = nxt
            s = nxt
        terminal[s] = True
    fail = [0] * len(goto)
    dead = list(terminal)
    depth = [0] * len(goto)
    out_len = [0] * len(goto)  # longest delimiter ending at this state (0: none)
    queue = list(goto[0].values())
    for t in queue:
        depth[t] = 1
        out_len[t] = 1 if terminal[t] else 0
    while queue:
        s = queue.pop(0)
        for ch, t in goto[s].items():
            f = fail[s]
            while f and ch not in goto[f]:
                f = fail[f]
            fail[t] = goto[f].get(ch, 0) if goto[f].get(ch, 0) != t else 0
            depth[t] = depth[s] + 1
            dead[t] = dead[t] or dead[fail[t]]
            out_len[t] = max(depth[t] if terminal[t] else 0, out_len[fail[t]])
            queue.append(t)

    def delta(s: int, ch: str) -> int:
        while s and ch not in goto[s]:
            s = fail[s]
        return goto[s].get(ch, 0)

    def accepting(s: int) -> bool:
        # Content may end here if no delimiter appended next completes an occurrence that
        # starts inside the content (which `until` would have stopped at instead).
        for d in delims:
            t = s
            for i, ch in enumerate(d):
                t = delta(t, ch)
                if out_len[t] > i + 1:
                    return False
                if dead[t]:
                    break
        return True

    alphabet = sorted({ch for d in delims for ch in d})
    names = {0: base}
    live = [s for s in range(len(goto)) if not dead[s]]
    for s in live:
        if s:
            names[s] = f"{base}-{s}"
    rules: dict[str, str] = {}
    for s in live:
        alts: list[str] = []
        if accepting(s):
            alts.append('""')
        by_target: dict[int, list[str]] = {}
        for ch in alphabet:
            t = delta(s, ch)
            if not dead[t]:
                by_target.setdefault(t, []).append(ch)
        # Every character outside the alphabet goes back to the start state.
        to_start = set(by_target.pop(0, []))
        others = [c for c in alphabet if c not in to_start]
        negated = CharSet.union(((ord(c), ord(c)) for c in others), negated=True)
        alts.append(f"{negated.gbnf()} {base}")
        for t, chs in by_target.items():
            alts.append(f"{_char_choice(chs)} {names[t]}")
        rules[names[s]] = " | ".join(alts)
    return rules


class _Successors(NodeVisitor[tuple[Parser, ...]]):
    """A node's children; a rule reference leads to the rule's body, a lazy node to its
    family's representative (what every member's form is) or, alone, to what it builds."""

    __slots__ = ("finder",)

    def __init__(self, finder: _SplitFinder | None) -> None:
        self.finder = finder

    def visit_Ref(self, node: Ref) -> tuple[Parser, ...]:
        return (node.target(),)

    def visit_Lazy(self, node: Lazy) -> tuple[Parser, ...]:
        return (_form_of(node, self.finder),)

    def children(self, node: Parser, *args: object) -> tuple[Parser, ...]:
        return node.children()

    visit_Literal = visit_Chars = visit_End = visit_Rest = visit_Until = children
    visit_Json = visit_Seq = visit_Choice = visit_Repeat = visit_Peek = children
    visit_Negate = visit_Tag = visit_Atomic = visit_TriggerMark = foreign = children


def _successors(node: Parser, finder: _SplitFinder | None = None) -> tuple[Parser, ...]:
    """``_Successors`` of ``node`` (the finder's own visitor when one is given)."""
    if finder is None:
        return _SUCCESSORS(node)
    return finder.successors(node)


_SUCCESSORS = _Successors(None).visit


def _walk(root: Parser, stop: type[Parser] | None = None) -> Iterator[Parser]:
    """Every node reachable from root, depth-first in order, following rule references;
    nodes of type `stop` are yielded but not entered."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node._uid in seen:
            continue
        seen.add(node._uid)
        yield node
        if stop is None or not isinstance(node, stop):
            stack.extend(reversed(_successors(node)))


class _SplitFinder(NodeVisitor[None]):
    """Where to write a literal one character per string, so that llguidance reads it.

    llguidance lexes every string of a rule as one greedy token and can step back only one
    byte: where an ``until`` automaton's one-character tokens are allowed too, a literal such
    as "</think>" would make it reject text that starts like the literal and then differs
    ("</b>": the lexer has committed to "</" and cannot go back). A literal is split only
    where that can happen: where it may start while an ``until`` (or ``rest()``) is still
    running, or where one could start instead of it. Everywhere else the grammar keeps whole
    literals, which every engine reads the same and a person can read.

    The emitter asks, for each node, where it is (``_Where``: a free-text token may be read
    where it starts / right after it); a rule is written once for every place it is used,
    so its body is written for all of them (``ref_where``, gathered by walking the roots).
    """

    def __init__(self, roots: list[Parser] | None = None) -> None:
        self.split: set[int] = set()  # literals split somewhere
        self._refs: dict[tuple[int, str], _Where] = {}
        self._seen: set[tuple[int, bool, bool]] = set()
        self._nullable: dict[int, bool] = {}
        self._starts: dict[int, bool] = {}
        self._ends: dict[tuple[int, bool], bool] = {}
        self._before: dict[tuple[int, bool], tuple[tuple[Parser, ...], list[bool]]] = {}
        self._after: dict[tuple[int, bool], tuple[tuple[Parser, ...], list[bool]]] = {}
        self._alts: dict[int, tuple[tuple[Parser, ...], int, int]] = {}
        # Members the roots reach (and their parts), by family and their parts' forms.
        self.members: dict[tuple[Family, tuple[tuple[bool, ...], ...]], int] = {}
        self._form_keys: dict[int, tuple[Family, tuple[tuple[bool, ...], ...]]] = {}
        # Whether a rule with a node as its body is one llguidance lexeme, per node.
        self.lexemes = _Lexeme()
        # What each node kind can do, wherever it is (memoised by the three methods below).
        self._nullable_of = _Nullable(self).visit
        self.successors = _Successors(self).visit
        self._starts_of = _StartsFree(self).visit
        self._ends_of = _EndsFree(self).visit
        self._counting = True  # members are counted while the roots are walked only
        for root in roots or []:
            self.walk(root, _NOWHERE)
        self._counting = False

    # Where the parts of a node are, given where the node is. Both are asked once per part,
    # so each keeps its running values per sequence or choice (linear, not quadratic, in a
    # choice of a thousand tools).
    def seq_where(self, items: tuple[Parser, ...], index: int, where: _Where) -> _Where:
        before, after = self.seq_wheres(items, where)
        return before[index], after[index]

    def seq_wheres(self, items: tuple[Parser, ...], where: _Where) -> tuple[list[bool], list[bool]]:
        """``seq_where`` of every item at once: (before, after) lists indexed by item."""
        return self._seq_before(items, where[0]), self._seq_after(items, where[1])

    def _seq_before(self, items: tuple[Parser, ...], start: bool) -> list[bool]:
        """Whether a free-text token may still run where each item (and the end) starts."""
        key = (id(items), start)
        cached = self._before.get(key)
        if cached is not None and cached[0] is items:
            return cached[1]
        running, out = start, [start]
        for item in items:
            running = self.ends_free(item, running) or (
                self.nullable(item) and self.starts_free(item)
            )
            out.append(running)
        self._before[key] = (items, out)
        return out

    def _seq_after(self, items: tuple[Parser, ...], after: bool) -> list[bool]:
        """Whether a free-text token may be read right after each item."""
        key = (id(items), after)
        cached = self._after.get(key)
        if cached is not None and cached[0] is items:
            return cached[1]
        out = [after] * (len(items) + 1)
        follows = after
        for i in range(len(items) - 1, 0, -1):
            item = items[i]
            if self.starts_free(item):
                follows = True
            elif not self.nullable(item):
                follows = False
            out[i - 1] = follows
        self._after[key] = (items, out)
        return out

    def choice_where(self, alts: tuple[Parser, ...], index: int, where: _Where) -> _Where:
        cached = self._alts.get(id(alts))
        if cached is None or cached[0] is not alts:
            starts = sum(self.starts_free(a) for a in alts)
            nulls = sum(self.nullable(a) for a in alts)
            cached = self._alts[id(alts)] = (alts, starts, nulls)
        alt = alts[index]
        rival = cached[1] - self.starts_free(alt) > 0 or (
            where[1] and cached[2] - self.nullable(alt) > 0
        )
        return where[0] or rival, where[1]

    def repeat_where(self, node: Repeat, where: _Where) -> _Where:
        before, after = where
        more = node.max is None or node.max > 1
        once = self.ends_free(node.child, before)
        start = before or (more and once) or (after and (node.min == 0 or more))
        return start, after or (more and self.starts_free(node.child))

    def ref_where(self, node: Ref) -> _Where:
        return self._refs.get((id(node.rules), node.name), _NOWHERE)

    # What a node can do, wherever it is.
    # The three memos below are written out (no closure per call): the finder asks them
    # hundreds of thousands of times for a thousand tools.
    def nullable(self, node: Parser) -> bool:
        """Whether the node can match the empty string."""
        cache, key = self._nullable, node._uid
        value = cache.get(key)
        if value is None:
            cache[key] = False  # a rule reached again through itself adds nothing
            value = cache[key] = self._nullable_of(node)
        return value

    def starts_free(self, node: Parser) -> bool:
        """Whether the node's first token can be one of an ``until``'s (or ``rest()``'s)."""
        cache, key = self._starts, node._uid
        value = cache.get(key)
        if value is None:
            cache[key] = False
            value = cache[key] = self._starts_of(node)
        return value

    def ends_free(self, node: Parser, before: bool) -> bool:
        """Whether an ``until`` may still be running after the node (``before``: one may be
        running where the node starts)."""
        cache, key = self._ends, (node._uid, before)
        value = cache.get(key)
        if value is None:
            cache[key] = False
            value = cache[key] = self._ends_of(node, before)
        return value

    def _follows_free(self, rest: tuple[Parser, ...], after: bool) -> bool:
        """Whether a free-text token may be read where ``rest`` starts."""
        for item in rest:
            if self.starts_free(item):
                return True
            if not self.nullable(item):
                return False
        return after

    # Walking the roots: where each rule is used, and which literals are split somewhere.
    def walk(self, node: Parser, where: _Where) -> None:
        key = (node._uid, *where)
        if key in self._seen:
            return
        self._seen.add(key)
        self.visit(node, where)

    def visit_Literal(self, node: Literal, where: _Where) -> None:
        if where[0] and len(node.value) > 1:
            self.split.add(node._uid)

    def visit_Seq(self, node: Seq, where: _Where) -> None:
        items = node.items
        before, after = self.seq_wheres(items, where)
        for i, item in enumerate(items):
            self.walk(item, (before[i], after[i]))

    def visit_Choice(self, node: Choice, where: _Where) -> None:
        for i, alt in enumerate(node.alternatives):
            self.walk(alt, self.choice_where(node.alternatives, i, where))

    def visit_Repeat(self, node: Repeat, where: _Where) -> None:
        if _exclusion_body(node.child) is None:
            self.walk(node.child, self.repeat_where(node, where))

    def visit_Ref(self, node: Ref, where: _Where) -> None:
        ref = (id(node.rules), node.name)
        old = self._refs.get(ref, _NOWHERE)
        merged = (old[0] or where[0], old[1] or where[1])
        self._refs[ref] = merged
        self.walk(node.target(), merged)

    def visit_Lazy(self, node: Lazy, where: _Where) -> None:
        # A family member is written from its family's template, found on its own; a
        # stand-in is where a part goes.
        if node.slot >= 0:
            return
        if node.family is None:
            self.walk(node.target(), where)
        elif self._counting:
            self.count(node)

    def form_key(self, member: Lazy) -> tuple[Family, tuple[tuple[bool, ...], ...]]:
        """A member's family and its parts' forms: what its template is made for (kept
        per member: counted, then asked again when the member is written)."""
        key = self._form_keys.get(member._uid)
        if key is None:
            family = member.family
            assert family is not None
            key = self._form_keys[member._uid] = (
                family,
                tuple(_part_form(p, self) for p in member.parts),
            )
        return key

    def count(self, member: Lazy) -> None:
        """Count a family member, and the members among its parts."""
        key = self.form_key(member)
        self.members[key] = self.members.get(key, 0) + 1
        for part in member.parts:
            if isinstance(part, Lazy) and part.family is not None and part.slot < 0:
                self.count(part)

    def lookahead(self, node: Peek | Negate, where: _Where) -> None:
        pass  # not emitted but as a character exclusion, which holds no literal

    visit_Peek = visit_Negate = lookahead

    def children_here(self, node: Parser, *args: object) -> None:
        where = args[0]
        assert isinstance(where, tuple)
        for child in node.children():
            self.walk(child, where)

    visit_Chars = visit_End = visit_Rest = visit_Until = visit_Json = children_here
    visit_Tag = visit_Atomic = visit_TriggerMark = foreign = children_here


class _Nullable(facts.Nullable):
    """``facts.Nullable`` as one emission asks it: ``_SplitFinder.nullable`` answers for the
    children (kept per finder, which writes a member from its family's form), and a member
    of a family answers from that form, never built for it."""

    # ``of`` is the finder's memo itself (an instance slot over ``Fact.of``: no frame
    # between a node and its children's answers, asked hundreds of thousands of times).
    __slots__ = ("finder", "of")

    def __init__(self, finder: _SplitFinder) -> None:
        super().__init__()
        self.finder = finder
        self.of = finder.nullable  # type: ignore[method-assign]

    def visit_Ref(self, node: Ref) -> bool:
        return self.of(node.target())

    def foreign(self, node: Parser, *args: object) -> bool:
        return all(self.of(child) for child in _successors(node, self.finder))

    def visit_Lazy(self, node: Lazy) -> bool:
        if node.family is None:
            return self.of(node.target())
        return _part_form(node, self.finder)[_NULLABLE]  # a family's, kept with it


class _StartsFree(NodeVisitor[bool]):
    """Whether the node's first token can be one of an ``until``'s (or ``rest()``'s)
    (``_SplitFinder.starts_free`` answers for its children, once per node)."""

    def __init__(self, finder: _SplitFinder) -> None:
        self.finder = finder

    def free(self, node: Parser) -> bool:
        return True

    visit_Until = visit_Rest = free

    def never(self, node: Parser) -> bool:
        return False

    visit_Literal = visit_Chars = visit_Json = visit_End = visit_Peek = visit_Negate = never

    def visit_Seq(self, node: Seq) -> bool:
        return self.finder._follows_free(node.items, False)

    def visit_Repeat(self, node: Repeat) -> bool:
        return _is_free_text(node) or self.by_children(node)

    def by_children(self, node: Parser) -> bool:
        starts_free = self.finder.starts_free
        return any(starts_free(child) for child in node.children())

    visit_Choice = visit_Tag = visit_Atomic = visit_TriggerMark = by_children

    def successors(self, node: Parser, *args: object) -> bool:
        return any(self.finder.starts_free(child) for child in _successors(node, self.finder))

    visit_Ref = foreign = successors

    def visit_Lazy(self, node: Lazy) -> bool:
        if node.family is None:
            return self.successors(node)
        return _part_form(node, self.finder)[_STARTS_FREE]


class _EndsFree(NodeVisitor[bool]):
    """Whether an ``until`` may still be running after the node, given whether one may be
    running where it starts (``_SplitFinder.ends_free`` answers for its children)."""

    def __init__(self, finder: _SplitFinder) -> None:
        self.finder = finder

    def free(self, node: Parser, before: bool) -> bool:
        return True

    visit_Until = visit_Rest = free

    def if_empty(self, node: Literal | Chars | Json, before: bool) -> bool:
        return before and self.finder.nullable(node)

    visit_Literal = visit_Chars = visit_Json = if_empty

    def reads_nothing(self, node: End | Peek | Negate, before: bool) -> bool:
        return before

    visit_End = visit_Peek = visit_Negate = reads_nothing

    def visit_Seq(self, node: Seq, before: bool) -> bool:
        # Where the end of the sequence is: the last of the running values (what follows
        # each item is not needed here).
        return self.finder._seq_before(node.items, before)[-1]

    def visit_Repeat(self, node: Repeat, before: bool) -> bool:
        if _is_free_text(node):
            return True
        ends_free = self.finder.ends_free
        once = ends_free(node.child, before)
        again = ends_free(node.child, before or once)
        return once or again or (before and node.min == 0)

    def by_children(self, node: Parser, before: bool) -> bool:
        ends_free = self.finder.ends_free
        return any(ends_free(child, before) for child in node.children())

    visit_Choice = visit_Tag = visit_Atomic = visit_TriggerMark = by_children

    def successors(self, node: Parser, *args: object) -> bool:
        before = args[0]
        assert isinstance(before, bool)
        finder = self.finder
        return any(finder.ends_free(child, before) for child in _successors(node, finder))

    visit_Ref = foreign = successors

    def visit_Lazy(self, node: Lazy, before: bool) -> bool:
        if node.family is None:
            return self.successors(node, before)
        facts = _part_form(node, self.finder)
        return facts[_ENDS_FREE_AFTER_FREE if before else _ENDS_FREE]


def _is_free_text(node: Parser) -> bool:
    """Nodes written as one-character tokens over (nearly) any text: until, rest()."""
    if isinstance(node, (Until, Rest)):
        return True
    return isinstance(node, Repeat) and _exclusion_body(node.child) is not None


class _Lexeme(NodeVisitor[bool]):
    """Whether llguidance would make a rule with this body a single lexeme (all terminals,
    no rule reached again through itself). ``of`` answers once per node."""

    def __init__(self) -> None:
        self._found: dict[int, bool] = {}

    def of(self, node: Parser) -> bool:
        found = self._found.get(node._uid)
        if found is None:
            self._found[node._uid] = False  # a rule reached again through itself: no lexeme
            found = self._found[node._uid] = self.visit(node)
        return found

    def terminal(self, node: Parser) -> bool:
        return True

    visit_Literal = visit_Chars = visit_Rest = visit_End = terminal

    def not_terminal(self, node: Parser) -> bool:
        return False

    visit_JsonSchema = visit_Until = not_terminal

    def visit_Json(self, node: Json) -> bool:
        return node.kind in ("string", "number", "literal")

    def visit_Ref(self, node: Ref) -> bool:
        return self.of(node.target())

    def visit_Repeat(self, node: Repeat) -> bool:
        return _exclusion_body(node.child) is None and self.children(node)

    def visit_Lazy(self, node: Lazy) -> bool:
        if node.family is not None:
            return _part_form(node)[_LEXEME]
        return all(self.of(k) for k in _successors(node))

    def children(self, node: Parser, *args: object) -> bool:
        return all(self.of(k) for k in node.children())

    visit_Seq = visit_Choice = visit_Peek = visit_Negate = children
    visit_Tag = visit_Atomic = visit_TriggerMark = foreign = children


def _is_lexeme(node: Parser, finder: _SplitFinder | None = None) -> bool:
    """Whether llguidance would make a rule with this body a single lexeme (all terminals);
    kept per node by ``finder`` when given (one emitter's: nodes are immutable)."""
    return (finder.lexemes if finder is not None else _Lexeme()).of(node)


# --- lazy triggers -------------------------------------------------------------------------


def _find_triggers(root: Parser) -> list[TriggerMark]:
    """Trigger nodes reachable from root (following rule references), in order."""
    return [n for n in _walk(root, stop=TriggerMark) if isinstance(n, TriggerMark)]


class _LeadingWords(NodeVisitor[list[GrammarTrigger]]):
    """The trigger words a match of a node must start with (for the trigger ``trig``)."""

    def __init__(self, trig: TriggerMark) -> None:
        self.trig = trig

    def visit_Token(self, node: Token) -> list[GrammarTrigger]:
        return [GrammarTrigger("token", node.value)]

    def visit_Literal(self, node: Literal) -> list[GrammarTrigger]:
        if node.value:
            return [GrammarTrigger("word", node.value)]
        return self.none(node)

    def through(self, node: Tag | Atomic | TriggerMark) -> list[GrammarTrigger]:
        return self.visit(node.child)

    visit_Tag = visit_Atomic = visit_TriggerMark = through

    def visit_Ref(self, node: Ref) -> list[GrammarTrigger]:
        return self.visit(node.target())

    def visit_Lazy(self, node: Lazy) -> list[GrammarTrigger]:
        family = node.family
        if family is None:
            return self.visit(node.target())
        if node.slot >= 0:
            return self.none(node)  # a part of a call: no call starts with one
        # The representative's words, with this member's names in.
        found = self.visit(_form_of(node))
        names = dict(zip(family.placeholders, node.names, strict=True))
        return [GrammarTrigger(w.kind, _with_names(w.value, names), w.reason) for w in found]

    def visit_Choice(self, node: Choice) -> list[GrammarTrigger]:
        return [w for a in node.alternatives for w in self.visit(a)]

    def visit_Seq(self, node: Seq) -> list[GrammarTrigger]:
        optional_words: list[GrammarTrigger] = []
        for item in node.items:
            if isinstance(item, Chars) and item.min == 0:
                continue  # optional leading whitespace and the like
            if isinstance(item, Repeat) and item.min == 0 and item.max == 1:
                # An optional opener (a call prefix token): a match starts with it or
                # with what follows.
                optional_words += self.visit(item.child)
                continue
            return optional_words + self.visit(item)
        return self.none(node)

    def visit_Repeat(self, node: Repeat) -> list[GrammarTrigger]:
        return self.visit(node.child) if node.min > 0 else self.none(node)

    def none(self, node: Parser, *args: object) -> list[GrammarTrigger]:
        raise GrammarError(f"{self.trig!r}: cannot find a leading literal to use as a trigger word")

    visit_Chars = visit_End = visit_Rest = visit_Until = visit_Json = none
    visit_Peek = visit_Negate = foreign = none


def _with_names(text: str, names: Mapping[str, Name]) -> str:
    """``text`` with each placeholder replaced by its member's name as written."""
    for holder, name in names.items():
        text = text.replace(holder, name.text)
    return text


def _leading_pattern(node: Parser) -> str | None:
    """A regex for the start of `node`, up to and including its first literal, or None."""
    finder = _LeadingPattern()
    if finder.visit(node) is None or not finder.pieces:
        return None
    return "".join(finder.pieces)


class _LeadingPattern(NodeVisitor["bool | None"]):
    """Writes the start of a node as regex pieces, up to its first literal: True (written
    up to it), False (written whole: what follows it goes on), None (not expressible)."""

    __slots__ = ("pieces",)

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def visit_Literal(self, node: Literal) -> bool | None:
        self.pieces.append(re.escape(node.value))
        return bool(node.value)

    def visit_Chars(self, node: Chars) -> bool | None:
        hi = "" if node.max is None else str(node.max)
        self.pieces.append(f"{node.charset.regex()}{{{node.min},{hi}}}")
        return False

    def visit_Seq(self, node: Seq) -> bool | None:
        for item in node.items:
            done = self.visit(item)
            if done is None or done:
                return done
        return False

    def visit_Choice(self, node: Choice) -> bool | None:
        words = [a.value for a in node.alternatives if isinstance(a, Literal)]
        if len(words) < len(node.alternatives):
            return None
        self.pieces.append("(?:" + "|".join(map(re.escape, words)) + ")")
        return True

    def through(self, node: Tag | Atomic | TriggerMark) -> bool | None:
        return self.visit(node.child)

    visit_Tag = visit_Atomic = visit_TriggerMark = through

    def visit_Ref(self, node: Ref) -> bool | None:
        return self.visit(node.target())

    def visit_Lazy(self, node: Lazy) -> bool | None:
        return self.visit(node.target())  # what it builds (a pattern holds no placeholder)

    def inexpressible(self, node: Parser, *args: object) -> bool | None:
        return None

    visit_End = visit_Rest = visit_Until = visit_Json = visit_Repeat = inexpressible
    visit_Peek = visit_Negate = foreign = inexpressible
