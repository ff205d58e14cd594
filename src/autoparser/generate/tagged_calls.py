"""Calls whose arguments are tagged one by one (<arg_key>k</arg_key><arg_value>v...):
string, JSON and Python-literal values.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from autoparser import tags
from autoparser.analysis.model import ArgumentsAnalysis, CallIdPosition
from autoparser.cache import CACHES, Store
from autoparser.errors import SchemaError
from autoparser.generate import elements, notation, pythonic, raw_pattern
from autoparser.generate.context import (
    BuildContext,
    TwinTool,
    argument_rule,
    choice_of,
    closing,
    rule_part,
    seq_of,
    tool_rule,
)
from autoparser.generate.json_calls import is_string_param, name_part, with_call_id
from autoparser.generate.request import ToolSpec
from autoparser.generate.required import required_names, required_sequence
from autoparser.peg import (
    Parser,
    Rules,
    atomic,
    chars,
    end,
    json_array,
    json_number,
    json_object,
    json_schema,
    json_string,
    json_value,
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
from autoparser.peg.python_literal import python_string
from autoparser.schema.argument_types import value_types
from autoparser.schema.refs import resolve_ref


def _value_end(ctx: BuildContext, strict: bool = True) -> list[str]:
    """Where a raw string value ends: its suffix; without one, the next marker.

    The lenient parser also ends a value left unclosed where the next argument opens
    (a markup marker only: a value may hold ordinary punctuation). Not at the call's
    closers: values (code, documents) hold those more often than the argument opener.
    """
    t = ctx.analysis.tools
    a = t.arguments
    if a.value_suffix:
        if strict:
            return [a.value_suffix]
        nexts = [a.name_prefix] if is_markup(a.name_prefix) else []
        return list(dict.fromkeys([a.value_suffix, *nexts]))
    candidates = [
        a.separator,
        a.name_prefix,
        a.end,
        t.function.close,
        t.format.per_call_end,
        t.format.section_end,
    ]
    return [c for c in dict.fromkeys(candidates) if c and c.strip()]


def is_markup(marker: str) -> bool:
    """A marker that reads as markup (a tag or special token), not as ordinary text."""
    return len(marker) >= 3 and marker[0] in "<[{|"


def _closers(ctx: BuildContext) -> list[str]:
    """The markers that close a call's arguments, the call and the section (non-empty)."""
    t = ctx.analysis.tools
    found = [t.arguments.end, t.function.close, t.format.per_call_end, t.format.section_end]
    return [m for m in dict.fromkeys(found) if m]


def _one_of(words: list[str], at_end: bool = True) -> Parser:
    """Any of ``words`` (longest first, so none shadows a longer one), or the end of input."""
    alts = [literal(w) for w in sorted(dict.fromkeys(w for w in words if w), key=len, reverse=True)]
    return choice_of([*alts, end()] if at_end else alts)


def _after_call(ctx: BuildContext) -> Parser:
    """What may follow a call's closer when the format goes on: another closer, the next
    call's opener, the end of the turn, or the end of output."""
    return _one_of([*_closers(ctx), *ctx.call_openers, *ctx.end_markers])


def _value_closed(ctx: BuildContext) -> Parser:
    """The value suffix where it ends the value: what follows continues the format (the
    next argument, a separator, a closer, or the end of output)."""
    a = ctx.analysis.tools.arguments
    after = [a.name_prefix, a.separator, *_closers(ctx)]
    return literal(a.value_suffix) + space() + _one_of(after)


def _unclosed_end(ctx: BuildContext) -> Parser | None:
    """Where a value left without its suffix ends: a call's closer (markup) after which
    the format goes on as after a call (GLM's missing last ``</arg_value>``)."""
    a = ctx.analysis.tools.arguments
    closers = [c for c in _closers(ctx) if is_markup(c) and c != a.value_suffix]
    if not closers:
        return None
    return _one_of(closers, at_end=False) + space() + _after_call(ctx)


# Lenient raw values by what they read of the context and the tool's argument names: the
# same for every string argument of tools with the same names, and the largest piece of a
# tagged call (built again per argument of a thousand tools, it was a quarter of the build).
_LENIENT_VALUES: Store[Parser] = CACHES.store("lenient_values", 1024)


def _lenient_value(ctx: BuildContext, names: list[str]) -> Parser:
    """``_build_lenient_value``, shared by every argument whose context reads the same."""
    t = ctx.analysis.tools
    a = t.arguments
    key = (
        a.value_suffix,
        a.name_prefix,
        a.name_suffix,
        a.separator,
        a.end,
        t.function.close,
        t.format.per_call_end,
        t.format.section_end,
        ctx.call_openers,
        ctx.end_markers,
        tuple(names),
    )
    return _LENIENT_VALUES.get_or_build(key, lambda: _build_lenient_value(ctx, names))


