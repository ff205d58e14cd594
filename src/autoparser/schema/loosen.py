"""A schema made convertible by loosening what the grammar cannot express, node by node.

Clients send tool schemas written for a validator, not a grammar: keywords the converter
does not turn into grammar (``propertyNames``, ``multipleOf``, ``uniqueItems``...), length
bounds a grammar would have to spell out one repetition at a time (``maxLength: 524288``),
or combinations it cannot express (``pattern`` with ``maxLength``). ``loosen_schema``
returns the schema with each such keyword dropped at its node, so the grammar accepts a
superset of what the schema allows there and stays exact everywhere else, and one
``Loosened`` finding per keyword (its JSON pointer, what was done) for the caller to log
and count. ``strict=True`` raises a ``SchemaError`` naming the first one instead.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from autoparser.cache import CACHES, Store
from autoparser.errors import SchemaError
from autoparser.schema.convert import IGNORED_KEYWORDS, SUPPORTED_KEYWORDS, schema_rules
from autoparser.schema.regex import translate_pattern
from autoparser.schema.string_formats import FORMAT_RULES

COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
"""Bounds the grammar writes as a repetition count."""

# Keywords whose value is one schema, a list of schemas, or a name -> schema map.
_ONE = ("items", "additionalProperties", "additionalItems", "not", "contains", "if", "then")
_ONE_MORE = ("else", "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
# Where a converter error is: "... at /properties/a/allOf/1: ..." (or "#" for the root).
_AT = re.compile(r" at (#|/[^\s:]*)")
_QUOTED = re.compile(r"'([A-Za-z$]+)'")
# Converter errors about what it cannot express (not about a schema no value satisfies, or
# a malformed one: those stay the caller's to name).
_INEXPRESSIBLE = re.compile(r"cannot merge|unsupported|combined with")
MAX_ROUNDS = 64  # conversions tried while loosening what only the converter finds
# Loosened schemas by (canonical schema, max_count): agents send the same tools each turn.
# (None: nothing to loosen, the schema is its own answer).
_LOOSENED: Store[tuple[object, tuple[Loosened, ...]]] = CACHES.store("loosened_schemas", 4096)


@dataclass(frozen=True)
class Loosened:
    """One keyword left out of the grammar: where (a JSON pointer, ``#`` the root), what,
    and why (``unsupported``, ``above_limit``, ``always_true``, ``combined``,
    ``bad_pattern``, ``unconvertible``: what the converter itself refused there, ``value``
    saying why)."""

    pointer: str
    keyword: str
    reason: str
    value: object = None

    def problem(self) -> str:
        """What the grammar cannot do here."""
        return {
            "unsupported": f"unsupported keyword {self.keyword!r}",
            "above_limit": f"{self.keyword} {self.value!r} is above the limit",
            "always_true": f"{self.keyword} is always true",
            "combined": f"{self.keyword} combined with pattern or format",
            "bad_pattern": "a pattern the grammar cannot express",
            "unconvertible": f"{self.value}",
        }[self.reason]

    def describe(self) -> str:
        """One line for a log: the pointer, the keyword and what became of it."""
        done = "left unbounded" if self.reason == "above_limit" else "dropped"
        return f"{self.pointer}: {self.problem()}: {done}"


def _always_true(schema: object) -> bool:
    """A ``propertyNames`` schema every object key (a string) satisfies."""
    if schema is True or schema == {}:
        return True
    if not isinstance(schema, Mapping):
        return False
    rest = {k: v for k, v in schema.items() if k not in IGNORED_KEYWORDS}
    return rest in ({}, {"type": "string"})


def _children(key: str, value: object, pointer: str) -> Iterator[tuple[str, object]]:
    """The subschemas under keyword ``key`` (its value ``value``), with their pointers."""
    where = f"{pointer}/{key}"
    if isinstance(value, list) and (key in _LISTS or key == "items"):  # items: draft 4 tuples
        for i, item in enumerate(value):
            yield f"{where}/{i}", item
    elif key in _ONE or key in _ONE_MORE:
        yield where, value
    elif key in _MAPS and isinstance(value, Mapping):
        for name, item in value.items():
            escaped = str(name).replace("~", "~0").replace("/", "~1")
            yield f"{where}/{escaped}", item


class _Loosener:
    def __init__(self, max_count: int | None, strict: bool) -> None:
        self.max_count = max_count
        self.strict = strict
        self.found: list[Loosened] = []

    def note(self, finding: Loosened) -> None:
        if self.strict:
            raise SchemaError(f"{finding.problem()} at {finding.pointer}")
        self.found.append(finding)

    def visit(self, schema: object, pointer: str) -> object:
        if not isinstance(schema, Mapping):
            return schema  # booleans, or a malformed schema the converter names
        out: dict[str, Any] = {}
        for key, value in schema.items():
            at = f"{pointer}/{key}"
            if key == "propertyNames" and _always_true(value):
                self.note(Loosened(at, key, "always_true"))
                continue
            if key not in SUPPORTED_KEYWORDS and key not in IGNORED_KEYWORDS:
                self.note(Loosened(at, key, "unsupported"))
                continue
            if key in COUNT_KEYWORDS and self._too_large(value):
                self.note(Loosened(at, key, "above_limit", value))
                continue
            if key in _MAPS or key in _LISTS or key in _ONE:
                out[key] = self.children(key, value, pointer)
            else:
                out[key] = value
        return self.combinations(out, pointer)

    def children(self, key: str, value: object, pointer: str) -> object:
        if isinstance(value, list):
            return [self.visit(item, at) for at, item in _children(key, value, pointer)]
        if key in _MAPS and isinstance(value, Mapping):
            pairs = zip(value, _children(key, value, pointer), strict=True)
            return {name: self.visit(item, at) for name, (at, item) in pairs}
        return self.visit(value, f"{pointer}/{key}")

    def _too_large(self, value: object) -> bool:
        return (
            self.max_count is not None
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value > self.max_count
        )

    def combinations(self, node: dict[str, Any], pointer: str) -> dict[str, Any]:
        """What the converter refuses in one node: an untranslatable pattern, and lengths
        next to a pattern or a known format."""
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                translate_pattern(pattern, pointer + "/pattern")
            except SchemaError:
                self.note(Loosened(f"{pointer}/pattern", "pattern", "bad_pattern"))
                del node["pattern"]
        fmt = node.get("format")
        if "pattern" in node or (isinstance(fmt, str) and fmt in FORMAT_RULES):
            for key in ("minLength", "maxLength"):
                if key in node:
                    self.note(Loosened(f"{pointer}/{key}", key, "combined"))
                    del node[key]
        return node


def _locate(schema: object, pointer: str) -> tuple[object, object, str | int | None]:
    """(parent, node, key in parent) at a converter's pointer; the parent is None at the
    root or where the pointer leads nowhere."""
    parent: object = None
    node: object = schema
    key: str | int | None = None
    for raw in [p for p in pointer.split("/")[1:] if p]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            parent, node, key = node, node[part], part
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            parent, node, key = node, node[int(part)], int(part)
        else:
            return None, None, None
    return parent, node, key


def _converted(schema: object, found: list[Loosened]) -> object:
    """``schema`` loosened further until the converter takes it: for each error about what
    it cannot express (``allOf`` parts it cannot merge...), the node the error names loses
    the keyword the error names, or becomes any value when none is named. A malformed or
    unsatisfiable schema is returned as it is, for the converter to name."""
    for _ in range(MAX_ROUNDS):
        try:
            schema_rules(schema, "loosen")
            return schema
        except SchemaError as exc:
            text = exc.detail
        except (TypeError, ValueError, AttributeError):
            return schema  # malformed beyond a schema error: the caller's checks name it
        if not _INEXPRESSIBLE.search(text):
            return schema  # malformed or unsatisfiable: the converter names it to the caller
        where = _AT.search(text)
        pointer = "#" if where is None or where.group(1) == "#" else "#" + where.group(1)
        parent, node, key = _locate(schema, pointer)
        named = [k for k in _QUOTED.findall(text) if isinstance(node, Mapping) and k in node]
        if isinstance(node, dict) and named:
            del node[named[0]]
            found.append(Loosened(f"{pointer}/{named[0]}", named[0], "unconvertible", text))
        elif isinstance(parent, dict) and isinstance(key, str) and not isinstance(node, Mapping):
            del parent[key]  # a keyword's value (``pattern``, a bound): the keyword goes
            found.append(Loosened(pointer, key, "unconvertible", text))
        elif isinstance(parent, dict) and isinstance(key, str):
            parent[key] = {}  # the node takes any value
            found.append(Loosened(pointer, "schema", "unconvertible", text))
        elif isinstance(parent, list) and isinstance(key, int):
            parent[key] = {}
            found.append(Loosened(pointer, "schema", "unconvertible", text))
        else:
            found.append(Loosened("#", "schema", "unconvertible", text))
            return {}
    raise SchemaError(f"the schema could not be loosened into one the grammar takes: {text}")


def loosen_schema(
    schema: object, *, max_count: int | None = None, strict: bool = False
) -> tuple[object, tuple[Loosened, ...]]:
    """``schema`` with every keyword the grammar cannot express dropped at its node, and
    what was dropped.

    Dropped: keywords the converter does not support (``propertyNames`` that every string
    satisfies counts as always true), ``minLength``/``maxLength``/``minItems``/``maxItems``
    above ``max_count`` (the bound becomes open), a ``pattern`` the regex translator
    cannot read, and lengths next to a ``pattern`` or a known ``format``. Everything else
    is kept as given, so ``schema_rules`` still names any other problem. With ``strict``,
    the first such keyword is a ``SchemaError`` naming its JSON pointer instead.
    """
    if strict:
        return _Loosener(max_count, strict).visit(schema, "#"), ()
    try:
        key = json.dumps([schema, max_count], sort_keys=True)
    except (TypeError, ValueError):
        key = None
    known = _LOOSENED.get(key) if key is not None else None
    if known is None:
        loosener = _Loosener(max_count, strict)
        loose = loosener.visit(schema, "#")
        if isinstance(loose, (Mapping, bool)):
            loose = _converted(copy.deepcopy(loose), loosener.found)
        # Nothing loosened: the schema itself is the answer (no copy to make per request).
        known = (loose if loosener.found else None, tuple(loosener.found))
        if key is not None:
            _LOOSENED.put(key, known)
    if known[0] is None:
        return schema, ()
    return copy.deepcopy(known[0]), known[1]
