"""Whether a tool parameter's value is raw text or JSON in tagged argument formats.

Formats like `<parameter=city>Paris</parameter>` write string arguments as raw text and
every other argument as JSON. The rule here: a parameter is a string when every value its
schema allows, apart from null, is a string. So `{"type": ["string", "null"]}` and an
`anyOf` of string schemas and null are strings (the text is the string; null cannot be
written raw), while `{}` (any value), `["string", "number"]` or an enum mixing strings and
numbers are JSON. An unresolvable `$ref` counts as not a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoparser.errors import SchemaError
from autoparser.schema.refs import resolve_ref

_STRING_ONLY_KEYWORDS = ("minLength", "maxLength", "pattern", "format")


def _kinds(schema: object, root: object, seen: frozenset[str]) -> set[str] | None:
    """JSON types `schema` allows (None = unconstrained)."""
    if schema is True:
        return None
    if not isinstance(schema, Mapping):
        return set()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        if target is None or ref in seen:
            return None
        return _kinds(target, root, seen | {ref})
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            union: set[str] = set()
            for branch in branches:
                kinds = _kinds(branch, root, seen)
                if kinds is None:
                    return None
                union |= kinds
            return union
    parts = schema.get("allOf")
    if isinstance(parts, list) and parts:
        result: set[str] | None = None
        for part in parts:
            kinds = _kinds(part, root, seen)
            if kinds is not None:
                result = kinds if result is None else result & kinds
        return result
    if "const" in schema:
        return {json_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {json_type(v) for v in schema["enum"]}
    kind = schema.get("type")
    if isinstance(kind, str):
        kinds = {kind}
    elif isinstance(kind, list):
        kinds = {k for k in kind if isinstance(k, str)}
    elif any(k in schema for k in _STRING_ONLY_KEYWORDS):
        kinds = {"string"}
    else:
        return None
    if schema.get("nullable") is True:
        kinds.add("null")
    return kinds


def json_type(value: Any) -> str:
    """The JSON Schema type of a JSON value (an integral number is an integer; a tuple,
    as Python literals give, is an array)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"


def _resolve(ref: str, root: object) -> object | None:
    try:
        return resolve_ref(ref, root)[1]
    except SchemaError:
        return None


def value_types(schema: object, root: object = None) -> set[str] | None:
    """The JSON types the values of `schema` may have (None: any), following `$ref`s
    into `root` (by default the schema itself)."""
    return _kinds(schema, schema if root is None else root, frozenset())


def parameter_is_string(schema: object, root: object = None) -> bool:
    """True when every non-null value `schema` allows is a string (so: raw text).

    `root` is the document `$ref`s point into (the tool's parameters object); by
    default the schema itself.
    """
    kinds = value_types(schema, root)
    if kinds is None:
        return False
    kinds.discard("null")
    return kinds == {"string"}
