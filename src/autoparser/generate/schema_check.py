"""jsonschema's metaschema check of request schemas, asked node by node and remembered.

``check_schema`` walks the whole metaschema for every schema: about 1 ms for a tool of
eight nodes under draft 2020-12, so 1,000 tools never seen before cost a second, and real
tool sets never repeat (their property names, descriptions and enums differ). What they
repeat is the *shape* of their nodes. So jsonschema, still the only judge, is asked about
each shape once.

Why that is exact. Every standard metaschema is, at its root, ``type`` (object or boolean)
and one constraint per keyword, each reading only that keyword's value (plus, in drafts 3
and 4, ``dependencies`` that need one keyword present with another); a keyword it does not
name is unconstrained. ``read_metaschema`` reads the live metaschema and refuses any other
root. So a node is valid iff each of its keywords' values meets that keyword's constraint,
and a value may be swapped for a stand-in that meets the constraint exactly when it does.
Where a keyword's constraint (its local ``$ref`` resolved, annotations dropped) has one of
these shapes, its value is abstracted:

- the metaschema itself (``{"$ref": "#"}`` in the root document, ``{"$recursiveRef": "#"}``
  or ``{"$dynamicRef": "#meta"}`` where those anchors lead back to the root): an object is
  a node checked on its own, standing as ``{}`` (valid) in its parent;
- an object of those (``properties``, ``$defs``), a non-empty array of those (``anyOf``),
  or either (draft 7's ``items``): objects of objects likewise, standing as ``{}``,
  ``[{}]`` or ``[]``;
- ``{"type": "string"}`` (descriptions, titles): a string stands as ``""``; a number as 0
  for ``{"type": "number"}``; an int >= 0 as 0 for ``{"type": "integer", "minimum": 0}``;
  a list as ``[]`` for ``{"type": "array"}`` (``enum``, ``examples``); distinct strings as
  ``[]`` for a unique string array (``required``); an unconstrained keyword is left out.

Anything else (``type``, ``pattern``, ``$ref``, a string where an object belongs) is kept
as it is, frozen type-exactly (``1``, ``1.0`` and ``True`` differ). A node's key is its
keywords with these stand-ins; jsonschema checks the node rebuilt from the key, and a
schema is valid iff the key of each of its nodes is. A schema found invalid is checked
whole by ``check_schema``, whose message the RequestError carries.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Protocol
from urllib.parse import urljoin

from autoparser.cache import CACHES, Store
from autoparser.errors import RequestError

# What a keyword's constraint is (``_kind``). A keyword of no kind is unconstrained.
EXACT, STRING, NUMBER, COUNT, ARRAY, NAMES = "exact", "string", "number", "count", "array", "names"
SCHEMA, SCHEMA_MAP, SCHEMA_LIST, SCHEMA_OR_LIST = "schema", "map", "list", "schema-or-list"
ANY = "any"

NodeKey = tuple[Hashable, ...]
# The node keys one request found valid, by metaschema (``check_schema``'s ``known``).
Known = dict[type, set[NodeKey]]


class _StandIn:
    """The one key part for every value of an abstracted kind; ``make`` builds its value."""

    __slots__ = ("make", "name")

    def __init__(self, name: str, make: Callable[[], object]) -> None:
        self.name, self.make = name, make

    def __repr__(self) -> str:
        return f"<{self.name}>"


_STRING = _StandIn("string", str)
_NUMBER = _StandIn("number", int)
_ARRAY = _StandIn("array", list)
_SCHEMA = _StandIn("schema", dict)
_SCHEMAS = _StandIn("schemas", lambda: [{}])
_NO_SCHEMAS = _StandIn("no schemas", list)


class _Opaque(Exception):
    """A value that is not plain JSON data (a tuple, a Mapping that is no dict)."""


def _freeze(value: object) -> Hashable:
    """A hashable, type-exact copy of plain JSON data; ``_Opaque`` for anything else."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int or kind is float or kind is bool or value is None:
        return (kind, value)
    if isinstance(value, list) and kind is list:
        return (list, tuple(map(_freeze, value)))
    if isinstance(value, dict) and kind is dict:
        if not all(type(k) is str for k in value):
            raise _Opaque
        return (dict, tuple((k, _freeze(v)) for k, v in value.items()))
    raise _Opaque


