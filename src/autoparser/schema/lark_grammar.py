"""Translate a Lark grammar (a ``custom`` tool's ``format``) into one regular expression.

OpenAI's Responses API lets a client constrain a freeform tool's input with a Lark grammar
(Codex sends its ``apply_patch`` tool that way). The server serves such a tool as a
function of one string argument, so the grammar becomes that string's JSON Schema
``pattern``: the regex path (``schema/regex.py``) then writes it into the GBNF, escaped as
the argument's JSON needs, and every tool-call format gets it for free.

A regex reaches only regular languages: the subset translated is what clients send (rules,
terminals, string literals with the ``i`` flag, ``/regex/`` terminals with the ``s``, ``m``
and ``u`` flags, ``"a".."z"`` ranges, alternation, grouping, ``?`` ``*`` ``+`` ``[...]``,
``~ n`` and ``~ n..m``, ``%import common.X``, ``%ignore``, ``?rule``/``!rule``/``_rule``,
``-> alias``, priorities). A recursive rule, a template, a ``%declare`` or llguidance's
own extensions raise :class:`LarkGrammarError` with ``unsupported`` set and the construct
named; a grammar that is not valid Lark raises it with ``unsupported`` unset.

Lark reads literals and regexes as Python does (``ast.literal_eval``, ``re``), so does
this. A lexer (Lark's, llguidance's) may turn down a string the language holds when a
greedy terminal swallows what the next one needed; the regex accepts the language, a
superset that the usual line-shaped grammars (``apply_patch``) do not reach.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator, Mapping

from autoparser.cache import CACHES, Store
from autoparser.errors import SchemaError
from autoparser.schema.regex import translate_pattern

# The most text a translated grammar may come to (a rule used in many places is copied
# into each): past it the translation is refused rather than handed to the engine.
MAX_REGEX_CHARS = 65_536
# The largest count ``~ n..m`` may give: an engine spells a counted repetition out.
MAX_REPEAT = 10_000


class LarkGrammarError(SchemaError):
    """A Lark grammar is not valid Lark (``unsupported`` unset) or uses a construct a
    regular expression cannot express (``unsupported`` set); ``detail`` names it."""

    def __init__(self, detail: str, *, unsupported: bool) -> None:
        super().__init__(detail)
        self.unsupported = unsupported


def _invalid(what: str) -> LarkGrammarError:
    return LarkGrammarError(what, unsupported=False)


def _unsupported(what: str) -> LarkGrammarError:
    return LarkGrammarError(f"{what} cannot be expressed in the grammar", unsupported=True)


# Lark's common.lark terminals, written as the regexes of the languages they name.
_SIGNED = r"[+\-]?"
_INT = r"[0-9]+"
_DECIMAL = rf"(?:{_INT}\.(?:{_INT})?|\.{_INT})"
_EXP = rf"[eE]{_SIGNED}{_INT}"
_FLOAT = rf"(?:{_INT}{_EXP}|{_DECIMAL}(?:{_EXP})?)"
_NUMBER = rf"(?:{_FLOAT}|{_INT})"
COMMON: Mapping[str, str] = {
    "DIGIT": "[0-9]",
    "HEXDIGIT": "[a-fA-F0-9]",
    "INT": _INT,
    "SIGNED_INT": f"{_SIGNED}{_INT}",
    "DECIMAL": _DECIMAL,
    "_EXP": _EXP,
    "FLOAT": _FLOAT,
    "SIGNED_FLOAT": f"{_SIGNED}{_FLOAT}",
    "NUMBER": _NUMBER,
    "SIGNED_NUMBER": f"{_SIGNED}{_NUMBER}",
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\[^\n])*"',
    "LCASE_LETTER": "[a-z]",
    "UCASE_LETTER": "[A-Z]",
    "LETTER": "[A-Za-z]",
    "WORD": "[A-Za-z]+",
    "CNAME": "[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": "[ \\t]+",
    "WS": "[ \\t\\f\\r\\n]+",
    "CR": "\\r",
    "LF": "\\n",
    "NEWLINE": "(?:\\r?\\n)+",
    "SH_COMMENT": "#[^\\n]*",
    "CPP_COMMENT": "//[^\\n]*",
    "C_COMMENT": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "SQL_COMMENT": "--[^\\n]*",
}

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\f\r]+|//[^\n]*|\\\n)
    |(?P<nl>\n)
    |(?P<string>"(?:[^"\\\n]|\\.)*"i?)
    |(?P<regex>/(?!/)(?:[^/\\\n]|\\.)+/[a-z]*)
    |(?P<directive>%[A-Za-z_]+)
    |(?P<name>[?!]?[A-Za-z_][A-Za-z_0-9]*)
    |(?P<number>[0-9]+)
    |(?P<op>\.\.|->|[:|()\[\]?*+~,{}.])
    """,
    re.VERBOSE,
)
_TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")


