"""Parse trees -> OpenAI messages and streaming deltas, with linear cost.

The stream parser feeds chunks to the PEG incremental parser and, after each chunk, walks
the (small) tree of tagged nodes. For every output field it keeps how much it has already
emitted, so it only ever slices the *new* part of a node's span: the cost per chunk is the
size of the chunk plus the number of tagged nodes, never the length of the text so far.
Deltas only append; the message is the accumulation of the deltas. See docs/streaming.md.
"""

from __future__ import annotations

import ast
import collections
import json
import random
import re
from collections.abc import Callable
from typing import Any

from autoparser.errors import RequestError
from autoparser.generate import tags
from autoparser.message import ChatMessage, ToolCall
from autoparser.peg import IncrementalParse, Node, Parser, ParseStatus, end, json_object

_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


class CallIds:
    """Tool call ids for calls the model gave none: ``call_`` + 24 random characters.

    The k-th generated id depends only on the seed and k, so ``parse`` and ``stream`` of
    the same ``ChatParams`` agree, while two requests (two seeds) get different ids.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = random.SystemRandom().getrandbits(64) if seed is None else seed

    def __call__(self, index: int) -> str:
        rng = random.Random(f"{self.seed}:{index}")
        return "call_" + "".join(rng.choice(_ID_ALPHABET) for _ in range(24))


def _escape(text: str) -> str:
    """JSON string-body escaping; escaping pieces separately equals escaping the whole."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


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


# Value tags of hand-written formats (``autoparser.formats``) whose values are neither JSON
# nor Python literals: tag -> converter of the value text to JSON text. Like JSON values, a
# value is delivered whole once complete (or, at the end of a cut-off call, its prefix).
VALUE_CONVERTERS: dict[str, Callable[[str], str]] = {}
_STRING_TAGS = (tags.TOOL_ARG_STRING, tags.TOOL_ARG_TEXT)
_VALUE_TAGS = (*_STRING_TAGS, tags.TOOL_ARG_JSON, tags.TOOL_ARG_PY)


class _TextField:
    """One text field (content or reasoning): strips leading/trailing whitespace lazily.

    ``raw_done`` counts raw characters already consumed (over the concatenation of the
    field's nodes); trailing whitespace is held back until more text follows it, so the
    final value is ``raw.strip()`` however the text was split.
    """

    __slots__ = ("held", "key", "pieces", "raw_done", "started")

    def __init__(self, key: str) -> None:
        self.key = key
        self.raw_done = 0
        self.started = False
        self.held = ""
        self.pieces: list[str] = []

    def push(self, raw: str) -> str:
        self.raw_done += len(raw)
        combined = self.held + raw if self.held else raw
        if not self.started:
            combined = combined.lstrip()
        core = combined.rstrip()
        self.held = combined[len(core) :]
        if core:
            self.started = True
            self.pieces.append(core)
        return core

    def advance(self, nodes: list[Node], text: str) -> str:
        total = 0
        out: list[str] = []
        for node in nodes:
            length = node.end - node.start
            if total + length > self.raw_done:
                piece = self.push(text[node.start + self.raw_done - total : node.end])
                if piece:
                    out.append(piece)
            total += length
        return "".join(out)

    def value(self) -> str | None:
        return "".join(self.pieces) if self.pieces else None


