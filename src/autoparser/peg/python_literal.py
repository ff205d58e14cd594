"""Python literals (``'a'``, ``r"\\d"``, ``True``, ``[1, {'k': None}]``) as PEG parsers and JSON.

Models trained on "pythonic" tool calls (``[f(a="x", n=1), g()]``) write argument values as
Python literals; templates that print them with ``tojson`` write JSON, so JSON's ``true`` /
``false`` / ``null`` are accepted as well. One PEG definition gives the parser and the
grammar, so what the grammar lets a model write is what the parser reads. ``to_json``
converts a complete literal with ``ast.literal_eval`` (one C-speed call per value, no
per-character Python loop) and ``json.dumps``.

Accepted: single- or double-quoted strings (optional ``r``/``u`` prefix; in non-raw strings
only escapes Python defines: ``\\n``, ``\\x41``, ``\\u00e9``, ``\\U0001f600``, octal, ...),
JSON numbers, ``True``/``False``/``None`` and ``true``/``false``/``null``, lists and dicts
(string or number keys) nested freely, trailing commas. Not accepted: triple-quoted and
byte strings, tuples, sets, expressions.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from autoparser.peg.core import (
    Parser,
    Rules,
    char_class,
    chars,
    choice,
    json_number,
    literal,
    optional,
    space,
    zero_or_more,
)

WORD_VALUES: Mapping[str, bool | None] = MappingProxyType(
    {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
)
"""The words models write for booleans and null, Python's and JSON's, and their values:
the one table every reader of argument values (Python literals, element text, Gemma's
notation) takes them from."""
WORDS = tuple(WORD_VALUES)
_HEX = "0-9a-fA-F"


def _escape() -> Parser:
    """A backslash escape of a non-raw string, as Python defines them (no ``\\N{...}``)."""
    hexes = [literal("x") + chars(_HEX, 2, 2), literal("u") + chars(_HEX, 4, 4)]
    hexes.append(literal("U") + chars(_HEX, 8, 8))
    simple = char_class("\\\\'\"abfnrtv\\n")
    return literal("\\") + choice(simple, chars("0-7", 1, 3), *hexes)


def python_string(quotes: str = "'\"") -> Parser:
    """A one-line Python string literal in one of ``quotes``, optional ``r``/``u`` prefix."""
    forms: list[Parser] = []
    for quote in quotes:
        plain = chars(f"^{quote}\\\\\\n", 1)
        body = zero_or_more(choice(plain, _escape()))
        raw_body = zero_or_more(choice(plain, literal("\\") + chars("^\\n", 1, 1)))
        forms.append(optional(char_class("uU")) + literal(quote) + body + literal(quote))
        forms.append(char_class("rR") + literal(quote) + raw_body + literal(quote))
    return choice(*forms)


def python_words() -> Parser:
    return choice(*(literal(w) for w in WORDS))


def python_literal(rules: Rules | None = None, name: str = "py-value") -> Parser:
    """Any accepted literal; nested values refer to the rule ``name`` in ``rules`` (and
    strings to ``py-string``)."""
    rules = rules if rules is not None else Rules()
    value = rules.ref(name)
    string = rules.ref("py-string")
    rules["py-string"] = python_string()
    sep = space() + literal(",") + space()
    tail = optional(space() + literal(","))
    items = optional(value + zero_or_more(sep + value) + tail)
    key = choice(string, json_number())
    pair = key + space() + literal(":") + space() + value
    pairs = optional(pair + zero_or_more(sep + pair) + tail)
    rules[name] = choice(
        string,
        json_number(),
        python_words(),
        literal("[") + space() + items + space() + literal("]"),
        literal("{") + space() + pairs + space() + literal("}"),
    )
    return value


# A string literal (kept as is) or a JSON word (turned into Python's) outside strings.
_TOKENS = re.compile(
    r"""[rRuU]?(?:'(?:[^'\\\n]|\\[\s\S])*'|"(?:[^"\\\n]|\\[\s\S])*")|\b(true|false|null)\b"""
)
_AS_PYTHON = {w: repr(v) for w, v in WORD_VALUES.items() if w != repr(v)}


def _python_word(m: re.Match[str]) -> str:
    word = m.group(1)
    return _AS_PYTHON[word] if word else m.group()


def to_python(raw: str) -> Any:
    """The value of a complete literal; ValueError when it is not one."""
    source = _TOKENS.sub(_python_word, raw.strip())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn; the parser refuses them
            return ast.literal_eval(source)
    except (SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise ValueError(f"not a Python literal: {raw[:80]!r}") from exc


def _pair_surrogates(text: str) -> str:
    """``"\\ud83c\\udf27"`` decodes to two halves in Python (one character in JSON)."""
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        return text  # a lone half stays as written


def literal_json(raw: str) -> str | None:
    """A complete literal as JSON text; None when it is not one (or has no JSON form: a
    set, a number beyond JSON's range)."""
    try:
        text = json.dumps(to_python(raw), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None
    return _pair_surrogates(text) if re.search("[\ud800-\udfff]", text) else text


def to_json(raw: str) -> str:
    """A complete literal as JSON text; the raw text as a JSON string if it is not one.

    The parser only completes a value it accepted, so the fallback is for text cut by the
    end of output (or a number beyond JSON's range), never silently different data.
    """
    text = literal_json(raw)
    return json.dumps(raw.strip(), ensure_ascii=False) if text is None else text