def _build_lenient_value(ctx: BuildContext, names: list[str]) -> Parser:
    """A raw string value of the lenient parser, where the format writes a value suffix.

    A marker inside a value ("wrap each call in <tool_call> and </tool_call>") is text of
    the value unless what follows it continues the format: the value suffix ends the value
    only when the next argument, a closer or the end of output follows (``_value_closed``);
    a call's closer ends a value left unclosed only when what follows goes on after a call
    (``_unclosed_end``); the next argument's header (opener, one of the tool's names,
    name suffix) ends a value left unclosed. Once a suffix was read as text, the value
    must end at a suffix or closer that is one: reaching the next argument's opener instead
    makes it no value (text between two arguments: the call is not one). In partial input
    a marker and what follows it stay undecided (held back) until known.
    """
    a = ctx.analysis.tools.arguments
    suffix = a.value_suffix
    opener = a.name_prefix if is_markup(a.name_prefix) else ""
    closers = [c for c in _closers(ctx) if is_markup(c) and c != suffix]
    unclosed = _unclosed_end(ctx)
    ends_here = [_value_closed(ctx), *([unclosed] if unclosed else [])]
    next_arg: list[Parser] = []
    if opener:
        header = literal(a.name_suffix) if a.name_suffix else None
        named = _one_of(names, at_end=False) if names else None
        next_arg = [seq_of(opener, named, header)]
    ends = list(dict.fromkeys([suffix, *([opener] if opener else []), *closers]))
    scan = until(ends[0]) if len(ends) == 1 else until_one_of(*ends)
    # Before any suffix: markers other than the suffix that end nothing are text.
    others = [e for e in ends if e != suffix]
    # After a suffix read as text: the next argument's opener is no longer text.
    inner = [e for e in ends if e != opener]
    after: Parser = zero_or_more(negate(choice_of(ends_here)) + _one_of(inner, at_end=False) + scan)
    more = literal(suffix) + scan + after
    if opener:
        more = more + negate(literal(opener))
    # Before any suffix: markers other than the suffix that end nothing are text; a
    # suffix that ends nothing goes on as ``more`` (one boundary test per marker).
    step = choice_of([_one_of(others, at_end=False) + scan, more]) if others else more
    return scan + zero_or_more(negate(choice_of([*ends_here, *next_arg])) + step)


def _string_tag(ctx: BuildContext) -> str:
    """The tag of a raw string value: which sides lose the template's padding newline."""
    lead, trail = ctx.string_padding
    if lead and trail:
        return tags.TOOL_ARG_STRING
    if lead:
        return tags.TOOL_ARG_STRING_LEAD
    return tags.TOOL_ARG_STRING_TRAIL if trail else tags.TOOL_ARG_TEXT


def _allows_null(schema: Any, root: Any = None) -> bool:
    """Whether null is one of the values (not merely "anything") `schema` names."""
    kinds = value_types(schema, root)
    return kinds is not None and "null" in kinds


def _schema_types(schema: Any, root: Any = None) -> set[str]:
    """The JSON types `schema` names, following `$ref`s into `root` (empty: any)."""
    return value_types(schema, root) or set()


def python_value() -> Parser:
    """A value as Python's repr() writes it: 'quotes', True / False / None, dicts, lists."""
    rules = Rules()
    value = rules.ref("python-value")
    sep = space() + literal(",") + space()
    string = json_string(allow_single_quotes=True)
    items = optional(value + zero_or_more(sep + value))
    pair = string + space() + literal(":") + space() + value
    pairs = optional(pair + zero_or_more(sep + pair))
    rules["python-value"] = choice_of(
        [
            literal("{") + space() + pairs + space() + literal("}"),
            literal("[") + space() + items + space() + literal("]"),
            string,
            json_number(),
            literal("True"),
            literal("False"),
            literal("None"),
        ]
    )
    return value


