"""An iterative, resumable JSON (RFC 8259) scanner for partial input.

Tokens are recognised with compiled regexes and containers are tracked on an explicit
linked-list stack, so nesting depth never turns into Python recursion and a scan can be
snapshotted in O(1) and resumed when more input arrives. Complete documents take a fast
path through the C `json` decoder; the scanner only runs on truncated or invalid input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.scanner import make_scanner
from typing import Any, NamedTuple, cast

from autoparser.peg.status import FAIL, MORE, OK

_WS = re.compile(r"[ \t\n\r]*")
_DQ_BODY = re.compile(r'[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*')
_SQ_BODY = re.compile(r"[^'\\\x00-\x1f]*(?:\\(?:['\"\\/bfnrt]|u[0-9a-fA-F]{4})[^'\\\x00-\x1f]*)*")
_ESC_PREFIX = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?")
_NUM = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUM_INCOMPLETE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.|(?:\.[0-9]+)?[eE][+-]?)|-")
_WORDS = {"t": "true", "f": "false", "n": "null"}

_SLICE_LIMIT = 16384  # decode from a slice when this close to the end (see fast_complete)
_FAST_ATTEMPTS = 4  # C-decoder tries per scan for nested values (see scan)

# What the scanner expects next.
VALUE, VALUE_OR_CLOSE, KEY_OR_CLOSE, KEY, COLON, COMMA_OR_CLOSE = range(6)
_MAY_CLOSE = frozenset((VALUE_OR_CLOSE, KEY_OR_CLOSE, COMMA_OR_CLOSE))
_CLOSER = {"{": "}", "[": "]"}

KINDS = ("value", "object", "array", "string", "number", "literal")
_EMPTY_CLOSER = {
    "value": "null",
    "object": "{}",
    "array": "[]",
    "string": '""',
    "number": "0",
    "literal": "null",
}

# (open char, parent, depth): O(1) push, pop and snapshot; cells are shared between states.
Stack = tuple[str, "Stack", int] | None


class ScanState(NamedTuple):
    """Where a truncated scan stopped: resume from `pos` with this stack and expectation."""

    pos: int
    stack: Stack
    expect: int
    quote: str  # "" unless stopped inside a string, then its quote char (pos is in its body)
    # A stack whose closing brackets are known, and those brackets: lets the next resumed
    # scan build its closer from the difference instead of walking the whole stack.
    known: tuple[Stack, str] = (None, "")


class ScanResult(NamedTuple):
    status: int
    end: int
    hit_end: bool
    closer: str
    state: ScanState | None


_new = tuple.__new__


def _span_end(rx: re.Pattern[str], text: str, pos: int) -> int:
    """End of a match of a pattern that always matches (it can match the empty string)."""
    m = rx.match(text, pos)
    return m.end() if m else pos


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The scanner itself, not JSONDecoder.raw_decode: raw_decode re-raises StopIteration inside
# an `except ... as err` block, which leaves a reference cycle through the frames that keeps
# the caller's text alive until the cyclic GC runs (defeating in-place appends when
# streaming).
_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = make_scanner(cast(Any, _DECODER))
_FIRST = {
    "object": "{",
    "array": "[",
    "string": "\"'",
    "number": "-0123456789",
    "literal": "tfn",
}


def first_chars(kind: str, single_quotes: bool) -> frozenset[str]:
    """The characters a value of `kind` can start with: `scan` fails at any other one,
    consuming nothing, whatever follows."""
    quotes = "\"'" if single_quotes else '"'
    firsts = {
        "object": "{",
        "array": "[",
        "string": quotes,
        "number": "-0123456789",
        "literal": "tfn",
    }
    if kind == "value":
        return frozenset("{[" + quotes + "-0123456789tfn")
    return frozenset(firsts[kind])


def fast_complete(text: str, pos: int, kind: str) -> int:
    """End of a complete non-number JSON value at pos via the C decoder, or -1.

    A failed decode costs O(pos) in CPython (JSONDecodeError counts the lines before the
    error). Values near the end of the text (where
    a stream's unfinished values start) are therefore decoded from a short slice; values
    far from the end are decoded in place, without copying.
    """
    n = len(text)
    if kind not in ("value", "object", "array") or pos >= n:
        return -1
    first = text[pos]
    if first not in '{["' and not (kind == "value" and first in "tfn"):
        return -1
    if kind != "value" and first != _FIRST[kind]:
        return -1
    try:
        if n - pos <= _SLICE_LIMIT:
            _, end = _SCAN_ONCE(text[pos:], 0)
            return pos + int(end)
        _, end = _SCAN_ONCE(text, pos)
        return int(end)
    except (StopIteration, ValueError, RecursionError):
        return -1


def scan(
    text: str,
    pos: int,
    kind: str,
    partial: bool,
    single_quotes: bool,
    resume: ScanState | None = None,
    fast: bool = True,
) -> ScanResult:
    """Scan one JSON value of `kind` starting at pos (no leading whitespace).

    `fast=False` disables skipping nested complete values with the C decoder (for tests).
    """
    n = len(text)
    if resume is not None:
        p, stack, expect, quote, known = resume
        if quote and partial and known[0] is stack:
            # A stream inside a long string: the body runs to the end again; only the
            # position moves (the closer is the same as on the last scan).
            m = (_DQ_BODY if quote == '"' else _SQ_BODY).match(text, p)
            if m is not None and m.end() == n:
                key = ":null" if expect in (KEY, KEY_OR_CLOSE) else ""
                state = _new(ScanState, (n, stack, expect, quote, known))
                return _new(ScanResult, (MORE, n, True, quote + key + known[1], state))
    else:
        p, stack, expect, quote, known = pos, None, VALUE, "", (None, "")
        if p >= n:
            return _incomplete(partial, ScanState(p, None, VALUE, ""), kind, None, n, known)
        first = text[p]
        allowed = _FIRST.get(kind)
        if allowed is not None and (first not in allowed or (first == "'" and not single_quotes)):
            return ScanResult(FAIL, p, False, "", None)
    sq = "\"'" if single_quotes else '"'
    attempts = _FAST_ATTEMPTS if fast else 0
    while True:
        if quote:
            # Inside a string body: continue it.
            body = _DQ_BODY if quote == '"' else _SQ_BODY
            e = _span_end(body, text, p)
            if e < n and text[e] == quote:
                p = e + 1
                quote = ""
                if expect in (KEY, KEY_OR_CLOSE):
                    expect = COLON
                    continue
                if stack is None:
                    return ScanResult(OK, p, False, "", None)
                expect = COMMA_OR_CLOSE
                continue
            if e < n:
                if _ESC_PREFIX.fullmatch(text, e) is None:
                    return ScanResult(FAIL, e, False, "", None)
                tail = text[e:]
                fix = "\\" if tail == "\\" else "0" * (6 - len(tail))
            else:
                fix = ""
            state = ScanState(e, stack, expect, quote)
            closer = fix + quote + (":null" if expect in (KEY, KEY_OR_CLOSE) else "")
            return _incomplete(partial, state, kind, closer, n, known)
        if stack is not None:
            p = _span_end(_WS, text, p)
        if p >= n:
            return _incomplete(partial, ScanState(p, stack, expect, ""), kind, None, n, known)
        c = text[p]
        if c in "}]" and expect in _MAY_CLOSE and stack is not None and c == _CLOSER[stack[0]]:
            # The innermost container ends: after a member or element, or at once if empty.
            stack = stack[1]
            p += 1
            if stack is None:
                return ScanResult(OK, p, False, "", None)
            expect = COMMA_OR_CLOSE
            continue
        if expect == COMMA_OR_CLOSE:
            assert stack is not None
            if c != ",":
                return ScanResult(FAIL, p, False, "", None)
            expect = KEY if stack[0] == "{" else VALUE
            p += 1
        elif expect == COLON:
            if c != ":":
                return ScanResult(FAIL, p, False, "", None)
            expect = VALUE
            p += 1
        elif expect in (KEY, KEY_OR_CLOSE):
            if c in sq:
                quote = c
                p += 1
            else:
                return ScanResult(FAIL, p, False, "", None)
        else:  # VALUE or VALUE_OR_CLOSE
            if c in "{[":
                if attempts > 0 and stack is not None:
                    # Skip a complete nested value at C speed; only the path to the end of
                    # a truncated document is scanned here. Failed attempts cost a C scan
                    # of the rest, so they are capped (deep truncated nesting stays linear).
                    e = fast_complete(text, p, "value")
                    if e >= 0:
                        p = e
                        expect = COMMA_OR_CLOSE
                        continue
                    attempts -= 1
                if c == "{":
                    stack = ("{", stack, stack[2] + 1 if stack else 1)
                    expect = KEY_OR_CLOSE
                else:
                    stack = ("[", stack, stack[2] + 1 if stack else 1)
                    expect = VALUE_OR_CLOSE
                p += 1
            elif c in sq:
                quote = c
                expect = VALUE
                p += 1
            elif c == "-" or "0" <= c <= "9":
                m = _NUM.match(text, p)
                truncated = _NUM_INCOMPLETE.fullmatch(text, p) is not None
                if truncated and partial:
                    return _incomplete(partial, ScanState(p, stack, VALUE, ""), kind, "0", n, known)
                if m is None:
                    hit = truncated
                    return ScanResult(FAIL, n if hit else p, hit, "", None)
                e = m.end()
                if e == n or truncated:
                    # More input could extend the number: incomplete, or complete at top level.
                    if partial:
                        return _incomplete(
                            partial, ScanState(p, stack, VALUE, ""), kind, "", n, known
                        )
                    if stack is None:
                        return ScanResult(OK, e, True, "", None)
                    return ScanResult(FAIL, n, True, "", None)
                p = e
                if stack is None:
                    return ScanResult(OK, p, False, "", None)
                expect = COMMA_OR_CLOSE
            elif c in _WORDS:
                word = _WORDS[c]
                if text.startswith(word, p):
                    p += len(word)
                    if stack is None:
                        return ScanResult(OK, p, False, "", None)
                    expect = COMMA_OR_CLOSE
                elif n - p < len(word) and word.startswith(text[p:]):
                    state = ScanState(p, stack, VALUE, "")
                    return _incomplete(partial, state, kind, word[n - p :], n, known)
                else:
                    return ScanResult(FAIL, p, False, "", None)
            else:
                return ScanResult(FAIL, p, False, "", None)


def _incomplete(
    partial: bool,
    state: ScanState,
    kind: str,
    token_fix: str | None,
    n: int,
    known: tuple[Stack, str],
) -> ScanResult:
    """Input ended inside the value: NEED_MORE (partial) or FAIL (full), with the closer."""
    pos, stack, expect, quote, _known = state
    if not partial:
        return ScanResult(FAIL, n, True, "", ScanState(pos, stack, expect, quote, known))
    # A resumed scan that ended in the same container (a long string or number growing)
    # reuses the closing brackets it knew. Built with tuple.__new__: the named tuples'
    # generated __new__ is a Python call, and this runs on every feed of a streamed value.
    closing = known[1] if known[0] is stack else _stack_closing(stack, known)
    state = _new(ScanState, (pos, stack, expect, quote, (stack, closing)))
    return _new(ScanResult, (MORE, n, True, closer_for(state, kind, token_fix), state))


def _stack_closing(stack: Stack, known: tuple[Stack, str]) -> str:
    """Closing brackets of `stack`, reusing those of a known stack that shares cells."""
    ref, ref_closing = known
    depth = stack[2] if stack else 0
    ref_depth = ref[2] if ref else 0
    parts: list[str] = []
    skip = 0
    while depth > ref_depth:
        assert stack is not None
        parts.append(_CLOSER[stack[0]])
        stack, depth = stack[1], depth - 1
    while ref_depth > depth:
        assert ref is not None
        ref, ref_depth, skip = ref[1], ref_depth - 1, skip + 1
    while stack is not ref:
        assert stack is not None and ref is not None
        parts.append(_CLOSER[stack[0]])
        stack, ref, skip = stack[1], ref[1], skip + 1
    return "".join(parts) + ref_closing[skip:]


def closer_for(state: ScanState, kind: str, token_fix: str | None) -> str:
    """Text that turns the scanned prefix into a complete JSON value.

    `token_fix` completes a truncated token (string, number, literal); None means the input
    stopped between tokens, so whatever the scanner expects next is filled in minimally.
    The state's `known` pair must describe its own stack.
    """
    parts = [token_fix or ""]
    if token_fix is None:
        if state.stack is None:
            parts.append(_EMPTY_CLOSER[kind])
        elif state.expect == VALUE:
            parts.append("null")
        elif state.expect == KEY:
            parts.append('"":null')
        elif state.expect == COLON:
            parts.append(":null")
    known_stack, closing = state.known
    if known_stack is not state.stack:
        closing = _stack_closing(state.stack, state.known)
    parts.append(closing)
    return "".join(parts)
