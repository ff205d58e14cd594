"""The node-by-node metaschema check accepts exactly what jsonschema's ``check_schema`` does.

jsonschema is the oracle: every schema below (explicit edge cases, random schemas over every
keyword of every draft, well-formed schemas and mutations of them, realistic tool sets) is
checked both ways, with the check's cache kept across examples so that a key standing for
two schemas of different validity would show up as a disagreement.
"""

from __future__ import annotations

import copy
import itertools
import math
import types
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import pytest
from helpers.distinct_tools import distinct_tools
from helpers.schema_corpus import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoparser.cache import CACHES
from autoparser.errors import RequestError
from autoparser.generate import schema_check
from autoparser.generate.schema_check import (
    ARRAY,
    COUNT,
    EXACT,
    NAMES,
    NUMBER,
    SCHEMA,
    SCHEMA_LIST,
    SCHEMA_MAP,
    SCHEMA_OR_LIST,
    STRING,
    check_schema,
    read_metaschema,
)

jsonschema = pytest.importorskip("jsonschema")
from jsonschema import validators  # noqa: E402
from jsonschema_specifications import REGISTRY  # noqa: E402

DRAFTS = {
    "2020-12": validators.Draft202012Validator,
    "2019-09": validators.Draft201909Validator,
    "7": validators.Draft7Validator,
    "6": validators.Draft6Validator,
    "4": validators.Draft4Validator,
    "3": validators.Draft3Validator,
}
URIS = [cls.META_SCHEMA["$schema"] for cls in DRAFTS.values()]
# Random schemas name unknown metaschemas; jsonschema warns and checks with the latest.
pytestmark = pytest.mark.filterwarnings("ignore:The metaschema specified by:DeprecationWarning")


def oracle_message(schema: Any) -> str | None:
    """jsonschema's verdict as ``check_schema`` gives it: None, or the error's message (a
    ``$schema`` ``validator_for`` cannot look up names no draft: the latest judges)."""
    declared = schema.get("$schema")
    try:
        cls = validators.validator_for(schema if isinstance(declared, (str, type(None))) else {})
    except ValueError:
        cls = validators.validator_for({})
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return str(exc.message)
    return None


def ours(schema: Any) -> str | None:
    """The module's verdict: None, or the RequestError's text."""
    try:
        check_schema(schema, "where")
    except RequestError as exc:
        return str(exc)
    return None


def assert_agrees(schema: Any) -> None:
    expected = oracle_message(schema)
    got = ours(schema)
    if expected is None:
        assert got is None, (schema, got)
    else:
        assert got == f"where: invalid JSON schema: {expected}", (schema, got)


# ------------------------------------------------------------------ explicit cases

# (schema, drafts that accept it): one per abstraction and the edges around it.
CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"type": "object", "properties": {"a": {"type": "string", "description": "A."}}}, set(DRAFTS)),
    ({"properties": {"a": {"type": 3}}}, set()),
    ({"properties": {"a": True}}, {"2020-12", "2019-09", "7", "6"}),
    ({"properties": {"a": 3}}, set()),
    ({"properties": []}, set()),
    ({"description": 3}, set()),
    ({"title": ["x"]}, set()),
    ({"minimum": 1}, set(DRAFTS)),
    ({"minimum": True}, set()),
    ({"minimum": "1"}, set()),
    ({"minimum": 0.5}, set(DRAFTS)),
    ({"minLength": 2}, set(DRAFTS)),
    ({"minLength": -1}, set()),
    ({"maxLength": -1}, {"3"}),  # draft 3's maxLength: any integer
    ({"minLength": 1.0}, {"2020-12", "2019-09", "7", "6"}),
    ({"minLength": True}, set()),
    ({"required": ["a", "b"]}, {"2020-12", "2019-09", "7", "6", "4"}),
    ({"required": ["a", "a"]}, set()),
    ({"required": []}, {"2020-12", "2019-09", "7", "6"}),
    ({"required": ["a", 1]}, set()),
    ({"required": True}, {"3"}),
    ({"enum": []}, {"2020-12", "2019-09", "7", "6"}),
    ({"enum": [1, 1]}, {"2020-12", "2019-09", "7", "6"}),
    ({"enum": ["a", {"b": 1}]}, set(DRAFTS)),
    ({"enum": "a"}, set()),
    ({"anyOf": []}, {"3"}),  # no keyword of draft 3
    ({"anyOf": [{}, {"type": "null"}]}, set(DRAFTS)),
    ({"anyOf": [{"type": 3}]}, {"3"}),
    ({"items": {"type": "string"}}, set(DRAFTS)),
    ({"items": [{"type": "string"}]}, {"2019-09", "7", "6", "4", "3"}),
    ({"items": []}, {"3"}),
    ({"items": [{"type": 3}]}, set()),
    ({"prefixItems": [{"type": "string"}]}, set(DRAFTS)),
    ({"prefixItems": [{"type": 3}]}, {"2019-09", "7", "6", "4", "3"}),
    ({"additionalProperties": False}, set(DRAFTS)),
    ({"additionalProperties": {"type": 3}}, set()),
    ({"pattern": "^a+$"}, set(DRAFTS)),
    ({"pattern": "("}, set()),
    ({"patternProperties": {"(": {}}}, {"4", "3"}),
    ({"x-custom": {"type": 3}}, set(DRAFTS)),
    ({"default": {"type": 3}}, set(DRAFTS)),
    ({"const": {"type": 3}}, set(DRAFTS)),
    ({"$defs": {"a": {"type": 3}}}, {"7", "6", "4", "3"}),
    ({"definitions": {"a": {"type": 3}}}, {"3"}),
    ({"dependencies": {"a": {"type": 3}}}, set()),
    ({"dependencies": {"a": ["b", "b"]}}, {"3"}),
    ({"exclusiveMaximum": True}, set()),
    ({"exclusiveMaximum": True, "maximum": 3}, {"4", "3"}),
    ({"exclusiveMaximum": 3}, {"2020-12", "2019-09", "7", "6"}),
    ({"type": ["string", "null"]}, set(DRAFTS)),
    ({"type": ["string", "string"]}, set()),
    ({"type": "strin"}, {"3"}),
    ({"not": {"not": {"not": {"minLength": -2}}}}, {"3"}),
    ({"$ref": "#/$defs/a", "$defs": {"a": {"type": "integer"}}}, set(DRAFTS)),
    ({"$id": "#frag"}, {"7", "6", "4", "3"}),
    ({"$anchor": "1bad"}, {"7", "6", "4", "3"}),
    (
        {"properties": {"a": {"$schema": "http://json-schema.org/draft-04/schema#", "type": 3}}},
        set(),
    ),
]


