"""One small streamer per argument encoding: each turns successive argument nodes of one
call into appended JSON text.

Encodings (by the tag of the node(s) a format writes, see ``autoparser.tags``):

- ``JsonArguments``: a JSON object as written (``tool-args``), streamed as is;
- ``EncodedArguments``: a JSON string holding the object's text (``tool-args-str``),
  streamed decoded, escape by escape;
- ``PythonArguments``: a Python-literal dict (``tool-args-py``), delivered whole once
  complete;
- ``TaggedArguments``: one node per argument (``tool-arg``), assembled into an object.

Each writes to the call's ``ArgumentText`` and exposes ``invalid`` (what was written is
not a JSON object: the call is not a call, its text is content) and ``complete()`` (the
text that ends the arguments once the call's node is complete). Arguments are never
repaired: the text emitted is the model's own, converted, or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import NamedTuple

from autoparser import tags
from autoparser.peg import IncrementalParse, Node, ParseStatus
from autoparser.stream.repair import (
    JSON_OBJECT_PROBE,
    escape_json,
    json_object_text,
    python_dict_json,
    python_value_json,
    safe_escape_cut,
)

ValueConverters = Mapping[str, Callable[[str], str | None]]


class ArgumentText:
    """The argument text one call has emitted so far; new pieces also go to ``sink``
    (None: a call read whole, whose pieces go nowhere else)."""

    __slots__ = ("pieces", "sink")

    def __init__(self, sink: Callable[[str], None] | None) -> None:
        self.pieces: list[str] = []
        self.sink = sink

    def emit(self, piece: str) -> None:
        if piece:
            self.pieces.append(piece)
            if self.sink is not None:
                self.sink(piece)

    def text(self) -> str:
        return "".join(self.pieces)


class JsonArguments:
    """``tool-args``: the object's text, as written."""

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.invalid = False
        self.done = 0  # characters of the node's text already emitted

    def advance(self, node: Node, text: str) -> None:
        length = node.end - node.start
        if length > self.done:
            self.out.emit(text[node.start + self.done : node.end])
            self.done = length

    def extend(self, piece: str) -> None:
        """The node grew by ``piece`` past what was emitted (a stream's moved feed)."""
        self.done += len(piece)
        self.out.emit(piece)

    def complete(self) -> str:
        if not self.out.pieces:
            return "{}"
        self.invalid = not json_object_text(self.out.text())
        return ""


class EncodedArguments:
    """``tool-args-str``: a JSON string whose value is the arguments' JSON text.

    The decoded text streams as it arrives while it can still be the start of a JSON
    object (an incremental parse of the decoded text); once it cannot, or the string ends
    before or after its object does, the arguments are invalid.
    """

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.invalid = False
        self.done = 0  # characters of the string body consumed
        self.held = ""  # an escape sequence not complete yet
        self.inner: IncrementalParse | None = None  # the decoded JSON so far

    def advance(self, node: Node, text: str) -> None:
        body_end = node.end - 1 if node.complete else node.end
        start = node.start + 1 + self.done  # after the opening quote
        if self.invalid or (body_end <= start and not node.complete):
            return
        pending = self.held + text[start:body_end]
        self.done = max(self.done, body_end - node.start - 1)
        cut = len(pending) if node.complete else safe_escape_cut(pending)
        self.held = pending[cut:]
        if cut:
            try:
                decoded = json.loads('"' + pending[:cut] + '"')
            except ValueError:
                self.invalid = True
                return
            self._emit_decoded(decoded)

    def _emit_decoded(self, decoded: str) -> None:
        if not decoded:
            return
        if self.inner is None:
            self.inner = JSON_OBJECT_PROBE.incremental()
        if self.inner.feed(decoded).status == ParseStatus.FAIL:
            self.invalid = True
            return
        self.out.emit(decoded)

    def complete(self) -> str:
        if not self.invalid and not json_object_text(self.out.text()):
            self.invalid = True
        return ""