def _thaw(frozen: Hashable) -> object:
    """The value a key part stands for."""
    if isinstance(frozen, _StandIn):
        return frozen.make()
    if not isinstance(frozen, tuple):
        return frozen
    head, body = frozen
    if head is list:
        return [_thaw(item) for item in body]
    if head is dict:
        return {k: _thaw(v) for k, v in body}
    return body


def _node(key: NodeKey) -> dict[str, object]:
    """The node a key stands for (keywords and key parts alternate in the key)."""
    return {str(name): _thaw(part) for name, part in zip(key[::2], key[1::2], strict=True)}


def node_keys(kinds: Mapping[str, str], schema: dict[str, object]) -> set[NodeKey]:
    """The key of every node of ``schema``: its constrained keywords and their key parts,
    alternating (``_Opaque`` for data that is not plain JSON)."""
    keys: set[NodeKey] = set()
    todo: list[dict[str, object]] = [schema]
    while todo:
        parts: list[Hashable] = []
        for name, value in todo.pop().items():
            kind = kinds.get(name)
            if kind is None:
                continue
            parts.append(name)
            vtype = type(value)
            if vtype is str:
                parts.append(_STRING if kind is STRING else value)
            elif isinstance(value, dict) and vtype is dict:
                if kind is SCHEMA_MAP and all(type(v) is dict for v in value.values()):
                    todo.extend(value.values())
                    parts.append(_SCHEMA)
                elif kind is SCHEMA or kind is SCHEMA_OR_LIST:
                    todo.append(value)
                    parts.append(_SCHEMA)
                else:
                    parts.append(_freeze(value))
            elif isinstance(value, list) and vtype is list:
                parts.append(_list_part(kind, value, todo))
            elif vtype is int or vtype is float:
                if kind is NUMBER or (kind is COUNT and vtype is int and value >= 0):  # type: ignore[operator]
                    parts.append(_NUMBER)
                else:
                    parts.append((vtype, value))
            else:
                parts.append(_freeze(value))
        keys.add(tuple(parts))
    return keys


def _list_part(kind: str, value: list[object], todo: list[dict[str, object]]) -> Hashable:
    """The key part of a list under a keyword of ``kind``, its sub-schemas put on ``todo``."""
    if kind is ARRAY:
        return _ARRAY
    if kind is NAMES and all(type(v) is str for v in value) and len(set(value)) == len(value):
        return _ARRAY
    if (kind is SCHEMA_LIST or kind is SCHEMA_OR_LIST) and all(type(v) is dict for v in value):
        todo.extend(value)  # type: ignore[arg-type]
        return _SCHEMAS if value else _NO_SCHEMAS
    return _freeze(value)


# ------------------------------------------------------------------ reading the metaschema

_ANNOTATIONS = frozenset({"default", "$comment", "deprecated", "title", "description"})
_ROOT_KEYWORDS = _ANNOTATIONS | {
    "$schema", "$id", "id", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor",
    "definitions", "$defs", "type", "allOf", "properties", "dependencies",
}  # fmt: skip
_APPLICATORS = ("items", "additionalProperties", "anyOf", "allOf")


def _normal(doc: Mapping[str, object], constraint: object) -> object:
    """``constraint`` without annotations, local ``$ref``s and one-part ``allOf`` inlined,
    ``items: {}`` (no constraint) dropped."""
    if constraint is True:
        return {}
    if not isinstance(constraint, dict):
        return constraint
    out = {k: v for k, v in constraint.items() if k not in _ANNOTATIONS}
    ref = out.get("$ref")
    if len(out) == 1 and isinstance(ref, str) and ref.startswith("#/"):
        section, _, name = ref[2:].partition("/")
        defs = doc.get(section) if section in ("$defs", "definitions") else None
        target = defs.get(name) if isinstance(defs, dict) else None
        return out if target is None else _normal(doc, target)
    for key in _APPLICATORS:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [_normal(doc, v) for v in value]
        elif key in out:
            out[key] = _normal(doc, value)
    if out.get("items") == {}:
        del out["items"]
    if list(out) == ["allOf"] and isinstance(out["allOf"], list):
        parts = [p for p in out["allOf"] if p != {}]
        if len(parts) == 1:
            return parts[0]
    return out


