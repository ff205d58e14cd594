"""PEG building blocks for chat output: reasoning, content, tool calls per format.

Every builder takes a ``BuildContext`` and a ``strict`` flag. The same blocks make two
parsers: a *lenient* one that parses whatever the model wrote (end markers optional, text
that is not a valid call stays content) and a *strict* one, restricted to the request
(tool_choice, parallel calls, response format), from which the grammar is emitted. The
lenient parser accepts every text the strict one accepts, with the same tags, so the
grammar and the parser agree. Hand-written formats (``autoparser.formats``) reuse them.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from autoparser.analysis.model import (
    ArgumentsAnalysis,
    CallIdPosition,
    ContentMode,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
)
from autoparser.errors import RequestError
from autoparser.generate import tags
from autoparser.generate.request import Request, ToolSpec
from autoparser.generate.triggers import GrammarTrigger
from autoparser.peg import (
    Parser,
    Rules,
    any_char,
    atomic,
    chars,
    end,
    json_number,
    json_schema,
    json_string,
    json_value,
    literal,
    optional,
    rest,
    seq,
    space,
    tag,
    trigger,
    until,
    until_one_of,
    zero_or_more,
)
from autoparser.peg import choice as peg_choice

Part = Parser | str | None


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What a parser builder needs: the analysis, the validated request, the prompt facts."""

    analysis: TemplateAnalysis
    request: Request
    thinking_forced_open: bool  # the output starts inside a reasoning block
    extract_reasoning: bool  # reasoning goes to reasoning_content (else stays content)
    # The prompt ends with the call opener (call_opener()): the output starts inside the
    # first call, whose opener is already written; later calls carry their own.
    call_opened: bool = False

    @property
    def end_markers(self) -> tuple[str, ...]:
        return tuple(m for m in self.analysis.end_of_turn if m)


@dataclasses.dataclass(frozen=True)
class ParserDefinition:
    """The parsers a format produces: lenient for parsing, strict for the grammar.

    ``expects_call_ids`` makes the stream wait for the model's call id before announcing a
    call; ``trigger_markers`` are lazy-grammar trigger words used when the grammar itself
    yields none. A hand-written format may also declare ``grammar_triggers`` (used instead
    of those the lazy grammar derives, when the format knows better where a call starts),
    and ``preserved_tokens`` / ``additional_stops`` (added to the analysis' own).
    """

    parser: Parser
    grammar_parser: Parser | None = None
    grammar_lazy: bool = False
    expects_call_ids: bool = False
    trigger_markers: tuple[str, ...] = ()
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()


def seq_of(*parts: Part) -> Parser:
    """A sequence of the non-empty parts (strings are literals); at least one must remain."""
    items: list[Parser] = []
    for part in parts:
        if part is None or part == "":
            continue
        items.append(literal(part) if isinstance(part, str) else part)
    if not items:
        raise ValueError("seq_of: nothing to sequence")
    return items[0] if len(items) == 1 else seq(*items)


def closing(marker: str, strict: bool) -> Parser | None:
    """An end marker: required in the strict parser, optional in the lenient one."""
    if not marker:
        return None
    return literal(marker) if strict else optional(literal(marker))


def choice_of(parsers: Sequence[Parser]) -> Parser:
    if not parsers:
        raise ValueError("choice_of: no alternatives")
    return parsers[0] if len(parsers) == 1 else peg_choice(*parsers)


def _strip_fields(obj: Any, names: Sequence[str]) -> Any:
    return dataclasses.replace(obj, **{n: getattr(obj, n).strip() for n in names})


def normalize_markers(analysis: TemplateAnalysis) -> TemplateAnalysis:
    """The analysis with whitespace stripped from every marker.

    Renders put newlines around markers ("<tool_call>\n", "\n</parameter>\n"); the
    builders allow any whitespace around markers instead (``space()``), so a model that
    writes the marker without the newline, or with two, still parses. Whitespace-only
    markers become absent.
    """
    t = analysis.tools
    tools = dataclasses.replace(
        t,
        format=_strip_fields(
            t.format,
            (
                "section_start",
                "section_end",
                "per_call_start",
                "per_call_end",
                "array_open",
                "array_close",
            ),
        ),
        function=_strip_fields(t.function, ("name_prefix", "name_suffix", "close")),
        arguments=_strip_fields(
            t.arguments,
            (
                "start",
                "end",
                "name_prefix",
                "name_suffix",
                "name_suffix_json",
                "value_prefix",
                "value_suffix",
                "separator",
            ),
        ),
        call_id=_strip_fields(t.call_id, ("prefix", "suffix")),
        call_separator=t.call_separator.strip(),
    )
    tools = _strip_typed_suffixes(tools)
    return dataclasses.replace(
        analysis,
        reasoning=_strip_fields(analysis.reasoning, ("start", "end")),
        content=_strip_fields(analysis.content, ("start", "end")),
        tools=tools,
        end_of_turn=tuple(m.strip() for m in analysis.end_of_turn if m.strip()),
    )


