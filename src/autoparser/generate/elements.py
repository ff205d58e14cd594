"""Object and array values written as nested elements of the argument markup.

Some tagged-argument templates (MiniMax-M3) write an object value as its members in the
argument markup itself and an array as items named by a fixed element
(``ArgumentsAnalysis.value_item_name``)::

    <filters><range><min>1.5</min></range><flags><item>true</item><item></item></flags></filters>

Nothing in such text says whether ``1.5`` is a number or a string, or whether an empty
element is null or "": the tool's schema does. So the parser reads an element value as
text (delivered whole once complete) and ``read_value`` turns it into JSON typed by the
parameter's schema; the grammar allows exactly the elements the schema describes.
Untyped leaves read as JSON scalars where they are one (``42``, ``true``), else as text;
an empty untyped element is null (the template writes null as nothing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from autoparser.analysis.model import ArgumentsAnalysis
from autoparser.errors import SchemaError
from autoparser.peg import (
    Parser,
    Rules,
    chars,
    choice,
    json_schema,
    literal,
    optional,
    space,
    until,
)
from autoparser.peg.python_literal import WORD_VALUES
from autoparser.schema.argument_types import json_type, value_types
from autoparser.schema.refs import resolve_ref

# The value tag of an element-valued argument; the tool and argument follow it, so that
# each has its own converter (the schema that types the value).
TAG_PREFIX = "tool-arg-elements:"

_NESTED = frozenset({"object", "array"})
# Element names the grammar allows where the schema names none (additional members).
_NAME_CHARS = "a-zA-Z0-9_.\\-"


def value_tag(tool: str, argument: str) -> str:
    return f"{TAG_PREFIX}{tool}/{argument}"


def nests(schema: Any, root: Any) -> bool:
    """Whether values of ``schema`` may be objects or arrays (an untyped one may)."""
    kinds = value_types(schema, root)
    return kinds is None or bool(kinds & _NESTED)


def closer(a: ArgumentsAnalysis, name: str) -> str:
    """What closes an element: the value suffix, with the name repeated where the template
    repeats it (``</NAME>``)."""
    if not a.value_suffix_after_name:
        return a.value_suffix
    return a.value_suffix + name + a.value_suffix_after_name


def _resolved(schema: Any, root: Any, seen: frozenset[str] = frozenset()) -> Any:
    """``schema`` with its ``$ref`` followed (a cycle or dangling one: any value)."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref in seen:
            return {}
        seen = seen | {ref}
        try:
            schema = resolve_ref(ref, root)[1]
        except SchemaError:
            return {}
    return schema


def _branch(schema: Any, root: Any, kind: str) -> Any:
    """The part of ``schema`` describing values of JSON type ``kind`` (through anyOf/oneOf)."""
    schema = _resolved(schema, root)
    if not isinstance(schema, Mapping):
        return {}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                kinds = value_types(branch, root)
                if kinds is None or kind in kinds:
                    return _branch(branch, root, kind)
    return schema


def _member_schema(schema: Any, root: Any, name: str) -> Any:
    obj = _branch(schema, root, "object")
    if not isinstance(obj, Mapping):
        return {}
    props = obj.get("properties")
    if isinstance(props, Mapping) and name in props:
        return props[name]
    extra = obj.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else {}


def _items_schema(schema: Any, root: Any) -> Any:
    arr = _branch(schema, root, "array")
    items = arr.get("items") if isinstance(arr, Mapping) else None
    return items if isinstance(items, Mapping) else {}


class _Invalid(ValueError):
    """The text is not elements the schema allows."""