def _kind(constraint: object, refs: list[object]) -> str:
    """The kind of a keyword constrained by ``constraint`` (normalised), ``refs`` being the
    ways its document refers back to the root metaschema."""
    lists = [{"type": "array", "minItems": 1, "items": r} for r in refs]
    shapes: list[tuple[str, list[object]]] = [
        (ANY, [{}]),
        (STRING, [{"type": "string"}]),
        (NUMBER, [{"type": "number"}]),
        (COUNT, [{"type": "integer", "minimum": 0}]),
        (ARRAY, [{"type": "array"}]),
        (NAMES, [{"type": "array", "items": {"type": "string"}, "uniqueItems": True}]),
        (SCHEMA, refs),
        (SCHEMA_MAP, [{"type": "object", "additionalProperties": r} for r in refs]),
        (SCHEMA_LIST, list(lists)),
        (SCHEMA_OR_LIST, [{"anyOf": [r, a]} for r, a in zip(refs, lists, strict=True)]),
    ]
    return next((kind for kind, allowed in shapes if constraint in allowed), EXACT)


def read_metaschema(
    metaschema: Mapping[str, object], contents: Callable[[str], object]
) -> dict[str, str] | None:
    """Each constrained keyword's kind under ``metaschema`` (its ``allOf`` documents fetched
    by URI with ``contents``), or None when its root is more than per-keyword constraints."""
    base = metaschema.get("$id", metaschema.get("id", ""))
    parts = metaschema.get("allOf", [])
    if not isinstance(base, str) or not isinstance(parts, list):
        return None
    docs: list[object] = [metaschema]
    for part in parts:
        ref = part.get("$ref") if isinstance(part, dict) and len(part) == 1 else None
        if not isinstance(ref, str):
            return None
        docs.append(contents(urljoin(base, ref)))
    found: dict[str, list[str]] = {}
    needed: list[str] = []  # keywords another keyword's presence needs
    for number, doc in enumerate(docs):
        if not isinstance(doc, dict) or not set(doc) <= _ROOT_KEYWORDS:
            return None
        declared, properties = doc.get("type", "object"), doc.get("properties", {})
        if declared != "object" and not (isinstance(declared, list) and "object" in declared):
            return None
        dependencies = doc.get("dependencies", {})
        if (number and "allOf" in doc) or not isinstance(properties, dict):
            return None
        if not isinstance(dependencies, dict):
            return None
        for name, needs in dependencies.items():
            names = [needs] if isinstance(needs, str) else needs
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return None  # a dependency on more than presence
            needed += [name, *names]
        refs: list[object] = [{"$ref": "#"}] if number == 0 else []
        if metaschema.get("$recursiveAnchor") is True and doc.get("$recursiveAnchor") is True:
            refs.append({"$recursiveRef": "#"})
        if metaschema.get("$dynamicAnchor") == "meta" and doc.get("$dynamicAnchor") == "meta":
            refs.append({"$dynamicRef": "#meta"})
        for name, constraint in properties.items():
            found.setdefault(name, []).append(_kind(_normal(doc, constraint), refs))
    # A keyword constrained twice is kept exactly.
    kinds = {name: k[0] if len(k) == 1 else EXACT for name, k in found.items()}
    for name in needed:
        if kinds.get(name, ANY) is ANY:
            kinds[name] = EXACT
    return {name: kind for name, kind in kinds.items() if kind is not ANY}


# ------------------------------------------------------------------ the check


class _Validator(Protocol):
    def iter_errors(self, instance: object) -> Iterator[object]: ...