def _strip_typed_suffixes(tools: Any) -> Any:
    """``normalize_markers`` for the per-type argument name suffixes."""
    a = tools.arguments
    if not a.name_suffix_by_type:
        return tools
    by_type = tuple((kind, suffix.strip()) for kind, suffix in a.name_suffix_by_type)
    return dataclasses.replace(tools, arguments=dataclasses.replace(a, name_suffix_by_type=by_type))


# --------------------------------------------------------------------------- reasoning


def reasoning_parser(ctx: BuildContext, strict: bool) -> Parser | None:
    """The reasoning block for the analysis' mode, or None when reasoning is not extracted.

    Forced open (the prompt opened the block, or a DELIMITER template with thinking on):
    everything up to the end marker is reasoning. Otherwise an optional start ... end block
    at the very beginning. The lenient parser also stops reasoning at an end-of-turn marker
    and tolerates a missing end marker (a truncated block).
    """
    r = ctx.analysis.reasoning
    if not ctx.extract_reasoning or not r.end:
        return None
    stops = [r.end] if strict else [r.end, *ctx.end_markers]
    body = tag(tags.REASONING, until(r.end) if len(stops) == 1 else until_one_of(*stops))
    close = tag(tags.REASONING_CLOSE, literal(r.end))
    block = body + (close if strict else optional(close))
    if ctx.thinking_forced_open:
        # Some models repeat the start marker the prompt already wrote.
        return (optional(space() + literal(r.start)) + block) if r.start else block
    if not r.start:
        # DELIMITER without a start marker, thinking not forced on: the block is reasoning
        # only if its end delimiter comes; atomic() holds it back until then (no retraction).
        strict_block = body + close
        return optional(atomic(strict_block if not strict else block))
    return optional(space() + literal(r.start) + block)


def should_extract_reasoning(analysis: TemplateAnalysis, request: Request, forced: bool) -> bool:
    r = analysis.reasoning
    if request.reasoning_format == "none" or r.mode == ReasoningMode.NONE or not r.end:
        return False
    return forced or bool(r.start) or r.mode == ReasoningMode.DELIMITER


# --------------------------------------------------------------------------- tool calls


def _is_string_param(schema: Any, root: Any) -> bool:
    from autoparser.schema import parameter_is_string

    return bool(parameter_is_string(schema, root))


def rule_name(name: str) -> str:
    """A GBNF-safe rule name for a hand-written format's own rules: each run of characters
    other than ASCII letters and digits becomes one ``-``."""
    return re.sub(r"[^a-zA-Z0-9]+", "-", name).strip("-") or "x"


def json_args(tool: ToolSpec) -> Parser:
    """The JSON arguments of ``tool``, checked against its schema, in rules named after it."""
    return json_schema(dict(tool.parameters), f"{rule_name(tool.name)}-args")


def longest_name_first(tools: Sequence[ToolSpec]) -> list[ToolSpec]:
    """Longest names first, so a name that prefixes another cannot shadow it."""
    return sorted(tools, key=lambda t: len(t.name), reverse=True)