class _Reader:
    """Reads element text back into JSON values, typed by a schema."""

    def __init__(self, a: ArgumentsAnalysis, root: Any) -> None:
        self.a = a
        self.root = root
        self.head_end = a.name_suffix + a.value_prefix

    def members(self, text: str) -> list[tuple[str, str]] | None:
        """``text`` as (name, inner text) elements, or None when it is not only elements."""
        a, found, pos = self.a, [], 0
        sep = a.separator.strip()
        while pos < len(text):
            if not text.startswith(a.name_prefix, pos):
                return None
            name_at = pos + len(a.name_prefix)
            name_end = text.find(self.head_end, name_at)
            if name_end <= name_at:
                return None
            name = text[name_at:name_end]
            start = name_end + len(self.head_end)
            end = self._matching_close(text, name, start)
            if end < 0:
                return None
            found.append((name, text[start:end]))
            pos = end + len(closer(a, name))
            rest = text[pos:].lstrip()
            if sep and rest.startswith(sep):
                rest = rest[len(sep) :].lstrip()
            pos = len(text) - len(rest)
        return found

    def _matching_close(self, text: str, name: str, start: int) -> int:
        """Where the element opened before ``start`` closes, over nested ones of its name."""
        a = self.a
        opener = (
            a.name_prefix + name + self.head_end if a.value_suffix_after_name else a.name_prefix
        )
        close = closer(a, name)
        depth, at = 1, start
        while True:
            c = text.find(close, at)
            if c < 0:
                return -1
            o = text.find(opener, at, c)
            if o >= 0:
                depth, at = depth + 1, o + len(opener)
                continue
            depth -= 1
            if depth == 0:
                return c
            at = c + len(close)

    def value(self, text: str, schema: Any) -> Any:
        kinds = value_types(schema, self.root)
        if text.startswith(self.a.name_prefix) and (kinds is None or kinds & _NESTED):
            found = self.members(text)
            if found is not None:
                return self._nested(found, schema, kinds)
        return self._scalar(text, kinds)

    def _nested(self, found: list[tuple[str, str]], schema: Any, kinds: set[str] | None) -> Any:
        """Elements named by the item name are an array's items, others an object's members."""
        if all(n == self.a.value_item_name for n, _ in found) and (
            kinds is None or "array" in kinds
        ):
            items = _items_schema(schema, self.root)
            return [self.value(inner, items) for _, inner in found]
        if kinds is not None and "object" not in kinds:
            raise _Invalid("members where the schema allows an array's items only")
        return {n: self.value(inner, _member_schema(schema, self.root, n)) for n, inner in found}

    def _scalar(self, text: str, kinds: set[str] | None) -> Any:
        if not text.strip():
            if kinds is None or "null" in kinds:
                return None
            if "string" in kinds:
                return text
            if "array" in kinds:
                return []
            if "object" in kinds:
                return {}
            raise _Invalid("an empty value the schema does not allow")
        stripped = text.strip()
        try:
            value = json.loads(stripped)
        except ValueError:
            value = WORD_VALUES.get(stripped, text)
        if value is text or isinstance(value, str):
            if kinds is None or "string" in kinds:
                return text
            raise _Invalid(f"{stripped[:40]!r} where the schema allows {sorted(kinds)}")
        kind = json_type(value)
        if kinds is None or kind in kinds or (kind == "integer" and "number" in kinds):
            return value
        if "string" in kinds:
            return text
        raise _Invalid(f"{stripped[:40]!r} where the schema allows {sorted(kinds)}")


def converter(a: ArgumentsAnalysis, schema: Any, root: Any) -> Callable[[str], str | None]:
    """The element text of one argument -> its JSON text (None: not what the schema allows)."""
    reader = _Reader(a, root)

    def to_json(text: str) -> str | None:
        try:
            return json.dumps(reader.value(text, schema), ensure_ascii=False)
        except _Invalid:
            return None

    return to_json


