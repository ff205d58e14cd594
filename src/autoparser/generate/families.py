"""Tools whose calls differ only in their names, as one family (``peg.Family``).

Building every call parser of a thousand tools costs more than a request may spend, yet
most tools share a form: the same parameter schemas under other names. A tool's *twin* is
the tool with placeholders for its name and its parameters' names, and without the
annotations no parser reads (descriptions, titles, examples). Tools with one twin, in one
build context, are one family: the GBNF emitter writes the family's grammar once, from the
call built for the twin, and puts each member's names in (``peg.gbnf_template``); the
lenient parser builds a tool's call only when the output calls it (``peg.Lazy``), knowing
from the twin what text that call starts with.

A tool joins no family (its call is built as before) where its names are not plain text
(``PLAIN``), two of its parameter names would share a rule name, or its schema could make
the grammar's form depend on the names' characters: a ``$ref`` (which may point through
``properties``) or top-level keywords other than the plain object ones (the grammar of
``additionalProperties`` excludes the declared names character by character).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoparser.analysis.model import ToolFormat
from autoparser.cache import CACHES, Store
from autoparser.gbnf_text import name_part
from autoparser.generate.context import BuildContext, TwinTool, rule_part, tool_rule
from autoparser.generate.json_calls import arguments_schema
from autoparser.generate.pythonic import is_pythonic
from autoparser.generate.request import ToolSpec
from autoparser.generate.tagged_calls import strict_argument
from autoparser.peg import Family, Name, Parser, json_schema, placeholder
from autoparser.peg.core import Lazy

# Names a family member may have: written the same as text, as JSON, as a Python string,
# in XML and in a rule name's sanitiser, so that only their text differs from a twin's
# (and with a letter or digit, so that the sanitised rule name part is not empty).
PLAIN = re.compile(r"[A-Za-z0-9_.\-]*[A-Za-z0-9][A-Za-z0-9_.\-]*")
# Keywords no parser or grammar reads (dropped from a twin, so tools that differ only in
# them are one family).
ANNOTATIONS = frozenset({"description", "title", "examples", "$comment"})
# The top-level keywords a twin may have: an object's own (any other one may combine
# schemas in ways that read the parameters' names).
_TOP_LEVEL = frozenset({"type", "properties", "required", "$schema"}) | ANNOTATIONS
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas.
_ONE = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
    | {"additionalItems", "unevaluatedItems", "unevaluatedProperties"}
)
_MANY = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


@dataclass(frozen=True)
class Twin:
    """A tool with placeholders for its names: ``key`` (its canonical JSON) says which
    tools are one family; ``names`` are the tool's own, in placeholder order (the tool's
    name, then its parameters')."""

    key: str
    tool: ToolSpec
    names: tuple[str, ...]


def _annotations_dropped(schema: object) -> object:
    """``schema`` without annotations, wherever a schema stands (not inside values such
    as ``enum``, ``const`` or ``default``, which are data)."""
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key in _ONE:
            out[key] = _annotations_dropped(value)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_annotations_dropped(v) for v in value]
        elif key in _MAP and isinstance(value, Mapping):
            out[key] = {k: _annotations_dropped(v) for k, v in value.items()}
        else:
            out[key] = value
    return out