def python_typed(schema: Any, root: Any, rule: str, seen: frozenset[str] = frozenset()) -> Parser:
    """A value of ``schema`` as Python's repr() writes it ({'name': 'tea', 'n': 2}).

    Typed like the JSON alternative beside it, and, like it, without recursion where the
    schema has none: llguidance reads such a rule as one lexeme, and a lexeme beside a
    recursive rule that starts with the same ``[`` would shadow it. A recursive or untyped
    part is any Python value.
    """
    if not isinstance(schema, dict):
        return python_value()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return python_value()
        try:
            target = resolve_ref(ref, root)[1]
        except SchemaError:
            return python_value()
        return python_typed(target, root, rule, seen | {ref})
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return choice_of([python_typed(b, root, rule, seen) for b in schema[key]])
    words = schema["enum"] if isinstance(schema.get("enum"), list) else None
    if "const" in schema:
        words = [schema["const"]]
    if words:
        return choice_of([literal(repr(w)) for w in dict.fromkeys(map(_hashable, words))])
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return choice_of([python_typed({**schema, "type": k}, root, rule, seen) for k in kind])
    sep = space() + literal(",") + space()
    if kind == "object":
        props = schema.get("properties")
        members = [
            choice_of([literal(repr(k)), literal(json.dumps(k))])
            + space()
            + literal(":")
            + space()
            + python_typed(v, root, rule, seen)
            for k, v in (props.items() if isinstance(props, dict) else ())
        ]
        if schema.get("additionalProperties", not members) is not False:
            members.append(
                json_string(allow_single_quotes=True)
                + space()
                + literal(":")
                + space()
                + python_value()
            )
        member = choice_of(members)
        body = optional(member + zero_or_more(sep + member))
        return literal("{") + space() + body + space() + literal("}")
    if kind == "array":
        items = schema.get("items")
        item = python_typed(items, root, rule, seen) if isinstance(items, dict) else python_value()
        return (
            literal("[")
            + space()
            + optional(item + zero_or_more(sep + item))
            + space()
            + literal("]")
        )
    if kind == "string":
        return python_string()
    if kind in ("integer", "number"):
        return json_schema({"type": kind}, f"{rule}-{kind}")
    if kind == "boolean":
        return choice_of([literal("True"), literal("False")])
    if kind == "null":
        return literal("None")
    return python_value()


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)


def _python_words(schema: Any, root: Any = None) -> list[str]:
    """How Python's str() writes the scalar values a schema allows, where unlike JSON."""
    types = _schema_types(schema, root)
    words = ["True", "False"] if "boolean" in types else []
    if "null" in types:
        words.append("None")
    return words


def json_name_suffix(a: ArgumentsAnalysis) -> str:
    """The argument name suffix written before a non-string (JSON) value.

    The analysis records it when it differs from the string one (DeepSeek's
    ``string="false">``, the bare ``=`` of ``f(a='v', n=1)``). Analyses from before that
    field: a name suffix ending with the quote that also closes string values
    (``='`` ... ``'``) means other values follow bare.
    """
    if a.name_suffix_json:
        return a.name_suffix_json
    quote = a.value_suffix if a.value_suffix in ("'", '"') else ""
    if quote and a.name_suffix.endswith(quote) and not a.value_prefix:
        return a.name_suffix[: -len(quote)]
    return a.name_suffix


# Which recorded value types a JSON Schema type's values take (an integer is a number).
_SUFFIX_TYPES = {"number": ("number", "integer")}


def typed_name_suffixes(a: ArgumentsAnalysis, schema: Any, root: Any = None) -> list[str]:
    """The name suffixes that may precede a non-string value of ``schema`` (None: any).

    With ``name_suffix_by_type`` the template names the value's type in the header
    (``type="boolean"``): the schema's types pick theirs; otherwise the one JSON suffix.
    """
    if not a.name_suffix_by_type:
        return [json_name_suffix(a)]
    by_type = dict(a.name_suffix_by_type)
    types = _schema_types(schema, root) if schema is not None else set()
    wanted = [k for t in sorted(types) for k in _SUFFIX_TYPES.get(t, (t,)) if k in by_type]
    if not wanted:
        wanted = list(by_type)
    return list(dict.fromkeys(by_type[k] for k in wanted))


def _string_choices(schema: Any) -> list[str]:
    """The strings a string parameter is limited to (``enum`` / ``const``), else []."""
    if not isinstance(schema, dict):
        return []
    values = schema["enum"] if isinstance(schema.get("enum"), list) else []
    if "const" in schema:
        values = [schema["const"]]
    if values and all(isinstance(v, str) and v for v in values):
        return list(dict.fromkeys(values))
    return []