@pytest.mark.parametrize("draft", sorted(DRAFTS))
@pytest.mark.parametrize(("schema", "accepted_by"), CASES)
def test_explicit_cases_agree_with_jsonschema(
    schema: dict[str, Any], accepted_by: set[str], draft: str
) -> None:
    full = {"$schema": DRAFTS[draft].META_SCHEMA["$schema"], **schema}
    assert (oracle_message(full) is None) == (draft in accepted_by)  # the table reads right
    assert_agrees(full)


@pytest.mark.parametrize("draft", ["3", "4", "2020-12"])
def test_values_equal_in_python_are_different_key_parts(draft: str) -> None:
    """``1 == 1.0 == True``, yet a schema may take one and refuse another (``uniqueItems:
    1``, draft 3's ``maxLength: 1.0``): whichever is judged first, the other is judged anew."""
    uri = DRAFTS[draft].META_SCHEMA["$schema"]
    values = (1, 1.0, True, "1", None, [1], {"a": 1})
    # draft 4 wants distinct enum values: 1 and True are, 1 and 1.0 are not
    lists = ([1, True], [1, 1.0], [0, False], [[1], [True]], [{"a": 1}, {"a": True}])
    for keyword, options in [
        *((k, values) for k in ("minimum", "maxLength", "minLength", "uniqueItems", "type")),
        *((k, (*values, *lists)) for k in ("required", "enum")),
    ]:
        for first, then in itertools.permutations(options, 2):
            CACHES.store("schema_checks", 1).clear()
            for value in (first, then):
                assert_agrees({"$schema": uri, "properties": {"p": {keyword: value}}})


def test_data_that_is_not_plain_json_is_judged_whole() -> None:
    """A tuple is no array to jsonschema and a mapping proxy no object: no key may stand
    for them as for the list and the dict."""
    check_schema({"required": ["a"], "enum": [1]}, "warm")
    for schema in (
        {"required": ("a",)},
        {"properties": {"a": {"enum": (1,)}}},
        {"properties": types.MappingProxyType({"a": {}})},
        types.MappingProxyType({"type": "object"}),
    ):
        expected = oracle_message(schema)
        assert expected is not None
        assert ours(schema) == f"where: invalid JSON schema: {expected}"


def test_a_schema_key_that_is_no_string_is_a_request_error() -> None:
    with pytest.raises(RequestError, match=r"^where: invalid JSON schema: \[\] is not of type"):
        check_schema({"$schema": [], "type": "object"}, "where")


def test_a_schema_key_jsonschema_cannot_look_up_is_judged_by_the_latest_draft() -> None:
    """``validator_for`` raises ValueError on ``http://[x``; the request is then checked as
    one naming an unknown metaschema is: by the latest draft."""
    latest = validators.validator_for({})
    for schema in ({"$schema": "http://[x", "type": "object"}, {"$schema": "http://[x", "type": 1}):
        try:
            latest.check_schema(schema)
            expected = None
        except jsonschema.exceptions.SchemaError as exc:
            expected = f"where: invalid JSON schema: {exc.message}"
        assert ours(schema) == expected


