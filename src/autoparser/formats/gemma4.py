"""Google gemma-4: tool calls whose arguments are written in a notation of their own.

After reasoning (``<|channel>thought\\n...<channel|>``) the model writes calls and text::

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,n:3,opts:{a:[1,true,None]}}<tool_call|>

The arguments are not JSON: keys are bare, strings are quoted with the ``<|"|>`` token and
never escaped, numbers are Python's ``str()``, booleans ``true``/``false``, null ``None``,
objects and arrays nest in the same notation, and keys come sorted case-insensitively (the
template's ``dictsort``), which the grammar follows. The differential analysis can only
see markers around JSON or raw text, so no generated format can express this one.

Parsing converts the notation into JSON by appending: each top-level argument becomes
``"key": value``; quoted strings stream as escaped JSON text, exactly as written; other
values (numbers, booleans, nested objects and arrays) are converted once complete
(``to_json``, registered with the stream mapper for the tag ``tool-arg-gemma4``). A call
announced while streaming whose arguments then break is kept (the broken rest read as one
last value); JSON arguments (``{"city": "Paris"}``) are read as well; any other text outside
the format stays content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from autoparser import tags
from autoparser.definition import ParserDefinition
from autoparser.gbnf_text import rule_name
from autoparser.generate.assembly import lenient_body
from autoparser.generate.context import (
    BuildContext,
    choice_of,
    longest_name_first,
    seq_of,
)
from autoparser.generate.notation import word_value
from autoparser.generate.reasoning import reasoning_parser
from autoparser.generate.request import ToolSpec
from autoparser.peg import (
    Parser,
    Rules,
    any_char,
    atomic,
    char_class,
    chars,
    end,
    json_object,
    json_schema,
    literal,
    optional,
    peek,
    space,
    tag,
    trigger,
    until,
    zero_or_more,
)

QUOTE = '<|"|>'
CALL_START = "<|tool_call>"
CALL_END = "<tool_call|>"
CALL_PREFIX = "call:"
VALUE_TAG = "tool-arg-gemma4"  # a non-string argument value in the gemma notation

_KEY_CHARS = "a-zA-Z0-9_.$@\\-"
_JSON_OPENERS = '" \t\n\r'  # after "{": JSON arguments, not the notation


# --------------------------------------------------------------------------- notation -> JSON

_TOKEN = re.compile(
    r'<\|"\|>(?P<s>.*?)(?:<\|"\|>|\Z)|(?P<p>[{}\[\],:])|(?P<w>(?:(?!<\|"\|>)[^{}\[\],:\s])+)',
    re.S,
)


def _unfinished_quote(text: str) -> str:
    """An unterminated string at the end: drop a trailing partial ``<|"|>``."""
    for k in range(len(QUOTE) - 1, 0, -1):
        if text.endswith(QUOTE[:k]):
            return text[:-k]
    return text