class PythonArguments:
    """``tool-args-py``: a Python-literal dict, delivered whole as JSON once complete."""

    def __init__(self, out: ArgumentText) -> None:
        self.out = out
        self.invalid = False
        self.delivered = False

    def advance(self, node: Node, text: str) -> None:
        if self.delivered or not node.complete:
            return
        self.delivered = True
        converted = python_dict_json(node.text(text))
        if converted is None:
            self.invalid = True
        else:
            self.out.emit(converted)

    def complete(self) -> str:
        return "" if self.out.pieces or self.invalid else "{}"


class TaggedArguments:
    """``tool-arg`` nodes -> JSON by appending: ``{``, ``"key": ``, value, ``, ``..., ``}``.

    String values (raw text) stream as escaped JSON strings. JSON and Python-literal values
    are short and may still turn out to be written another way (``{'a'`` is not JSON), so
    each is delivered whole once its node is complete; so are values of a format's own
    tags, through its converters.
    """

    def __init__(self, out: ArgumentText, converters: ValueConverters) -> None:
        self.out = out
        self.invalid = False  # a value is neither JSON nor a Python literal
        self.converters = converters
        self.done = 0  # tool-arg nodes fully emitted
        self.named = False  # the current argument's key was emitted
        self.string = False  # ... and its value is a streaming string (opening quote sent)
        self.value: Node | None = None  # the current argument's value node, if any
        self.value_done = 0  # raw characters of the current string value consumed
        self.lead_checked = False  # the leading newline of a string value was looked at
        self.held = ""  # trailing whitespace held back (see _string_piece)
        # Names of arguments read by the format's markers alone (the schema does not
        # declare them); one attribute test per argument on the normal path.
        self.undeclared: list[str] | None = None
        # Names of arguments whose value did not read as their type (kept as the text).
        self.mistyped: list[str] | None = None
        self.names: list[str] = []  # the arguments' names, as read (the current one last)

    def advance(self, nodes: list[Node], text: str) -> None:
        if not self.out.pieces:
            self.out.emit("{")
        for k in range(self.done, len(nodes) if not self.invalid else 0):
            arg = nodes[k]
            name_node = value_node = None
            for child in arg.children:
                if child.tag == tags.TOOL_ARG_NAME:
                    name_node = child
                elif child.tag in tags.VALUE_SPECS or child.tag in self.converters:
                    value_node = child
            if not self.named:
                if name_node is None or not name_node.complete:
                    return
                name = name_node.text(text)
                if name_node.children and name_node.children[0].tag == tags.TOOL_ARG_UNDECLARED:
                    self.undeclared = [*(self.undeclared or ()), name]
                decode = self.converters.get(tags.TOOL_ARG_NAME)  # escaped names
                name = (decode(name) if decode else None) or name
                self.names.append(name)
                self.out.emit(f"{', ' if k else ''}{encode_basestring(name)}: ")
                self.named = True
            self.value = value_node
            if value_node is not None and value_node.tag in tags.STRING_VALUES:
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
            end = self._value_end(text)
            value = self.value
            if (
                self.string
                and self.held
                and value is not None
                and value.tag not in tags.TRIMS_TRAIL
                and arg.end > value.end
            ):
                end = escape_json(self.held) + end  # closed: the whitespace is its own
            self.out.emit(end)
            self.done = k + 1
            self.named = False
            self.string = False
            self.value = None
            self.value_done = 0
            self.lead_checked = False
            self.held = ""

    def extend(self, raw: str) -> None:
        """The string value being streamed grew by ``raw`` (a stream's moved feed)."""
        assert self.value is not None
        self.value_done += len(raw)
        self.out.emit(self._string_piece(self.value, raw))

    def _value_end(self, text: str) -> str:
        """What ends the current (complete) argument's value: a quote, null or the value.

        A value read by the format's markers alone (up to its closer) that does not
        convert to its type is kept as the text the model wrote, a JSON string, and its
        argument named in ``mistyped``: one bad value does not cost the call.
        """
        if self.string:
            return '"'
        if self.value is None:
            return "null"
        raw = self.value.text(text).strip()
        value = converted_value(raw, self.value.tag, self.converters)
        if value is None:
            self.mistyped = [*(self.mistyped or ()), self.names[-1]]
            return encode_basestring(raw)
        return value

    def _string_piece(self, node: Node, raw: str) -> str:
        """Escaped raw text; one leading and one trailing newline of the value dropped
        where the template pads it (by the node's tag), nothing elsewhere."""
        if not self.lead_checked and raw:
            self.lead_checked = True
            if raw.startswith("\n") and node.tag in tags.TRIMS_LEAD:
                raw = raw[1:]
        if node.tag not in tags.TRIMS_TRAIL:
            # Trailing whitespace waits: it is the value's if the value suffix follows,
            # the joint's if the value ends unclosed at the next marker (``_value_end``).
            combined = self.held + raw
            core = combined.rstrip(" \t\r\n")
            self.held = combined[len(core) :]
            return escape_json(core)
        combined = self.held + raw
        if combined.endswith("\n"):
            self.held = "\n"
            combined = combined[:-1]
        else:
            self.held = ""
        return escape_json(combined)

    def complete(self) -> str:
        return "}" if self.out.pieces else "{}"


