"""One small streamer per argument encoding: each turns successive argument nodes of one
call into appended JSON text.

Encodings (by the tag of the node(s) a format writes, see ``autoparser.tags``):

- ``JsonArguments``: a JSON object as written (``tool-args``), streamed as is;
- ``EncodedArguments``: a JSON string holding the object's text (``tool-args-str``),
  streamed decoded, escape by escape;
- ``PythonArguments``: a Python-literal dict (``tool-args-py``), delivered whole once
  complete;
- ``TaggedArguments``: one node per argument (``tool-arg``), assembled into an object.

Each writes to the call's ``ArgumentText`` and exposes ``broken`` (the arguments stopped
being valid and were cut at their last valid prefix), ``complete()`` (the text that closes
them when the call ends normally, None while it cannot) and ``cut()`` (the text that
closes them when generation stopped inside the call).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from autoparser import tags
from autoparser.peg import IncrementalParse, Node, ParseStatus
from autoparser.stream.repair import (
    JSON_OBJECT_PROBE,
    closing_text,
    escape_json,
    json_closer,
    python_dict_json,
    python_prefix_json,
    python_value_json,
    safe_escape_cut,
    valid_json,
    viable_encoded_prefix,
    viable_json_prefix,
)

ValueConverters = Mapping[str, Callable[[str], str]]

_STRING_TAGS = (tags.TOOL_ARG_STRING, tags.TOOL_ARG_TEXT)
_VALUE_TAGS = (*_STRING_TAGS, tags.TOOL_ARG_JSON, tags.TOOL_ARG_PY)


class ArgumentText:
    """The argument text one call has emitted so far; new pieces also go to ``sink``."""

    __slots__ = ("pieces", "sink")

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.pieces: list[str] = []
        self.sink = sink

    def emit(self, piece: str) -> None:
        if piece:
            self.pieces.append(piece)
            self.sink(piece)

    def text(self) -> str:
        return "".join(self.pieces)

    def completion(self, broken: bool) -> str:
        """What ends the arguments when the call closes: ``{}`` when none were written,
        the JSON closer when they broke off, nothing when they are whole."""
        args = self.text()
        if not args:
            return "{}"
        return closing_text(args) if broken else ""


class JsonArguments:
    """``tool-args``: the object's text as written; ``tool-args-bad`` once it broke."""

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.broken = False
        self.done = 0  # characters of the node's text already emitted
        self.closer = ""  # what the parser says closes the text so far

    def advance(self, node: Node, text: str) -> None:
        if node.tag == tags.TOOL_ARGS_BAD:
            if not self.broken:  # once: the valid prefix is fixed by where they broke
                raw = node.text(text)
                valid = viable_json_prefix(raw)
                if valid > self.done:
                    self.out.emit(raw[self.done : valid])
                    self.done = valid
                self.broken = True
            return
        length = node.end - node.start
        if length > self.done:
            self.out.emit(text[node.start + self.done : node.end])
            self.done = length
        self.closer = "" if node.complete else node.closer

    def complete(self) -> str:
        return self.out.completion(self.broken)

    def cut(self) -> str:
        args = self.out.text()
        if not args:
            return "{}"
        if self.broken:
            return closing_text(args)
        closer = self.closer
        if not closer or not valid_json(args + closer):
            closer = json_closer(args)
        return closer


class EncodedArguments:
    """``tool-args-str``: a JSON string whose value is the arguments' JSON text.

    The decoded text streams as it arrives, up to where the JSON it holds stops being
    viable (an incremental parse of the decoded text), so it can always be closed validly.
    """

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.broken = False
        self.done = 0  # characters of the string body consumed
        self.held = ""  # an escape sequence not complete yet
        self.inner: IncrementalParse | None = None  # the decoded JSON so far
        self.checked = False  # the complete string's JSON was checked

    def advance(self, node: Node, text: str) -> None:
        if node.tag == tags.TOOL_ARGS_STR_BAD:
            if not self.broken:
                done = self.out.text()
                decoded = viable_encoded_prefix(node.text(text))
                if len(decoded) > len(done) and decoded.startswith(done):
                    self._emit_decoded(decoded[len(done) :])
                self.broken = True
            return
        body_end = node.end - 1 if node.complete else node.end
        start = node.start + 1 + self.done  # after the opening quote
        if body_end <= start and not node.complete:
            return
        pending = self.held + text[start:body_end]
        self.done = max(self.done, body_end - node.start - 1)
        cut = len(pending) if node.complete else safe_escape_cut(pending)
        self.held = pending[cut:]
        if cut:
            try:
                decoded = json.loads('"' + pending[:cut] + '"')
            except ValueError:
                decoded = pending[:cut]
            self._emit_decoded(decoded)
        if node.complete and not self.broken and self.inner is not None and not self.checked:
            self.checked = True  # once: the string may end before the call does
            if not valid_json(self.out.text()):
                # The string ended but the JSON it holds did not: closed like a cut-off call.
                self.broken = True

    def _emit_decoded(self, decoded: str) -> None:
        if self.broken or not decoded:
            return
        if self.inner is None:
            self.inner = JSON_OBJECT_PROBE.incremental()
        if self.inner.feed(decoded).status != ParseStatus.FAIL:
            self.out.emit(decoded)
            return
        done = self.out.text()
        valid = viable_json_prefix(done + decoded) - len(done)
        self.out.emit(decoded[: max(0, valid)])
        self.broken = True

    def complete(self) -> str:
        return self.out.completion(self.broken)

    def cut(self) -> str:
        args = self.out.text()
        return closing_text(args) if args else "{}"


