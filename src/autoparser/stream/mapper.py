"""Parse trees -> OpenAI message fields and deltas, appending only.

After each chunk the stream parser hands the mapper the (small) tree of tagged nodes. For
every output field the mapper keeps how much it has already emitted, so it only ever
slices the *new* part of a node's span: the cost per chunk is the size of the chunk plus
the number of tagged nodes, never the length of the text so far. Arguments are handled by
one streamer per encoding (``stream/arguments.py``). See docs/streaming.md.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any

from autoparser import tags
from autoparser.message import ChatMessage, ToolCall
from autoparser.peg import Node
from autoparser.stream.arguments import (
    ArgumentStreamer,
    ArgumentText,
    EncodedArguments,
    JsonArguments,
    PythonArguments,
    TaggedArguments,
    ValueConverters,
)

_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ID_TABLE = bytes(ord(_ID_ALPHABET[b % len(_ID_ALPHABET)]) for b in range(256))


class CallIds:
    """Tool call ids for calls the model gave none: ``call_`` + 24 random characters.

    The k-th generated id depends only on the seed and k, so ``parse`` and ``stream`` of
    the same ``ChatParams`` agree, while two requests (two seeds) get different ids.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = random.SystemRandom().getrandbits(64) if seed is None else seed

    def __call__(self, index: int) -> str:
        # A keyed hash, not a seeded random.Random: seeding the Mersenne Twister from a
        # string cost more than parsing a whole short output. Each byte picks a character
        # (byte % 62: the first 8 characters slightly likelier; ~190 bits per id).
        digest = hashlib.blake2b(f"{self.seed}:{index}".encode(), digest_size=24).digest()
        return "call_" + digest.translate(_ID_TABLE).decode("ascii")


class CallIdPolicy:
    """Where a call's id comes from: the model's own, or generated.

    ``expects_call_ids``: the format writes ids, so a call is announced only once its id
    is complete. ``model_ids=False``: what the format writes in the id position is not an
    id (Kimi-K2 writes the call's index, ``functions.f:0``), so ids are generated.
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


# Tags of a call's arguments node -> the streamer of that encoding.
_JSON_TAGS = (tags.TOOL_ARGS, tags.TOOL_ARGS_BAD)
_ENCODED_TAGS = (tags.TOOL_ARGS_STR, tags.TOOL_ARGS_STR_BAD)
_PYTHON_TAGS = (tags.TOOL_ARGS_PY, tags.TOOL_ARGS_PY_BAD)
_ARGS_TAGS = (*_JSON_TAGS, *_ENCODED_TAGS, *_PYTHON_TAGS)


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
    """Streaming state of one tool call: announcement, then its arguments' streamer."""

    def __init__(self, index: int, events: list[tuple[str, int, str]]) -> None:
        self.index = index
        self.announced = False
        self.closed = False
        self.id = ""
        self.name = ""
        self.events = events
        self.out = ArgumentText(self._sink)
        self.args: ArgumentStreamer | None = None
        self.tagged: TaggedArguments | None = None

    def _sink(self, piece: str) -> None:
        if self.announced:
            self.events.append(("args", self.index, piece))

    def streamer(self, tag: str) -> ArgumentStreamer:
        """The streamer for an arguments node of this tag (kept while the encoding holds)."""
        kind: type[ArgumentStreamer] = (
            JsonArguments
            if tag in _JSON_TAGS
            else EncodedArguments
            if tag in _ENCODED_TAGS
            else PythonArguments
        )
        if not isinstance(self.args, kind):
            self.args = kind(self.out)
        return self.args

    @property
    def broken(self) -> bool:
        return self.args is not None and self.args.broken

    def complete(self) -> str | None:
        """The text closing the arguments of a call whose node is complete."""
        if self.tagged is not None:
            return self.tagged.complete()
        return self.args.complete() if self.args is not None else "{}"

    def cut(self, text: str) -> str:
        """The text closing the arguments of a call cut off by the end of generation."""
        if self.tagged is not None:
            return self.tagged.cut(text)
        return self.args.cut() if self.args is not None else "{}"


class Mapper:
    """Turns successive parse trees of a growing text into appended pieces per field."""

    def __init__(self, policy: CallIdPolicy, converters: ValueConverters) -> None:
        self.policy = policy
        self.converters = converters
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
            self.push_content(self.content.advance(content, text))
        for i, node in enumerate(calls):
            if i < len(self.calls) and self.calls[i].closed:
                continue
            if not self._advance_call(i, node, text):
                break

    def push_content(self, piece: str) -> None:
        if piece:
            self.events.append(("content", -1, piece))

    def _advance_call(self, i: int, node: Node, text: str) -> bool:
        """Advance call i; False when later calls must wait (this one is not announced)."""
        if i == len(self.calls):
            self.calls.append(_Call(i, self.events))
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
            if self.policy.expects_call_ids and not id_ready and not node.complete:
                return False
            call.name = name_node.text(text)
            call.id = id_node.text(text) if id_ready and id_node and self.policy.model_ids else ""
            if not call.id:
                call.id = self.policy.call_ids(i)
            if arg_nodes:
                call.tagged = TaggedArguments(call.out, self.converters)
            call.announced = True
            self.events.append(("call", i, ""))
            if call.out.pieces:  # arguments gathered before the announcement
                self.events.append(("args", i, call.out.text()))
        if args_node is not None:
            call.streamer(args_node.tag or "").advance(args_node, text)
            if call.broken:
                self.truncated = True
        elif arg_nodes or call.tagged is not None:
            if call.tagged is None:
                call.tagged = TaggedArguments(call.out, self.converters)
            call.tagged.advance(arg_nodes, text)
        if node.complete and not call.closed:
            closing = call.complete()
            if closing is None:
                return True
            call.out.emit(closing)
            call.closed = True
        return True

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
            call.out.emit(call.cut(text))
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
            ToolCall(id=c.id, name=c.name, arguments=c.out.text())
            for c in self.calls
            if c.announced
        ]
        return ChatMessage(
            content=self.content.value(),
            reasoning_content=self.reasoning.value(),
            tool_calls=calls,
            truncated=self.truncated,
        )