def _string_argument(
    ctx: BuildContext,
    name_p: Parser,
    schema: Any,
    root: Any,
    strict: bool,
    names: list[str] | None = None,
) -> Parser:
    """``name_prefix NAME name_suffix value_prefix RAW value_suffix``: a raw string value."""
    a = ctx.analysis.tools.arguments
    ends = _value_end(ctx, strict)
    header = atomic(seq_of(a.name_prefix, name_p, a.name_suffix))
    if a.value_suffix and not strict:
        raw = _lenient_value(ctx, names or [])
    else:
        raw = until(ends[0]) if len(ends) == 1 else until_one_of(*ends)
    choices = _string_choices(schema) if strict else []
    patterned = None if choices or not strict else _pattern_text(ctx, schema, ends)
    if patterned is not None:
        raw = patterned
    elif not choices and not (a.value_suffix and _allows_null(schema, root)):
        # The value after the header reads nothing of the tool: one parser for every such
        # argument (``raw`` is shared already where it is the lenient value).
        raw_key = raw._uid if a.value_suffix and not strict else tuple(ends)
        wrapper = (a.value_wrapper_open, a.value_wrapper_close)
        key = (raw_key, _string_tag(ctx), a.value_prefix, a.value_suffix, strict, wrapper)
        shared = _STRING_VALUES.get(key)
        if shared is None:
            shared = _STRING_VALUES.put(key, _string_value(ctx, raw, [], strict))
        return tag(tags.TOOL_ARG, header + shared)
    if choices:  # the grammar writes one of the allowed strings, raw as the template does
        # A newline either side, as templates write values on a line of their own (the
        # parser drops it); other whitespace would become part of the value.
        newline = optional(literal("\n"))
        raw = newline + choice_of([literal(word) for word in choices]) + newline
    string_arg = _string_value(ctx, raw, choices, strict, exact=patterned is not None)
    lead = space() if a.value_prefix else None  # whitespace between name and value markers
    if a.value_suffix and _allows_null(schema, root):
        # A nullable string: the bare word null (alone before the suffix) is JSON null.
        null: Parser = tag(tags.TOOL_ARG_JSON, literal("null"))
        if not strict:  # templates that print values with Python's str() write None
            null = choice_of([null, tag(tags.TOOL_ARG_PY, literal("None"))])
        null_arg = atomic(seq_of(lead, a.value_prefix, space(), null, space(), a.value_suffix))
        return tag(tags.TOOL_ARG, header + choice_of([null_arg, string_arg]))
    return tag(tags.TOOL_ARG, header + string_arg)


# The part of a raw string argument after its header, by what it reads of the context.
_STRING_VALUES: Store[Parser] = CACHES.store("string_values", 1024)


def _pattern_text(ctx: BuildContext, schema: Any, ends: list[str]) -> Parser | None:
    """The raw text a string parameter's ``pattern`` allows, the template's padding
    newlines around it (``raw_pattern``); None without a usable pattern."""
    pattern = schema.get("pattern") if isinstance(schema, dict) else None
    if not isinstance(pattern, str):
        return None
    lead, trail = ctx.string_padding
    padding = ("\n" if lead else "", "\n" if trail else "")
    return raw_pattern.pattern_text(pattern, ends, padding, "a raw string value")


def _string_value(
    ctx: BuildContext, raw: Parser, choices: list[str], strict: bool, *, exact: bool = False
) -> Parser:
    """``value_prefix RAW value_suffix`` of a raw string argument (``raw`` the text;
    ``exact``: a text the schema limits, never written in the template's wrapper)."""
    a = ctx.analysis.tools.arguments
    value: Parser = tag(_string_tag(ctx) if not choices else tags.TOOL_ARG_STRING, raw)
    if a.value_wrapper_open and a.value_wrapper_close and not choices and not exact:
        # A value holding markup, wrapped as the template wraps it (<![CDATA[...]]>).
        close = a.value_wrapper_close
        inner = tag(tags.TOOL_ARG_STRING, until(close))
        value = choice_of([literal(a.value_wrapper_open) + inner + literal(close), value])
    suffix = closing(a.value_suffix, strict) if a.value_suffix else None
    lead = space() if a.value_prefix else None  # whitespace between name and value markers
    return seq_of(lead, a.value_prefix, value, suffix)


