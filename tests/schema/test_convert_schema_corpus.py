"""Schema corpus: every generated instance is accepted, every invalid mutation rejected.

For each schema in tests/data/schemas/corpus.json (plus a few built here: a tool with 50
optional parameters and recursive schemas), hypothesis-jsonschema draws up to 100 valid
instances. Each is put in the grammar's canonical key order (required keys first, then
optional, both in declared order; undeclared keys dropped where the grammar closes the
object), checked valid by jsonschema, serialised with json.dumps and fed to llguidance:
compact and default separators and indent=2 under the "pretty" whitespace, compact
separators under "compact". Then mutations of some instances, one keyword at a time, that
jsonschema rejects must be rejected by the grammar; ENFORCED lists the keywords checked,
and each must have produced at least one rejected mutation.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

import jsonschema
import pytest
from helpers.gbnf_oracle import accepts
from helpers.schema_corpus import corpus
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from autoparser.schema import schema_to_gbnf

INSTANCES = 100
MUTATED_PER_SCHEMA = 10  # instances per schema whose mutations are checked

ENFORCED = (
    "type", "enum", "const", "properties", "required", "additionalProperties", "$ref",
    "anyOf", "oneOf", "allOf", "nullable", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items", "prefixItems",
    "minItems", "maxItems",
)  # fmt: skip
"""Keywords whose violations the grammar must reject (oneOf: as anyOf, not exclusivity)."""


LEAF = {"value": 6, "children": []}
HAND_WRITTEN: dict[str, list[Any]] = {
    "recursive-tree": [
        {"value": 1},
        {"value": 1, "children": []},
        {"value": -4, "children": [{"value": 2}, {"value": 3, "children": [{"value": 0}]}]},
        {"value": 9, "children": [{"value": 8, "children": [{"value": 7, "children": [LEAF]}]}]},
    ],
    "recursive-root-list": [
        {"v": "a", "next": None},
        {"v": "a", "next": {"v": "bc", "next": {"v": "", "next": None}}},
    ],
    "recursive-expression": [
        1.5,
        {"op": "+", "args": [1, 2]},
        {"op": "*", "args": [{"op": "-", "args": [3, 0.5]}, {"op": "/", "args": [1, 1e-05]}]},
    ],
}  # fmt: skip


# ------------------------------------------------------------------ the jsonschema oracle
def _rfc3339_time(text: str) -> bool:
    match = re.fullmatch(
        r"(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))", text, flags=re.ASCII
    )
    if not match:
        return False
    hour, minute, second = (int(g) for g in match.group(1, 2, 3))
    offset_ok = match.group(6) is None or (int(match.group(6)) < 24 and int(match.group(7)) < 60)
    return hour < 24 and minute < 60 and second <= 60 and offset_ok


def _rfc3339_date_time(text: str) -> bool:
    date, sep, time = text.partition("T") if "T" in text else text.partition("t")
    if not sep or not re.fullmatch(r"\d{4}-\d\d-\d\d", date, flags=re.ASCII):
        return False
    try:
        datetime.strptime(date, "%Y-%m-%d")
    except ValueError:
        return False
    return _rfc3339_time(time)


# Only the formats the grammar enforces are assertions; others (email...) are annotations,
# as JSON Schema 2020-12 says by default.
FORMATS = jsonschema.FormatChecker(["date", "uuid"])
FORMATS.checks("time")(lambda v: not isinstance(v, str) or _rfc3339_time(v))
FORMATS.checks("date-time")(lambda v: not isinstance(v, str) or _rfc3339_date_time(v))


def oracle_schema(schema: Any) -> Any:
    """The schema as jsonschema should see it: OpenAPI `nullable` spelled out."""
    if isinstance(schema, list):
        return [oracle_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: oracle_schema(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def validator(schema: Any) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(oracle_schema(schema), format_checker=FORMATS)


# ------------------------------------------------------------------ canonical key order
def deref(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 50:
        target = root
        for part in schema["$ref"][1:].split("/")[1:]:
            target = target[part]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = merged([target, rest], root) if rest else target
        seen += 1
    return schema


def merged(parts: list[Any], root: Any) -> dict[str, Any]:
    """allOf as the converter reads it: properties united, required united."""
    out: dict[str, Any] = {}
    for part in parts:
        part = deref(part, root)
        if not isinstance(part, dict):
            continue
        if "allOf" in part:
            part = {
                **merged(part["allOf"], root),
                **{k: v for k, v in part.items() if k != "allOf"},
            }
        for key, value in part.items():
            if key == "properties":
                out["properties"] = {**out.get("properties", {}), **value}
            elif key == "required":
                out["required"] = list(dict.fromkeys([*out.get("required", []), *value]))
            else:
                out.setdefault(key, value)
    return out


def canonical(value: Any, schema: Any, root: Any) -> Any:
    """`value` with object keys in the order the grammar writes them."""
    schema = deref(schema, root)
    if not isinstance(schema, dict) or "const" in schema or "enum" in schema:
        return value
    if "allOf" in schema:
        return canonical(value, merged([schema], root), root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k != key}
            for branch in schema[key]:
                candidate = merged([base, branch], root) if base else branch
                if is_valid(value, candidate, root):
                    return canonical(value, candidate, root)
            return value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", not props)
        order = [k for k in props if k in required] + [k for k in required if k not in props]
        order += [k for k in props if k not in required]
        out = {k: canonical(value[k], props.get(k, extra), root) for k in order if k in value}
        if extra is not False:
            out.update({k: canonical(v, extra, root) for k, v in value.items() if k not in out})
        return out
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        return [
            canonical(v, prefix[i] if i < len(prefix) else items, root) for i, v in enumerate(value)
        ]
    return value


def is_valid(value: Any, schema: Any, root: Any) -> bool:
    """jsonschema's verdict on `value` for a subschema, `$ref`s resolved against `root`."""
    return bool(
        root_validator(json.dumps(root)).evolve(schema=oracle_schema(schema)).is_valid(value)
    )


