"""Pythonic calls: ``[get_weather(city="Paris", days=3), ping()]`` read with Python's rules.

A tagged-argument format whose arguments open with ``(``, close with ``)`` and bind names
with a bare ``=`` (no marker before a name or a value) is Python call syntax, whatever the
template itself prints for a value (``tojson``, ``'%s'``, ``repr``): models trained on it
(Llama 3.2 / 4, ToolACE, Gemma 3 and MiniCPM3 through vLLM's templates, LFM2, Olmo 3)
write every value as a Python literal. So values are parsed as Python literals
(``autoparser.peg.python_literal``: either quote, raw strings, escapes, nested lists and
dicts, ``True``/``None`` and JSON's ``true``/``null``) and converted once complete; the
grammar allows exactly such literals, typed by the parameter's schema where Python's
notation allows it (strings, numbers, booleans, null, string enums).

A template that prints string values bare (``'%s' | format(v)``, so ``city=Paris``) shows
that a value may also be raw text up to the next separator: the parser and the grammar then
also accept that, as the template renders it.

A lazy grammar must not wake up on a bare ``[`` in prose: when the call opener holds no
letter or digit, the trigger is a pattern needing a call's start, ``[`` + a tool's name
+ ``(``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autoparser import tags
from autoparser.analysis.model import ArgumentsAnalysis, TemplateAnalysis, ToolFormat
from autoparser.cache import CACHES, Store
from autoparser.generate.request import ToolSpec
from autoparser.generate.required import required_names, required_sequence
from autoparser.peg import (
    GrammarTrigger,
    Parser,
    Rules,
    any_char,
    atomic,
    chars,
    choice,
    json_schema,
    literal,
    negate,
    optional,
    peek,
    space,
    tag,
    until,
    until_one_of,
    zero_or_more,
)
from autoparser.peg.python_literal import python_literal, python_string, to_json, to_python
from autoparser.schema.argument_types import json_type, value_types

# A Python identifier (ASCII): the name of an argument of a tool without declared ones.
IDENTIFIER = chars("a-zA-Z_", 1, 1) + chars("a-zA-Z0-9_", 0, 127)


def quotes_all_values(a: ArgumentsAnalysis) -> bool:
    """Does the template quote every value, its str() inside the string's quotes
    (``f(city="Paris", days="3", tags="['a']")``, vLLM's Llama 4 pythonic template)?

    The analysis says so by recording the quoted suffix before a number too
    (``name_suffix_json == name_suffix == '="'``).
    """
    quote = a.value_suffix
    return (
        quote in ("'", '"')
        and a.name_suffix_json == a.name_suffix
        and a.name_suffix.endswith(quote)
        and not a.value_prefix
    )


def _bare_name_suffix(a: ArgumentsAnalysis) -> str:
    """The suffix before a non-string value (``=`` for ``f(a='v', n=1)``)."""
    if quotes_all_values(a):
        return a.name_suffix[: -len(a.value_suffix)]  # what a Python literal follows
    if a.name_suffix_json:
        return a.name_suffix_json
    quote = a.value_suffix if a.value_suffix in ("'", '"') else ""
    if quote and a.name_suffix.endswith(quote) and not a.value_prefix:
        return a.name_suffix[: -len(quote)]
    return a.name_suffix


def is_pythonic(analysis: TemplateAnalysis) -> bool:
    """Are the calls Python call syntax: ``NAME(key=value, ...)``?"""
    t = analysis.tools
    a = t.arguments
    return (
        t.format.mode == ToolFormat.TAG_WITH_TAGGED
        and a.start.strip() == "("
        and a.end.strip() == ")"
        and not a.name_prefix.strip()
        and not a.value_prefix.strip()
        and _bare_name_suffix(a).strip() == "="
        and not t.function.name_prefix.strip()
        and not t.function.name_suffix.strip()
        and not t.function.close.strip()
    )


def prints_bare_strings(a: ArgumentsAnalysis) -> bool:
    """Does the template print string values unquoted (``city=Paris``)?"""
    return not a.value_suffix and not a.name_suffix_json


def raw_string_quote(a: ArgumentsAnalysis) -> str:
    """The quote a template puts around string values it prints unescaped (``'%s'``)."""
    quote = a.value_suffix
    return quote if quote in ("'", '"') and a.name_suffix.endswith(quote) else ""


class _Values:
    """Python-literal values, generic (parsing) or typed by a parameter's schema (grammar).

    After the literal, the template's own way of printing a string, where it is not Python:
    bare text up to a separator (``raw_ends``) or text between quotes, unescaped
    (``raw_quote``). Parsing tries the literal first (a separator or the close must follow
    it); the grammar allows the template's way for string parameters only.
    """

    def __init__(
        self, raw_ends: Sequence[str], raw_quote: str, close: str, glued: bool = False
    ) -> None:
        self.close = close
        # The template writes no separator, so a value may be glued to the next name
        # (``ratio=0.25exact=False``).
        self.glued = glued
        self.raw_ends = tuple(e for e in raw_ends if e)
        self.raw_quote = raw_quote
        self.rules = Rules()
        self.any = python_literal(self.rules, "py-value")
        self.string = self.rules.ref("py-string")

    def after_value(self) -> Parser:
        """What may follow a value: a comma, the close, or the next ``name=`` (a template
        may print no comma); not any word, which a quote inside text is followed by."""
        next_name = IDENTIFIER + space() + literal("=")
        close = literal(self.close)
        return space() + choice(close, literal(",") + space() + choice(next_name, close), next_name)

    def raw_quoted(self) -> Parser:
        """Unescaped text between the template's quotes (``'%s'``): a quote inside it is
        text unless a value could end there (``"say "hi" now"``)."""
        q = self.raw_quote
        return zero_or_more(choice(chars(f"^{q}", 1), literal(q) + negate(self.after_value())))

    def typed(self, schema: Any) -> Parser:
        if not isinstance(schema, Mapping):
            return self.any
        options = schema.get("enum", [schema["const"]] if "const" in schema else None)
        if isinstance(options, list) and options and all(isinstance(o, str) for o in options):
            quoted = {repr(o) for o in options} | {_double_quoted(o) for o in options}
            return choice(*(literal(q) for q in sorted(quoted)))
        for combo in ("anyOf", "oneOf"):
            if isinstance(schema.get(combo), list) and schema[combo]:
                return choice(*(self.typed(s) for s in schema[combo]))
        kind = schema.get("type")
        if isinstance(kind, list) and kind:
            return choice(*(self.typed({**schema, "type": k}) for k in kind))
        if kind == "string":
            return self.string
        if kind == "number" and self.glued:
            # No exponent: a GBNF engine lexing greedily (llguidance) would read the "e"
            # of a glued next name (0.25exact) as one.
            digits = literal("0") | (chars("1-9", 1, 1) + chars("0-9", 0))
            return optional(literal("-")) + digits + optional(literal(".") + chars("0-9", 1))
        if kind in ("integer", "number"):
            return json_schema({"type": kind}, f"py-{kind}")
        if kind == "boolean":
            return choice(*(literal(w) for w in ("True", "False", "true", "false")))
        if kind == "null":
            return choice(literal("None"), literal("null"))
        return self.any

    def value(self, schema: Any, strict: bool) -> Parser:
        typed = self.typed(schema) if strict else self.any
        string_param = _may_be_string(schema)
        if strict and self.raw_quote and string_param and typed is self.string:
            # The same-quoted literal or the template's unescaped 'text', as one expression:
            # a GBNF engine lexes greedily, so the two cannot be alternatives. The parser
            # reads the literal first, else the raw text.
            q = self.raw_quote
            other = python_string("'\"".replace(q, ""))
            body = zero_or_more(choice(chars(f"^{q}\\\\", 1), literal("\\") + any_char()))
            either = literal(q) + tag(tags.TOOL_ARG_TEXT, body) + literal(q)
            return choice(tag(tags.TOOL_ARG_PYTHON, other), either)
        literal_value = tag(tags.TOOL_ARG_PYTHON, typed)
        fallbacks: list[Parser] = []
        if strict and not string_param:
            pass
        elif self.raw_quote:
            q = self.raw_quote
            body = until(q) if strict else self.raw_quoted()  # GBNF has no lookahead
            fallbacks.append(literal(q) + tag(tags.TOOL_ARG_TEXT, body) + literal(q))
        elif self.raw_ends:
            ends = self.raw_ends
            raw = until(ends[0]) if len(ends) == 1 else until_one_of(*ends)
            fallbacks.append(tag(tags.TOOL_ARG_STRING, raw))
        if not fallbacks:
            return literal_value
        if not strict:  # PEG: a literal counts only where the call can go on after it
            literal_value = literal_value + peek(self.after_value())
        return choice(literal_value, *fallbacks)


def _may_be_string(schema: Any) -> bool:
    if not isinstance(schema, Mapping) or "type" not in schema:
        return True  # untyped (or a combination): may be a string
    kind = schema["type"]
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _double_quoted(text: str) -> str:
    """A string in double quotes with Python's escapes (what a model may write instead)."""
    body = repr(text.replace("'", "\x00"))[1:-1]  # repr picks single quotes for this text
    return '"' + body.replace('"', '\\"').replace("\\x00", "'") + '"'


# Keyed by a template's markers: bounded and owned by the one store, as every such cache.
_VALUES: Store[_Values] = CACHES.store("pythonic_values", 64)


def _values(bare_ends: tuple[str, ...], raw_quote: str, close: str, glued: bool) -> _Values:
    """One set of value rules per notation (parsers are immutable: shared by all tools)."""
    key = (bare_ends, raw_quote, close, glued)
    return _VALUES.get_or_build(key, lambda: _Values(bare_ends, raw_quote, close, glued))


def arguments(tool: ToolSpec, a: ArgumentsAnalysis, *, strict: bool) -> Parser:
    """``( key=value, ... )``: any order, trailing comma allowed, each value a literal; in
    the grammar, each required argument once (in schema order, optional ones around)."""
    close = a.end.strip()
    bare_ends = tuple(dict.fromkeys((a.separator or ",", close))) if prints_bare_strings(a) else ()
    values = _values(bare_ends, raw_string_quote(a), close, not a.separator.strip())
    props: Mapping[str, Any] = tool.properties
    # The parser tries longer names first (none shadows a longer one); the grammar's choice
    # has no order, and keeps the schema's.
    names = list(props) if strict else sorted(props, key=len, reverse=True)

    def argument(name: str) -> Parser:
        header = atomic(tag(tags.TOOL_ARG_NAME, literal(name)) + space() + literal("="))
        value = values.value(props[name], strict)
        if quotes_all_values(a) and not _string_only(props[name], tool.parameters):
            value = _stringified(values, value, tool, name, strict)
        return tag(tags.TOOL_ARG, header + space() + value)

    # The parser reads a missing comma; the grammar allows one where the template prints
    # none between arguments (Gemma 3's vLLM template).
    comma = literal(",") if strict and a.separator.strip() else optional(literal(","))
    sep = space() + comma + space()
    trailing = optional(space() + literal(","))
    required = required_names(tool) if strict else []
    if required:
        args = required_sequence(tool, required, sep, argument) + trailing
    else:
        one = [argument(name) for name in names]
        if not names or not strict:
            # No declared parameters: any identifier, any literal. In the parser, also
            # where every declared name failed (an undeclared argument, reported; never in
            # the grammar).
            any_name = IDENTIFIER if not names else tag(tags.TOOL_ARG_UNDECLARED, IDENTIFIER)
            header = atomic(tag(tags.TOOL_ARG_NAME, any_name) + space() + literal("="))
            one.append(tag(tags.TOOL_ARG, header + space() + values.value({}, strict)))
        arg = choice(*one)
        args = optional(arg + zero_or_more(sep + arg) + trailing)
    return literal(a.start.strip()) + space() + args + space() + literal(close)


def _string_only(schema: Any, root: Any) -> bool:
    """Every value the schema allows is a string (or it says nothing: any text)."""
    kinds = value_types(schema, root)
    return kinds is None or kinds <= {"string"}


def stringified_tag(tool: str, argument: str) -> str:
    """The value tag of a non-string argument written as its str() in quotes; the tool and
    argument name its converter (the schema that types it)."""
    return f"{STRINGIFIED_PREFIX}{tool}/{argument}"


STRINGIFIED_PREFIX = "tool-arg-str-of:"


def _stringified(
    values: _Values, literal_value: Parser, tool: ToolSpec, name: str, strict: bool
) -> Parser:
    """A non-string value of a template that quotes every value: its str() in the quotes
    (``days="3"``), or a Python literal as models also write (``days=3``).

    The quoted text is typed by the parameter's schema once complete (``from_str``); it is
    tried first, since ``"3"`` is also a Python string, which the schema does not allow.
    """
    q = values.raw_quote
    if strict:
        return choice(literal(q) + literal_value + literal(q), literal_value)
    quoted = literal(q) + tag(stringified_tag(tool.name, name), values.raw_quoted()) + literal(q)
    return choice(quoted + peek(values.after_value()), literal_value)


def from_str(schema: Any, root: Any) -> Callable[[str], str | None]:
    """The quoted str() of a value -> its JSON text, typed by ``schema`` (None: not one)."""
    kinds = value_types(schema, root)

    def convert(text: str) -> str | None:
        try:
            value = to_python(text)
        except ValueError:
            value = text
        kind = json_type(value)
        allowed = kinds is None or kind in kinds or (kind == "integer" and "number" in kinds)
        if isinstance(value, str) or not allowed or (kinds is not None and "string" in kinds):
            # A string parameter's text is the string, whatever it looks like.
            if kinds is not None and "string" not in kinds:
                return None
            return json.dumps(text, ensure_ascii=False)
        return json.dumps(value, ensure_ascii=False)

    return convert


def value_converters(
    analysis: TemplateAnalysis, tools: Sequence[ToolSpec]
) -> dict[str, Callable[[str], str | None]]:
    """The converters of a pythonic request: literals, and the quoted str() of each
    non-string parameter where the template quotes every value."""
    found: dict[str, Callable[[str], str | None]] = dict(VALUE_CONVERTERS)
    if quotes_all_values(analysis.tools.arguments):
        for tool in tools:
            for name, schema in tool.properties.items():
                if not _string_only(schema, tool.parameters):
                    found[stringified_tag(tool.name, name)] = from_str(schema, tool.parameters)
    return found


def call_start_triggers(
    analysis: TemplateAnalysis, markers: Sequence[str], tools: Sequence[ToolSpec]
) -> tuple[GrammarTrigger, ...]:
    """Pattern triggers for an opener without a letter or digit (``[``): opener + name + ``(``.

    Empty (the word triggers stand) when the opener is a real marker or no tool is named.
    """
    if not is_pythonic(analysis) or not tools:
        return ()
    start = re.escape(analysis.tools.arguments.start.strip())
    names = "|".join(re.escape(t.name) for t in sorted(tools, key=lambda t: -len(t.name)))
    opener = analysis.tools.arguments.start.strip()
    bare = {m.strip().lstrip("[").removesuffix(opener).strip() for m in markers}
    if markers and bare <= {t.name for t in tools}:
        # A bare call (no opener): the name alone is ordinary text ("get_weather is
        # slow"); the pattern asks for a whole word and the call's parenthesis after it.
        why = (
            "a bare Python call has no opener: the tool's name alone also appears in prose, so "
            "only a pattern can ask for the name as a whole word followed by the parenthesis"
        )
        return (GrammarTrigger("pattern", rf"\b(?:{names})\s*{start}", why),)
    found = []
    for marker in markers:
        if any(ch.isalnum() for ch in marker):
            return ()
        why = (
            f"the call opener {marker.strip()!r} alone also starts ordinary text (a list, a "
            "link): only a pattern can ask for a tool's name and the call's parenthesis after it"
        )
        pattern = rf"{re.escape(marker)}\s*(?:{names})\s*{start}"
        found.append(GrammarTrigger("pattern", pattern, why))
    return tuple(found)


# Pythonic argument values arrive as Python literals; the stream delivers them as JSON.
VALUE_CONVERTERS: Mapping[str, Callable[[str], str]] = {tags.TOOL_ARG_PYTHON: to_json}