def _json_argument(
    ctx: BuildContext, tool: ToolSpec, name: str | None, name_p: Parser, schema: Any, strict: bool
) -> Parser:
    """``name_prefix NAME name_suffix_json value_prefix JSON value_suffix``: a typed value."""
    a = ctx.analysis.tools.arguments
    name_suffix = json_name_suffix(a)
    root = tool.parameters
    suffixes = typed_name_suffixes(a, schema if strict else None, root)
    suffix_p = choice_of([literal(x) for x in suffixes]) if len(suffixes) > 1 else suffixes[0]
    header = atomic(seq_of(a.name_prefix, name_p, suffix_p))
    rule = argument_rule(ctx, tool, name)
    value = tag(tags.TOOL_ARG_JSON, json_schema(dict(schema), rule, document=dict(tool.parameters)))
    if name_suffix != a.name_suffix and name_suffix + a.value_suffix == a.name_suffix:
        # Quoted strings, bare other values (f(city='Paris', days=3)): the quote opens and
        # closes string values only; other values follow the suffix bare, as JSON or as
        # Python's repr (True, ['a']).
        repr_value = tag(tags.TOOL_ARG_PY, python_value())
        values = [value, repr_value]
        quote = notation.quote_token(a)
        if quote:
            # The template's own notation for objects and arrays (FunctionGemma's
            # ``{lang:<escape>fr<escape>,safe:true}``), in the grammar too: the template
            # renders it, so constrained decoding must be able to write it.
            values.append(tag(notation.NOTATION_TAG, notation.notation_value(quote)))
        return tag(tags.TOOL_ARG, header + space() + choice_of(values))
    suffix = closing(a.value_suffix, strict) if a.value_suffix else None
    lead = space() if a.value_prefix else None
    if strict:
        # Templates that print values with str() teach the model True / None / {'a': 1}.
        words = _python_words(schema, root)
        python: list[Parser] = [literal(w) for w in words]
        types = _schema_types(schema, root)
        if types & {"object", "array"} and a.values_as_python:
            # Objects and arrays as str() writes them, where the template writes them so
            # (a template printing them as JSON never shows the model {'a': 1}).
            # A rule of its own, so that a GBNF engine lexing whole rules sees one lexeme.
            rules = Rules()
            rules[f"{rule}-py"] = python_typed(schema, root, f"{rule}-py")
            python.append(rules.ref(f"{rule}-py"))
        elif not types:
            python.append(python_value())
        if python:
            value = choice_of([value, tag(tags.TOOL_ARG_PY, choice_of(python))])
    json_arg = seq_of(lead, a.value_prefix, space(), value, space(), suffix)
    bare = _bare_notation_argument(a, name_p)
    if strict or not a.value_suffix:
        return _or_bare(tag(tags.TOOL_ARG, header + json_arg), bare)
    # Templates that print values with Python's str() write True / None / {'a': 1}: read
    # such a value as raw text up to the suffix and convert it once complete.
    py_value = tag(tags.TOOL_ARG_PY, until(a.value_suffix))
    py_arg = seq_of(lead, a.value_prefix, space(), py_value, suffix)
    return _or_bare(tag(tags.TOOL_ARG, header + choice_of([json_arg, py_arg])), bare)


def _or_bare(argument: Parser, bare: Parser | None) -> Parser:
    return argument if bare is None else choice_of([argument, bare])


def _bare_notation_argument(a: ArgumentsAnalysis, name_p: Parser) -> Parser | None:
    """Where a token quotes string values (``name:<escape>v<escape>``), a non-string value
    written bare in the token-quoted notation (``n:5``, ``o:{a:<escape>x<escape>}``), as
    models of such formats write them (``generate/notation.py``); None elsewhere."""
    quote = notation.quote_token(a)
    if not quote:
        return None
    header = atomic(seq_of(a.name_prefix, name_p, notation.bare_suffix(a)))
    value = tag(notation.NOTATION_TAG, notation.notation_value(quote))
    return tag(tags.TOOL_ARG, header + space() + value)