def _rule_part(text: str) -> str:
    """A GBNF-safe rule name part: ASCII letters and digits, everything else ``-``."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in text).strip("-") or "x"


def _tool_rule(ctx: BuildContext, tool: ToolSpec) -> str:
    """The rule name prefix of a tool; distinct even when two names sanitise alike."""
    part = _rule_part(tool.name)
    if sum(_rule_part(t.name) == part for t in ctx.request.tools) > 1:
        part += f"-{zlib.crc32(tool.name.encode('utf-8')):08x}"
    return part


def _json_key(key: str, quote: str = '"') -> Parser:
    text = json.dumps(key, ensure_ascii=False) if quote == '"' else f"{quote}{key}{quote}"
    return literal(text) + space() + literal(":") + space()


def _id_value_json(quote: str = '"') -> Parser:
    return literal(quote) + tag(tags.TOOL_ID, until(quote)) + literal(quote)


def _json_args_value(ctx: BuildContext, tool: ToolSpec) -> Parser:
    fmt = ctx.analysis.tools.format
    if fmt.arguments_as_string:
        return tag(tags.TOOL_ARGS_STR, json_string())
    if fmt.uses_python_dicts:
        return tag(tags.TOOL_ARGS_PY, json_value(allow_single_quotes=True))
    return tag(tags.TOOL_ARGS, json_schema(dict(tool.parameters), f"{_tool_rule(ctx, tool)}-args"))


def _json_object(pairs: Sequence[Parser]) -> Parser:
    body: Parser = pairs[0]
    for pair in pairs[1:]:
        body = body + space() + literal(",") + space() + pair
    return literal("{") + space() + body + space() + literal("}")


def _field_paths(ctx: BuildContext) -> list[str]:
    """Dotted paths of the fields of one JSON call, in the order the model writes them."""
    fmt = ctx.analysis.tools.format
    name_key = fmt.name_field or "name"
    args_key = fmt.args_field or "arguments"
    nest = f"{fmt.function_field}." if fmt.function_field else ""
    name_path, args_path = nest + name_key, nest + args_key
    paths: list[str] = []
    for field in fmt.field_order:
        if not field:
            continue
        if nest and "." not in field and field in (name_key, args_key):
            field = nest + field  # legacy form: inner keys listed without their parent
        if nest and field == fmt.function_field:
            continue  # the parent comes from its children's paths
        if field not in paths:
            paths.append(field)
    if not paths:
        paths = [k for k in (fmt.id_field, fmt.gen_id_field) if k]
    for required in (name_path, args_path):
        if required not in paths:
            paths.append(required)
    return paths


def _paths_by_head(paths: list[str]) -> dict[str, list[str]]:
    """Dotted key paths grouped by their first component, in order: the nested keys of each."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        head, _, tail = path.partition(".")
        groups.setdefault(head, [])
        if tail:
            groups[head].append(tail)
    return groups


def _object_from_paths(paths: list[str], leaf: Any, quote: str, prefix: str = "") -> Parser:
    """A JSON object parser whose keys follow the paths (grouped by first component)."""
    groups = _paths_by_head(paths)
    pairs = []
    for head, tails in groups.items():
        full = prefix + head
        value = _object_from_paths(tails, leaf, quote, full + ".") if tails else leaf(full)
        pairs.append(_json_key(head, quote) + value)
    return _json_object(pairs)


def _object_prefix(
    paths: list[str], leaf: Any, quote: str, stop: str, prefix: str = ""
) -> Parser | None:
    """The object parser of ``_object_from_paths`` cut right after the key at ``stop``."""
    groups = _paths_by_head(paths)
    parts: list[Part] = [literal("{"), space()]
    for i, (head, tails) in enumerate(groups.items()):
        full = prefix + head
        if i:
            parts += [space(), literal(","), space()]
        key = _json_key(head, quote)
        if full == stop:
            return seq_of(*parts, key)
        if tails and stop.startswith(full + "."):
            inner = _object_prefix(tails, leaf, quote, stop, full + ".")
            return seq_of(*parts, key, inner) if inner is not None else None
        value = _object_from_paths(tails, leaf, quote, full + ".") if tails else leaf(full)
        parts.append(key + value)
    return None


def _recovery_ends(ctx: BuildContext) -> list[str]:
    """Markers after which a broken call is over: its end, the next call, the end of turn."""
    section_start, section_end, call_start, call_end = _effective_markers(ctx)
    f = ctx.analysis.tools.function
    ends = [f.close, call_end, section_end, call_start, section_start, *ctx.end_markers]
    return list(dict.fromkeys(m for m in ends if m))


def recover_arguments(ctx: BuildContext, kind: str = tags.TOOL_ARGS_BAD) -> Parser:
    """Lenient recovery once a named call's arguments broke: raw text to the call's end.

    A call is announced while streaming as soon as its name is complete; recovering here
    keeps it a call in the final parse too (its arguments cut at the last valid prefix),
    so the stream never has to retract it. ``kind`` says how the arguments are written:
    ``TOOL_ARGS_BAD`` (JSON text), ``TOOL_ARGS_STR_BAD`` (a JSON string holding the JSON),
    ``TOOL_ARGS_PY_BAD`` (a Python-literal dict).
    """
    ends = _recovery_ends(ctx)
    if not ends:
        return tag(kind, rest())
    return tag(kind, until(ends[0]) if len(ends) == 1 else until_one_of(*ends))


