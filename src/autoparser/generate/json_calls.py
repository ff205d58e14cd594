"""Calls whose name and arguments are JSON: JSON-native objects ({"name": ..., "arguments":
...}), tag-wrapped JSON arguments, and call ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from autoparser import tags
from autoparser.analysis.model import CallIdPosition, TemplateAnalysis, ToolFormat
from autoparser.cache import CACHES, Store
from autoparser.gbnf_text import rule_name
from autoparser.generate.context import (
    BuildContext,
    Part,
    TwinTool,
    choice_of,
    closing,
    longest_name_first,
    seq_of,
    tool_name,
    tool_rule,
)
from autoparser.generate.request import ToolSpec
from autoparser.peg import (
    GrammarTrigger,
    Parser,
    atomic,
    chars,
    json_schema,
    json_string,
    json_value,
    literal,
    negate,
    optional,
    space,
    tag,
    until,
    zero_or_more,
)


def is_string_param(schema: Any, root: Any) -> bool:
    from autoparser.schema import parameter_is_string

    return bool(parameter_is_string(schema, root))


def json_args(tool: ToolSpec) -> Parser:
    """The JSON arguments of ``tool``, checked against its schema, in rules named after it."""
    return json_schema(dict(tool.parameters), f"{rule_name(tool.name)}-args")


# Parser pieces that depend on the template's format alone (a member key, the lenient
# call object's other members), built once and shared by every tool's call: parsers are
# immutable, and building them again per tool was a good part of a thousand tools' build.
_PIECES: Store[Parser] = CACHES.store("call_pieces", 512)


def _json_key(key: str, quote: str = '"') -> Parser:
    def build() -> Parser:
        text = json.dumps(key, ensure_ascii=False) if quote == '"' else f"{quote}{key}{quote}"
        return literal(text) + space() + literal(":") + space()

    return _PIECES.get_or_build(("key", key, quote), build)


# What the grammar lets a model write as a call id: id-like characters, bounded (an engine
# must not be able to sample an id forever); the parser reads any text up to the quote.
_GRAMMAR_ID_CHARS = "a-zA-Z0-9_\\-.:"
_GRAMMAR_ID_MAX = 64


def _id_value_json(quote: str = '"', strict: bool = False) -> Parser:
    value = chars(_GRAMMAR_ID_CHARS, 1, _GRAMMAR_ID_MAX) if strict else until(quote)
    return literal(quote) + tag(tags.TOOL_ID, value) + literal(quote)


def arguments_schema(ctx: BuildContext, tool: ToolSpec) -> Parser:
    """The call's arguments as one JSON value of the tool's schema: the part a family's
    representative has a stand-in for (``generate.families``)."""
    if isinstance(tool, TwinTool):
        return tool.slots[0]
    return json_schema(dict(tool.parameters), f"{tool_rule(ctx, tool)}-args")


def _json_args_value(ctx: BuildContext, tool: ToolSpec) -> Parser:
    fmt = ctx.analysis.tools.format
    if fmt.arguments_as_string:
        return tag(tags.TOOL_ARGS_STR, json_string())
    if fmt.uses_python_dicts:
        return tag(tags.TOOL_ARGS_PY, json_value(allow_single_quotes=True))
    return tag(tags.TOOL_ARGS, arguments_schema(ctx, tool))


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


def json_native_call(
    ctx: BuildContext, tool: ToolSpec, strict: bool = True, python_args: Parser | None = None
) -> Parser:
    """One call written as a JSON object (flat, nested under a key, or name-as-key).

    With ``uses_python_dicts`` the call object is written with single quotes too. The
    lenient parser also reads the members in another order (``_loose_call_object``), and,
    given ``python_args`` (a Python-literal value), arguments and the whole call object in
    Python's notation (models copy a template that prints the arguments object with str());
    a call whose arguments break is no call (its text is content).
    """
    fmt = ctx.analysis.tools.format
    q = "'" if fmt.uses_python_dicts else '"'
    args = _json_args_value(ctx, tool)
    if not strict and not (fmt.arguments_as_string or fmt.uses_python_dicts):
        # Models also write the arguments as a JSON string holding the object.
        args = choice_of([tag(tags.TOOL_ARGS_STR, json_string()), args])
        if python_args is not None:
            args = choice_of([args, tag(tags.TOOL_ARGS_PY, python_args)])
    if fmt.fun_name_is_key:
        name = atomic(literal(q) + tag(tags.TOOL_NAME, tool_name(tool)) + literal(q))
        return _json_object([name + space() + literal(":") + space() + args])
    nest = f"{fmt.function_field}." if fmt.function_field else ""
    name_path = nest + (fmt.name_field or "name")
    args_path = nest + (fmt.args_field or "arguments")
    id_names = {k for k in (fmt.id_field, fmt.gen_id_field) if k}
    constants = dict(fmt.constant_fields)
    name_value = literal(q) + atomic(tag(tags.TOOL_NAME, tool_name(tool)) + literal(q))

    def leaf(path: str) -> Parser:
        if path == name_path:
            return name_value
        if path == args_path:
            return args
        if path in constants and q == '"':
            return literal(constants[path])
        if path.rpartition(".")[2] in id_names:
            return _id_value_json(q, strict)
        return json_value(allow_single_quotes=q == "'")

    paths = _field_paths(ctx)
    good = _object_from_paths(paths, leaf, q)
    if strict or nest:
        return good
    loose = [good, _loose_call_object(ctx, name_value, args, q)]
    if python_args is not None and q == '"':
        single = literal("'") + atomic(tag(tags.TOOL_NAME, tool_name(tool)) + literal("'"))
        loose.append(_loose_call_object(ctx, single, args, "'"))
    return choice_of(loose)


# The keys models use for a call's arguments, whichever one the template renders.
ARGUMENT_KEYS = ("arguments", "parameters")


def _loose_call_object(
    ctx: BuildContext,
    name_value: Parser,
    args_value: Parser,
    q: str,
    keys: tuple[str, str] = ("", ""),
) -> Parser:
    """A flat call object as real models write it, for the lenient parser only.

    The name and the arguments in either order, ``parameters`` for ``arguments`` (and the
    reverse), other members (``"type": "function"``, an id) before, between or after them,
    and the arguments written as the template's own call writes them (``args_value``).
    ``keys`` names the name and arguments keys where the format's fields do not.
    """
    fmt = ctx.analysis.tools.format
    name_key = keys[0] or fmt.name_field or "name"
    arg_keys = tuple(dict.fromkeys([keys[1] or fmt.args_field or "arguments", *ARGUMENT_KEYS]))
    shape = (name_key, arg_keys, q)
    name_pair = _json_key(name_key, q) + name_value
    args_pair = _PIECES.get_or_build(("args keys", *shape), lambda: _args_keys(arg_keys, q))
    args_pair = args_pair + args_value
    sep = _PIECES.get_or_build(("sep",), lambda: space() + literal(",") + space())
    others = _PIECES.get_or_build(("others", *shape), lambda: _other_members(*shape, sep, True))
    trailing = _PIECES.get_or_build(
        ("trailing", *shape), lambda: _other_members(*shape, sep, False)
    )
    both = choice_of([name_pair + sep + others + args_pair, args_pair + sep + others + name_pair])
    return literal("{") + space() + others + both + trailing + space() + literal("}")


def _args_keys(arg_keys: Sequence[str], q: str) -> Parser:
    """Any of the keys models write the arguments under."""
    return choice_of([_json_key(k, q) for k in arg_keys])


def _other_members(
    name_key: str, arg_keys: Sequence[str], q: str, sep: Parser, before: bool
) -> Parser:
    """Members other than the name and the arguments, any number, each followed
    (``before``) or preceded by the separator."""
    known = choice_of([literal(f"{q}{k}{q}") for k in (name_key, *arg_keys)])
    other_pair = (
        negate(known)
        + json_string(allow_single_quotes=q == "'")
        + space()
        + literal(":")
        + space()
        + json_value(allow_single_quotes=q == "'")
    )
    return zero_or_more(other_pair + sep) if before else zero_or_more(sep + other_pair)


def _call_id(ctx: BuildContext, strict: bool = True) -> Parser:
    """The call id with its markers; the lenient parser allows whitespace at the joint
    before the suffix (``get_weather:0 <|tool_call_argument_begin|>``)."""
    cid = ctx.analysis.tools.call_id
    if cid.generated:
        # The call's position (0, 1, ...): digits only, so the id never spans markers or
        # another call's text up to the next suffix.
        value = tag(tags.TOOL_ID, chars("0-9", 1, 9))
    elif cid.suffix:
        value = tag(tags.TOOL_ID, until(cid.suffix))
    else:
        value = tag(tags.TOOL_ID, chars("a-zA-Z0-9_\\-", 1, 64))
    gap = space() if cid.suffix and not strict else None
    return seq_of(cid.prefix, value, gap, cid.suffix)


def name_part(ctx: BuildContext, tool: ToolSpec, strict: bool = True) -> Parser:
    """The function name with its markers. The lenient parser also reads the name without
    a plain-text prefix (``get_weather`` for ``functions.get_weather``) where a markup
    marker opens the call anyway: models leave such a namespace out."""
    fn = ctx.analysis.tools.function
    f = ctx.analysis.tools.format
    gap = space() if fn.name_suffix else None  # the suffix may follow a newline
    # A format that names the function twice (a header, then markup) repeats it verbatim.
    again = (tool_name(tool), fn.name_suffix_after_name) if fn.name_suffix_after_name else ()
    prefix: Parser | str = fn.name_prefix
    opened = f.per_call_start or f.section_start
    plain = fn.name_prefix and not any(c in fn.name_prefix for c in "<>[]{}|")
    if not strict and plain and opened and fn.name_prefix.strip():
        prefix = optional(literal(fn.name_prefix))
    return atomic(seq_of(prefix, tag(tags.TOOL_NAME, tool_name(tool)), gap, fn.name_suffix, *again))


def with_call_id(
    ctx: BuildContext, name: Parser, args: Parser, close: Parser | None, strict: bool
) -> Parser:
    cid = ctx.analysis.tools.call_id
    pos = cid.position
    id_part: Parser | None = None
    if pos != CallIdPosition.NONE:
        id_part = _call_id(ctx, strict)
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


def tag_json_call(
    ctx: BuildContext, tool: ToolSpec, strict: bool, python_args: Parser | None = None
) -> Parser:
    """``<name markers>{json arguments}<close>``.

    The lenient parser (given ``python_args``, a Python-literal value) also reads the
    arguments as a Python dict (``{'city': 'Paris'}``: templates that print the arguments
    object rather than its JSON render it so), and (always), where the markers around the name are
    a JSON object's skeleton (``{"name": "`` ... ``", "arguments": ``), the call as any
    JSON object (``_json_skeleton_call``): a template that writes that skeleton broken or
    with its own spacing is not the only shape read back.
    """
    a = ctx.analysis.tools.arguments
    args = tag(tags.TOOL_ARGS, arguments_schema(ctx, tool))
    if not strict and python_args is not None:
        args = choice_of([args, tag(tags.TOOL_ARGS_PY, python_args)])
    body = seq_of(a.start, args, closing(a.end, strict))
    close = closing(ctx.analysis.tools.function.close, strict)
    call = with_call_id(ctx, name_part(ctx, tool, strict), body, close, strict)
    if strict and (fixed := _fixed_skeleton_call(ctx, tool, args)) is not None:
        return choice_of([fixed, call])
    if strict:
        return call
    skeleton = _json_skeleton_call(ctx, tool, args)
    return call if skeleton is None else choice_of([call, skeleton])


# A JSON object's opening up to its first key's value: ``{"name": "`` (the name's quote
# optional, for a skeleton whose value quotes are elsewhere).
_SKELETON_HEAD = re.compile(r"""\{\s*(["'])(\w+)\1\s*:\s*["']?\Z""")
# The key before the arguments value: ``", "arguments": ``.
_SKELETON_ARGS = re.compile(r"""(["'])(\w+)\1\s*:\s*\Z""")


def _skeleton_parts(ctx: BuildContext) -> tuple[str, str, str, str] | None:
    """(markers before the brace, name key, arguments key, markers after the closing
    brace) of a call whose name and arguments markers are a JSON object's skeleton."""
    fn = ctx.analysis.tools.function
    if ctx.analysis.tools.call_id.position != CallIdPosition.NONE:
        return None
    brace = fn.name_prefix.find("{")
    end = fn.close.find("}")
    head = _SKELETON_HEAD.search(fn.name_prefix, brace) if brace >= 0 else None
    args_key = _SKELETON_ARGS.search(fn.name_suffix)
    if head is None or head.start() != brace or args_key is None or end < 0:
        return None
    before, after = fn.name_prefix[:brace], fn.close[end + 1 :]
    return before, head.group(2), args_key.group(2), after


def _fixed_skeleton_call(ctx: BuildContext, tool: ToolSpec, args: Parser) -> Parser | None:
    """The grammar's other call where the template writes its JSON skeleton broken
    (xinference's ``{"name": "NAME, "arguments": {...}"}``): the same object as valid JSON,
    which is what a model writes (the grammar allows both, the broken one never alone).
    None where the template's own skeleton is JSON (it stays as written).
    """
    parts = _skeleton_parts(ctx)
    if parts is None:
        return None
    fn = ctx.analysis.tools.function
    brace, end = fn.name_prefix.find("{"), fn.close.find("}")
    sample = fn.name_prefix[brace:] + "f" + fn.name_suffix + "{}" + fn.close[: end + 1]
    try:
        json.loads(sample.replace("'", '"'))
        return None
    except ValueError:
        pass
    before, name_key, args_key, after = parts
    name = tag(tags.TOOL_NAME, tool_name(tool))
    head = json.dumps({name_key: ""})[:-2]  # '{"name": "'
    middle = '", ' + json.dumps(args_key) + ": "
    return seq_of(before or None, head, name, middle, args, "}", after or None)


def _json_skeleton_call(ctx: BuildContext, tool: ToolSpec, args: Parser) -> Parser | None:
    """The call read as a JSON object, where the template writes its name and arguments
    as the members of one (``{"name": "NAME", "arguments": {...}}`` between its markers).

    None for any other markup, or when a call id sits in the skeleton. The markers before
    the brace and after the closing brace stay (``<tool_call>``, ``</tool_call>``); the
    object itself is read as ``_loose_call_object`` reads one, in double or single quotes.
    """
    parts = _skeleton_parts(ctx)
    if parts is None:
        return None
    before, after = parts[0].strip(), parts[3].strip()
    keys = (parts[1], parts[2])
    objects = []
    for q in ('"', "'"):
        name = literal(q) + atomic(tag(tags.TOOL_NAME, tool_name(tool)) + literal(q))
        objects.append(_loose_call_object(ctx, name, args, q, keys))
    return seq_of(
        before or None,
        space() if before else None,
        choice_of(objects),
        space() if after else None,
        after or None,
    )


def call_start_triggers(
    analysis: TemplateAnalysis, markers: Sequence[str], tools: Sequence[ToolSpec]
) -> tuple[GrammarTrigger, ...]:
    """Pattern triggers for bare JSON calls, whose opener is just ``{`` or ``[``.

    A bare brace or bracket also starts ordinary text (code, JSON answers, lists), and a
    lazy grammar that fires on it would force a call on them: the trigger needs the call
    object's first key as well (and a tool's name when that key is the name). Empty (the
    word triggers stand) for any other format, or when the opener is a real marker.
    """
    f = analysis.tools.format
    if f.mode != ToolFormat.JSON_NATIVE or not tools or not f.field_order:
        return ()
    first = f.field_order[0]
    key = rf'"{re.escape(first)}"\s*:\s*'
    if first == f.name_field:
        names = "|".join(re.escape(t.name) for t in longest_name_first(tools))
        key += rf'"(?:{names})"'
    found = []
    for marker in markers:
        if any(ch.isalnum() for ch in marker):
            return ()
        opener = re.escape(marker.strip())
        if marker.strip() == "[":
            opener += r"\s*\{"
        why = (
            f"a bare {marker.strip()!r} also starts ordinary text (code, a JSON answer): only a "
            f"pattern can ask for the call object's first key {first!r} after it"
        )
        found.append(GrammarTrigger("pattern", rf"{opener}\s*{key}", why))
    return tuple(found)