def _tagged_argument(
    ctx: BuildContext, tool: ToolSpec, name: str | None, strict: bool, *, undeclared: bool = False
) -> Parser:
    """One argument: string-typed parameters raw text, others JSON.

    Where the template writes a different name suffix before non-string values (a typed
    suffix), the lenient parser accepts either suffix for any parameter and types the
    value by the suffix the model wrote; the grammar allows the one the schema implies
    (either, for a nullable string and for the arguments of an open-ended tool).
    ``undeclared`` (lenient only, ``name`` None): an argument the tool's schema does not
    declare, its name tagged ``TOOL_ARG_UNDECLARED``, its value JSON (or a Python
    literal) where the whole value is one, else the text.
    """
    if ctx.analysis.tools.arguments.value_item_name and name is not None:
        declared = tool.properties.get(name, {})
        if elements.nests(declared, tool.parameters):
            return _element_argument(ctx, tool, name, declared, strict)
    ctx = _with_named_closer(ctx, name)
    a = ctx.analysis.tools.arguments
    if name is None:  # open-ended tool: any identifier as argument name, string value
        any_name = chars("a-zA-Z0-9_.\\-", 1, 128)
        if undeclared:
            any_name = tag(tags.TOOL_ARG_UNDECLARED, any_name)
        name_p: Parser = tag(tags.TOOL_ARG_NAME, any_name)
        is_string = True
        schema: Any = {}
        if undeclared and a.value_suffix and json_name_suffix(a) == a.name_suffix:
            return choice_of(
                [
                    _union_typed_argument(ctx, name_p, None, python=False),
                    _string_argument(ctx, name_p, schema, tool.parameters, strict, []),
                ]
            )
    else:
        name_p = tag(tags.TOOL_ARG_NAME, _name_literal(a, name, strict))
        schema = tool.properties.get(name, {})
        is_string = is_string_param(schema, tool.parameters)
    typed = json_name_suffix(a) != a.name_suffix
    if not strict and name is not None and not is_string and not typed and a.value_suffix:
        kinds = value_types(schema, tool.parameters)
        if kinds is None or "string" in kinds:
            # A union with string (or any value): a value valid as one of the other types
            # is that value; any other text is the string, exactly as written.
            return choice_of(
                [
                    _union_typed_argument(ctx, name_p, kinds),
                    _string_argument(
                        ctx, name_p, schema, tool.parameters, strict, list(tool.properties)
                    ),
                ]
            )
    # A nullable string's null is a non-string value: written after the typed suffix.
    only_string = strict and name is not None and not _allows_null(schema, tool.parameters)
    if is_string and (not typed or only_string):
        return _string_argument(ctx, name_p, schema, tool.parameters, strict, list(tool.properties))
    json_arg = _json_argument(ctx, tool, name, name_p, schema, strict)
    if not is_string and (not typed or strict):
        return json_arg
    return choice_of(
        [
            _string_argument(ctx, name_p, schema, tool.parameters, strict, list(tool.properties)),
            json_arg,
        ]
    )


def _union_typed_argument(
    ctx: BuildContext, name_p: Parser, kinds: set[str] | None, *, python: bool = True
) -> Parser:
    """An argument of a union type that includes string, read as one of its other types
    (JSON, or a Python literal as str() prints it): only when the whole value up to its
    suffix is one. A quoted value is the string as written, quotes included. Without
    ``python``, JSON only (an undeclared argument: the Python-literal reader is a named,
    recursive rule, which would keep the call off the compiled one-shot parse)."""
    a = ctx.analysis.tools.arguments
    json_parts: list[Parser] = []
    py_parts: list[Parser] = []
    if kinds is None:
        json_parts.append(json_value())
        if python:
            py_parts.append(python_value())
    else:
        if kinds & {"integer", "number"}:
            json_parts.append(json_number())
        if "boolean" in kinds:
            json_parts += [literal("true"), literal("false")]
            py_parts += [literal("True"), literal("False")]
        if "null" in kinds:
            json_parts.append(literal("null"))
            py_parts.append(literal("None"))
        if "object" in kinds:
            json_parts.append(json_object())
            py_parts.append(peek(literal("{")) + python_value())
        if "array" in kinds:
            json_parts.append(json_array())
            py_parts.append(peek(literal("[")) + python_value())
    values = [tag(tags.TOOL_ARG_JSON, choice_of(json_parts))] if json_parts else []
    if py_parts:
        values.append(tag(tags.TOOL_ARG_PY, choice_of(py_parts)))
    header = atomic(seq_of(a.name_prefix, name_p, a.name_suffix))
    unclosed = _unclosed_end(ctx)
    quoted = choice_of([literal('"'), literal("'")])
    value = seq_of(
        space() if a.value_prefix else None,
        a.value_prefix,
        space(),
        negate(quoted),
        choice_of(values),
        space(),
        choice_of([literal(a.value_suffix), *([peek(unclosed)] if unclosed else [])]),
    )
    return tag(tags.TOOL_ARG, header + value)


