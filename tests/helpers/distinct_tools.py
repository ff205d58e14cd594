"""Deterministic sets of many *distinct* tools, shaped like the tool sets real requests carry.

``many_tools`` cycles six schemas, so every cache keyed by a schema hits after the sixth
tool; real tool sets (an agent's MCP servers) differ in property names, descriptions,
enums and nesting, so nothing repeats. ``distinct_tools(n, seed)`` gives such a set: each
tool 1-6 properties of mixed types (strings with descriptions, enums, formats, patterns,
bounded integers and numbers, booleans, arrays of scalars or objects, nested objects,
nullable ``anyOf``), names and descriptions built from word lists, no two schemas equal.
Same ``n`` and ``seed``, same tools; no network.
"""

from __future__ import annotations

import random
from typing import Any


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_VERBS = _words(
    "get list create update delete search find fetch send schedule cancel book convert "
    "summarize translate upload download archive restore compute validate export import "
    "resolve notify assign merge"
)
_NOUNS = _words(
    "weather forecast user account order invoice ticket issue file folder message email "
    "event meeting calendar flight hotel route stock price report document image repo "
    "branch commit record contact task note payment subscription device sensor"
)
_FIELDS = _words(
    "city country query limit offset page id name title body text amount currency date "
    "start end timezone language format unit category status priority owner email phone "
    "url path tags labels notes count size width height latitude longitude radius mode "
    "verbose dry_run include_archived sort_by order token region zone version"
)
_ADJECTIVES = _words("optional preferred target source primary maximum minimum default")
_FORMATS = ("date", "date-time", "email", "uri", "uuid")
_PATTERNS = (r"^[A-Z]{3}$", r"^\d{4}-\d{2}-\d{2}$", r"^[a-z0-9_-]+$", r"^#[0-9a-fA-F]{6}$")


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    words = rng.sample(_NOUNS + _FIELDS + _ADJECTIVES, rng.randint(lo, hi))
    return " ".join(words).capitalize() + "."


def _scalar(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(("string", "string", "integer", "number", "boolean", "enum"))
    schema: dict[str, Any]
    if kind == "enum":
        schema = {"type": "string", "enum": rng.sample(_FIELDS, rng.randint(2, 5))}
    elif kind == "string":
        schema = {"type": "string"}
        extra = rng.random()
        if extra < 0.2:
            schema["format"] = rng.choice(_FORMATS)
        elif extra < 0.35:
            schema["pattern"] = rng.choice(_PATTERNS)
        elif extra < 0.5:
            schema["maxLength"] = rng.randint(8, 256)
    elif kind in ("integer", "number"):
        schema = {"type": kind}
        if rng.random() < 0.5:
            schema["minimum"] = rng.randint(0, 10)
            schema["maximum"] = schema["minimum"] + rng.randint(1, 1000)
    else:
        schema = {"type": kind}
        if rng.random() < 0.3:
            schema["default"] = rng.random() < 0.5
    return schema


def _value(rng: random.Random, depth: int) -> dict[str, Any]:
    roll = rng.random()
    if depth < 2 and roll < 0.12:
        schema = _object(rng, depth + 1, rng.randint(1, 3))
    elif depth < 2 and roll < 0.27:
        items = _object(rng, depth + 1, rng.randint(1, 3)) if roll < 0.17 else _scalar(rng)
        schema = {"type": "array", "items": items}
        if rng.random() < 0.3:
            schema["maxItems"] = rng.randint(1, 20)
    elif roll < 0.33:
        schema = {"anyOf": [_scalar(rng), {"type": "null"}]}
    else:
        schema = _scalar(rng)
    if rng.random() < 0.75:
        schema["description"] = _sentence(rng, 3, 9)
    return schema


def _object(rng: random.Random, depth: int, size: int) -> dict[str, Any]:
    names = rng.sample(_FIELDS, size)
    properties = {name: _value(rng, depth) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name in names if rng.random() < 0.5]
    if required:
        schema["required"] = required
    if rng.random() < 0.3:
        schema["additionalProperties"] = False
    return schema


def distinct_tools(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` OpenAI function tools, every name and parameter schema distinct (the tool's
    number is in its name and its schema's description), the same for the same seed."""
    rng = random.Random(seed)
    tools: list[dict[str, Any]] = []
    for i in range(n):
        verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
        parameters = _object(rng, 0, rng.randint(1, 6))
        parameters["description"] = f"Arguments of {verb} {noun} ({i})."
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"{verb}_{noun}_{i}",
                    "description": _sentence(rng, 4, 14),
                    "parameters": parameters,
                },
            }
        )
    return tools