def test_nan_and_infinite_bounds_agree() -> None:
    for value in (math.nan, math.inf, -math.inf):
        assert_agrees({"minimum": value, "properties": {"a": {"maximum": value}}})


# ------------------------------------------------------------------ random schemas


def _keywords() -> list[str]:
    """Every keyword some draft's metaschema (or a vocabulary of it) names, and two it does not."""
    names: set[str] = {"x-extension", "name"}
    for cls in DRAFTS.values():
        meta = cls.META_SCHEMA
        names |= set(meta.get("properties", {}))
        base = meta.get("$id", meta.get("id"))
        for part in meta.get("allOf", []):
            names |= set(REGISTRY.contents(urljoin(base, part["$ref"])).get("properties", {}))
    return sorted(names)


KEYWORDS = _keywords()
TEXT = st.sampled_from(
    ["", "a", "b", "string", "object", "^a$", "(", "#x", "http://x/y", "http://[x", "a b"]
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from([0.0, 1.0, 2.5, -1.5]),
    TEXT,
)


def _schema_of(value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(KEYWORDS), value, max_size=4)


VALUE: st.SearchStrategy[Any] = st.deferred(
    lambda: st.one_of(
        LEAF,
        SCHEMA_VALUE,
        st.lists(st.one_of(LEAF, SCHEMA_VALUE), max_size=3),
        st.dictionaries(TEXT, st.one_of(SCHEMA_VALUE, LEAF), max_size=3),
    )
)
SCHEMA_VALUE: st.SearchStrategy[Any] = st.deferred(lambda: _schema_of(VALUE))

# Well-formed values per keyword, so that random schemas are often valid (then mutated).
WELL: st.SearchStrategy[dict[str, Any]] = st.deferred(
    lambda: st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "integer", "object", ["string", "null"]]),
            "description": TEXT,
            "title": TEXT,
            "enum": st.lists(LEAF, min_size=1, max_size=3, unique_by=repr),
            "properties": st.dictionaries(TEXT, WELL, max_size=3),
            "required": st.lists(TEXT, max_size=3, unique=True),
            "items": WELL,
            "anyOf": st.lists(WELL, min_size=1, max_size=2),
            "additionalProperties": st.one_of(st.booleans(), WELL),
            "minimum": st.integers(-5, 5),
            "maxLength": st.integers(0, 9),
            "pattern": st.sampled_from(["^a$", "[0-9]+"]),
            "format": st.sampled_from(["date", "uri"]),
            "default": VALUE,
            "$defs": st.dictionaries(TEXT, WELL, max_size=2),
        },
    )
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (dict keys and list indexes)."""
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*path, i))
    return found


def _mutate(schema: dict[str, Any], draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
    """``schema`` with one value replaced, one key renamed to a keyword, or one key dropped."""
    mutated = copy.deepcopy(schema)
    path = draw(st.sampled_from(_paths(mutated)[1:] or [()]))
    if not path:
        return mutated
    parent = mutated
    for step in path[:-1]:
        parent = parent[step]
    how = draw(st.sampled_from(["replace", "rename", "drop"]))
    last = path[-1]
    if how == "replace" or isinstance(parent, list):
        parent[last] = draw(VALUE)
    elif how == "rename":
        parent[draw(st.sampled_from(KEYWORDS))] = parent.pop(last)
    else:
        del parent[last]
    return mutated


EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@EXAMPLES
@given(schema=SCHEMA_VALUE, uri=st.sampled_from([None, *URIS]))
def test_random_schemas_agree_with_jsonschema(schema: dict[str, Any], uri: str | None) -> None:
    assert_agrees(schema if uri is None else {**schema, "$schema": uri})


@EXAMPLES
@given(schema=WELL, uri=st.sampled_from([None, *URIS]), data=st.data())
def test_mutated_well_formed_schemas_agree_with_jsonschema(
    schema: dict[str, Any], uri: str | None, data: st.DataObject
) -> None:
    if uri is not None:
        schema = {**schema, "$schema": uri}
    assert_agrees(schema)
    assert_agrees(_mutate(schema, data.draw))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), data=st.data())
def test_mutated_realistic_tools_agree_with_jsonschema(seed: int, data: st.DataObject) -> None:
    for tool in distinct_tools(4, seed):
        schema = tool["function"]["parameters"]
        assert_agrees(schema)
        assert_agrees(_mutate(schema, data.draw))


@pytest.mark.parametrize(("name", "schema"), sorted(corpus().items()))
def test_the_schema_corpus_agrees_with_jsonschema(name: str, schema: Any) -> None:
    """The converter's corpus (tests/data/schemas/corpus.json): real schemas, most keywords.
    A boolean schema, valid to jsonschema, is no object: requests refuse it by design."""
    if isinstance(schema, dict):
        assert_agrees(schema)
    else:
        assert (
            ours(schema) == f"where: a JSON schema must be an object, got {type(schema).__name__}"
        )


def test_a_cold_cache_agrees_too() -> None:
    """The verdicts do not depend on what the cache held before."""
    schemas = [t["function"]["parameters"] for t in distinct_tools(30, 7)]
    schemas += [{"properties": {"a": {"minLength": -1}}}, {"anyOf": [{"required": ["a", "a"]}]}]
    warm = [ours(s) for s in schemas]
    CACHES.store("schema_checks", 1).clear()
    assert [ours(s) for s in reversed(schemas)] == warm[::-1]
    assert warm == [
        None if m is None else f"where: invalid JSON schema: {m}"
        for m in map(oracle_message, schemas)
    ]


# ------------------------------------------------------------------ what is asked of jsonschema


def test_distinct_tools_share_node_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the module: 300 tools never seen before ask jsonschema about a few dozen
    node shapes, not about 300 schemas (each of several nodes)."""
    CACHES.store("schema_checks", 1).clear()
    asked: list[object] = []
    real = schema_check._Draft.valid
    monkeypatch.setattr(
        schema_check._Draft, "valid", lambda self, node: asked.append(node) or real(self, node)
    )
    known: schema_check.Known = {}
    tools = distinct_tools(300, 11)
    for tool in tools:
        check_schema(tool["function"]["parameters"], "where", known)
    nodes = sum(len(_paths(t["function"]["parameters"])) for t in tools)
    assert 0 < len(asked) < len(tools) / 3 < nodes
    assert all(isinstance(node, dict) for node in asked)