def converted_value(raw: str, tag: str | None, converters: ValueConverters) -> str | None:
    """A complete non-string value's JSON text (``raw`` stripped): by the format's own
    converter of its tag, as a Python literal where its tag says so, else as written (JSON
    the parse already read); None where it does not convert. What the streamer and the
    one-shot reader of tagged arguments both deliver."""
    convert = converters.get(tag or "")
    if convert is not None:
        return convert(raw)
    spec = tags.VALUE_SPECS.get(tag or "")
    return python_value_json(raw) if spec is not None and spec.decoder == "python" else raw


class TaggedRead(NamedTuple):
    """A complete tagged call's arguments read at once (``tagged_object``)."""

    arguments: str  # the JSON object text
    names: list[str]  # the arguments' names, as read
    undeclared: list[str] | None  # names the schema does not declare (None: none)
    mistyped: list[str] | None  # names whose value did not read as its type (None: none)


def tagged_object(nodes: Sequence[Node], text: str, converters: ValueConverters) -> TaggedRead:
    """The JSON object text that complete ``tool-arg`` nodes give, read at once:
    what ``TaggedArguments`` streams from the same nodes (tests/stream/test_arguments.py
    holds them equal), without its per-piece state. A value that does not convert to its
    type is kept as the text written, a JSON string, and its name is in ``mistyped``."""
    parts = ["{"]
    names: list[str] = []
    undeclared: list[str] | None = None
    mistyped: list[str] | None = None
    decode = converters.get(tags.TOOL_ARG_NAME)  # escaped names
    specs = tags.VALUE_SPECS
    for k, arg in enumerate(nodes):
        name_node = value = None
        for child in arg.children:
            if child.tag == tags.TOOL_ARG_NAME:
                name_node = child
            elif child.tag in specs or child.tag in converters:
                value = child
        if name_node is None or not name_node.complete:
            break
        name = text[name_node.start : name_node.end]
        if name_node.children and name_node.children[0].tag == tags.TOOL_ARG_UNDECLARED:
            undeclared = [*(undeclared or ()), name]
        name = (decode(name) if decode else None) or name
        names.append(name)
        key = encode_basestring(name)
        parts.append(f", {key}: " if k else f"{key}: ")
        tag = value.tag if value is not None else None
        if value is not None and tag in tags.STRING_VALUES:
            raw = text[value.start : value.end]
            if raw.startswith("\n") and tag in tags.TRIMS_LEAD:
                raw = raw[1:]
            if tag in tags.TRIMS_TRAIL:
                body = raw[:-1] if raw.endswith("\n") else raw
            elif arg.end > value.end:  # closed by its suffix: trailing whitespace is its own
                body = raw
            else:
                body = raw.rstrip(" \t\r\n")
            parts.append(encode_basestring(body))
            continue
        if value is None:
            parts.append("null")
            continue
        raw = text[value.start : value.end].strip()
        end = converted_value(raw, tag, converters)
        if end is None:
            mistyped = [*(mistyped or ()), name]
            end = encode_basestring(raw)
        parts.append(end)
    parts.append("}")
    return TaggedRead("".join(parts), names, undeclared, mistyped)


ArgumentStreamer = JsonArguments | EncodedArguments | PythonArguments