def _json_args_recovery(ctx: BuildContext) -> Parser:
    fmt = ctx.analysis.tools.format
    if fmt.arguments_as_string:
        return recover_arguments(ctx, tags.TOOL_ARGS_STR_BAD)
    if fmt.uses_python_dicts:
        return recover_arguments(ctx, tags.TOOL_ARGS_PY_BAD)
    return recover_arguments(ctx)


def json_native_call(ctx: BuildContext, tool: ToolSpec, strict: bool = True) -> Parser:
    """One call written as a JSON object (flat, nested under a key, or name-as-key).

    With ``uses_python_dicts`` the call object is written with single quotes too. The
    lenient parser recovers from broken arguments after the name (``recover_arguments``).
    """
    fmt = ctx.analysis.tools.format
    q = "'" if fmt.uses_python_dicts else '"'
    args = _json_args_value(ctx, tool)
    bad = None if strict else _json_args_recovery(ctx)
    if fmt.fun_name_is_key:
        name = atomic(literal(q) + tag(tags.TOOL_NAME, literal(tool.name)) + literal(q))
        good = _json_object([name + space() + literal(":") + space() + args])
        if bad is None:
            return good
        return choice_of([good, literal("{") + space() + name + space() + ":" + space() + bad])
    nest = f"{fmt.function_field}." if fmt.function_field else ""
    name_path = nest + (fmt.name_field or "name")
    args_path = nest + (fmt.args_field or "arguments")
    id_names = {k for k in (fmt.id_field, fmt.gen_id_field) if k}
    constants = dict(fmt.constant_fields)
    name_value = literal(q) + atomic(tag(tags.TOOL_NAME, literal(tool.name)) + literal(q))

    def leaf(path: str) -> Parser:
        if path == name_path:
            return name_value
        if path == args_path:
            return args
        if path in constants and q == '"':
            return literal(constants[path])
        if path.rpartition(".")[2] in id_names:
            return _id_value_json(q)
        return json_value(allow_single_quotes=q == "'")

    paths = _field_paths(ctx)
    good = _object_from_paths(paths, leaf, q)
    if bad is None or paths.index(name_path) > paths.index(args_path):
        return good
    head = _object_prefix(paths, leaf, q, args_path)
    return good if head is None else choice_of([good, head + bad])


def _call_id(ctx: BuildContext) -> Parser:
    cid = ctx.analysis.tools.call_id
    if cid.suffix:
        value = tag(tags.TOOL_ID, until(cid.suffix))
    else:
        value = tag(tags.TOOL_ID, chars("a-zA-Z0-9_\\-", 1, 64))
    return seq_of(cid.prefix, value, cid.suffix)


def _name_part(ctx: BuildContext, tool: ToolSpec) -> Parser:
    fn = ctx.analysis.tools.function
    gap = space() if fn.name_suffix else None  # the suffix may follow a newline
    return atomic(
        seq_of(fn.name_prefix, tag(tags.TOOL_NAME, literal(tool.name)), gap, fn.name_suffix)
    )


def _with_call_id(
    ctx: BuildContext, name: Parser, args: Parser, close: Parser | None, strict: bool
) -> Parser:
    cid = ctx.analysis.tools.call_id
    pos = cid.position
    id_part: Parser | None = None
    if pos != CallIdPosition.NONE:
        id_part = _call_id(ctx)
        if not strict:
            # A model may leave the id out (keeping the marker that introduces what follows).
            bare = literal(cid.suffix) if cid.suffix and pos != CallIdPosition.POST_ARGS else None
            id_part = optional(choice_of([id_part, bare]) if bare else id_part)
    parts: list[Part] = []
    if pos == CallIdPosition.PRE_FUNC_NAME:
        parts += [id_part, space()]
    parts += [name, space()]
    if pos == CallIdPosition.BETWEEN_FUNC_AND_ARGS:
        parts += [id_part, space()]
    parts.append(args)
    if pos == CallIdPosition.POST_ARGS:
        parts += [space(), id_part]
    if close is not None:
        parts += [space(), close]
    return seq_of(*parts)


def tag_json_call(ctx: BuildContext, tool: ToolSpec, strict: bool) -> Parser:
    """``<name markers>{json arguments}<close>``."""
    a = ctx.analysis.tools.arguments
    args = tag(tags.TOOL_ARGS, json_schema(dict(tool.parameters), f"{_tool_rule(ctx, tool)}-args"))
    good = seq_of(args, closing(a.end, strict))
    body = seq_of(a.start, good if strict else choice_of([good, recover_arguments(ctx)]))
    close = closing(ctx.analysis.tools.function.close, strict)
    return _with_call_id(ctx, _name_part(ctx, tool), body, close, strict)