@lru_cache(maxsize=256)
def root_validator(root_text: str) -> jsonschema.Draft202012Validator:
    return validator(json.loads(root_text))


# ------------------------------------------------------------------ instances
def unrolled(schema: Any, root: Any, depth: int) -> Any:
    """`schema` with `$ref`s inlined `depth` deep and `false` below: finite, for hypothesis."""
    if isinstance(schema, list):
        return [unrolled(s, root, depth) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        if depth == 0:
            return False
        return unrolled(deref({"$ref": schema["$ref"]}, root), root, depth - 1)
    return {
        k: unrolled(v, root, depth) for k, v in schema.items() if k not in ("$defs", "definitions")
    }


def is_recursive(schema: Any) -> bool:
    text = json.dumps(schema)
    return '"$ref": "#"' in text or any(
        f'"$ref": "#/$defs/{name}"' in json.dumps(body)
        for name, body in (schema.get("$defs", {}) if isinstance(schema, dict) else {}).items()
    )


def draw(schema: Any, count: int) -> list[Any]:
    """Up to `count` instances from hypothesis-jsonschema (fixed seed, no shrinking)."""
    out: list[Any] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(from_schema(schema, custom_formats={"uuid": st.uuids().map(str)}))
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


def draft7_arrays(schema: Any) -> Any:
    """prefixItems/items (2020-12) as items/additionalItems: hypothesis-jsonschema's form."""
    if isinstance(schema, list):
        return [draft7_arrays(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: draft7_arrays(v) for k, v in schema.items()}
    if "prefixItems" in out:
        out["additionalItems"] = out.pop("items", True)
        out["items"] = out.pop("prefixItems")
    return out


def instances(name: str, schema: Any) -> list[Any]:
    """Valid instances: generated, plus hand-written ones for recursive schemas."""
    if is_recursive(schema):
        finite = unrolled(schema, schema, 3)
        generated = draw(draft7_arrays(finite), INSTANCES - len(HAND_WRITTEN[name]))
        return HAND_WRITTEN[name] + generated
    return draw(draft7_arrays(oracle_schema(schema)), INSTANCES)


# ------------------------------------------------------------------ mutations
WRONG_TYPE_VALUES: list[Any] = [None, True, 0, 1.5, "x", [], {}]


def mutations(
    value: Any,
    schema: Any,
    root: Any,
    path: tuple[Any, ...] = (),
    via: frozenset[str] = frozenset(),
) -> list[tuple[frozenset[str], tuple[Any, ...], Any]]:
    """(keywords meant to be violated, path, replacement value), one local change each."""
    out: list[tuple[frozenset[str], tuple[Any, ...], Any]] = []
    if isinstance(schema, dict) and "$ref" in schema:
        return mutations(value, deref(schema, root), root, path, via | {"$ref"})
    if not isinstance(schema, dict):
        return out
    if "allOf" in schema:
        return mutations(value, merged([schema], root), root, path, via | {"allOf"})
    for key in ("anyOf", "oneOf"):
        if key in schema:
            out += [(via | {key}, path, w) for w in WRONG_TYPE_VALUES]
            base = {k: v for k, v in schema.items() if k != key}
            for branch in schema[key]:
                candidate = merged([base, branch], root) if base else branch
                if is_valid(value, candidate, root):
                    out += mutations(value, candidate, root, path, via | {key})
                    break
            return out
    if schema.get("nullable") is True:
        via = via | {"nullable"}
        out += [(via | {"type"}, path, w) for w in WRONG_TYPE_VALUES]

    def add(keyword: str, *candidates: Any) -> None:
        out.extend((via | {keyword}, path, c) for c in candidates)

    if "const" in schema:
        add("const", "other-const", 424242, [schema["const"]])
    if "enum" in schema:
        add("enum", "not-in-enum", 424242, {"k": [1]})
    if "type" in schema:
        add("type", *WRONG_TYPE_VALUES)
        if (
            value == int(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else False
        ):
            add("type", value + 0.5)
    if isinstance(value, str):
        if schema.get("minLength"):
            add("minLength", value[: schema["minLength"] - 1])
        if "maxLength" in schema:
            add("maxLength", value + "x" * (schema["maxLength"] - len(value) + 1))
        if "pattern" in schema:
            add("pattern", value + "!", "!" + value, "", value[:-1], value + "\n", value * 2, "Zz9")
        if "format" in schema:
            add(
                "format",
                "not-a-date",
                value + "x",
                value[:-1],
                "2021-13-01",
                "2021-02-30T25:00:00Z",
            )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, deltas in (
            ("minimum", (-1, -0.5)),
            ("exclusiveMinimum", (0, -1, -0.25)),
            ("maximum", (1, 0.5)),
            ("exclusiveMaximum", (0, 1, 0.25)),
        ):
            if key in schema:
                add(key, *(schema[key] + d for d in deltas))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key in value:
                out.append((via | {"required"}, (*path, ("del", key)), None))
        extra = schema.get("additionalProperties")
        if extra is False:
            add("additionalProperties", {**value, "zz_extra": 1})
        elif isinstance(extra, dict):
            add("additionalProperties", *({**value, "zz_extra": w} for w in WRONG_TYPE_VALUES))
        for key, sub in value.items():
            if key in props:
                out += mutations(sub, props[key], root, (*path, key), via | {"properties"})
            elif isinstance(extra, dict):
                out += mutations(sub, extra, root, (*path, key), via | {"additionalProperties"})
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        if schema.get("minItems"):
            add("minItems", value[: schema["minItems"] - 1])
        if "maxItems" in schema and value:
            add("maxItems", value + [value[-1]] * (schema["maxItems"] - len(value) + 1))
        for i, sub in enumerate(value[:3]):
            keyword, sub_schema = (
                ("prefixItems", prefix[i]) if i < len(prefix) else ("items", items)
            )
            out += mutations(sub, sub_schema, root, (*path, i), via | {keyword})
        if items is not True:
            add("items", *([*value, w] for w in WRONG_TYPE_VALUES))
    return out


def applied(document: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    """A copy of `document` with the value at `path` replaced (or a key deleted)."""
    if not path:
        return copy.deepcopy(replacement)
    result = copy.deepcopy(document)
    node = result
    for step in path[:-1]:
        node = node[step]
    last = path[-1]
    if isinstance(last, tuple):
        del node[last[1]]
    else:
        node[last] = copy.deepcopy(replacement)
    return result


# ------------------------------------------------------------------ results per schema
def serialisations(value: Any) -> dict[str, list[str]]:
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    spaced = json.dumps(value, ensure_ascii=False)
    indented = json.dumps(value, indent=2, ensure_ascii=False)
    return {"pretty": [compact, spaced, indented], "compact": [compact]}


@dataclass
class Outcome:
    instances: int = 0
    accepted: int = 0
    checks: int = 0
    rejected: int = 0  # jsonschema-invalid mutations the grammar rejected
    by_keyword: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


@cache
def outcome(name: str) -> Outcome:
    schema = corpus()[name]
    grammars = {ws: schema_to_gbnf(schema, whitespace=ws) for ws in ("pretty", "compact")}  # type: ignore[arg-type]
    check = validator(schema)
    result = Outcome()
    docs: list[Any] = []
    for raw in instances(name, schema):
        doc = canonical(raw, schema, schema)
        result.instances += 1
        if not check.is_valid(doc):
            result.failures.append(f"canonical form invalid for jsonschema: {doc!r}")
            continue
        ok = True
        for style, texts in serialisations(doc).items():
            for text in texts:
                result.checks += 1
                if not accepts(grammars[style], text):
                    ok = False
                    result.failures.append(f"{style} grammar rejects valid {text!r}")
        result.accepted += ok
        docs.append(doc)
    seen: set[str] = set()
    for doc in docs[:MUTATED_PER_SCHEMA]:
        for keywords, path, replacement in mutations(doc, schema, schema):
            bad = applied(doc, path, replacement)
            text = json.dumps(bad, ensure_ascii=False)
            if text in seen or check.is_valid(bad):
                continue
            seen.add(text)
            if accepts(grammars["pretty"], text):
                result.failures.append(f"grammar accepts invalid ({sorted(keywords)}): {text!r}")
                continue
            result.rejected += 1
            result.by_keyword.update(keywords)
    return result


NAMES = sorted(corpus())


@pytest.mark.parametrize("name", NAMES)
def test_schema_corpus(name: str) -> None:
    result = outcome(name)
    assert not result.failures, "\n".join(result.failures[:10])
    assert result.accepted == result.instances > 0


def test_corpus_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """At least 40 schemas, and every enforced keyword shown rejecting invalid values."""
    results = [outcome(n) for n in NAMES]
    by_keyword: Counter[str] = Counter()
    for r in results:
        by_keyword.update(r.by_keyword)
    with capsys.disabled():
        print(
            f"\nschema corpus: {len(NAMES)} schemas, "
            f"{sum(r.accepted for r in results)}/{sum(r.instances for r in results)} instances "
            f"accepted ({sum(r.checks for r in results)} serialisations), "
            f"{sum(r.rejected for r in results)} invalid mutations rejected"
        )
        print(
            "rejected mutations by keyword: " + ", ".join(f"{k}={by_keyword[k]}" for k in ENFORCED)
        )
    assert len(NAMES) >= 40
    assert all(not r.failures for r in results)
    missing = [k for k in ENFORCED if by_keyword[k] == 0]
    assert not missing, f"enforced keywords never exercised: {missing}"