def _element_argument(
    ctx: BuildContext, tool: ToolSpec, name: str, schema: Any, strict: bool
) -> Parser:
    """An argument whose object or array value is written as nested elements
    (``elements``): the parser takes the text up to the argument's closer, converted by the
    schema once complete; the grammar allows the elements the schema describes."""
    a = ctx.analysis.tools.arguments
    name_p = tag(tags.TOOL_ARG_NAME, literal(name))
    header = atomic(seq_of(a.name_prefix, name_p, json_name_suffix(a)))
    value_tag = elements.value_tag(tool.name, name)
    if strict:  # the value and its closer are one (see elements.Grammar)
        rule = f"{tool_rule(ctx, tool)}-{rule_part(name)}-el"
        body = elements.Grammar(a, tool.parameters, rule).closed(schema, name)
        return tag(tags.TOOL_ARG, header + seq_of(a.value_prefix, tag(value_tag, body)))
    close = elements.closer(a, name)
    value = tag(value_tag, until(close))
    return tag(tags.TOOL_ARG, header + seq_of(a.value_prefix, value, closing(close, strict)))


def encode_name(a: ArgumentsAnalysis, name: str) -> str:
    """An argument's name as the template writes it (its ``name_escapes`` applied)."""
    for char, entity in sorted(a.name_escapes, key=lambda pair: pair[0] != "&"):
        name = name.replace(char, entity)  # "&" first: the entities' own "&" stays
    return name


def _name_literal(a: ArgumentsAnalysis, name: str, strict: bool) -> Parser:
    """The name as the template encodes it; the lenient parser also reads it as is."""
    encoded = encode_name(a, name)
    if strict or encoded == name:
        return literal(encoded)
    return choice_of([literal(encoded), literal(name)])


def name_decoder(a: ArgumentsAnalysis) -> Callable[[str], str | None]:
    """Decodes exactly the entities the template writes in names (one pass: ``&amp;lt;``
    is ``&lt;``, never ``<``)."""
    table = {entity: char for char, entity in a.name_escapes}
    pattern = re.compile("|".join(re.escape(e) for e in sorted(table, key=len, reverse=True)))

    def decode(text: str) -> str:
        return pattern.sub(lambda m: table[m.group()], text)

    return decode


def element_converters(ctx: BuildContext) -> dict[str, Callable[[str], str | None]]:
    """The converters of the element-valued arguments of the request's tools (by tag),
    and the decoder of argument names where the template escapes them."""
    a = ctx.analysis.tools.arguments
    found: dict[str, Callable[[str], str | None]] = (
        {tags.TOOL_ARG_NAME: name_decoder(a)} if a.name_escapes else {}
    )
    if pythonic.is_pythonic(ctx.analysis):
        return found
    quote = notation.quote_token(a)
    if quote:
        found[notation.NOTATION_TAG] = notation.converter(quote)
    if not a.value_item_name:
        return found
    for tool in ctx.request.tools:
        for name, schema in tool.properties.items():
            if elements.nests(schema, tool.parameters):
                found[elements.value_tag(tool.name, name)] = elements.converter(
                    a, schema, tool.parameters
                )
    return found


def _with_named_closer(ctx: BuildContext, name: str | None) -> BuildContext:
    """The context for one argument whose closer repeats its name (``</NAME>``): the
    value suffix made whole for that name (an open-ended tool's argument keeps the part
    before the name)."""
    a = ctx.analysis.tools.arguments
    if not a.value_suffix_after_name:
        return ctx
    closer = a.value_suffix + name + a.value_suffix_after_name if name else a.value_suffix
    arguments = dataclasses.replace(a, value_suffix=closer, value_suffix_after_name="")
    tools = dataclasses.replace(ctx.analysis.tools, arguments=arguments)
    return dataclasses.replace(ctx, analysis=dataclasses.replace(ctx.analysis, tools=tools))


def strict_argument(ctx: BuildContext, tool: ToolSpec, name: str | None) -> Parser:
    """The grammar's argument ``name`` of ``tool`` (None: any argument of a tool that
    declares none), the body of its rule."""
    return _tagged_argument(ctx, tool, name, True)


def _strict_arguments(ctx: BuildContext, tool: ToolSpec) -> Callable[[str | None], Parser]:
    """The grammar's argument of each name, a rule of its own (``{tool}-{name}-arg``):
    an optional argument written in several places is written once, and a family's
    representative holds its members' arguments as parts (``generate.families``): of a
    twin, the argument is its stand-in, in the order of the parameters."""
    rules = Rules()
    names: list[str | None] = [*tool.properties] or [None]
    refs: dict[str | None, Parser] = {}

    def argument(name: str | None) -> Parser:
        found = refs.get(name)
        if found is None:
            if isinstance(tool, TwinTool):
                body = tool.slots[names.index(name)]
            else:
                body = strict_argument(ctx, tool, name)
            found = refs[name] = rules.define(f"{argument_rule(ctx, tool, name)}-arg", body)
        return found

    return argument