class PythonArguments:
    """``tool-args-py``: a Python-literal dict, delivered whole as JSON once complete."""

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.broken = False
        self.delivered = False

    def advance(self, node: Node, text: str) -> None:
        if node.tag == tags.TOOL_ARGS_PY_BAD:
            if not self.broken:
                if not self.out.pieces:
                    self.out.emit(python_prefix_json(node.text(text)))
                    self.delivered = True
                self.broken = True
            return
        if self.delivered or not node.complete:
            return
        self.out.emit(python_dict_json(node.text(text)))
        self.delivered = True

    def complete(self) -> str:
        return self.out.completion(self.broken)

    def cut(self) -> str:
        return "" if self.out.pieces else "{}"


class TaggedArguments:
    """``tool-arg`` nodes -> JSON by appending: ``{``, ``"key": ``, value, ``, ``..., ``}``.

    String values (raw text) stream as escaped JSON strings. JSON and Python-literal values
    are short and may still turn out to be written another way (``{'a'`` is not JSON), so
    each is delivered whole once its node is complete; so are values of a format's own
    tags, through its converters.
    """

    broken = False

    def __init__(self, out: ArgumentText, converters: ValueConverters) -> None:
        self.out = out
        self.converters = converters
        self.done = 0  # tool-arg nodes fully emitted
        self.named = False  # the current argument's key was emitted
        self.string = False  # ... and its value is a streaming string (opening quote sent)
        self.value: Node | None = None  # the current argument's value node, if any
        self.value_done = 0  # raw characters of the current string value consumed
        self.lead_checked = False  # the leading newline of a string value was looked at
        self.held = ""  # a trailing newline held back

    def advance(self, nodes: list[Node], text: str) -> None:
        if not self.out.pieces:
            self.out.emit("{")
        for k in range(self.done, len(nodes)):
            arg = nodes[k]
            name_node = value_node = None
            for child in arg.children:
                if child.tag == tags.TOOL_ARG_NAME:
                    name_node = child
                elif child.tag in _VALUE_TAGS or child.tag in self.converters:
                    value_node = child
            if not self.named:
                if name_node is None or not name_node.complete:
                    return
                key = json.dumps(name_node.text(text), ensure_ascii=False)
                self.out.emit(f"{', ' if k else ''}{key}: ")
                self.named = True
            self.value = value_node
            if value_node is not None and value_node.tag in _STRING_TAGS:
                if not self.string:
                    self.string = True
                    self.out.emit('"')
                length = value_node.end - value_node.start
                if length > self.value_done:
                    raw = text[value_node.start + self.value_done : value_node.end]
                    self.value_done = length
                    self.out.emit(self._string_piece(value_node, raw))
            if not arg.complete:
                return
            self.out.emit(self._value_end(text))
            self.done = k + 1
            self.named = False
            self.string = False
            self.value = None
            self.value_done = 0
            self.lead_checked = False
            self.held = ""

    def _value_end(self, text: str) -> str:
        """What ends the current argument's value: a quote, null or the whole value."""
        if self.string:
            return '"'
        if self.value is None:
            return "null"
        return self._whole_value(self.value, text)

    def _string_piece(self, node: Node, raw: str) -> str:
        """Escaped raw text; one leading and one trailing newline of the value dropped."""
        if node.tag == tags.TOOL_ARG_TEXT:
            return escape_json(raw)  # a quoted value: exactly as written
        if not self.lead_checked and raw:
            self.lead_checked = True
            if raw.startswith("\n"):
                raw = raw[1:]
        combined = self.held + raw
        if combined.endswith("\n"):
            self.held = "\n"
            combined = combined[:-1]
        else:
            self.held = ""
        return escape_json(combined)

    def _whole_value(self, node: Node, text: str) -> str:
        """A complete (or, at the end, truncated) non-string value as JSON text."""
        raw = node.text(text).strip()
        convert = self.converters.get(node.tag or "")
        if convert is not None:
            return convert(raw)
        if node.tag == tags.TOOL_ARG_PY:
            return python_value_json(raw)
        if node.complete or valid_json(raw):
            return raw
        closer = node.closer if valid_json(raw + node.closer) else json_closer(raw)
        return raw + closer if valid_json(raw + closer) else "null"

    def complete(self) -> str | None:
        if self.named:
            return None  # an argument is still open (cannot happen when complete)
        return "}" if self.out.pieces else "{}"

    def cut(self, text: str) -> str:
        return (self._value_end(text) if self.named else "") + "}"


ArgumentStreamer = JsonArguments | EncodedArguments | PythonArguments
