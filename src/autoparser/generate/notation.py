"""Argument values in a token-quoted notation: ``key:<escape>text<escape>``, ``n:5``,
``opts:{a:<escape>x<escape>,b:[1,true]}``.

A template that writes each tagged value between a quote token (FunctionGemma's
``<escape>``, recorded as a name suffix ending with the token that also closes the value)
quotes only strings in its model's own notation: numbers, booleans and null follow the name
bare, and objects and lists nest in the same notation (keys bare, strings token-quoted).
Renders of a template that prints every value with ``str()`` inside the quotes cannot show
that, so the parser accepts it beside the template's own form, and converts it to JSON once
the value is complete.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from autoparser.analysis.model import ArgumentsAnalysis
from autoparser.generate.context import choice_of
from autoparser.peg import (
    Parser,
    Rules,
    chars,
    json_number,
    literal,
    optional,
    space,
    until,
    zero_or_more,
)
from autoparser.peg.python_literal import WORD_VALUES

NOTATION_TAG = "tool-arg-notation"  # a bare value in the notation -> JSON, once complete

_TOKEN_RE = re.compile(r"<[^\s<>]{1,40}>\Z")
_KEY_CHARS = "a-zA-Z0-9_.$@\\-"


def quote_token(a: ArgumentsAnalysis) -> str:
    """The token that quotes string values (``<escape>``), or "" when the format has none:
    the value suffix is a ``<...>`` token, there is no value prefix, and the name suffix
    ends with the same token after the name's own separator (``:<escape>``). A template
    that writes non-string values bare itself (FunctionGemma's own: ``n:5``,
    ``o:{a:<escape>x<escape>}``) shows that separator as the name suffix before them."""
    q = a.value_suffix
    if a.value_prefix or not _TOKEN_RE.match(q):
        return ""
    bare = a.name_suffix[: -len(q)] if a.name_suffix.endswith(q) else ""
    if a.name_suffix_json and a.name_suffix_json != bare:
        return ""
    return q if bare.strip() else ""


def bare_suffix(a: ArgumentsAnalysis) -> str:
    """The name suffix before a bare value (``:`` of ``:<escape>``)."""
    return a.name_suffix[: -len(a.value_suffix)]


def notation_value(quote: str) -> Parser:
    """Any value of the notation, written bare (a token-quoted string inside it only)."""
    rules = Rules()
    value = rules.ref("notation-value")
    sep = space() + literal(",") + space()
    string = literal(quote) + until(quote) + literal(quote)
    key = choice_of([string, chars(_KEY_CHARS, 1, 128)])
    pair = key + space() + literal(":") + space() + value
    pairs = optional(pair + zero_or_more(sep + pair))
    items = optional(value + zero_or_more(sep + value))
    words = [literal(w) for w in WORD_VALUES]
    rules["notation-value"] = choice_of(
        [
            literal("{") + space() + pairs + space() + literal("}"),
            literal("[") + space() + items + space() + literal("]"),
            string,
            json_number(),
            *words,
        ]
    )
    return value


def word_value(word: str) -> Any:
    """A bare word of a value notation: true/false/null (either spelling), a finite number,
    else the word as a string."""
    if word in WORD_VALUES:
        return WORD_VALUES[word]
    try:
        number = json.loads(word)
    except ValueError:
        return word
    if isinstance(number, float) and not math.isfinite(number):
        return word
    return number if isinstance(number, int | float) else word


class _Reader:
    """Recursive descent over the notation's tokens (the parser has checked the shape)."""

    def __init__(self, raw: str, quote: str) -> None:
        q = re.escape(quote)
        token = re.compile(rf"{q}(?P<s>.*?){q}|(?P<p>[{{}}\[\],:])|(?P<w>[^{{}}\[\],:\s<]+)", re.S)
        self.toks = [(m.lastgroup or "w", m.group(m.lastgroup or "w")) for m in token.finditer(raw)]
        self.i = 0

    def next(self) -> tuple[str, str]:
        tok = self.toks[self.i] if self.i < len(self.toks) else ("p", "")
        self.i += 1
        return tok

    def value(self, depth: int = 0) -> Any:
        if depth > 64:
            raise ValueError("nested too deeply")
        kind, text = self.next()
        if kind == "s":
            return text
        if kind == "w":
            return word_value(text)
        if text == "{":
            out: dict[str, Any] = {}
            while (tok := self.next()) != ("p", "}"):
                if tok[0] == "p" and tok[1] == ",":
                    continue
                if tok[0] == "p" or self.next() != ("p", ":"):
                    raise ValueError("not a member")
                out[tok[1]] = self.value(depth + 1)
            return out
        if text == "[":
            items: list[Any] = []
            while self.i < len(self.toks) and self.toks[self.i] != ("p", "]"):
                if self.toks[self.i] == ("p", ","):
                    self.i += 1
                    continue
                items.append(self.value(depth + 1))
            self.i += 1
            return items
        raise ValueError("not a value")


def converter(quote: str) -> Callable[[str], str | None]:
    """The converter of bare notation values (``NOTATION_TAG``) to JSON text; None when the
    text is not one value."""

    def to_json(raw: str) -> str | None:
        reader = _Reader(raw, quote)
        try:
            value = reader.value()
        except ValueError:
            return None
        if reader.i != len(reader.toks):
            return None
        return json.dumps(value, ensure_ascii=False)

    return to_json