def _value_end(ctx: BuildContext) -> list[str]:
    t = ctx.analysis.tools
    a = t.arguments
    if a.value_suffix:
        return [a.value_suffix]
    candidates = [
        a.separator,
        a.name_prefix,
        a.end,
        t.function.close,
        t.format.per_call_end,
        t.format.section_end,
    ]
    return [c for c in dict.fromkeys(candidates) if c and c.strip()]


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(
        isinstance(options, list) and any(_allows_null(o) for o in options)
        for options in (schema.get("anyOf"), schema.get("oneOf"))
    )


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    kind = schema.get("type")
    found = {kind} if isinstance(kind, str) else {k for k in kind or () if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            found |= _schema_types(option)
    return found


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


def _python_words(schema: Any) -> list[str]:
    """How Python's str() writes the scalar values a schema allows, where unlike JSON."""
    types = _schema_types(schema)
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


def typed_name_suffixes(a: ArgumentsAnalysis, schema: Any) -> list[str]:
    """The name suffixes that may precede a non-string value of ``schema`` (None: any).

    With ``name_suffix_by_type`` the template names the value's type in the header
    (``type="boolean"``): the schema's types pick theirs; otherwise the one JSON suffix.
    """
    if not a.name_suffix_by_type:
        return [json_name_suffix(a)]
    by_type = dict(a.name_suffix_by_type)
    types = _schema_types(schema) if schema is not None else set()
    wanted = [k for t in sorted(types) for k in _SUFFIX_TYPES.get(t, (t,)) if k in by_type]
    if not wanted:
        wanted = list(by_type)
    return list(dict.fromkeys(by_type[k] for k in wanted))


def _string_argument(ctx: BuildContext, name_p: Parser, schema: Any, strict: bool) -> Parser:
    """``name_prefix NAME name_suffix value_prefix RAW value_suffix``: a raw string value."""
    a = ctx.analysis.tools.arguments
    ends = _value_end(ctx)
    header = atomic(seq_of(a.name_prefix, name_p, a.name_suffix))
    raw = until(ends[0]) if len(ends) == 1 else until_one_of(*ends)
    value: Parser = tag(tags.TOOL_ARG_STRING, raw)
    suffix = closing(a.value_suffix, strict) if a.value_suffix else None
    lead = space() if a.value_prefix else None  # whitespace between name and value markers
    string_arg = seq_of(lead, a.value_prefix, value, suffix)
    if a.value_suffix and _allows_null(schema):
        # A nullable string: the bare word null (alone before the suffix) is JSON null.
        null: Parser = tag(tags.TOOL_ARG_JSON, literal("null"))
        if not strict:  # templates that print values with Python's str() write None
            null = choice_of([null, tag(tags.TOOL_ARG_PY, literal("None"))])
        null_arg = atomic(seq_of(lead, a.value_prefix, space(), null, space(), a.value_suffix))
        return tag(tags.TOOL_ARG, header + choice_of([null_arg, string_arg]))
    return tag(tags.TOOL_ARG, header + string_arg)


def _json_argument(
    ctx: BuildContext, tool: ToolSpec, name: str | None, name_p: Parser, schema: Any, strict: bool
) -> Parser:
    """``name_prefix NAME name_suffix_json value_prefix JSON value_suffix``: a typed value."""
    a = ctx.analysis.tools.arguments
    name_suffix = json_name_suffix(a)
    suffixes = typed_name_suffixes(a, schema if strict else None)
    suffix_p = choice_of([literal(x) for x in suffixes]) if len(suffixes) > 1 else suffixes[0]
    header = atomic(seq_of(a.name_prefix, name_p, suffix_p))
    part = _rule_part(name or "arg")
    if name and sum(_rule_part(other) == part for other in tool.properties) > 1:
        part += f"-{zlib.crc32(name.encode('utf-8')):08x}"
    rule = f"{_tool_rule(ctx, tool)}-{part}"
    value = tag(tags.TOOL_ARG_JSON, json_schema(dict(schema), rule))
    if name_suffix != a.name_suffix and name_suffix + a.value_suffix == a.name_suffix:
        # Quoted strings, bare other values (f(city='Paris', days=3)): the quote opens and
        # closes string values only; other values follow the suffix bare, as JSON or as
        # Python's repr (True, ['a']).
        repr_value = tag(tags.TOOL_ARG_PY, python_value())
        return tag(tags.TOOL_ARG, header + space() + choice_of([value, repr_value]))
    suffix = closing(a.value_suffix, strict) if a.value_suffix else None
    lead = space() if a.value_prefix else None
    if strict:
        # Templates that print values with str() teach the model True / None / {'a': 1}.
        words = _python_words(schema)
        python: list[Parser] = [literal(w) for w in words]
        if _schema_types(schema) & {"object", "array"} or not _schema_types(schema):
            python.append(python_value())
        if python:
            value = choice_of([value, tag(tags.TOOL_ARG_PY, choice_of(python))])
    json_arg = seq_of(lead, a.value_prefix, space(), value, space(), suffix)
    if strict or not a.value_suffix:
        return tag(tags.TOOL_ARG, header + json_arg)
    # Templates that print values with Python's str() write True / None / {'a': 1}: read
    # such a value as raw text up to the suffix and convert it once complete.
    py_value = tag(tags.TOOL_ARG_PY, until(a.value_suffix))
    py_arg = seq_of(lead, a.value_prefix, space(), py_value, suffix)
    return tag(tags.TOOL_ARG, header + choice_of([json_arg, py_arg]))


def _tagged_argument(ctx: BuildContext, tool: ToolSpec, name: str | None, strict: bool) -> Parser:
    """One argument: string-typed parameters raw text, others JSON.

    Where the template writes a different name suffix before non-string values (a typed
    suffix), the lenient parser accepts either suffix for any parameter and types the
    value by the suffix the model wrote; the grammar allows the one the schema implies
    (either, for a nullable string and for the arguments of an open-ended tool).
    """
    ctx = _with_named_closer(ctx, name)
    a = ctx.analysis.tools.arguments
    if name is None:  # open-ended tool: any identifier as argument name, string value
        name_p: Parser = tag(tags.TOOL_ARG_NAME, chars("a-zA-Z0-9_.\\-", 1, 128))
        is_string = True
        schema: Any = {}
    else:
        name_p = tag(tags.TOOL_ARG_NAME, literal(name))
        schema = tool.properties.get(name, {})
        is_string = _is_string_param(schema, tool.parameters)
    typed = json_name_suffix(a) != a.name_suffix
    # A nullable string's null is a non-string value: written after the typed suffix.
    only_string = strict and name is not None and not _allows_null(schema)
    if is_string and (not typed or only_string):
        return _string_argument(ctx, name_p, schema, strict)
    json_arg = _json_argument(ctx, tool, name, name_p, schema, strict)
    if not is_string and (not typed or strict):
        return json_arg
    return choice_of([_string_argument(ctx, name_p, schema, strict), json_arg])


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


def tag_tagged_call(ctx: BuildContext, tool: ToolSpec, strict: bool) -> Parser:
    """``<name markers><arg markers>value...<close>``; string params raw, others JSON."""
    t = ctx.analysis.tools
    a = t.arguments
    names: list[str | None] = [*sorted(tool.properties, key=len, reverse=True)]
    if not names:
        names = [None]
    one = choice_of([_tagged_argument(ctx, tool, n, strict) for n in names])
    sep: Parser = space()
    if a.separator and a.separator.strip():
        sep = space() + optional(literal(a.separator)) + space()
    args_seq = optional(one + zero_or_more(sep + one))
    body = seq_of(a.start, space(), args_seq, space(), closing(a.end, strict))
    return _with_call_id(
        ctx, _name_part(ctx, tool), body, closing(t.function.close, strict), strict
    )


def single_call(ctx: BuildContext, tool: ToolSpec, strict: bool) -> Parser:
    mode = ctx.analysis.tools.format.mode
    if mode == ToolFormat.JSON_NATIVE:
        return json_native_call(ctx, tool, strict)
    if mode == ToolFormat.TAG_WITH_JSON:
        return tag_json_call(ctx, tool, strict)
    if mode == ToolFormat.TAG_WITH_TAGGED:
        return tag_tagged_call(ctx, tool, strict)
    raise ValueError(f"no call parser for tool format {mode.value}")


def _effective_markers(ctx: BuildContext) -> tuple[str, str, str, str]:
    """(section_start, section_end, per_call_start, per_call_end), without double wrapping."""
    f = ctx.analysis.tools.format
    prefix = ctx.analysis.tools.function.name_prefix
    section_start, section_end = f.section_start, f.section_end
    call_start, call_end = f.per_call_start, f.per_call_end
    if prefix and call_start == prefix:
        call_start = ""
    if prefix and section_start == prefix and not call_start:
        section_start = ""
    return section_start, section_end, call_start, call_end


def call_opener(ctx: BuildContext) -> str:
    """The marker that opens the calls (section, per-call or name prefix), "" if none.

    A prompt ending with it has opened the first call itself (``call_opened``). Array-wrapped
    JSON whose section start holds the bracket is left out: its first call is not a unit.
    """
    f = ctx.analysis.tools.format
    if f.mode == ToolFormat.NONE:
        return ""
    section_start, _, call_start, _ = _effective_markers(ctx)
    if section_start:
        array = f.mode == ToolFormat.JSON_NATIVE and f.tools_array_wrapped
        return "" if array and section_start.endswith("[") else section_start
    if call_start:
        return call_start
    return ctx.analysis.tools.function.name_prefix if f.mode != ToolFormat.JSON_NATIVE else ""


def _opened_context(ctx: BuildContext) -> BuildContext:
    """The context for a call whose opener the prompt already wrote: that marker removed."""
    opener = call_opener(ctx)
    t = ctx.analysis.tools

    def drop(marker: str) -> str:
        return "" if marker == opener else marker

    tools = dataclasses.replace(
        t,
        format=dataclasses.replace(
            t.format,
            section_start=drop(t.format.section_start),
            per_call_start=drop(t.format.per_call_start),
        ),
        function=dataclasses.replace(t.function, name_prefix=drop(t.function.name_prefix)),
    )
    analysis = dataclasses.replace(ctx.analysis, tools=tools)
    return dataclasses.replace(ctx, analysis=analysis, call_opened=False)


def call_trigger_markers(ctx: BuildContext) -> tuple[str, ...]:
    """Where a tool call can begin in the output (content stops there to try a call)."""
    f = ctx.analysis.tools.format
    section_start, _, call_start, _ = _effective_markers(ctx)
    first = section_start or call_start
    if not first and f.mode != ToolFormat.JSON_NATIVE:
        first = ctx.analysis.tools.function.name_prefix
    if not first and f.mode == ToolFormat.JSON_NATIVE:
        first = "[" if f.tools_array_wrapped else "{"
    return (first,) if first else ()


def _one_call(ctx: BuildContext, tools: Sequence[ToolSpec], strict: bool) -> Parser:
    """One call to any of ``tools``, with its per-call markers."""
    _, _, call_start, call_end = _effective_markers(ctx)
    ordered = longest_name_first(tools)
    inner = choice_of([single_call(ctx, t, strict) for t in ordered])
    return tag(
        tags.TOOL,
        seq_of(
            call_start,
            space() if call_start else None,
            inner,
            space() if call_end else None,
            closing(call_end, strict),
        ),
    )


def tool_section(
    ctx: BuildContext,
    tools: Sequence[ToolSpec],
    *,
    strict: bool,
    parallel: bool,
    opened: bool = False,
) -> Parser:
    """One section of calls: section markers, per-call markers, separators, array wrapping.

    With ``opened`` the prompt wrote the opener (``call_opener``): the section starts after
    it; where the opener is per call, only the first call lacks it.
    """
    first_ctx = _opened_context(ctx) if opened else ctx
    if opened and _effective_markers(ctx)[0]:
        ctx = first_ctx  # the prompt opened the whole section
    f = ctx.analysis.tools.format
    section_start, section_end, _, _ = _effective_markers(ctx)
    call = _one_call(ctx, tools, strict)
    first = _one_call(first_ctx, tools, strict) if first_ctx is not ctx else call
    array = f.mode == ToolFormat.JSON_NATIVE and f.tools_array_wrapped
    sep_text = "," if array else ctx.analysis.tools.call_separator.strip()
    sep: Parser = space() + literal(sep_text) + space() if sep_text else space()
    calls = first + zero_or_more(sep + call) if parallel else first
    if array:
        open_b = "" if section_start.endswith("[") else (f.array_open or "[")
        close_b = "" if section_end.startswith("]") else (f.array_close or "]")
        calls = seq_of(
            open_b, space(), calls, space(), closing(close_b, strict) if close_b else None
        )
    return seq_of(
        section_start,
        space() if section_start else None,
        calls,
        space() if section_end else None,
        closing(section_end, strict),
    )


# --------------------------------------------------------------------------- whole output


def content_markers(ctx: BuildContext) -> tuple[str, ...]:
    c = ctx.analysis.content
    if c.mode == ContentMode.PLAIN:
        return ()
    return tuple(m for m in (c.start, c.end) if m)


def lenient_body(ctx: BuildContext, section: Parser | None, triggers: Sequence[str]) -> Parser:
    """``(tool section | dropped marker | content chunk)*``: never fails, keeps all text.

    Content-wrapper markers are dropped; an end-of-turn marker ends the message (the rest
    is ignored); a trigger that does not start a valid call becomes content one character
    at a time (then up to the next delimiter).
    """
    wrappers = [m for m in content_markers(ctx) if m not in ctx.end_markers]
    dropped = [*wrappers, *ctx.end_markers]
    delims = list(dict.fromkeys([*triggers, *dropped]))
    alts: list[Parser] = []
    if section is not None:
        alts.append(section)
    # The end of turn ends the message: whatever a template or engine appends after it
    # (the next turn's header) is not part of it.
    alts.extend(literal(m) + rest() for m in sorted(set(ctx.end_markers), key=len, reverse=True))
    alts.extend(literal(m) for m in sorted(set(wrappers), key=len, reverse=True))
    if delims:
        chunk = any_char() + (until(delims[0]) if len(delims) == 1 else until_one_of(*delims))
        alts.append(tag(tags.CONTENT, chunk))
        return zero_or_more(choice_of(alts))
    # No delimiter at all: content is everything (still after an optional section).
    if section is not None:
        return zero_or_more(section) + tag(tags.CONTENT, rest())
    return tag(tags.CONTENT, rest())


def build_standard(ctx: BuildContext) -> ParserDefinition:
    """The generated parsers for an analysed template (no hand-written handler)."""
    req = ctx.request
    fmt = ctx.analysis.tools.format
    can_call = req.calls_enabled and fmt.mode != ToolFormat.NONE
    triggers = call_trigger_markers(ctx) if can_call else ()
    if can_call and not triggers:
        can_call = False
    if req.tool_choice == "required" and not can_call:
        raise RequestError(
            "tool_choice: the template has no tool-call format the parser can read, "
            "so calls cannot be required"
        )

    opened = can_call and ctx.call_opened
    lenient_reasoning = reasoning_parser(ctx, strict=False)
    section = tool_section(ctx, req.tools, strict=False, parallel=True) if can_call else None
    body = lenient_body(ctx, section, triggers)
    first: Parser | None = None
    if opened:
        # The prompt wrote the first call's opener: the output may start inside that call.
        first = optional(
            seq_of(space(), tool_section(ctx, req.tools, strict=False, parallel=True, opened=True))
        )
    parser = seq_of(lenient_reasoning, first, body, end())

    strict_reasoning = reasoning_parser(ctx, strict=True)
    grammar_parser: Parser | None = None
    lazy = False
    c = ctx.analysis.content
    if can_call:
        strict_section = tool_section(
            ctx, req.grammar_tools, strict=True, parallel=req.parallel_tool_calls, opened=opened
        )
        if opened:
            # The prompt committed the model to a call: no trigger can start the grammar,
            # so it applies from the first byte; text may follow the calls.
            after = until(triggers[0]) if req.tool_choice != "required" else None
            grammar_parser = seq_of(
                strict_reasoning, space(), strict_section, space(), after, end()
            )
        elif req.tool_choice == "required":
            grammar_parser = seq_of(strict_reasoning, space(), strict_section, space(), end())
        else:
            lazy = True
            # Text may follow the calls (some templates write content after them), but
            # never another trigger: a further call must be part of the section.
            after = until(triggers[0]) if triggers else None
            grammar_parser = seq_of(
                strict_reasoning, trigger(seq_of(strict_section, space(), after)), end()
            )
    elif req.response_schema is not None:
        wrapped = c.mode == ContentMode.ALWAYS_WRAPPED and bool(c.start)
        content = tag(tags.CONTENT, json_schema(dict(req.response_schema), "response"))
        grammar_parser = seq_of(
            strict_reasoning,
            space(),
            c.start if wrapped else None,
            content,
            c.end if wrapped else None,
            space(),
            end(),
        )

    cid = ctx.analysis.tools.call_id
    expects_ids = can_call and (
        cid.position != CallIdPosition.NONE or bool(fmt.id_field or fmt.gen_id_field)
    )
    return ParserDefinition(
        parser=parser,
        grammar_parser=grammar_parser,
        grammar_lazy=lazy,
        expects_call_ids=expects_ids,
        trigger_markers=tuple(triggers),
    )