class _Call:
    """Streaming state of one tool call."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.announced = False
        self.closed = False
        self.id = ""
        self.name = ""
        self.pieces: list[str] = []
        # JSON-text arguments (tool-args)
        self.raw_done = 0
        self.closer = ""
        self.converted = False  # tool-args-py: emitted whole when complete
        self.encoded = False  # tool-args-str: decoded incrementally
        self.bad = False  # the arguments broke: cut at their last valid prefix
        self.str_held = ""  # an escape sequence not complete yet
        self.inner: IncrementalParse | None = None  # tool-args-str: the decoded JSON so far
        self.str_checked = False  # tool-args-str: the complete string's JSON was checked
        # tagged arguments
        self.tagged = False
        self.args_done = 0  # tool-arg nodes fully emitted
        self.cur_named = False  # the current argument's key was emitted
        self.cur_string = False  # ... and its value is a streaming string (opening quote sent)
        self.cur_value: Node | None = None  # the current argument's value node, if any
        self.cur_done = 0  # raw characters of the current string value consumed
        self.cur_lead = False  # the leading newline check of a string value was made
        self.cur_held = ""  # a trailing newline held back

    def arguments(self) -> str:
        return "".join(self.pieces)


class MapSpec:
    """What the mapper needs beyond the tree: the call id policy.

    ``model_ids=False``: what the format writes in the id position is not an id (Kimi-K2
    writes the call's index, ``functions.f:0``), so ids are generated.
    """

    def __init__(
        self,
        *,
        expects_call_ids: bool = False,
        call_ids: Callable[[int], str] | None = None,
        model_ids: bool = True,
    ) -> None:
        self.expects_call_ids = expects_call_ids
        self.call_ids: Callable[[int], str] = call_ids or CallIds()
        self.model_ids = model_ids


class _Mapper:
    """Turns successive parse trees of a growing text into appended pieces per field."""

    def __init__(self, spec: MapSpec) -> None:
        self.spec = spec
        self.reasoning = _TextField("reasoning_content")
        self.content = _TextField("content")
        self.calls: list[_Call] = []
        self.truncated = False
        self.events: list[tuple[str, int, str]] = []

    # ----------------------------------------------------------------- tree walking
    def advance(self, tree: Node, text: str) -> None:
        reasoning: list[Node] = []
        content: list[Node] = []
        calls: list[Node] = []
        for child in tree.children:
            if child.tag == tags.REASONING:
                reasoning.append(child)
            elif child.tag == tags.CONTENT:
                content.append(child)
            elif child.tag == tags.TOOL:
                calls.append(child)
        if reasoning:
            piece = self.reasoning.advance(reasoning, text)
            if piece:
                self.events.append(("reasoning_content", -1, piece))
        if content:
            piece = self.content.advance(content, text)
            if piece:
                self.events.append(("content", -1, piece))
        for i, node in enumerate(calls):
            if i < len(self.calls) and self.calls[i].closed:
                continue
            if not self._advance_call(i, node, text):
                break

    def _emit_args(self, call: _Call, piece: str) -> None:
        if piece:
            call.pieces.append(piece)
            if call.announced:
                self.events.append(("args", call.index, piece))

    def _advance_call(self, i: int, node: Node, text: str) -> bool:
        """Advance call i; False when later calls must wait (this one is not announced)."""
        if i == len(self.calls):
            self.calls.append(_Call(i))
        call = self.calls[i]
        name_node = id_node = None
        args_node: Node | None = None
        arg_nodes: list[Node] = []
        for child in node.children:
            if child.tag == tags.TOOL_NAME:
                name_node = child
            elif child.tag == tags.TOOL_ID:
                id_node = child
            elif child.tag in _ARGS_TAGS:
                args_node = child
            elif child.tag == tags.TOOL_ARG:
                arg_nodes.append(child)
        if not call.announced:
            if name_node is None or not name_node.complete:
                return False
            id_ready = id_node is not None and id_node.complete
            if self.spec.expects_call_ids and not id_ready and not node.complete:
                return False
            call.name = name_node.text(text)
            call.id = id_node.text(text) if id_ready and id_node and self.spec.model_ids else ""
            if not call.id:
                call.id = self.spec.call_ids(i)
            call.tagged = bool(arg_nodes)
            call.announced = True
            self.events.append(("call", i, ""))
            if call.pieces:  # arguments gathered before the announcement
                self.events.append(("args", i, call.arguments()))
        if args_node is not None:
            self._advance_json_args(call, args_node, text)
        elif arg_nodes or call.tagged:
            self._advance_tagged(call, arg_nodes, text)
        if node.complete and not call.closed:
            if call.tagged:
                if call.cur_named:
                    return True  # an argument is still open (cannot happen when complete)
                self._emit_args(call, "{}" if not call.pieces else "}")
            elif not call.pieces:
                self._emit_args(call, "{}")
            elif call.bad:
                self._emit_args(call, _closing_text(call.arguments()))
            call.closed = True
        return True

    def _advance_json_args(self, call: _Call, node: Node, text: str) -> None:
        if node.tag == tags.TOOL_ARGS:
            length = node.end - node.start
            if length > call.raw_done:
                self._emit_args(call, text[node.start + call.raw_done : node.end])
                call.raw_done = length
            call.closer = "" if node.complete else node.closer
            return
        if node.tag == tags.TOOL_ARGS_STR:
            self._advance_encoded_args(call, node, text)
            return
        if node.tag in _BAD_TAGS:
            if not call.bad:  # once: the valid prefix is fixed by where the arguments broke
                self._recover_args(call, node.tag or "", node.text(text))
                call.bad = True
                self.truncated = True
            return
        if call.converted or not node.complete:
            return
        self._emit_args(call, _convert_args(node.tag or "", node.text(text)))
        call.converted = True

    def _recover_args(self, call: _Call, kind: str, raw: str) -> None:
        """Broken arguments: emit what is missing of their last valid prefix.

        Whatever the stream emitted before the break is a prefix of it (JSON text as
        written; decoded string text; nothing for a Python dict, delivered only whole),
        and the prefix depends only on the text before the break, so the result does not
        depend on how the output was split.
        """
        if kind == tags.TOOL_ARGS_BAD:
            valid = _viable_json_prefix(raw)
            if valid > call.raw_done:
                self._emit_args(call, raw[call.raw_done : valid])
                call.raw_done = valid
        elif kind == tags.TOOL_ARGS_STR_BAD:
            call.encoded = True
            done = call.arguments()
            decoded = _viable_encoded_prefix(raw)
            if len(decoded) > len(done) and decoded.startswith(done):
                self._emit_decoded(call, decoded[len(done) :])
        elif not call.pieces:  # TOOL_ARGS_PY_BAD
            self._emit_args(call, _python_prefix_json(raw))
            call.converted = True

    def _advance_encoded_args(self, call: _Call, node: Node, text: str) -> None:
        """Arguments written as a JSON string: stream the decoded text, escape by escape."""
        call.encoded = True
        body_end = node.end - 1 if node.complete else node.end
        start = node.start + 1 + call.raw_done  # after the opening quote
        if body_end <= start and not node.complete:
            return
        pending = call.str_held + text[start:body_end]
        call.raw_done = max(call.raw_done, body_end - node.start - 1)
        cut = len(pending) if node.complete else _safe_escape_cut(pending)
        call.str_held = pending[cut:]
        if cut:
            try:
                decoded = json.loads('"' + pending[:cut] + '"')
            except ValueError:
                decoded = pending[:cut]
            self._emit_decoded(call, decoded)
        if node.complete and not call.bad and call.inner is not None and not call.str_checked:
            call.str_checked = True  # once: the string may end before the call does
            if not _valid_json(call.arguments()):
                # The string ended but the JSON it holds did not: closed like a cut-off call.
                call.bad = True
                self.truncated = True

    def _emit_decoded(self, call: _Call, decoded: str) -> None:
        """Decoded argument text, up to where the JSON it holds stops being viable.

        The string may hold anything; what is emitted stays a prefix of a JSON object (an
        incremental parse of the decoded text), so the arguments can be closed validly.
        """
        if call.bad or not decoded:
            return
        if call.inner is None:
            call.inner = _JSON_PROBE.incremental()
        if call.inner.feed(decoded).status != ParseStatus.FAIL:
            self._emit_args(call, decoded)
            return
        done = call.arguments()
        valid = _viable_json_prefix(done + decoded) - len(done)
        self._emit_args(call, decoded[: max(0, valid)])
        call.bad = True
        self.truncated = True

    def _advance_tagged(self, call: _Call, nodes: list[Node], text: str) -> None:
        """Tagged arguments -> JSON by appending: ``{``, ``"key": ``, value, ``, ``..., ``}``.

        String values (raw text) stream as escaped JSON strings. JSON and Python-literal
        values are short and may still turn out to be written another way (``{'a'`` is not
        JSON), so each is delivered whole once its node is complete.
        """
        call.tagged = True
        if not call.pieces:
            self._emit_args(call, "{")
        for k in range(call.args_done, len(nodes)):
            arg = nodes[k]
            name_node = value_node = None
            for child in arg.children:
                if child.tag == tags.TOOL_ARG_NAME:
                    name_node = child
                elif child.tag in _VALUE_TAGS or child.tag in VALUE_CONVERTERS:
                    value_node = child
            if not call.cur_named:
                if name_node is None or not name_node.complete:
                    return
                key = json.dumps(name_node.text(text), ensure_ascii=False)
                self._emit_args(call, f"{', ' if k else ''}{key}: ")
                call.cur_named = True
            call.cur_value = value_node
            if value_node is not None and value_node.tag in _STRING_TAGS:
                if not call.cur_string:
                    call.cur_string = True
                    self._emit_args(call, '"')
                length = value_node.end - value_node.start
                if length > call.cur_done:
                    raw = text[value_node.start + call.cur_done : value_node.end]
                    call.cur_done = length
                    self._emit_args(call, self._string_piece(call, raw))
            if not arg.complete:
                return
            if call.cur_string:
                self._emit_args(call, '"')
            elif value_node is None:
                self._emit_args(call, "null")
            else:
                self._emit_args(call, _whole_value(value_node, text))
            call.args_done = k + 1
            call.cur_named = False
            call.cur_string = False
            call.cur_value = None
            call.cur_done = 0
            call.cur_lead = False
            call.cur_held = ""

    @staticmethod
    def _string_piece(call: _Call, raw: str) -> str:
        """Escaped raw text; one leading and one trailing newline of the value dropped."""
        if call.cur_value is not None and call.cur_value.tag == tags.TOOL_ARG_TEXT:
            return _escape(raw)  # a quoted value: exactly as written
        if not call.cur_lead and raw:
            call.cur_lead = True
            if raw.startswith("\n"):
                raw = raw[1:]
        combined = call.cur_held + raw
        if combined.endswith("\n"):
            call.cur_held = "\n"
            combined = combined[:-1]
        else:
            call.cur_held = ""
        return _escape(combined)

    # ----------------------------------------------------------------- end of input
    def close(self, tree: Node, text: str) -> None:
        """Close whatever is still open at the end of generation (appending only)."""
        if any(c.tag == tags.REASONING for c in tree.children) and not any(
            c.tag == tags.REASONING_CLOSE for c in tree.children
        ):
            self.truncated = True
        for call in self.calls:
            if not call.announced or call.closed:
                continue
            self.truncated = True
            if call.tagged:
                tail = ""
                if call.cur_named:
                    if call.cur_string:
                        tail = '"'
                    elif call.cur_value is None:
                        tail = "null"
                    else:
                        tail = _whole_value(call.cur_value, text)
                self._emit_args(call, tail + "}")
            elif call.converted or not call.pieces:
                self._emit_args(call, "{}" if not call.pieces else "")
            elif call.encoded or call.bad:
                self._emit_args(call, _closing_text(call.arguments()))
            else:
                args = call.arguments()
                closer = call.closer
                if not closer or not _valid_json(args + closer):
                    closer = json_closer(args)
                self._emit_args(call, closer)
            call.closed = True

    # ----------------------------------------------------------------- output
    def take_deltas(self) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = []
        for kind, index, piece in self.events:
            if kind in ("content", "reasoning_content"):
                if deltas and set(deltas[-1]) == {kind}:
                    deltas[-1][kind] += piece
                else:
                    deltas.append({kind: piece})
            elif kind == "call":
                call = self.calls[index]
                deltas.append(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            else:
                last = (
                    deltas[-1]["tool_calls"][0] if deltas and "tool_calls" in deltas[-1] else None
                )
                if last is not None and last["index"] == index:
                    last["function"]["arguments"] += piece
                else:
                    deltas.append(
                        {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                    )
        self.events.clear()
        return deltas

    def message(self) -> ChatMessage:
        calls = [
            ToolCall(id=c.id, name=c.name, arguments=c.arguments())
            for c in self.calls
            if c.announced
        ]
        return ChatMessage(
            content=self.content.value(),
            reasoning_content=self.reasoning.value(),
            tool_calls=calls,
            truncated=self.truncated,
        )

    def snapshot(self) -> tuple[str, str, list[tuple[str, str]]]:
        calls = [(c.name, c.arguments()) for c in self.calls if c.announced]
        return ("".join(self.reasoning.pieces), "".join(self.content.pieces), calls)


_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,4}|[^u]?)")


def _safe_escape_cut(raw: str) -> int:
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


def _valid_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


_PY_TOKENS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\b(?:True|False|None)\b")
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}


def _py_token(m: re.Match[str]) -> str:
    tok = m.group()
    if tok[0] == "'":
        return json.dumps(ast.literal_eval(tok), ensure_ascii=False)
    return _PY_WORDS.get(tok, tok)


_JSON_PROBE = json_object() + end()
_PYTHON_PROBE = json_object(allow_single_quotes=True) + end()
_ARGS_TAGS = (
    tags.TOOL_ARGS,
    tags.TOOL_ARGS_PY,
    tags.TOOL_ARGS_STR,
    tags.TOOL_ARGS_BAD,
    tags.TOOL_ARGS_STR_BAD,
    tags.TOOL_ARGS_PY_BAD,
)
_BAD_TAGS = (tags.TOOL_ARGS_BAD, tags.TOOL_ARGS_STR_BAD, tags.TOOL_ARGS_PY_BAD)
# The valid start of a JSON string literal: its body up to the first invalid character.
_STRING_START = re.compile(r'\s*"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*)')
# A string left open at the end of a Python-literal prefix: from its quote on.
_OPEN_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|(['\"])")


def _viable_json_prefix(raw: str, probe: Parser = _JSON_PROBE) -> int:
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


def _viable_encoded_prefix(raw: str) -> str:
    """The decoded text of the valid start of arguments written as a JSON string.

    A trailing high surrogate whose low half never came is left out, as the stream holds
    it back.
    """
    m = _STRING_START.match(raw)
    if m is None:
        return ""
    body = m.group(1)
    body = body[: _safe_escape_cut(body)]
    try:
        decoded: str = json.loads('"' + body + '"')
    except ValueError:
        return ""
    return decoded


def _python_prefix_json(raw: str) -> str:
    """A broken Python-literal dict: its last valid prefix as a closed JSON object.

    A string left open at the cut is dropped (its key or value then reads null).
    """
    prefix = raw[: _viable_json_prefix(raw, _PYTHON_PROBE)]
    last = collections.deque(_OPEN_STRING.finditer(prefix), maxlen=1)
    if last and last[0].group(1):
        prefix = prefix[: last[0].start()]
    try:
        # Nothing was streamed yet: a dangling comma can simply go.
        text = _PY_TOKENS.sub(_py_token, prefix).rstrip().removesuffix(",")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return "{}"
    closed = text + _closing_text(text)
    return closed if _valid_json(closed) and closed.lstrip().startswith("{") else "{}"


# A JSON literal or number cut short at the end of a text, and what completes it.
_CUT_SCALAR = re.compile(
    r"(?<![\w.])(?:(t(?:r(?:u)?)?)|(f(?:a(?:l(?:s)?)?)?)|(n(?:u(?:l)?)?)"
    r"|(-|\d+\.|\d+(?:\.\d+)?[eE][+-]?))\Z"
)
_SCALAR_REST = ("true", "false", "null")


def _closing_text(args: str) -> str:
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
    if _valid_json(args + lead + closer) or not tail.endswith(","):
        return lead + closer
    # A dangling comma needs one more member / element.
    inner = closer.lstrip()[:1]
    return (" null" if inner == "]" else ' "": null') + closer


def _whole_value(node: Node, text: str) -> str:
    """A complete (or, at the end, truncated) JSON / Python-literal value as JSON text."""
    raw = node.text(text).strip()
    convert = VALUE_CONVERTERS.get(node.tag or "")
    if convert is not None:
        return convert(raw)
    if node.tag == tags.TOOL_ARG_PY:
        return _py_value(raw)
    if node.complete or _valid_json(raw):
        return raw
    closer = node.closer if _valid_json(raw + node.closer) else json_closer(raw)
    return raw + closer if _valid_json(raw + closer) else "null"


def _py_value(raw: str) -> str:
    """One value printed by a template with Python's str() -> JSON text (else a string)."""
    text = raw.strip()
    for candidate in (text, _PY_TOKENS.sub(_py_token, text) if text else text):
        try:
            return json.dumps(json.loads(candidate), ensure_ascii=False)
        except (ValueError, SyntaxError, RecursionError):
            continue
    return json.dumps(text, ensure_ascii=False)


def _convert_args(kind: str, raw: str) -> str:
    """Python-style dicts ('single quotes', True/None) and encoded arguments -> JSON text."""
    try:
        if kind == tags.TOOL_ARGS_STR:
            value = json.loads(raw)
            parsed = json.loads(value) if isinstance(value, str) else value
        else:
            parsed = json.loads(_PY_TOKENS.sub(_py_token, raw))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return "{}"
    if not isinstance(parsed, dict):
        return "{}"
    return json.dumps(parsed, ensure_ascii=False)


class StreamParser:
    """Feeds model output chunk by chunk; returns OpenAI ``delta`` dicts that only append.

    ``feed(chunk)`` -> deltas for the text that became certain; ``finish()`` -> the last
    deltas (held-back text flushed, truncated calls closed); ``message`` -> the message so
    far (the accumulation of every delta returned).
    """

    def __init__(self, parser: Parser, spec: MapSpec) -> None:
        self._parser = parser
        self._spec = spec
        self._inc = parser.incremental()
        self._mapper = _Mapper(spec)
        self._last_tree: Node | None = None
        self._finished = False

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        if self._finished:
            raise RequestError("StreamParser.feed: the stream is already finished")
        if not isinstance(chunk, str):
            raise RequestError(
                f"model output must be a str, got {type(chunk).__name__}"
                + (" (decode the bytes first)" if isinstance(chunk, (bytes, bytearray)) else "")
            )
        if not chunk:
            return []
        result = self._inc.feed(chunk)
        if result.status != ParseStatus.FAIL:
            self._last_tree = result.tree
            self._mapper.advance(result.tree, self._inc.text)
        return self._mapper.take_deltas()

    def finish(self) -> list[dict[str, Any]]:
        if self._finished:
            return []
        self._finished = True
        text = self._inc.text
        final = self._inc.finish()
        partial = self._last_tree
        tree = partial
        if final.status == ParseStatus.SUCCESS and not (
            partial is not None and self._ends_inside_call(partial)
        ):
            tree = final.tree
        if tree is not None:
            self._mapper.advance(tree, text)
            self._mapper.close(tree, text)
        elif text:
            # Nothing parsed at all (cannot happen with generated parsers): keep the text.
            piece = self._mapper.content.push(text)
            if piece:
                self._mapper.events.append(("content", -1, piece))
        return self._mapper.take_deltas()

    def _ends_inside_call(self, partial: Node) -> bool:
        """Did generation stop inside an announced call? Then that call is truncated.

        The full-mode parse would close such a call early (its end markers are optional)
        or turn it into content; the partial-mode tree keeps it open, so it is reported
        as a truncated call, its arguments closed by appending. Depends only on the text.
        """
        calls = [c for c in partial.children if c.tag == tags.TOOL]
        if not calls or calls[-1].complete:  # only the last call can be unfinished
            return False
        last = calls[-1]
        name = next((c for c in last.children if c.tag == tags.TOOL_NAME), None)
        if name is None or not name.complete:
            return False
        if self._spec.expects_call_ids:  # announced only once its id is complete
            cid = next((c for c in last.children if c.tag == tags.TOOL_ID), None)
            return cid is not None and cid.complete
        return True

    @property
    def message(self) -> ChatMessage:
        return self._mapper.message()

    @property
    def text(self) -> str:
        return str(self._inc.text)


def parse_text(parser: Parser, spec: MapSpec, text: str, partial: bool = False) -> ChatMessage:
    """``parse(text)``: exactly what a stream fed the whole text at once would produce."""
    stream = StreamParser(parser, spec)
    stream.feed(text)
    if not partial:
        stream.finish()
    return stream.message
