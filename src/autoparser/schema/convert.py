"""JSON Schema -> GBNF: rules whose root matches one JSON value valid for the schema.

The grammar is a subset of the schema's instances chosen for generation: object keys come
in a fixed order (required keys in declared order, then optional keys in declared order),
strings use json.dumps's escaping, and an object without `additionalProperties` admits
only its declared keys. Everything the grammar admits validates against the schema,
except where the docs of schema_rules say otherwise (oneOf exclusivity, allOf merging).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Literal

from autoparser.cancel import checkpoint
from autoparser.errors import SchemaError
from autoparser.gbnf_text import (
    JSON_CHAR,
    JSON_NUMBER,
    alternatives,
    fresh_name,
    gbnf_char_class,
    gbnf_literal,
    gbnf_optional,
    gbnf_repeat,
    group,
    name_part,
    rules_text,
    sequence,
)
from autoparser.schema.ranges import integer_range, number_range
from autoparser.schema.refs import resolve_ref
from autoparser.schema.regex import DOT_RULE, translate_pattern
from autoparser.schema.string_formats import FORMAT_RULES

IGNORED_KEYWORDS = frozenset(
    {
        "description", "title", "examples", "default", "$schema", "$id", "$comment",
        "$anchor", "deprecated", "readOnly", "writeOnly", "contentMediaType",
        "contentEncoding", "$defs", "definitions",
    }
)  # fmt: skip
"""Keywords that never constrain the JSON text."""

SUPPORTED_KEYWORDS = frozenset(
    {
        "type", "enum", "const", "properties", "required", "additionalProperties", "$ref",
        "anyOf", "oneOf", "allOf", "nullable", "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems",
    }
)  # fmt: skip
"""Keywords the converter turns into grammar."""

INLINE_OPTIONAL_LIMIT = 16
# Ends the message of an unsupported keyword (SchemaError.hint); callers that cannot pass
# lenient (the CLI, the studio) show SchemaError.detail with what they can offer instead.
LENIENT_HINT = " (pass lenient=True to drop it)"
"""Above this many optional keys next to additional properties, tails become named rules."""

JSON_TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
}
_PREFIX_OK = re.compile(r"[A-Za-z][A-Za-z0-9-]*\Z")

PRIMITIVE_RULES: dict[str, str] = {
    "json-char": JSON_CHAR,
    "json-string": '"\\"" json-char* "\\""',
    "json-number": JSON_NUMBER,
    "json-integer": '"-"? ( "0" | [1-9] [0-9]* )',
    "json-boolean": '"true" | "false"',
    "json-null": '"null"',
}
"""Whitespace-independent shared rules (names fixed, bodies fixed)."""


@dataclass(frozen=True)
class Whitespace:
    """The rule allowed between JSON tokens; `tag` names the shared rules that use it."""

    tag: str
    body: str | None  # None: no whitespace at all

    def __post_init__(self) -> None:
        if not _PREFIX_OK.match(self.tag):
            raise ValueError(f"whitespace tag {self.tag!r}: letters, digits and '-' only")
        if self.tag in _BUILT_IN_WHITESPACE and self.body != _BUILT_IN_WHITESPACE[self.tag]:
            raise ValueError(f"whitespace tag {self.tag!r} is built in: choose another tag")


_BUILT_IN_WHITESPACE = {"compact": None, "pretty": '"" | " " | "\\n" [ \\t]{0,40}'}
COMPACT = Whitespace("compact", None)
"""No whitespace between tokens: `{"a":1,"b":[1,2]}` (json.dumps separators=(',', ':'))."""
PRETTY = Whitespace("pretty", _BUILT_IN_WHITESPACE["pretty"])
"""One space, or a newline and indentation: json.dumps default and indent=N output."""

WhitespaceSpec = Literal["compact", "pretty"] | Whitespace


@dataclass(frozen=True)
class SchemaRules:
    """Grammar for one schema: `root` is the rule matching the value, `rules` name -> body."""

    root: str
    rules: dict[str, str]

    def gbnf(self) -> str:
        """The rules as GBNF lines (no `root` rule)."""
        return rules_text(self.rules)


def _resolve_whitespace(spec: WhitespaceSpec) -> Whitespace:
    if isinstance(spec, Whitespace):
        return spec
    if spec == "compact":
        return COMPACT
    if spec == "pretty":
        return PRETTY
    raise ValueError(f"unknown whitespace style {spec!r}: 'compact', 'pretty' or Whitespace")


def _pointer_part(key: str | int) -> str:
    return "/" + str(key).replace("~", "~0").replace("/", "~1")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise SchemaError(f"not a JSON value: {value!r}")


class _Converter:
    """One conversion: collects rules while walking the schema."""

    def __init__(
        self,
        root_schema: object,
        prefix: str,
        lenient: bool,
        whitespace: Whitespace,
        document: object = None,
    ) -> None:
        if not _PREFIX_OK.match(prefix) or _may_be_shared(prefix):
            raise ValueError(
                f"rule prefix {prefix!r}: must start with a letter, use letters, digits and "
                "'-', and not be a shared rule name (json-string, json-pretty-value...)"
            )
        self.root_schema = root_schema
        # The document `$ref`s point into: the schema itself, or (for one parameter of a
        # tool) the tool's whole parameters object with its `$defs`.
        self.document = root_schema if document is None else document
        self.prefix = prefix
        self.lenient = lenient
        self.ws = whitespace
        self.rules: dict[str, str] = {prefix: ""}
        self.ref_rules: dict[str, str] = {}
        self.merging_refs: set[str] = set()
        # References entered since the last token a value must begin with ('{', '['):
        # reaching one again would define a rule as itself (A ::= A, A ::= B, B ::= A).
        self.bare_refs: list[str] = []

    # ----------------------------------------------------------------- rule bookkeeping
    def name(self, hint: str) -> str:
        """A fresh rule name under the prefix, reserved at once."""
        base = f"{self.prefix}-{name_part(hint) or 'x'}"
        name = fresh_name(base, lambda n: n in self.rules or _may_be_shared(n))
        self.rules[name] = ""
        return name

    def define(self, hint: str, body: str) -> str:
        name = self.name(hint)
        self.rules[name] = body
        return name

    def shared(self, name: str, body: str) -> str:
        """A rule whose name is fixed across schemas (same name always same body)."""
        self.rules.setdefault(name, body)
        return name

    def primitive(self, name: str) -> str:
        if name == "json-string":
            self.shared("json-char", PRIMITIVE_RULES["json-char"])
        return self.shared(name, PRIMITIVE_RULES[name])

    def ws_name(self) -> str | None:
        """The shared whitespace rule, or None in compact style."""
        if self.ws.body is None:
            return None
        return self.shared(f"json-{self.ws.tag}-ws", self.ws.body)

    def sep(self, token: str) -> str:
        """A punctuation token with the whitespace rule around it."""
        ws = self.ws_name()
        return gbnf_literal(token) if ws is None else f"{ws} {gbnf_literal(token)} {ws}"

    def container(self, left: str, inner: str | None, right: str, *, optional: bool) -> str:
        """`left ws inner ws right`, the inner part possibly absent (then `left ws right`)."""
        ws = self.ws_name()
        parts = [gbnf_literal(left)] + ([ws] if ws else [])
        if inner is not None:
            tail = f"{inner} {ws}" if ws else inner
            parts.append(gbnf_optional(tail) if optional else tail)
        parts.append(gbnf_literal(right))
        return " ".join(parts)

    def any_value(self) -> str:
        tag = self.ws.tag
        value, obj, arr = f"json-{tag}-value", f"json-{tag}-object", f"json-{tag}-array"
        if value not in self.rules:
            self.rules[value] = ""
            kv = f"{self.primitive('json-string')} {self.sep(':')} {value}"
            comma = self.sep(",")
            self.rules[obj] = self.container(
                "{", f"{kv} {gbnf_repeat(f'{comma} {kv}', 0, None)}", "}", optional=True
            )
            items = f"{value} {gbnf_repeat(f'{comma} {value}', 0, None)}"
            self.rules[arr] = self.container("[", items, "]", optional=True)
            prims = ["json-string", "json-number", "json-boolean", "json-null"]
            self.rules[value] = " | ".join([obj, arr, *[self.primitive(p) for p in prims]])
        return value

    # ----------------------------------------------------------------- keyword policing
    def unsupported(self, keyword: str, pointer: str, why: str = "unsupported keyword") -> None:
        message = f"{why} {keyword!r} at {pointer or '#'}"
        if not self.lenient:
            raise SchemaError(message, LENIENT_HINT)
        warnings.warn(f"{message}: dropped, the grammar does not enforce it", stacklevel=4)

    def checked(self, schema: Mapping[str, Any], pointer: str) -> dict[str, Any]:
        """The schema without ignored keywords; unsupported ones raise (or warn and drop)."""
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in SUPPORTED_KEYWORDS:
                out[key] = value
            elif key not in IGNORED_KEYWORDS:
                self.unsupported(key, pointer + _pointer_part(key))
        return out

    # ----------------------------------------------------------------- $ref
    def resolve(self, ref: object, pointer: str) -> tuple[str, object]:
        """(normalised pointer, target schema) of a local reference in the document."""
        return resolve_ref(ref, self.document, pointer)

    def ref_rule(self, ref: object, pointer: str) -> str:
        path, target = self.resolve(ref, pointer)
        if path in self.bare_refs:
            cycle = " -> ".join(
                f"#{p}" for p in [*self.bare_refs[self.bare_refs.index(path) :], path]
            )
            raise SchemaError(
                f"$ref cycle {cycle} at {pointer or '#'}: a value would have to contain "
                "itself before any of its own text"
            )
        if path == "" and self.document is self.root_schema:
            return self.prefix
        if path not in self.ref_rules:
            name = self.name(path.rsplit("/", 1)[-1] or "root")
            self.ref_rules[path] = name
            self.bare_refs.append(path)
            try:
                self.rules[name] = self.visit(target, path, name)
            finally:
                self.bare_refs.pop()
        return self.ref_rules[path]

    # ----------------------------------------------------------------- allOf merging
    def merge(self, parts: Sequence[object], pointer: str) -> dict[str, Any]:
        """One schema equivalent to all parts for the keywords the grammar uses."""
        out: dict[str, Any] = {}
        for index, part in enumerate(parts):
            where = f"{pointer}/allOf/{index}"
            if part is True:
                continue
            if part is False or not isinstance(part, dict):
                raise SchemaError(f"allOf part at {where} is not a satisfiable schema object")
            part = self.checked(part, where)
            ref = part.pop("$ref", None)
            extra: list[object] = []
            if ref is not None:
                path, target = self.resolve(ref, where)
                if path in self.merging_refs:
                    raise SchemaError(f"$ref {ref!r} at {where} merges into itself")
                self.merging_refs.add(path)
                try:
                    extra.append(self.merge([target], path))
                finally:
                    self.merging_refs.discard(path)
            extra += part.pop("allOf", [])
            if extra:
                part = self.merge([*extra, part], where)
            for key, value in part.items():
                if key not in out:
                    out[key] = value
                else:
                    out[key] = self.merge_keyword(key, out[key], value, where)
        return out

    def merge_keyword(self, key: str, old: Any, new: Any, pointer: str) -> Any:
        if old == new:
            return old
        if key == "properties":
            merged = dict(old)
            for name, sub in new.items():
                merged[name] = {"allOf": [merged[name], sub]} if name in merged else sub
            return merged
        if key == "required":
            return list(dict.fromkeys([*old, *new]))
        if key == "type":
            old_types = [old] if isinstance(old, str) else list(old)
            new_types = [new] if isinstance(new, str) else list(new)
            common = []
            for kind in new_types:
                if kind in old_types:
                    common.append(kind)
                elif kind == "integer" and "number" in old_types:
                    common.append("integer")  # every integer is a number
                elif kind == "number" and "integer" in old_types:
                    common.append("integer")
            if not common:
                raise SchemaError(f"allOf at {pointer}: types {old!r} and {new!r} never overlap")
            return list(dict.fromkeys(common))
        if key in ("minimum", "exclusiveMinimum", "minLength", "minItems"):
            return max(old, new)
        if key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems"):
            return min(old, new)
        if key == "enum":
            common = [v for v in old if v in new]
            if not common:
                raise SchemaError(f"allOf at {pointer}: enums share no value")
            return common
        if key == "additionalProperties":
            if old is False or new is False:
                return False
            if old is True:
                return new
            if new is True:
                return old
            return {"allOf": [old, new]}
        if key in ("items", "additionalItems"):
            return {"allOf": [old, new]}
        raise SchemaError(f"allOf at {pointer}: cannot merge differing {key!r} values")

    # ----------------------------------------------------------------- the walk
    def visit(self, schema: object, pointer: str, hint: str) -> str:
        """A GBNF expression (safe to place in a sequence) for values of `schema`."""
        checkpoint()  # per schema node: a huge schema stops once its request is cancelled
        if schema is True:
            return self.any_value()
        if schema is False:
            raise SchemaError(f"schema at {pointer or '#'} is false: no value is valid")
        if not isinstance(schema, dict):
            raise SchemaError(f"schema at {pointer or '#'} is not an object or boolean")
        node = self.checked(schema, pointer)
        if "allOf" in node:
            parts = node.pop("allOf")
            if not isinstance(parts, list) or not parts:
                raise SchemaError(f"allOf at {pointer or '#'} must be a non-empty list")
            node = self.merge([*parts, node], pointer)
        if "$ref" in node:
            ref = node.pop("$ref")
            if not node:
                return self.ref_rule(ref, pointer + "/$ref")
            node = self.merge([{"$ref": ref}, node], pointer)
        if "anyOf" in node and "oneOf" in node:
            raise SchemaError(f"schema at {pointer or '#'} has both anyOf and oneOf")
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self.choice(node, key, pointer, hint)
        if "const" in node:
            if not _scalar_constraints_hold(node["const"], node):
                raise SchemaError(f"const at {pointer or '#'} violates the schema's own bounds")
            return self.value_literal(node["const"])
        if "enum" in node:
            return self.enumeration(node, pointer)
        types = self.types_of(node, pointer)
        if types is None:
            return self.any_value()
        options = [self.typed(kind, node, pointer, hint) for kind in types]
        return alternatives(options)

    def choice(self, node: dict[str, Any], key: str, pointer: str, hint: str) -> str:
        branches = node.pop(key)
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"{key} at {pointer or '#'} must be a non-empty list")
        subs: list[tuple[str, object]] = []
        for index, branch in enumerate(branches):
            where = f"{pointer}/{key}/{index}"
            if branch is not False:
                subs.append((where, self.merge([node, branch], where) if node else branch))
        if not subs:
            raise SchemaError(f"{key} at {pointer or '#'}: every branch is false")
        # A branch allowing any value, object or array makes narrower branches of that
        # kind redundant; dropping them keeps the alternatives apart by their first token.
        generic = {_generic_kind(sub) for _, sub in subs} - {None}
        if "any" in generic:
            return self.any_value()
        options = [
            self.visit(sub, where, _child(hint, where.rsplit("/", 1)[1]))
            for where, sub in subs
            if _generic_kind(sub) is not None or _single_type(sub) not in generic
        ]
        return self.define(_child(hint, "alt"), " | ".join(dict.fromkeys(options)))

    def types_of(self, node: dict[str, Any], pointer: str) -> list[str] | None:
        kind = node.get("type")
        if kind is None:
            inferred = [t for t, keys in _TYPE_KEYWORDS.items() if any(k in node for k in keys)]
            if not inferred:
                return None
            types = inferred
        else:
            if not isinstance(kind, (str, list)):
                raise SchemaError(f"type at {pointer}/type must be a string or a list")
            types = [kind] if isinstance(kind, str) else list(kind)
            for t in types:
                if t not in JSON_TYPES:
                    raise SchemaError(f"unknown type {t!r} at {pointer}/type")
        if node.get("nullable") is True and "null" not in types:
            types.append("null")
        if "number" in types and "integer" in types:
            types.remove("integer")
        return types

    def value_literal(self, value: object) -> str:
        """Exactly one JSON value, with the configured whitespace inside containers."""
        if isinstance(value, dict):
            items = [
                f"{json_literal(str(k))} {self.sep(':')} {self.value_literal(v)}"
                for k, v in value.items()
            ]
            inner = f" {self.sep(',')} ".join(items) if items else None
            return group(self.container("{", inner, "}", optional=False))
        if isinstance(value, list):
            inner = f" {self.sep(',')} ".join(self.value_literal(v) for v in value) or None
            return group(self.container("[", inner, "]", optional=False))
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(f"{value!r} is not a JSON value")
        _json_type(value)
        return json_literal(value)

    def enumeration(self, node: dict[str, Any], pointer: str) -> str:
        values = node["enum"]
        if not isinstance(values, list) or not values:
            raise SchemaError(f"enum at {pointer or '#'} must be a non-empty list")
        types = self.types_of(node, pointer) if "type" in node else None
        kept = [
            v
            for v in values
            if (
                types is None
                or _json_type(v) in types
                or (_json_type(v) == "integer" and "number" in types)
            )
            and _scalar_constraints_hold(v, node)
        ]
        if not kept:
            raise SchemaError(f"enum at {pointer or '#'}: no value satisfies the schema")
        return alternatives([self.value_literal(v) for v in kept])

    def typed(self, kind: str, node: dict[str, Any], pointer: str, hint: str) -> str:
        if kind in ("object", "array"):
            # Members and items follow a '{' or '[': references from inside them recurse
            # through real text, so a reference met again there is a fine recursive rule.
            outer, self.bare_refs = self.bare_refs, []
            try:
                return self.typed_value(kind, node, pointer, hint)
            finally:
                self.bare_refs = outer
        return self.typed_value(kind, node, pointer, hint)

    def typed_value(self, kind: str, node: dict[str, Any], pointer: str, hint: str) -> str:
        if kind == "string":
            return self.string(node, pointer, hint)
        if kind == "integer":
            return self.integer(node, pointer, hint)
        if kind == "number":
            return self.number(node, pointer, hint)
        if kind == "boolean":
            return self.primitive("json-boolean")
        if kind == "null":
            return self.primitive("json-null")
        if kind == "object":
            return self.object(node, pointer, hint)
        return self.array(node, pointer, hint)

    # ----------------------------------------------------------------- strings
    def string(self, node: dict[str, Any], pointer: str, hint: str) -> str:
        low = self.count(node, "minLength", pointer) or 0
        high = self.count(node, "maxLength", pointer)
        quote = gbnf_literal('"')
        if high is not None and high < low:
            raise SchemaError(f"string at {pointer or '#'}: maxLength below minLength")
        pattern = node.get("pattern")
        fmt = node.get("format")
        has_length = low > 0 or high is not None
        if pattern is not None:
            if not isinstance(pattern, str):
                raise SchemaError(f"pattern at {pointer}/pattern must be a string")
            if has_length:
                self.unsupported("minLength/maxLength", pointer, "pattern combined with")
            body, uses_dot = translate_pattern(pattern, pointer + "/pattern")
            self.primitive("json-char")
            if uses_dot:
                self.shared(*DOT_RULE)
            return self.define(_child(hint, "string"), f"{quote} {body} {quote}")
        if isinstance(fmt, str) and fmt in FORMAT_RULES:
            if has_length:
                self.unsupported("minLength/maxLength", pointer, f"format {fmt!r} combined with")
            name, body = FORMAT_RULES[fmt]
            return group(f"{quote} {self.shared(name, body)} {quote}")
        if not has_length:
            return self.primitive("json-string")
        self.primitive("json-char")
        return group(f"{quote} {gbnf_repeat('json-char', low, high)} {quote}")

    def count(self, node: dict[str, Any], key: str, pointer: str) -> int | None:
        value = node.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SchemaError(f"{key} at {pointer}/{key} must be a non-negative integer")
        if isinstance(value, float) and not value.is_integer():
            raise SchemaError(f"{key} at {pointer}/{key} must be a non-negative integer")
        return int(value)

    # ----------------------------------------------------------------- numbers
    def bounds(
        self, node: dict[str, Any], pointer: str
    ) -> tuple[float | None, bool, float | None, bool]:
        """(low, low inclusive, high, high inclusive) from the four bound keywords."""
        low: float | None = None
        high: float | None = None
        low_inc = high_inc = True
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            value = node.get(key)
            if value is None:
                continue
            if isinstance(value, bool):
                if key.startswith("exclusive") and value:  # draft 4 form
                    continue
                if key.startswith("exclusive"):
                    continue
                raise SchemaError(f"{key} at {pointer}/{key} must be a number")
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SchemaError(f"{key} at {pointer}/{key} must be a finite number")
            if key in ("minimum", "exclusiveMinimum"):
                inclusive = key == "minimum" and node.get("exclusiveMinimum") is not True
                if low is None or value > low or (value == low and not inclusive):
                    low, low_inc = value, inclusive
            else:
                inclusive = key == "maximum" and node.get("exclusiveMaximum") is not True
                if high is None or value < high or (value == high and not inclusive):
                    high, high_inc = value, inclusive
        return low, low_inc, high, high_inc

    def integer(self, node: dict[str, Any], pointer: str, hint: str) -> str:
        low, low_inc, high, high_inc = self.bounds(node, pointer)
        if low is None and high is None:
            return self.primitive("json-integer")
        lo = None if low is None else (math.ceil(low) if low_inc else math.floor(low) + 1)
        hi = None if high is None else (math.floor(high) if high_inc else math.ceil(high) - 1)
        if lo is not None and hi is not None and lo > hi:
            raise SchemaError(f"integer at {pointer or '#'}: no integer within the bounds")
        return self.define(_child(hint, "int"), integer_range(lo, hi))

    def number(self, node: dict[str, Any], pointer: str, hint: str) -> str:
        low, low_inc, high, high_inc = self.bounds(node, pointer)
        if low is None and high is None:
            return self.primitive("json-number")
        lo = None if low is None else Decimal(str(low))
        hi = None if high is None else Decimal(str(high))
        if lo is not None and hi is not None and (lo > hi or (lo == hi and not low_inc)):
            raise SchemaError(f"number at {pointer or '#'}: no number within the bounds")
        if lo is not None and hi is not None and lo == hi and not high_inc:
            raise SchemaError(f"number at {pointer or '#'}: no number within the bounds")
        return self.define(_child(hint, "num"), number_range(lo, low_inc, hi, high_inc))

    # ----------------------------------------------------------------- objects
    def object(self, node: dict[str, Any], pointer: str, hint: str) -> str:
        properties = node.get("properties", {})
        required = node.get("required", [])
        if not isinstance(properties, dict):
            raise SchemaError(f"properties at {pointer}/properties must be an object")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError(f"required at {pointer}/required must be a list of strings")
        extra = node.get("additionalProperties")
        if extra is None:  # closed when properties are declared, any object otherwise
            extra = not properties
        extra_schema: object = None if extra is False else extra

        def member(name: str, schema: object) -> str:
            where = pointer + "/properties" + _pointer_part(name)
            value = self.visit(schema, where, _child(hint, name))
            return f"{json_literal(name)} {self.sep(':')} {value}"

        required_names = [k for k in properties if k in required]
        required_names += [k for k in dict.fromkeys(required) if k not in properties]
        members: list[str] = []
        for name in required_names:
            # an undeclared required key takes additionalProperties' schema; when that
            # keyword is absent any value is valid, although other extra keys are not
            fallback = True if "additionalProperties" not in node else extra_schema
            schema = properties.get(name, fallback)
            if schema is None or schema is False:
                where = pointer or "#"
                raise SchemaError(f"required property {name!r} at {where} can never be valid")
            members.append(member(name, schema))
        optional = [
            member(name, schema)
            for name, schema in properties.items()
            if name not in required and schema is not False
        ]
        extra_member: str | None = None
        if extra_schema is not None:
            value = self.visit(
                extra_schema, pointer + "/additionalProperties", _child(hint, "extra")
            )
            declared = [*properties, *required]
            key = self.other_key(declared, hint) if declared else self.primitive("json-string")
            extra_member = f"{key} {self.sep(':')} {value}"

        comma = self.sep(",")
        if members:
            # required keys first, then each optional key at most once, in order
            groups = [gbnf_optional(f"{comma} {item}") for item in optional]
            if extra_member is not None:
                groups.append(gbnf_repeat(f"{comma} {extra_member}", 0, None))
            inner = sequence([f" {comma} ".join(members), *groups])
            return self.define(hint or "object", self.container("{", inner, "}", optional=False))
        if extra_member is not None:
            return self.define(hint or "object", self.open_object(optional, extra_member, hint))
        # No required key: rest[j] = the members from optional key j on (the first present
        # one written first), then the closing brace. One rule per key keeps the grammar
        # linear; ending each rule with "}" keeps llguidance (which makes every
        # non-recursive rule one greedy lexeme) from mistaking where a rule ends.
        ws = self.ws_name()
        close = sequence([ws, gbnf_literal("}")])
        rest: str | None = None
        for item in reversed(optional):
            after = close if rest is None else alternatives([f"{comma} {rest}", close])
            body = f"{item} {after}" if rest is None else f"{item} {after} | {rest}"
            rest = self.define(_child(hint, "rest"), body)
        start = sequence([gbnf_literal("{"), ws])
        options = [gbnf_literal("}")] if rest is None else [gbnf_literal("}"), rest]
        return self.define(hint or "object", f"{start} {alternatives(options)}")

    def other_key(self, declared: list[str], hint: str) -> str:
        """A rule for any key string except the declared names (as json.dumps writes them).

        Walks the trie of the names, one JSON character or escape at a time: at each node
        the key may end (unless a name ends there), continue with a character no name
        continues with (then anything), or follow a name further. While a name is being
        followed, `\\u` escapes are limited to control characters (json.dumps's own use):
        other ones could spell a name's character.
        """
        char = self.primitive("json-char")
        quote = gbnf_literal('"')
        names = [_JSON_UNITS.findall(json.dumps(n, ensure_ascii=False)[1:-1]) for n in declared]

        def node(suffixes: list[list[str]]) -> str:
            options = [] if [] in suffixes else [quote]
            firsts = sorted({units[0] for units in suffixes if units})
            if not firsts:
                return group(f"{char}+ {quote}") if options == [] else quote
            raw = [(ord(u), ord(u)) for u in firsts if len(u) == 1]
            plain = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), *raw]
            options.append(f"{gbnf_char_class(plain, negated=True)} {char}* {quote}")
            escapes = [
                e
                for e in '"\\/bfnrt'
                if "\\" + e not in firsts and not (e == "/" and "/" in firsts)
            ]
            if escapes:
                letters = gbnf_char_class((ord(e), ord(e)) for e in escapes)
                options.append(f'"\\\\" {letters} {char}* {quote}')
            if not any(u.startswith("\\u") for u in firsts):  # control characters
                options.append(f'"\\\\u00" [01] [0-9a-fA-F] {char}* {quote}')
            for first in firsts:
                rest = [units[1:] for units in suffixes if units and units[0] == first]
                options.append(f"{gbnf_literal(first)} {node(rest)}")
            return "( " + " | ".join(options) + " )"

        return self.define(_child(hint, "other-key"), f"{quote} {node(names)}")

    def open_object(self, optional: list[str], extra_member: str, hint: str) -> str:
        """An object body with optional keys and additional members, no required key.

        Any key may start it, so each optional key may come first followed by the flat
        tail of later groups: inline up to INLINE_OPTIONAL_LIMIT keys (additional keys
        start like declared ones, and llguidance needs such choices between small
        tokens), chained named tails beyond to stay linear.
        """
        comma = self.sep(",")
        groups = [gbnf_optional(f"{comma} {item}") for item in optional]
        groups.append(gbnf_repeat(f"{comma} {extra_member}", 0, None))
        tails: list[str | None] = [" ".join(groups[i:]) for i in range(len(groups))]
        if len(optional) > INLINE_OPTIONAL_LIMIT:
            for i in range(len(optional) - 1, 0, -1):
                tails[i] = self.define(_child(hint, "tail"), sequence([groups[i], tails[i + 1]]))
        firsts = [sequence([item, tails[i + 1]]) for i, item in enumerate(optional)]
        firsts.append(sequence([extra_member, groups[-1]]))
        return self.container("{", alternatives(firsts), "}", optional=True)

    # ----------------------------------------------------------------- arrays
    def array(self, node: dict[str, Any], pointer: str, hint: str) -> str:
        prefix_items = node.get("prefixItems")
        items = node.get("items", True)
        if isinstance(items, list):  # draft 2019 tuple form
            prefix_items, items = items, node.get("additionalItems", True)
        prefix_items = prefix_items or []
        if not isinstance(prefix_items, list):
            raise SchemaError(f"prefixItems at {pointer}/prefixItems must be a list")
        low = self.count(node, "minItems", pointer) or 0
        high = self.count(node, "maxItems", pointer)
        if items is False:
            high = len(prefix_items) if high is None else min(high, len(prefix_items))
        if high is not None and high < low:
            raise SchemaError(f"array at {pointer or '#'}: no length satisfies min/maxItems")
        positional = [
            self.visit(s, f"{pointer}/prefixItems/{i}", _child(hint, str(i)))
            for i, s in enumerate(prefix_items[:high])
        ]
        rest: str | None = None
        if high is None or high > len(positional):
            rest = self.visit(items, pointer + "/items", _child(hint, "item"))
        comma = self.sep(",")

        def after(index: int) -> str | None:
            """Elements from `index` on, each after a comma, elements before it present."""
            if index >= len(positional):
                top = None if high is None else high - index
                if rest is None or top == 0:
                    return None
                return gbnf_repeat(f"{comma} {rest}", max(low - index, 0), top)
            body = sequence([f"{comma} {positional[index]}", after(index + 1)])
            return body if index < low else gbnf_optional(body)

        first: str | None = None
        if high == 0:
            first = None
        elif positional:
            first = sequence([positional[0], after(1)])
        elif rest is not None:
            top = None if high is None else high - 1
            more = None if top == 0 else gbnf_repeat(f"{comma} {rest}", max(low - 1, 0), top)
            first = sequence([rest, more])
        body = self.container("[", first, "]", optional=low == 0)
        return self.define(hint or "array", body)


def _scalar_constraints_hold(value: object, node: Mapping[str, Any]) -> bool:
    """Whether an enum/const value meets the string and number keywords beside it."""
    if isinstance(value, str):
        if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
            return False
        pattern = node.get("pattern")
        try:
            return not isinstance(pattern, str) or re.search(pattern, value) is not None
        except re.error:
            return True  # the pattern is reported when translated, if it is
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound = node.get(key)
            if not isinstance(bound, (int, float)) or isinstance(bound, bool):
                continue
            if (key == "minimum" and value < bound) or (key == "maximum" and value > bound):
                return False
            if key == "exclusiveMinimum" and value <= bound:
                return False
            if key == "exclusiveMaximum" and value >= bound:
                return False
    return True


def _constraining(schema: Mapping[str, Any]) -> set[str]:
    return {k for k in schema if k not in IGNORED_KEYWORDS}


def _single_type(schema: object) -> str | None:
    """The one JSON type a plain typed schema allows (None when not that simple)."""
    if not isinstance(schema, Mapping):
        return None
    if _constraining(schema) & {"$ref", "anyOf", "oneOf", "allOf", "const", "enum", "nullable"}:
        return None
    kind = schema.get("type")
    if isinstance(kind, list) and len(kind) == 1:
        kind = kind[0]
    return kind if isinstance(kind, str) else None


def _generic_kind(schema: object) -> str | None:
    """ "any" for a schema allowing every value, "object"/"array" for every one of those."""
    if schema is True or (isinstance(schema, Mapping) and not _constraining(schema)):
        return "any"
    kind = _single_type(schema)
    if not isinstance(schema, Mapping) or kind not in ("object", "array"):
        return None
    rest = _constraining(schema) - {"type"}
    if kind == "object" and (
        rest - {"additionalProperties"} or schema.get("additionalProperties", True) is not True
    ):
        return None
    if kind == "array" and (rest - {"items"} or schema.get("items", True) not in (True, {})):
        return None
    return kind


_JSON_UNITS = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.DOTALL)
"""One character of JSON string text: an escape sequence or a plain character."""

_SHARED_SUFFIXES = ("-ws", "-value", "-object", "-array")


def _may_be_shared(name: str) -> bool:
    """Whether `name` has the form of a shared rule (so a prefixed rule must avoid it)."""
    if not name.startswith("json-"):
        return False
    rest = name[5:]
    return (
        f"json-{rest}" in PRIMITIVE_RULES
        or rest == "re-dot"
        or rest.startswith("fmt-")
        or rest.endswith(_SHARED_SUFFIXES)
    )


def json_literal(value: object) -> str:
    """A GBNF literal for the compact JSON text of a scalar (non-ASCII kept literal)."""
    if isinstance(value, str):  # what json.dumps writes for a string, without its setup
        return gbnf_literal(encode_basestring(value))
    return gbnf_literal(json.dumps(value, ensure_ascii=False))


def _child(hint: str, name: str) -> str:
    return f"{hint}-{name}" if hint else name


def schema_rules(
    schema: object,
    prefix: str,
    *,
    lenient: bool = False,
    whitespace: WhitespaceSpec = "pretty",
    document: object = None,
) -> SchemaRules:
    """GBNF rules for `schema`, for embedding in a larger grammar.

    `document` is what `$ref`s point into when `schema` is a part of a larger schema
    (one parameter of a tool: its `$ref: "#/$defs/Item"` means the tool's `$defs`);
    by default the schema itself.

    Every rule name is `prefix` or starts with `prefix-`, except shared rules named
    `json-...` (primitive values, formats, whitespace-tagged any-value rules) whose bodies
    never differ for the same name, so several schemas can share one grammar (give them
    prefixes that are not `other-prefix-...`). `whitespace` is the style between JSON
    tokens: "pretty" (nothing, one space, or newline + up to 40 spaces/tabs), "compact"
    (none), or a Whitespace(tag, body). No whitespace is allowed around the value itself.

    Object keys are written required-first, each group in declared order; with
    `properties` and no `additionalProperties`, undeclared keys are not generated.
    oneOf is treated as anyOf; allOf merges the parts (properties united, bounds
    tightened). Integer and number bounds are exact (decimal bounds too; numbers in
    exponent form only where the bounds make them safe). Pattern classes `\\d`, `\\w`,
    `\\s` follow Python's `re` (as the jsonschema validator does). A `pattern` combined
    with min/maxLength is not expressible: an error, or lengths dropped with a warning
    when lenient. Unknown `format` values are annotations.

    With llguidance as the engine, note that its GBNF import turns every non-recursive
    rule into one greedy lexeme: alternatives where one is such a lexeme and another a
    recursive rule starting with the same token (a closed object vs an object holding
    an any-JSON value) can reject valid text there.
    """
    if isinstance(schema, bool):
        root_schema: object = schema
    elif isinstance(schema, Mapping):
        root_schema = dict(schema)
    else:
        raise SchemaError(f"a schema is an object or a boolean, not {type(schema).__name__}")
    converter = _Converter(root_schema, prefix, lenient, _resolve_whitespace(whitespace), document)
    if document is None:
        converter.bare_refs = [""]  # the schema is the document's root, `#`
    converter.rules[prefix] = converter.visit(root_schema, "", "")
    return SchemaRules(root=prefix, rules=converter.rules)


def schema_to_gbnf(
    schema: object, *, lenient: bool = False, whitespace: WhitespaceSpec = "pretty"
) -> str:
    """A complete GBNF grammar whose `root` matches one JSON value valid for `schema`."""
    result = schema_rules(schema, "schema", lenient=lenient, whitespace=whitespace)
    return f"root ::= {result.root}\n" + result.gbnf()