def _twin_of(tool: ToolSpec) -> Twin | None:
    """The tool's twin, or None where it joins no family (see the module's docstring)."""
    params = tool.parameters
    props = tool.properties
    if not set(params) <= _TOP_LEVEL and not (
        set(params) <= _TOP_LEVEL | {"additionalProperties"}
        and params["additionalProperties"] is False
    ):
        return None
    if not isinstance(params.get("properties", {}), Mapping):
        return None
    names = (tool.name, *props)
    if not all(_plain(n) for n in names):
        return None
    if len({rule_part(n) for n in props}) != len(props):
        return None  # two parameters' rules would be told apart by a checksum of the name
    holders = {n: placeholder(i) for i, n in enumerate(props, start=1)}
    twin_params: dict[str, Any] = {}
    for key, value in params.items():
        if key in ANNOTATIONS:
            continue
        if key == "properties":
            value = {holders[k]: _annotations_dropped(v) for k, v in props.items()}
        elif key == "required" and isinstance(value, list):
            value = [holders.get(r, r) if isinstance(r, str) else r for r in value]
        twin_params[key] = value
    # One dump, of the twin (what the grammar reads): its key, and the test for what no
    # twin may hold (a reference, a value that is not JSON).
    try:
        text = json.dumps(twin_params, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    if '"$ref"' in text:
        return None
    return Twin(text, ToolSpec(placeholder(0), twin_params), names)


# (id(tool), tool, twin or None): a tool's twin, found once per tool object (a request's
# build asks for it in each context: lenient, strict, the first call's).
_TWINS: Store[tuple[ToolSpec, Twin | None]] = CACHES.store("tool_twins", 8192)


def twin(tool: ToolSpec) -> Twin | None:
    """The tool's twin (found once per tool object), or None: it joins no family."""
    key = id(tool)
    found = _TWINS.get(key)
    if found is None or found[0] is not tool:
        found = _TWINS.put(key, (tool, _twin_of(tool)))
    return found[1]


# Families by (what kind, the build context as the builders read it, the form's key).
_FAMILIES: Store[Family] = CACHES.store("call_families", 4096)
Build = Callable[[tuple[Parser, ...]], Parser]


_HOLDERS: list[str] = []


def _holders(size: int) -> tuple[str, ...]:
    """The first ``size`` placeholders."""
    while len(_HOLDERS) < size:
        _HOLDERS.append(placeholder(len(_HOLDERS)))
    return tuple(_HOLDERS[:size])


def _family(key: Hashable, size: int, build: Build) -> Family:
    return _FAMILIES.get_or_build(key, lambda: Family(key, _holders(size), build))


def _plain(name: str) -> bool:
    """Whether a family member may have this name (see ``PLAIN``)."""
    return PLAIN.fullmatch(name) is not None and "qjw" not in name


def call_member(
    ctx: BuildContext,
    context: Hashable,
    tool: ToolSpec,
    build: Callable[[BuildContext, ToolSpec], Parser],
) -> Parser | None:
    """The grammar's call of ``tool`` as a family member (``context``: the context's key;
    ``build``: the strict call builder), or None where the call is built on its own.

    A JSON call's family is every tool's (the arguments' schema its part); a tagged
    call's, every tool's with as many parameters, the same of them required (each
    argument its part); a call of any other format, every tool's with the same twin.
    """
    if not _plain(tool.name):
        return None
    props = list(tool.properties)
    if len({rule_part(n) for n in props}) != len(props):
        return None  # two arguments' rules would be told apart by a checksum of the name
    first = Name(tool.name, name_part(tool_rule(ctx, tool)))
    mode = ctx.analysis.tools.format.mode

    def real(parts: tuple[Parser, ...]) -> Callable[[], Parser]:
        """The member's own call: its name, its parts (so that written on its own, it
        still writes its parts from their families)."""
        own = TwinTool(tool.name, tool.parameters, tool.description, slots=parts)
        return functools.partial(build, ctx, own)

    if mode in (ToolFormat.JSON_NATIVE, ToolFormat.TAG_WITH_JSON):
        family = _family(
            ("json", context),
            1,
            lambda slots: build(ctx, TwinTool(placeholder(0), {}, slots=slots)),
        )
        parts: tuple[Parser, ...] = (_schema_part(ctx, tool, first),)
        return Lazy(real(parts), family=family, names=(first,), parts=parts)
    if mode == ToolFormat.TAG_WITH_TAGGED and not is_pythonic(ctx.analysis):
        required = _required_mask(tool)
        size = 1 + len(props)

        def make(slots: tuple[Parser, ...]) -> Parser:
            holders = _holders(size)[1:]
            params = {
                "type": "object",
                "properties": {h: {} for h in holders},
                "required": [h for h, r in zip(holders, required, strict=True) if r],
            }
            return build(ctx, TwinTool(placeholder(0), params, slots=slots))

        family = _family(("tagged", context, required), size, make)
        arguments = [Name(n, name_part(n)) for n in props]
        parts = tuple(_argument_part(ctx, context, tool, a, first) for a in arguments) or (
            _argument_part(ctx, context, tool, None, first),
        )
        return Lazy(real(parts), family=family, names=(first, *arguments), parts=parts)
    found = twin(tool)
    if found is None or not _plain_escapes(ctx, found.names[1:]):
        return None
    family = _family(
        ("whole", context, found.key),
        len(found.names),
        lambda slots: build(ctx, found.tool),
    )
    names = (first, *(Name(n, name_part(n)) for n in found.names[1:]))
    return Lazy(functools.partial(build, ctx, tool), family=family, names=names)


def _required_mask(tool: ToolSpec) -> tuple[bool, ...]:
    required = tool.parameters.get("required")
    names = set(required) if isinstance(required, list) else set()
    return tuple(n in names for n in tool.properties)


def _plain_escapes(ctx: BuildContext, names: Sequence[str]) -> bool:
    """Whether the template writes these argument names as they are (no entities)."""
    escapes = ctx.analysis.tools.arguments.name_escapes
    return not any(char in name for char, _ in escapes for name in names)


def _schema_part(ctx: BuildContext, tool: ToolSpec, first: Name) -> Parser:
    """A JSON call's arguments, a member of the family of schemas with the tool's twin."""
    real = functools.partial(arguments_schema, ctx, tool)
    found = twin(tool)
    if found is None:
        return Lazy(real)
    parameters = found.tool.parameters
    family = _family(
        ("schema", found.key),
        len(found.names),
        lambda slots: json_schema(dict(parameters), f"{placeholder(0)}-args"),
    )
    names = (first, *(Name(n, name_part(n)) for n in found.names[1:]))
    return Lazy(real, family=family, names=names)


def _argument_part(
    ctx: BuildContext, context: Hashable, tool: ToolSpec, argument: Name | None, first: Name
) -> Parser:
    """A tagged call's argument (None: any argument of a tool that declares none): a member
    of the family of arguments of its schema, of none where the schema has a reference
    (which may point into the tool's own definitions)."""
    name = argument.text if argument is not None else None
    real = functools.partial(strict_argument, ctx, tool, name)
    if name is not None and not (_plain(name) and _plain_escapes(ctx, [name])):
        return Lazy(real)
    schema = tool.properties.get(name, {}) if name is not None else None
    try:
        text = json.dumps(_annotations_dropped(schema), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return Lazy(real)
    if '"$ref"' in text:
        return Lazy(real)

    def make(slots: tuple[Parser, ...]) -> Parser:
        holder, arg = _holders(2)
        props = {arg: json.loads(text)} if name is not None else {}
        owner = ToolSpec(holder, {"type": "object", "properties": props})
        return strict_argument(ctx, owner, arg if name is not None else None)

    family = _family(("argument", context, text, name is None), 2, make)
    return Lazy(real, family=family, names=(first, argument or Name("any", "any")))


def first_text(
    ctx: BuildContext,
    context: Hashable,
    tool: ToolSpec,
    build: Callable[[BuildContext, ToolSpec], Parser],
) -> str:
    """What every match of the tool's lenient call (``build``) starts with, up to its name:
    the text of a call of a tool with no parameters named by a placeholder, the name in."""
    if PLAIN.fullmatch(tool.name) is None or "qjw" in tool.name:
        return ""
    family = _family(
        ("name", context),
        1,
        lambda slots: build(ctx, ToolSpec(placeholder(0), {"type": "object"})),
    )
    text = family.kept("first text", lambda: family.representative().first_text())
    assert isinstance(text, str)
    at = text.find(placeholder(0))
    return text if at < 0 else text[:at] + tool.name
