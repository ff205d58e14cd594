"""Pure text helpers for argument text: JSON escaping and checks, the closer of a JSON
prefix, and values printed by a template with Python's str() turned into JSON text.

Nothing here keeps state. Nothing here repairs a call: arguments that are not a JSON
object make the call content (see docs/streaming.md); ``json_closer`` is a public helper
for callers that want to display a prefix.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable
from json.encoder import encode_basestring  # what json.dumps(str, ensure_ascii=False) runs
from json.scanner import make_scanner
from typing import Any, cast

from autoparser.peg import end, json_object
from autoparser.peg.python_literal import literal_json

_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # what json.loads skips around a document
# json.loads' own scanner (its default decoder's): the same verdicts, NaN included.
_JSON_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, json.JSONDecoder()))
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def escape_json(text: str) -> str:
    """JSON string-body escaping; escaping pieces separately equals escaping the whole."""
    return encode_basestring(text)[1:-1]


def json_closer(prefix: str) -> str:
    """The text that closes a truncated JSON value prefix (strings, arrays, objects).

    Runs a compiled regex over the string tokens and brackets; a dangling key or ``:``
    gets ``null`` so the result stays valid JSON where possible.
    """
    stack: list[str] = []
    in_string = False
    for m in _JSON_TOKENS.finditer(prefix):
        tok = m.group()
        if tok[0] == '"':
            in_string = len(tok) == 1 or not tok.endswith('"') or _odd_backslashes(tok)
        elif tok in "[{":
            stack.append("]" if tok == "[" else "}")
        elif stack:
            stack.pop()
    closer = '"' if in_string else ""
    if in_string and _odd_backslashes(prefix + '"'):
        closer = '\\"'  # a lone backslash at the end: complete its escape first
    tail = (prefix + closer).rstrip()
    if tail.endswith(":"):
        closer += " null"
    elif tail.endswith(","):
        closer = closer.rstrip()  # a trailing comma cannot be closed validly; leave as is
    elif stack and stack[-1] == "}" and tail.endswith('"') and _dangling_key(tail):
        closer += ": null"
    return closer + "".join(reversed(stack))


def _odd_backslashes(tok: str) -> bool:
    body = tok[:-1]
    return (len(body) - len(body.rstrip("\\"))) % 2 == 1


def _dangling_key(tail: str) -> bool:
    start = tail.rfind('"', 0, len(tail) - 1)
    while start > 0 and tail[start - 1] == "\\":
        start = tail.rfind('"', 0, start - 1)
    before = tail[:start].rstrip()
    return before.endswith(("{", ","))


_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,4}|[^u]?)")


def safe_escape_cut(raw: str) -> int:
    """Length of the prefix of a JSON string body that decodes on its own.

    Holds back a trailing incomplete escape, and a complete high-surrogate escape whose
    low half has not arrived yet (decoding the halves apart would give two lone surrogates).
    """
    # raw starts at an escape boundary and holds only new text: scanning it all is linear.
    tail = collections.deque(_ESCAPE.finditer(raw), maxlen=1)
    last = tail[0] if tail else None
    if last is None or last.end() != len(raw):
        return len(raw)
    esc = last.group()
    if len(esc) < 2 or (esc[1] == "u" and len(esc) < 6):
        return last.start()
    if esc[1] == "u" and 0xD800 <= int(esc[2:], 16) <= 0xDBFF:
        return last.start()
    return len(raw)


JSON_OBJECT_PROBE = json_object() + end()


def json_object_text(text: str) -> bool:
    """Is ``text`` one JSON object (arguments as OpenAI carries them)? As ``json.loads``
    judges it, without its Python-level wrappers (this runs once per call)."""
    space = _JSON_SPACE.match(text)
    start = space.end() if space else 0
    if not text.startswith("{", start):
        return False
    try:
        _, end = _JSON_SCAN(text, start)
    except (StopIteration, ValueError, RecursionError):
        return False
    space = _JSON_SPACE.match(text, end)
    return (space.end() if space else end) == len(text)


def python_value_json(raw: str) -> str | None:
    """One value printed by a template with Python's str() -> JSON text (None if it is
    neither JSON nor a Python literal). Python literals are read by the one reader of
    them (``peg.python_literal``)."""
    text = raw.strip()
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except (ValueError, RecursionError):
        return literal_json(text) if text else None


def python_dict_json(raw: str) -> str | None:
    """A Python-style dict ('single quotes', True/None) -> JSON object text (None if not)."""
    text = python_value_json(raw)
    return text if text is not None and text.startswith("{") else None