# ------------------------------------------------------------------ reading the metaschema


def _kinds(draft: str) -> dict[str, str]:
    kinds = read_metaschema(DRAFTS[draft].META_SCHEMA, REGISTRY.contents)
    assert kinds is not None
    return kinds


def test_the_2020_12_metaschema_is_read_per_keyword() -> None:
    kinds = _kinds("2020-12")
    assert {k: kinds.get(k) for k in ("properties", "$defs", "dependentSchemas")} == dict.fromkeys(
        ("properties", "$defs", "dependentSchemas"), SCHEMA_MAP
    )
    assert kinds["items"] == kinds["not"] == kinds["contentSchema"] == SCHEMA
    assert kinds["anyOf"] == kinds["prefixItems"] == SCHEMA_LIST
    assert kinds["description"] == kinds["format"] == STRING
    assert (kinds["minimum"], kinds["minLength"], kinds["required"]) == (NUMBER, COUNT, NAMES)
    assert kinds["enum"] == kinds["examples"] == ARRAY
    # regexes, URIs, anchors and the type names are kept exactly
    for name in ("pattern", "patternProperties", "$ref", "$id", "$anchor", "type", "dependencies"):
        assert kinds[name] == EXACT, name
    assert "default" not in kinds and "const" not in kinds  # unconstrained


def test_older_drafts_keep_exactly_what_they_constrain_more() -> None:
    assert _kinds("7")["items"] == _kinds("2019-09")["items"] == SCHEMA_OR_LIST
    draft4 = _kinds("4")
    # draft 4: required needs one name, enum distinct values, booleans are no schemas
    assert draft4["required"] == draft4["enum"] == draft4["additionalProperties"] == EXACT
    assert draft4["properties"] == SCHEMA_MAP
    assert draft4["exclusiveMaximum"] == EXACT  # needed by nothing, but constrained


def test_a_metaschema_beyond_per_keyword_constraints_is_not_read() -> None:
    base: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert read_metaschema(base, REGISTRY.contents) == {"a": STRING}
    for extra in (
        {"additionalProperties": False},  # unknown keywords would be constrained
        {"required": ["a"]},
        {"dependencies": {"a": {"type": "object"}}},  # more than presence
        {"allOf": [{"type": "object"}]},  # not a document reference
        {"type": "string"},
    ):
        assert read_metaschema({**base, **extra}, REGISTRY.contents) is None, extra


def test_a_keyword_a_dependency_needs_is_never_left_out() -> None:
    meta = {"type": "object", "dependencies": {"a": ["b"]}, "properties": {"a": {}, "b": True}}
    assert read_metaschema(meta, REGISTRY.contents) == {"a": EXACT, "b": EXACT}


def test_a_schema_that_is_no_object_names_the_field() -> None:
    with pytest.raises(RequestError, match=r"^tools\[2\]\.x: a JSON schema must be an object"):
        check_schema(["type"], "tools[2].x")