@dataclasses.dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int


def _tokens(text: str) -> Iterator[_Token]:
    line, pos = 1, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None and text[pos] in "<&":
            raise _unsupported(f"line {line}: llguidance's {text[pos]!r} extension")
        if match is None:
            raise _invalid(f"line {line}: unexpected {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            yield _Token(kind, match.group(), line)
        line += match.group().count("\n")
        pos = match.end()


def _statements(text: str) -> list[list[_Token]]:
    """The grammar's statements: a newline ends one unless inside brackets or the next
    line goes on with ``|``."""
    statements: list[list[_Token]] = [[]]
    depth = 0
    pending_newline = False
    for token in _tokens(text):
        if token.kind == "nl":
            pending_newline = depth == 0
            continue
        if pending_newline and not (token.kind == "op" and token.text == "|"):
            statements.append([])
        pending_newline = False
        if token.kind == "op" and token.text in "([{":
            depth += 1
        elif token.kind == "op" and token.text in ")]}":
            depth = max(0, depth - 1)
        statements[-1].append(token)
    return [s for s in statements if s]


# The expression tree of one definition.
@dataclasses.dataclass(frozen=True)
class _Regex:
    """A piece of regex that is one token of the grammar (a literal, a range, a regex)."""

    text: str


@dataclasses.dataclass(frozen=True)
class _Ref:
    name: str
    line: int


@dataclasses.dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclasses.dataclass(frozen=True)
class _Alt:
    options: tuple[_Node, ...]


@dataclasses.dataclass(frozen=True)
class _Repeat:
    item: _Node
    low: int
    high: int | None


_Node = _Regex | _Ref | _Seq | _Alt | _Repeat


def _literal(token: _Token) -> str:
    """The regex of a string literal (``"..."``, ``"..."i``)."""
    text, folded = (token.text[:-1], True) if token.text.endswith("i") else (token.text, False)
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        raise _invalid(f"line {token.line}: bad string literal {token.text}") from None
    if not isinstance(value, str):
        raise _invalid(f"line {token.line}: bad string literal {token.text}")
    if not folded:
        return re.escape(value)
    return "".join(map(_either_case, value))


def _either_case(char: str) -> str:
    """One character of a case-folded literal: both its cases where it has two."""
    lower, upper = char.lower(), char.upper()
    if lower == upper or len(lower) != 1 or len(upper) != 1:
        return re.escape(char)
    return f"[{lower}{upper}]"


def _dot_all(pattern: str) -> str:
    """``pattern`` with each ``.`` outside a character class matching newlines too (the
    ``s`` flag, which the regex path takes no inline flag for)."""
    out: list[str] = []
    for piece in re.finditer(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|.", pattern, re.DOTALL):
        out.append(r"[\s\S]" if piece.group() == "." else piece.group())
    return "".join(out)


# The regex path's wording around the construct it names (the pattern, the offset).
_PATTERN_NOISE = re.compile(r"^pattern .*?: | \(offset \d+\) cannot be expressed in a grammar$")


def _regex(token: _Token) -> str:
    """The regex of a ``/.../flags`` terminal, checked by Python's ``re`` (as Lark reads
    it) and by the regex path (what the grammar can express)."""
    end = token.text.rindex("/")
    body, flags = token.text[1:end], token.text[end + 1 :]
    body = re.sub(r"\\(\\)|\\/", lambda m: m.group() if m.group(1) else "/", body)
    unknown = set(flags) - set("imslux")
    if unknown:
        raise _invalid(f"line {token.line}: unknown regex flag {''.join(sorted(unknown))!r}")
    try:
        re.compile(body)
    except re.error as exc:
        raise _invalid(f"line {token.line}: bad regex {token.text}: {exc}") from None
    for flag in "ix":
        if flag in flags:
            raise _unsupported(f"line {token.line}: the {flag!r} flag of regex {token.text}")
    if "s" in flags:
        body = _dot_all(body)
    try:
        translate_pattern(f"^(?:{body})$", "")
    except SchemaError as exc:
        why = re.sub(
            r"^pattern .*?: | \(offset \d+\) cannot be expressed in a grammar$", "", exc.detail
        )
        raise _unsupported(f"line {token.line}: regex {token.text} ({why})") from None
    return body


class _Reader:
    """Recursive descent over one statement's tokens."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, text: str | None = None, kind: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        token = self.tokens[self.pos]
        return (text is None or token.text == text) and (kind is None or token.kind == kind)

    def take(self) -> _Token:
        if self.pos >= len(self.tokens):
            line = self.tokens[-1].line if self.tokens else 0
            raise _invalid(f"line {line}: the definition ends too soon")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def expect(self, text: str) -> _Token:
        token = self.take()
        if token.text != text:
            raise _invalid(f"line {token.line}: expected {text!r}, got {token.text!r}")
        return token

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def expansions(self) -> _Node:
        options = [self.alias()]
        while self.peek("|"):
            self.take()
            options.append(self.alias())
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def alias(self) -> _Node:
        node = self.sequence()
        if self.peek("->"):
            self.take()
            if not self.peek(kind="name"):
                raise _invalid(f"line {self.take().line}: '->' needs a name")
            self.take()
        return node

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while not self.at_end() and not any(self.peek(t) for t in ("|", ")", "]", "->")):
            items.append(self.repeated(self.atom()))
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def repeated(self, node: _Node) -> _Node:
        if self.peek("?"):
            self.take()
            return _Repeat(node, 0, 1)
        if self.peek("*"):
            self.take()
            return _Repeat(node, 0, None)
        if self.peek("+"):
            self.take()
            return _Repeat(node, 1, None)
        if self.peek("~"):
            line = self.take().line
            low = self._count(line)
            high = low
            if self.peek(".."):
                self.take()
                high = self._count(line)
            if high < low:
                raise _invalid(f"line {line}: repetition ~ {low}..{high} has its bounds reversed")
            if high > MAX_REPEAT:
                raise _unsupported(f"line {line}: a repetition ~ {high} (above {MAX_REPEAT})")
            return _Repeat(node, low, high)
        return node

    def _count(self, line: int) -> int:
        if not self.peek(kind="number"):
            raise _invalid(f"line {line}: '~' needs a number")
        return int(self.take().text)

    def atom(self) -> _Node:
        token = self.take()
        if token.text in ("(", "["):
            inner = self.expansions()
            if token.text == "(":
                self.expect(")")
                return inner
            self.expect("]")
            return _Repeat(inner, 0, 1)
        if token.kind == "string":
            if self.peek(".."):
                self.take()
                return _Regex(_range(token, self.take()))
            return _Regex(_literal(token))
        if token.kind == "regex":
            return _Regex(_regex(token))
        if token.kind == "directive":
            raise _unsupported(f"line {token.line}: the directive {token.text}")
        if token.kind == "name" and token.text[0] not in "?!":
            if self.peek("{"):
                raise _unsupported(f"line {token.line}: the template use {token.text}{{...}}")
            return _Ref(token.text, token.line)
        raise _invalid(f"line {token.line}: unexpected {token.text!r}")


def _range(low: _Token, high: _Token) -> str:
    if high.kind != "string":
        raise _invalid(f"line {low.line}: a range '..' needs a string after it")
    first, last = _char(low), _char(high)
    if ord(last) < ord(first):
        raise _invalid(f"line {low.line}: range {low.text}..{high.text} is reversed")
    return f"[{re.escape(first)}-{re.escape(last)}]"


def _char(token: _Token) -> str:
    try:
        value = ast.literal_eval(token.text)
    except (SyntaxError, ValueError):
        value = None
    if not isinstance(value, str) or len(value) != 1:
        raise _invalid(f"line {token.line}: a range's ends are single characters")
    return value


@dataclasses.dataclass
class _Grammar:
    rules: dict[str, _Node] = dataclasses.field(default_factory=dict)
    terminals: dict[str, _Node] = dataclasses.field(default_factory=dict)
    ignored: list[_Node] = dataclasses.field(default_factory=list)


def _directive(tokens: list[_Token], grammar: _Grammar) -> None:
    head = tokens[0]
    if head.text == "%import":
        _import(tokens, grammar)
    elif head.text == "%ignore":
        reader = _Reader(tokens[1:])
        grammar.ignored.append(reader.expansions())
        if not reader.at_end():
            raise _invalid(f"line {head.line}: unexpected {reader.take().text!r} in %ignore")
    else:
        raise _unsupported(f"line {head.line}: the directive {head.text}")


def _import(tokens: list[_Token], grammar: _Grammar) -> None:
    """``%import common.X``, ``%import common.X -> Y``, ``%import common (X, Y)``."""
    line = tokens[0].line
    texts = [t.text for t in tokens[1:]]
    if not texts or texts[0] != "common":
        module = "".join(texts[: texts.index("(")] if "(" in texts else texts)
        raise _unsupported(f"line {line}: %import of {module or 'nothing'} (only common is known)")
    names: list[tuple[str, str]] = []
    if len(texts) >= 3 and texts[1] == ".":
        alias = texts[4] if len(texts) == 5 and texts[3] == "->" else texts[2]
        if len(texts) not in (3, 5) or (len(texts) == 5 and texts[3] != "->"):
            raise _invalid(f"line {line}: bad %import")
        names.append((texts[2], alias))
    elif len(texts) >= 3 and texts[1] == "(" and texts[-1] == ")":
        names += [(n, n) for n in texts[2:-1] if n != ","]
    else:
        raise _invalid(f"line {line}: bad %import")
    for name, alias in names:
        if name not in COMMON:
            raise _unsupported(f"line {line}: common.{name} (not a terminal of common)")
        grammar.terminals[alias] = _Regex(COMMON[name])


def _definition(tokens: list[_Token], grammar: _Grammar) -> None:
    head = tokens[0]
    name = head.text.lstrip("?!")
    rest = tokens[1:]
    if rest and rest[0].text == "{":
        raise _unsupported(f"line {head.line}: the template {name}{{...}}")
    if len(rest) >= 2 and rest[0].text == "." and rest[1].kind == "number":
        rest = rest[2:]  # a priority: which parse wins, not what is accepted
    if not rest or rest[0].text != ":":
        raise _invalid(f"line {head.line}: expected ':' after {head.text!r}")
    reader = _Reader(rest[1:])
    body = reader.expansions()
    if not reader.at_end():
        raise _invalid(f"line {head.line}: unexpected {reader.take().text!r}")
    if _TERMINAL_NAME.fullmatch(name) and head.text == name:
        table = grammar.terminals
    elif _RULE_NAME.fullmatch(name):
        table = grammar.rules
    else:
        raise _invalid(f"line {head.line}: {head.text!r} is neither a rule nor a terminal name")
    if name in table:
        raise _invalid(f"line {head.line}: {name!r} is defined twice")
    table[name] = body


def _read(text: str) -> _Grammar:
    grammar = _Grammar()
    for tokens in _statements(text):
        head = tokens[0]
        if head.kind == "directive":
            _directive(tokens, grammar)
        elif head.kind == "name":
            _definition(tokens, grammar)
        else:
            raise _invalid(f"line {head.line}: a statement starts with {head.text!r}")
    if "start" not in grammar.rules:
        raise _invalid("no 'start' rule")
    return grammar


class _Writer:
    """The regex of each definition, every token preceded by what ``%ignore`` allows."""

    def __init__(self, grammar: _Grammar) -> None:
        self.grammar = grammar
        self.done: dict[tuple[str, bool], str] = {}
        self.open: list[str] = []
        ignored = [self.node(n, in_rule=False) for n in grammar.ignored]
        self.skip = f"(?:{'|'.join(ignored)})*" if ignored else ""

    def name(self, ref: _Ref, in_rule: bool) -> str:
        terminal = ref.name in self.grammar.terminals
        if not terminal and not in_rule:
            raise _invalid(f"line {ref.line}: terminal uses the rule {ref.name!r}")
        key = (ref.name, in_rule and not terminal)
        if key in self.done:
            text = self.done[key]
        else:
            if ref.name in self.open:
                cycle = " -> ".join([*self.open[self.open.index(ref.name) :], ref.name])
                raise _unsupported(f"the recursive rule {ref.name!r} ({cycle})")
            table = self.grammar.terminals if terminal else self.grammar.rules
            if ref.name not in table:
                hint = " (import it with %import common.NAME?)" if ref.name.isupper() else ""
                raise _invalid(f"line {ref.line}: {ref.name!r} is not defined{hint}")
            self.open.append(ref.name)
            text = self.node(table[ref.name], in_rule=not terminal)
            self.open.pop()
            if len(text) > MAX_REGEX_CHARS:  # checked as it grows: copies multiply
                raise _too_large()
            self.done[key] = text
        return self.skip + text if terminal and in_rule else text

    def node(self, node: _Node, *, in_rule: bool) -> str:
        if isinstance(node, _Regex):
            text = f"(?:{node.text})"
            return self.skip + text if in_rule else text
        if isinstance(node, _Ref):
            return f"(?:{self.name(node, in_rule)})"
        if isinstance(node, _Seq):
            return "".join(self.node(item, in_rule=in_rule) for item in node.items)
        if isinstance(node, _Alt):
            return "(?:" + "|".join(self.node(o, in_rule=in_rule) for o in node.options) + ")"
        inner = self.node(node.item, in_rule=in_rule)
        if (node.low, node.high) == (0, 1):
            suffix = "?"
        elif (node.low, node.high) == (0, None):
            suffix = "*"
        elif (node.low, node.high) == (1, None):
            suffix = "+"
        else:
            suffix = f"{{{node.low},{node.high}}}" if node.high != node.low else f"{{{node.low}}}"
        return f"(?:{inner}){suffix}"


def _too_large() -> LarkGrammarError:
    return _unsupported(f"a grammar whose regex is over {MAX_REGEX_CHARS} characters")


def lark_to_regex(definition: str) -> str:
    """The regex (Python syntax, matched whole) of the language of a Lark grammar's
    ``start`` rule; LarkGrammarError naming the problem or the construct."""
    return _TRANSLATED.get_or_build(definition, lambda: _translated(definition))


# Per grammar text: agents send the same tools every turn.
_TRANSLATED: Store[str] = CACHES.store("lark_translations", 64)


def _translated(definition: str) -> str:
    """``lark_to_regex`` of a grammar not translated yet."""
    grammar = _read(definition)
    writer = _Writer(grammar)
    regex = writer.name(_Ref("start", 0), in_rule=True) + writer.skip
    if len(regex) > MAX_REGEX_CHARS:
        raise _too_large()
    return regex