class _Draft:
    """One metaschema: its validator (made once, as ``check_schema`` makes it) and kinds."""

    def __init__(self, cls: type) -> None:
        from jsonschema.validators import validator_for
        from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]

        meta: Mapping[str, object] = cls.META_SCHEMA  # type: ignore[attr-defined]
        checker = validator_for(meta, default=cls)
        self.cls = cls
        self.validator: _Validator = checker(meta, format_checker=checker.FORMAT_CHECKER)
        self.kinds = read_metaschema(meta, REGISTRY.contents)

    def valid(self, instance: object) -> bool:
        return next(self.validator.iter_errors(instance), None) is None


_DRAFTS: dict[type, _Draft] = {}
_DRAFTS_LOCK = threading.Lock()
# (metaschema class, node key or whole frozen schema) -> valid. Shapes repeat across tools
# and requests; a request of 1,000 distinct tools has a few hundred.
_CHECKED: Store[bool] = CACHES.store("schema_checks", 8192)


@functools.cache
def _validator_for() -> Callable[[Mapping[str, object]], type] | None:
    """jsonschema's ``validator_for``, imported once; None without jsonschema (optional at
    run time: schemas then go unchecked)."""
    try:
        from jsonschema.validators import validator_for
    except ImportError:  # pragma: no cover - the test environment has it
        return None
    return validator_for  # type: ignore[no-any-return]


def _draft(
    schema: Mapping[str, object], validator_for: Callable[[Mapping[str, object]], type]
) -> _Draft:
    """The metaschema ``check_schema`` checks ``schema`` against. A ``$schema`` jsonschema
    cannot look up (no string, or no URI: ``validator_for`` raises) names none: the latest
    draft's metaschema, which checks ``$schema`` too, is then the judge, as for an unknown
    one."""
    declared = schema.get("$schema")
    try:
        cls = validator_for(schema if declared is None or isinstance(declared, str) else {})
    except ValueError:
        cls = validator_for({})
    found = _DRAFTS.get(cls)
    if found is None:
        with _DRAFTS_LOCK:
            found = _DRAFTS.get(cls) or _DRAFTS.setdefault(cls, _Draft(cls))
    return found


def _valid(draft: _Draft, schema: Mapping[str, object], known: Known) -> bool:
    """Whether ``schema`` passes ``draft``'s metaschema, node by node where it can; ``known``
    holds the node keys found valid earlier in the same request (no lock to take for them)."""
    try:
        if draft.kinds is None or not isinstance(schema, dict) or type(schema) is not dict:
            raise _Opaque
        keys = node_keys(draft.kinds, schema)
    except (_Opaque, RecursionError):
        try:
            whole = (draft.cls, "whole", _freeze(schema))
        except (_Opaque, RecursionError):
            return draft.valid(schema)
        return _CHECKED.get_or_build(whole, lambda: draft.valid(schema))
    seen = known.setdefault(draft.cls, set())
    for key in keys - seen:
        valid = _CHECKED.get((draft.cls, key))
        if valid is None:
            valid = _CHECKED.put((draft.cls, key), draft.valid(_node(key)))
        if not valid:
            return False
        seen.add(key)
    return True


def check_schema(schema: object, where: str, known: Known | None = None) -> Mapping[str, object]:
    """``schema`` if it is a JSON schema jsonschema's ``check_schema`` accepts; otherwise a
    RequestError naming ``where`` (unchecked when jsonschema is not installed). ``known``:
    the node shapes found valid so far by the checks of one request (``normalize_tools``
    shares one across its tools)."""
    if not isinstance(schema, Mapping):
        raise RequestError(f"{where}: a JSON schema must be an object, got {type(schema).__name__}")
    validator_for = _validator_for()
    if validator_for is None:  # pragma: no cover - the test environment has jsonschema
        return schema
    draft = _draft(schema, validator_for)
    if not _valid(draft, schema, {} if known is None else known):
        from jsonschema.exceptions import SchemaError as JsonSchemaError

        try:
            draft.cls.check_schema(schema)  # type: ignore[attr-defined]
        except JsonSchemaError as exc:
            raise RequestError(f"{where}: invalid JSON schema: {exc.message}") from exc
    return schema