class Grammar:
    """The strict parser of element values followed by their closer, typed by the schema.

    The opener of an element and a closer usually share their start (``]<]minimax[>[<`` and
    ``]<]minimax[>[</``). A GBNF engine that lexes greedily (llguidance) commits to the
    longer string it can read, so the grammar writes that shared start once and branches
    after it: ``P ( member-rest more | closer-rest )``, one value and its closer together.
    Text values that could be an element's start are not allowed where elements are.
    """

    def __init__(self, a: ArgumentsAnalysis, root: Any, rule: str) -> None:
        self.a = a
        self.root = root
        self.rule = rule
        self.rules = Rules()
        self.count = 0
        self.sep: Parser = space()
        if a.separator.strip():
            self.sep = space() + optional(literal(a.separator.strip())) + space()
        k = 0
        while k < min(len(a.name_prefix), len(a.value_suffix)) and (
            a.name_prefix[k] == a.value_suffix[k]
        ):
            k += 1
        self.shared = a.name_prefix[:k]
        self.open_rest = a.name_prefix[k:]
        self.close_rest = a.value_suffix[k:]
        self.head_end = a.name_suffix + a.value_prefix
        self.name = chars(_NAME_CHARS, 1, 64)
        self.generic_rest = self._rest(None)

    def _rest(self, name: str | None) -> Parser:
        """What follows the shared start in the closer of element ``name`` (None: any)."""
        if not self.a.value_suffix_after_name:
            return literal(self.close_rest) if self.close_rest else literal("")
        named = literal(name) if name is not None else self.name
        rest = seq_parts(self.close_rest, named, self.a.value_suffix_after_name)
        return rest

    def _new_rule(self) -> str:
        self.count += 1
        return f"{self.rule}-{self.count}"

    def closed(self, schema: Any, name: str | None, seen: frozenset[str] = frozenset()) -> Parser:
        """A value of ``schema`` followed by the closer of element ``name``."""
        rest = self._rest(name)
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if ref in seen:
                return self._any(rest)  # a recursive schema: its grammar need not recurse
            return self.closed(_resolved(schema, self.root, seen), name, seen | {ref})
        kinds = value_types(schema, self.root)
        if kinds is None or not isinstance(schema, Mapping):
            return self._any(rest)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return choice(*(self.closed(b, name, seen) for b in branches))
        options = [self._typed(kind, schema, rest, seen) for kind in sorted(kinds)]
        return options[0] if len(options) == 1 else choice(*options)

    def _close(self, rest: Parser) -> Parser:
        return literal(self.shared) + rest if self.shared else rest

    def _text(self, rest: Parser) -> Parser:
        """Text then the closer: empty, or not starting like an element."""
        empty = self._close(rest)
        if not self.shared:
            return until(self.a.value_suffix) + rest
        first = chars("^\\" + self.shared[0], 1, 1)
        return choice(empty, first + until(self.a.value_suffix) + self._close(rest))

    def _members(self, members: list[Parser], rest: Parser) -> Parser:
        """Zero or more members (each with its own closer) then the closer ``rest``."""
        one = members[0] if len(members) == 1 else choice(*members)
        name = self._new_rule()
        more = self.rules.ref(name)
        if self.shared:
            # shared ( open-rest member more | close-rest ), members apart by separators
            body = literal(self.shared) + choice(
                seq_parts(self.open_rest, one, self.sep, more), rest
            )
        else:
            body = choice(seq_parts(self.a.name_prefix, one, self.sep, more), rest)
        self.rules[name] = body
        return more

    def _member(self, name: Parser, value_then_close: Parser) -> Parser:
        return name + literal(self.head_end) + value_then_close

    def _any(self, rest: Parser) -> Parser:
        """Any value (elements of any names, or text), then the closer ``rest``."""
        member = self._member(self.name, self._any_generic())
        return choice(self._members([member], rest), self._text(rest))

    def _any_generic(self) -> Parser:
        """Any value then a closer of any name (one recursive rule)."""
        name = f"{self.rule}-any"
        if name not in self.rules:
            ref = self.rules.ref(name)
            member = self._member(self.name, ref)
            self.rules[name] = choice(
                self._members([member], self.generic_rest), self._text(self.generic_rest)
            )
        return self.rules.ref(name)

    def _typed(
        self, kind: str, schema: Mapping[str, Any], rest: Parser, seen: frozenset[str]
    ) -> Parser:
        if kind == "object":
            props = schema.get("properties")
            members = [
                self._member(literal(k), self.closed(s, k, seen))
                for k, s in (props.items() if isinstance(props, Mapping) else ())
            ]
            extra = schema.get("additionalProperties", not members)
            if extra is not False:
                inner = (
                    self.closed(extra, None, seen)
                    if isinstance(extra, Mapping)
                    else self._any_generic()
                )
                members.append(self._member(self.name, inner))
            return self._members(members, rest)
        if kind == "array":
            items = schema.get("items")
            item = self.a.value_item_name
            inner = self.closed(items if isinstance(items, Mapping) else {}, item, seen)
            return self._members([self._member(literal(item), inner)], rest)
        if kind == "null":
            return self._close(rest)
        if kind == "string":
            words = schema.get("enum", [schema["const"]] if "const" in schema else None)
            if isinstance(words, list) and words and all(isinstance(w, str) for w in words):
                return choice(*(literal(w) for w in dict.fromkeys(words))) + self._close(rest)
            return self._text(rest)
        scalar = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "type")}
        value = json_schema({**scalar, "type": kind}, f"{self._new_rule()}-{kind}")
        return value + space() + self._close(rest)


def seq_parts(*parts: Parser | str) -> Parser:
    """The non-empty parts in sequence (strings are literals)."""
    items = [literal(p) if isinstance(p, str) else p for p in parts if p != ""]
    result = items[0]
    for item in items[1:]:
        result = result + item
    return result