def tag_tagged_call(ctx: BuildContext, tool: ToolSpec, strict: bool) -> Parser:
    """``<name markers><arg markers>value...<close>``; string params raw, others JSON."""
    t = ctx.analysis.tools
    a = t.arguments
    if pythonic.is_pythonic(ctx.analysis):
        body = pythonic.arguments(tool, a, strict=strict)
        close = closing(t.function.close, strict)
        return with_call_id(ctx, name_part(ctx, tool, strict), body, close, strict)
    sep: Parser = space()
    if a.separator and a.separator.strip():
        sep = space() + optional(literal(a.separator)) + space()
    required = required_names(tool)
    if strict:
        # Each argument a rule; the grammar's alternatives in the schema's order (a
        # grammar's choice has no order to keep).
        argument = _strict_arguments(ctx, tool)
        if required:
            args_seq = required_sequence(tool, required, sep, argument)
        else:
            every: list[str | None] = [*tool.properties] or [None]
            one = choice_of([argument(n) for n in every])
            args_seq = optional(one + zero_or_more(sep + one))
    else:
        # The parser tries longer names first, so that none shadows a longer one.
        names: list[str | None] = [*sorted(tool.properties, key=len, reverse=True)] or [None]
        read = [_tagged_argument(ctx, tool, n, strict) for n in names]
        if tool.properties:
            # Where every declared name failed: any name, by the format's markers alone
            # (reported as an undeclared argument; the grammar never writes one).
            read.append(_tagged_argument(ctx, tool, None, strict, undeclared=True))
        one = choice_of(read)
        args_seq = optional(one + zero_or_more(sep + one))
    closers = _closers(ctx)
    goes_on: Parser | None = None
    if not strict and closers and ctx.analysis.tools.call_id.position != CallIdPosition.POST_ARGS:
        # Never a partial call: after its last argument the call closes (or the output
        # ends, or the next call opens); anything else, junk between two arguments say,
        # makes it no call, and its text stays content.
        goes_on = peek(_after_call(ctx))
    body = seq_of(a.start, space(), args_seq, space(), goes_on, closing(a.end, strict))
    call = with_call_id(
        ctx, name_part(ctx, tool, strict), body, closing(t.function.close, strict), strict
    )
    alternatives = [call]
    if not strict:
        alternatives += [p for p in (_json_body_call(ctx, tool), _self_closed_call(ctx, tool)) if p]
    return choice_of(alternatives)


def _json_body_call(ctx: BuildContext, tool: ToolSpec) -> Parser | None:
    """A call whose arguments are one JSON object instead of the format's tagged arguments,
    for the lenient parser: the other style of the family (DeepSeek V3.2 models write
    ``<｜DSML｜invoke name="f">{"city": "Paris"}</｜DSML｜invoke>``). Only where it is told
    apart without doubt: the arguments open with markup, never with ``{``, and the call has
    a closer that ends the object. None elsewhere."""
    t = ctx.analysis.tools
    a = t.arguments
    opener = a.start.strip() or a.name_prefix.strip()
    if not opener or opener.startswith("{") or not t.function.close.strip():
        return None
    body = tag(tags.TOOL_ARGS, json_object())
    return with_call_id(
        ctx,
        name_part(ctx, tool, False),
        space() + body + space(),
        closing(t.function.close, False),
        False,
    )


# An XML element's opening up to its first attribute: ``<｜DSML｜invoke name="``.
_ELEMENT_OPEN = re.compile(r"""<([^\s<>/="']+)\s+[\w.:-]+=(["'])\Z""")


def _self_closed_call(ctx: BuildContext, tool: ToolSpec) -> Parser | None:
    """A call with no arguments written as a self-closed element, for the lenient parser.

    Where the template writes the call as an XML element whose attribute names the
    function (``<｜DSML｜invoke name="NAME">`` ... ``</｜DSML｜invoke>``), XML lets a model
    close an empty one at once: ``<｜DSML｜invoke name="submit"/>``, the call with ``{}``.
    None for any other markup (or where a call id sits next to the name).
    """
    t = ctx.analysis.tools
    fn = t.function
    head = _ELEMENT_OPEN.search(fn.name_prefix.strip())
    if head is None or t.call_id.position != CallIdPosition.NONE:
        return None
    if fn.close.strip() != f"</{head.group(1)}>" or not fn.name_suffix.strip().startswith(
        head.group(2)
    ):
        return None
    quote = head.group(2)
    name = seq_of(
        fn.name_prefix.strip(), tag(tags.TOOL_NAME, literal(tool.name)), quote, space(), "/>"
    )
    return atomic(name)
