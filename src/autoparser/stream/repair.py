"""Pure text helpers: close, cut and convert JSON and Python-literal argument text.

Nothing here keeps state; the argument streamers (``stream/arguments.py``) call these to
close a cut-off value, find the last valid prefix of broken arguments, or turn a Python
literal printed by a template into JSON text.
"""

from __future__ import annotations

import ast
import collections
import json
import re

from autoparser.peg import Parser, ParseStatus, end, json_object

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def escape_json(text: str) -> str:
    """JSON string-body escaping; escaping pieces separately equals escaping the whole."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def valid_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


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


_PY_TOKENS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b(?:True|False|None)\b")
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}


def _py_token(m: re.Match[str]) -> str:
    tok = m.group()
    if tok[0] == "'":
        return json.dumps(ast.literal_eval(tok), ensure_ascii=False)
    return _PY_WORDS.get(tok, tok)


def python_to_json_text(text: str) -> str:
    """Python-literal text ('single quotes', True/None) with its tokens rewritten as JSON.

    Raises ValueError / SyntaxError on a malformed single-quoted string.
    """
    return _PY_TOKENS.sub(_py_token, text)


JSON_OBJECT_PROBE = json_object() + end()
_PYTHON_PROBE = json_object(allow_single_quotes=True) + end()
# The valid start of a JSON string literal: its body up to the first invalid character.
_STRING_START = re.compile(r'\s*"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*)')
# A string left open at the end of a Python-literal prefix: from its quote on.
_OPEN_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|(['\"])")


def viable_json_prefix(raw: str, probe: Parser = JSON_OBJECT_PROBE) -> int:
    """Length of the longest prefix of raw that a JSON object can still continue.

    Binary search over partial-mode parses (viability is monotone in the prefix length);
    run once per broken call.
    """
    lo, hi = 0, len(raw)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if probe.parse(raw[:mid], partial=True).status == ParseStatus.FAIL:
            hi = mid - 1
        else:
            lo = mid
    return lo


def viable_encoded_prefix(raw: str) -> str:
    """The decoded text of the valid start of arguments written as a JSON string.

    A trailing high surrogate whose low half never came is left out, as the stream holds
    it back.
    """
    m = _STRING_START.match(raw)
    if m is None:
        return ""
    body = m.group(1)
    body = body[: safe_escape_cut(body)]
    try:
        decoded: str = json.loads('"' + body + '"')
    except ValueError:
        return ""
    return decoded


def python_prefix_json(raw: str) -> str:
    """A broken Python-literal dict: its last valid prefix as a closed JSON object.

    A string left open at the cut is dropped (its key or value then reads null).
    """
    prefix = raw[: viable_json_prefix(raw, _PYTHON_PROBE)]
    last = collections.deque(_OPEN_STRING.finditer(prefix), maxlen=1)
    if last and last[0].group(1):
        prefix = prefix[: last[0].start()]
    try:
        # Nothing was streamed yet: a dangling comma can simply go.
        text = python_to_json_text(prefix).rstrip().removesuffix(",")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return "{}"
    closed = text + closing_text(text)
    return closed if valid_json(closed) and closed.lstrip().startswith("{") else "{}"


# A JSON literal or number cut short at the end of a text, and what completes it.
_CUT_SCALAR = re.compile(
    r"(?<![\w.])(?:(t(?:r(?:u)?)?)|(f(?:a(?:l(?:s)?)?)?)|(n(?:u(?:l)?)?)"
    r"|(-|\d+\.|\d+(?:\.\d+)?[eE][+-]?))\Z"
)
_SCALAR_REST = ("true", "false", "null")


def closing_text(args: str) -> str:
    """What to append so that a cut JSON object text parses (best effort)."""
    tail = args.rstrip()
    m = _CUT_SCALAR.search(tail)
    lead = ""
    if m is not None and tail == args and not json_closer(args).startswith(('"', '\\"')):
        for word, cut in zip(_SCALAR_REST, m.groups(), strict=False):
            if cut:
                lead = word[len(cut) :]
        lead = lead or "0"  # a number cut after its sign, point or exponent
    closer = json_closer(args + lead)
    if valid_json(args + lead + closer) or not tail.endswith(","):
        return lead + closer
    # A dangling comma needs one more member / element.
    inner = closer.lstrip()[:1]
    return (" null" if inner == "]" else ' "": null') + closer


def python_value_json(raw: str) -> str:
    """One value printed by a template with Python's str() -> JSON text (else a string)."""
    text = raw.strip()
    for candidate in (text, python_to_json_text(text) if text else text):
        try:
            return json.dumps(json.loads(candidate), ensure_ascii=False)
        except (ValueError, SyntaxError, RecursionError):
            continue
    return json.dumps(text, ensure_ascii=False)


def python_dict_json(raw: str) -> str:
    """A Python-style dict ('single quotes', True/None) -> JSON object text ("{}" if not)."""
    try:
        parsed = json.loads(python_to_json_text(raw))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return "{}"
    if not isinstance(parsed, dict):
        return "{}"
    return json.dumps(parsed, ensure_ascii=False)