class _Reader:
    """Recursive descent over the tokens; a cut-off value is closed where it stops."""

    def __init__(self, raw: str) -> None:
        self.toks: list[tuple[str, str]] = []
        for m in _TOKEN.finditer(raw):
            kind = m.lastgroup or "w"
            text = m.group(kind)
            whole = m.group()
            if kind == "s" and (len(whole) < 2 * len(QUOTE) or not whole.endswith(QUOTE)):
                text = _unfinished_quote(text)  # cut off before its closing quote
            self.toks.append((kind, text))
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def value(self) -> Any:
        tok = self.peek()
        if tok is None:
            return None
        self.i += 1
        kind, text = tok
        if kind == "s":
            return text
        if kind == "w":
            return word_value(text)
        if text == "{":
            return self.members()
        if text == "[":
            return self.items()
        return None  # a stray separator where a value belongs

    def members(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while (tok := self.peek()) is not None:
            kind, text = tok
            self.i += 1
            if text == "}" and kind == "p":
                break
            if kind == "p":
                continue  # a separator (or stray bracket) between members
            nxt = self.peek()
            if nxt is None or nxt != ("p", ":"):
                out[text] = None
                continue
            self.i += 1
            out[text] = self.value()
        return out

    def items(self) -> list[Any]:
        out: list[Any] = []
        while (tok := self.peek()) is not None:
            if tok == ("p", "]"):
                self.i += 1
                break
            if tok == ("p", ","):
                self.i += 1
                continue
            out.append(self.value())
        return out


def to_json(raw: str) -> str:
    """A value in the gemma notation (possibly cut off at its end) -> JSON text.

    Text that is more than one value (the broken rest of a call) becomes a JSON string.
    """
    reader = _Reader(raw)
    try:
        value = reader.value()
    except RecursionError:
        return "null"
    if reader.i < len(reader.toks):  # not one value: broken text, kept as a string
        value = raw.strip()
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- shared pieces


def _string() -> Parser:
    return literal(QUOTE) + until(QUOTE) + literal(QUOTE)


def _scalar() -> Parser:
    words = [literal(w) for w in ("true", "false", "null", "None", "True", "False")]
    return choice_of([json_schema({"type": "number"}, "gemma-number"), *words])


class _Values:
    """The generic value of the notation, and structured values typed by a JSON schema."""

    def __init__(self) -> None:
        self.rules = Rules()
        value = self.rules.ref("gemma-value")
        sep = space() + literal(",") + space()
        key = choice_of([_string(), chars(_KEY_CHARS, 1, 256)])
        pair = key + space() + literal(":") + space() + value
        self.pairs = optional(pair + zero_or_more(sep + pair))
        self.obj = literal("{") + space() + self.pairs + space() + literal("}")
        self.arr = (
            literal("[") + space() + optional(value + zero_or_more(sep + value)) + space()
        ) + literal("]")
        self.rules["gemma-value"] = choice_of([_string(), self.obj, self.arr, _scalar()])
        self.value = value
        self._count = 0

    def typed(self, schema: Any, name: str) -> Parser:
        """The grammar of a value of ``schema`` as the template prints it."""
        if not isinstance(schema, Mapping):
            return self.value
        if "enum" in schema or "const" in schema:
            options = list(schema["enum"]) if "enum" in schema else [schema["const"]]
            if options and all(isinstance(o, str) for o in options):
                return choice_of([literal(QUOTE + o + QUOTE) for o in options])
            return self.value
        for combo in ("anyOf", "oneOf"):
            if isinstance(schema.get(combo), list) and schema[combo]:
                return choice_of(
                    [self.typed(s, f"{name}-{k}") for k, s in enumerate(schema[combo])]
                )
        kind = schema.get("type")
        if isinstance(kind, list) and kind:
            return choice_of([self.typed({**schema, "type": t}, f"{name}-{t}") for t in kind])
        if kind == "string":
            return _string()
        if kind in ("integer", "number", "boolean"):
            return json_schema({"type": kind}, f"gemma-{kind}")
        if kind == "null":
            return choice_of([literal("None"), literal("null")])
        if kind == "object":
            props = schema.get("properties")
            if isinstance(props, Mapping) and props:
                inner = self.members(props, schema.get("required", ()), name)
                return literal("{") + inner + literal("}")
            return self.obj
        if kind == "array":
            items = schema.get("items")
            if isinstance(items, Mapping) and items:
                item = self.typed(items, f"{name}-item")
                return literal("[") + optional(item + zero_or_more(literal(",") + item)) + "]"
            return self.arr
        return self.value

    def members(self, props: Mapping[str, Any], required: Any, name: str) -> Parser:
        """``key:value`` pairs in the template's (case-insensitive sorted) order.

        Required keys must appear; the choice is over which key comes first, every later
        one is ``,key:value`` (optional unless required): quadratic in the key count. With
        no required key, no key at all is allowed too.
        """
        needed = set(required) if isinstance(required, list | tuple) else set()
        keys = sorted(props, key=lambda k: (k.lower(), k))
        pairs: list[Parser] = []
        for key in keys:
            self._count += 1
            rule = f"{name}-{rule_name(key)}-{self._count}"
            kv = literal(key + ":") + self.typed(props[key], rule)
            pairs.append(self.rules.define(rule, kv))
        firsts: list[Parser] = []
        for j, key in enumerate(keys):
            tail: list[Parser] = [pairs[j]]
            for k in range(j + 1, len(keys)):
                later = literal(",") + pairs[k]
                tail.append(later if keys[k] in needed else optional(later))
            firsts.append(seq_of(*tail))
            if key in needed:
                return choice_of(firsts)
        return optional(choice_of(firsts))


# --------------------------------------------------------------------------- lenient parser


def _arg_header(names: Sequence[str]) -> Parser:
    """``key:`` (bare, or quoted); announced only once the colon is there."""
    odd = [literal(n) for n in sorted(names, key=len, reverse=True) if not _plain_key(n)]
    bare = tag(tags.TOOL_ARG_NAME, choice_of([*odd, chars(_KEY_CHARS, 1, 256)]))
    quoted = literal(QUOTE) + tag(tags.TOOL_ARG_NAME, until(QUOTE)) + literal(QUOTE)
    return atomic(choice_of([bare, quoted]) + space() + literal(":"))


def _plain_key(name: str) -> bool:
    return re.fullmatch(r"[a-zA-Z0-9_.$@\-]{1,256}", name) is not None


def _lenient_call(tool: ToolSpec, values: _Values) -> Parser:
    """One call, announced once the character after its ``{`` shows how it is written.

    ``{`` then a quote or whitespace: JSON arguments (a model slipping out of the notation),
    streamed as written; anything else: the notation. Deciding on that one character means
    a stream never switches between the two once it has delivered arguments.
    """
    header = _arg_header(list(tool.properties))
    text = literal(QUOTE) + tag(tags.TOOL_ARG_TEXT, until(QUOTE)) + literal(QUOTE)
    other = tag(VALUE_TAG, choice_of([values.obj, values.arr, _scalar()]))
    arg = tag(tags.TOOL_ARG, header + space() + choice_of([text, other]))
    sep = space() + literal(",") + space()
    args = optional(arg + zero_or_more(sep + arg))
    opened = atomic(
        literal(CALL_START)
        + space()
        + literal(CALL_PREFIX)
        + tag(tags.TOOL_NAME, literal(tool.name))
        + space()
        + peek(literal("{") + choice_of([any_char(), end()]))
    )
    end_mark = optional(literal(CALL_END))
    notation = literal("{") + peek(char_class("^" + _JSON_OPENERS))
    good = notation + args + space() + literal("}") + space() + end_mark
    as_json = tag(tags.TOOL_ARGS, json_object()) + space() + end_mark
    # Arguments that break make the call no call: its text is content.
    return tag(tags.TOOL, opened + choice_of([good, as_json]))


def lenient_section(ctx: BuildContext, tools: Sequence[ToolSpec]) -> Parser:
    values = _Values()
    call = choice_of([_lenient_call(t, values) for t in longest_name_first(tools)])
    return call + zero_or_more(space() + call)


# --------------------------------------------------------------------------- grammar


def _strict_call(tool: ToolSpec, values: _Values) -> Parser:
    props = tool.properties
    name = f"gemma-{rule_name(tool.name)}"
    if props:
        inner = values.members(props, tool.parameters.get("required", ()), name)
    else:
        inner = values.pairs
    return seq_of(CALL_START, CALL_PREFIX + tool.name + "{", inner, "}", CALL_END)


def grammar_parser(ctx: BuildContext) -> tuple[Parser | None, bool]:
    """The strict parser the grammar is emitted from, and whether the grammar is lazy."""
    req = ctx.request
    reasoning = reasoning_parser(ctx, strict=True)
    if req.calls_enabled:
        values = _Values()
        call = choice_of([_strict_call(t, values) for t in longest_name_first(req.grammar_tools)])
        calls = call + zero_or_more(space() + call) if req.parallel_tool_calls else call
        if req.tool_choice == "required":
            return seq_of(reasoning, space(), calls, space(), end()), False
        # Text may follow the calls (the template writes content after them).
        after = until(CALL_START)
        return seq_of(reasoning, trigger(seq_of(calls, space(), after)), end()), True
    if req.response_schema is not None:
        answer = tag(tags.CONTENT, json_schema(dict(req.response_schema), "response"))
        return seq_of(reasoning, space(), answer, space(), end()), False
    return None, False


def build(ctx: BuildContext) -> ParserDefinition:
    """Parsers for gemma-4 output (see the module docstring)."""
    req = ctx.request
    section = lenient_section(ctx, req.tools) if req.calls_enabled else None
    triggers = (CALL_START,) if section is not None else ()
    body = lenient_body(ctx, section, triggers)
    strict, lazy = grammar_parser(ctx)
    return ParserDefinition(
        parser=seq_of(reasoning_parser(ctx, strict=False), body, end()),
        grammar_parser=strict,
        grammar_lazy=lazy,
        value_converters={VALUE_TAG: to_json},
        trigger_markers=triggers,
        # The grammar spells calls with these; they must stay single tokens.
        preserved_tokens=(CALL_START, CALL_END, QUOTE) if section is not None else (),
    )
