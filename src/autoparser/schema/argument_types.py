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
        return {_type_name(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {_type_name(v) for v in schema["enum"]}
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


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    return "other"


def _resolve(ref: str, root: object) -> object | None:
    if not ref.startswith("#"):
        return None
    target = root
    for raw in ref[1:].split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, Mapping) or part not in target:
            return None
        target = target[part]
    return target


def parameter_is_string(schema: object, root: object = None) -> bool:
    """True when every non-null value `schema` allows is a string (so: raw text).

    `root` is the document `$ref`s point into (the tool's parameters object); by
    default the schema itself.
    """
    kinds = _kinds(schema, schema if root is None else root, frozenset())
    if kinds is None:
        return False
    kinds.discard("null")
    return kinds == {"string"}
