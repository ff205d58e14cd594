"""Parse trees -> OpenAI message fields and deltas, appending only.

After each chunk the stream parser hands the mapper the (small) tree of tagged nodes. For
every output field the mapper keeps how much it has already emitted, so it only ever
slices the *new* part of a node's span: the cost per chunk is the size of the chunk plus
the number of tagged nodes, never the length of the text so far. Arguments are handled by
one streamer per encoding (``stream/arguments.py``). See docs/streaming.md.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from autoparser import tags
from autoparser.errors import RequestError
from autoparser.message import (
    TOLERANCES,
    ChatMessage,
    Finding,
    FindingKind,
    FindingOutcome,
    ToolCall,
)
from autoparser.peg import Node
from autoparser.stream.arguments import (
    ArgumentStreamer,
    ArgumentText,
    EncodedArguments,
    JsonArguments,
    PythonArguments,
    TaggedArguments,
    ValueConverters,
    tagged_object,
)
from autoparser.stream.delta import StreamDelta, ToolCallDelta
from autoparser.stream.repair import json_object_text

_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ID_TABLE = bytes(ord(_ID_ALPHABET[b % len(_ID_ALPHABET)]) for b in range(256))


class CallIds:
    """Tool call ids for calls the model gave none: ``call_`` + 24 random characters.

    The id depends only on the seed and a key: where the call starts in the output. So
    ``parse`` and ``stream`` of the same ``ChatParams`` agree however the output is split,
    a call a stream announced and then dropped never shares its id with a later call, and
    two requests (two seeds) get different ids.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = random.SystemRandom().getrandbits(64) if seed is None else seed
        # The hash of "SEED:" once: each id copies it and adds its key (a third cheaper
        # than hashing the whole message again).
        self._seeded = hashlib.blake2b(f"{self.seed}:".encode(), digest_size=24)

    def __call__(self, key: int) -> str:
        # A keyed hash, not a seeded random.Random: seeding the Mersenne Twister from a
        # string cost more than parsing a whole short output. Each byte picks a character
        # (byte % 62: the first 8 characters slightly likelier; ~190 bits per id).
        hashed = self._seeded.copy()
        hashed.update(b"%d" % key)
        return "call_" + hashed.digest().translate(_ID_TABLE).decode("ascii")


class CallIdPolicy:
    """Where a call's id comes from: the model's own, or generated.

    ``expects_call_ids``: the format writes ids, so a call is announced only once its id
    is complete. ``model_ids=False``: what the format writes in the id position is not an
    id (Kimi-K2 writes the call's index, ``functions.f:0``), so ids are generated.
    ``call_ids(key)`` generates one from where the call starts in the output.
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


# The streamer of each encoding of a call's whole arguments (``tags.WHOLE_ARGUMENTS``).
_STREAMERS: Mapping[str, type[ArgumentStreamer]] = {
    "json": JsonArguments,
    "encoded": EncodedArguments,
    "python": PythonArguments,
}

TOOL_CALL_DELTAS = ("whole", "incremental")
"""The streaming policies for tool calls (``tool_call_deltas``), the default first."""

Span = tuple[int, int]
_LEAD = 8  # whitespace a content span may start with before a call opener
_NO_FINDINGS: Mapping[tuple[int, str, str], Finding] = types.MappingProxyType({})
_NO_REQUIRED: Mapping[str, tuple[str, ...]] = types.MappingProxyType({})


def check_tolerance(value: object) -> str:
    """The tolerance policy's name, or a RequestError naming the option and its values."""
    if not isinstance(value, str) or value not in TOLERANCES:
        raise RequestError(
            f"tolerance: must be one of {', '.join(map(repr, TOLERANCES))}, got {value!r}"
        )
    return value


def check_tool_call_deltas(value: object) -> str:
    """The policy name, or a RequestError naming the option and its values."""
    if not isinstance(value, str) or value not in TOOL_CALL_DELTAS:
        raise RequestError(
            f"tool_call_deltas: must be one of {', '.join(map(repr, TOOL_CALL_DELTAS))}, "
            f"got {value!r}"
        )
    return value


class _TextField:
    """One text field (content or reasoning): strips leading/trailing whitespace lazily.

    ``raw_done`` counts raw characters already consumed (over the concatenation of the
    field's spans); trailing whitespace is held back until more text follows it, so the
    final value is ``raw.strip()`` however the text was split.
    """

    __slots__ = ("at", "held", "key", "pieces", "raw_done", "started")

    def __init__(self, key: str) -> None:
        self.key = key
        self.raw_done = 0
        self.at = 0  # where the raw text consumed ends, as a position in the last span
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

    def advance(self, spans: list[Span], text: str) -> str:
        total = 0
        end = 0
        out: list[str] = []
        for start, end in spans:
            length = end - start
            if total + length > self.raw_done:
                piece = self.push(text[start + self.raw_done - total : end])
                if piece:
                    out.append(piece)
            total += length
        # Past the last span's end if an earlier tree's spans were longer (the text
        # consumed then is not sent again).
        self.at = end + self.raw_done - total
        return "".join(out)

    def value(self) -> str | None:
        return "".join(self.pieces) if self.pieces else None


class _Call:
    """Streaming state of one tool call: announcement, then its arguments' streamer."""

    __slots__ = ("args", "events", "id", "index", "name", "out", "start", "tagged")

    def __init__(self, start: int, events: list[tuple[str, int, str]] | None) -> None:
        """``events``: where its argument pieces go once it is announced; None for a call
        only read whole (``Mapper.read_call``), which is never announced."""
        self.start = start  # where the call's node starts in the output (its identity)
        self.index = -1  # its delta index, once announced
        self.id = ""
        self.name = ""
        self.events = events
        self.out = ArgumentText(None if events is None else self._sink)
        self.args: ArgumentStreamer | None = None
        self.tagged: TaggedArguments | None = None

    @property
    def announced(self) -> bool:
        return self.index >= 0

    def _sink(self, piece: str) -> None:
        if self.index >= 0 and self.events is not None:  # announced
            self.events.append(("args", self.index, piece))

    def advance(self, node: Node, text: str, converters: ValueConverters) -> None:
        """Feed the arguments written so far to the streamer of their encoding."""
        arg_nodes: list[Node] = []
        for child in node.children:
            encoding = tags.WHOLE_ARGUMENTS.get(child.tag or "")
            if encoding is not None:
                self._streamer(encoding).advance(child, text)
            elif child.tag == tags.TOOL_ARG:
                arg_nodes.append(child)
        if arg_nodes or self.tagged is not None:
            if self.tagged is None:
                self.tagged = TaggedArguments(self.out, converters)
            self.tagged.advance(arg_nodes, text)

    def _streamer(self, encoding: str) -> ArgumentStreamer:
        kind = _STREAMERS[encoding]
        if not isinstance(self.args, kind):
            self.args = kind(self.out)
        return self.args

    @property
    def invalid(self) -> bool:
        return (self.args is not None and self.args.invalid) or (
            self.tagged is not None and self.tagged.invalid
        )

    def complete(self) -> str:
        """The text that ends the arguments of a call whose node is complete."""
        if self.tagged is not None:
            return self.tagged.complete()
        return self.args.complete() if self.args is not None else "{}"


def _delta(kind: str, index: int, head: _Call | None, pieces: list[str]) -> StreamDelta:
    """One delta of ``take_deltas``: the pieces of a text field, or of call ``index``'s
    arguments (announced by it when ``head`` is the call)."""
    text = pieces[0] if len(pieces) == 1 else "".join(pieces)
    if kind == "content":
        return StreamDelta.of(text)
    if kind == "reasoning_content":
        return StreamDelta.of(None, text)
    if head is None:
        return StreamDelta.of(None, None, (ToolCallDelta.of(index, text),))
    return StreamDelta.of(None, None, (ToolCallDelta.of(index, text, head.id, head.name),))


def spans_end(*fields: list[Span]) -> int:
    """Where the last span of any of the fields ends (0 without one)."""
    return max((spans[-1][1] for spans in fields if spans), default=0)


def call_identity(policy: CallIdPolicy, node: Node, text: str) -> tuple[str, str] | None:
    """A call node's name and id; None while they are not complete yet."""
    name = cid = None
    for child in node.children:  # one pass for both (the first of each tag)
        if child.tag == tags.TOOL_NAME and name is None:
            name = child
        elif child.tag == tags.TOOL_ID and cid is None:
            cid = child
    if name is None or not name.complete:
        return None
    id_ready = cid is not None and cid.complete
    if policy.expects_call_ids and not id_ready and not node.complete:
        return None
    call_id = cid.text(text) if cid is not None and id_ready and policy.model_ids else ""
    # Else by where the call starts: the same id in parse() and in any stream, and never
    # the id of a call a stream announced and then dropped.
    return name.text(text), call_id or policy.call_ids(node.start)


def _child(node: Node, tag: str) -> Node | None:
    for c in node.children:
        if c.tag == tag:
            return c
    return None


class Walked(NamedTuple):
    """What a tree's top-level nodes give the message (``walk_tree``): the spans of each
    text field, and the call the tree ends inside, if any."""

    reasoning: list[Span]
    content: list[Span]
    pending: Node | None  # a call node not complete yet (the walk stopped there)
    lead: int  # where the pending call's text would start, as content
    pending_spans: list[Span]  # the field that text would join (reasoning or content)
    end: int  # where the last node walked ends (untagged text follows)
    reasoned: Sequence[Span]  # calls of the message written inside a reasoning block
    wrappers: Sequence[Span]  # special tokens around calls, dropped as markup


def walk_tree(tree: Node, settle: Callable[[Node], bool]) -> Walked:
    """The one tree -> message walk: which top-level node is reasoning, content or a call.

    A stream runs it on every tree of its growing text (``Mapper.advance``), a one-shot
    parse once on its final tree (``whole_message``): the rules cannot diverge.
    ``settle(node)`` reads a complete call node: a call of the message (True), or not a
    call (False), whose raw text then joins the field around it.
    """
    reasoning: list[Span] = []
    content: list[Span] = []
    reasoned: Sequence[Span] = ()  # a list of its own at the first such call
    wrappers: Sequence[Span] = ()  # likewise
    prev_end = 0  # where the untagged text before the next node starts
    after_call = False  # the previous node is a call of the message
    in_reasoning = False  # the last text node was reasoning (calls_in_reasoning)
    in_block = False  # inside a reasoning block (a call there ends it with an empty close)
    for child in tree.children:
        tag = child.tag
        if tag == tags.TOOL:
            # The raw text of a call that is not one: with the markers before it,
            # unless those close the call before it; where the call was written.
            lead = child.start if after_call else prev_end
            spans = reasoning if in_reasoning else content
            if not child.complete:
                return Walked(reasoning, content, child, lead, spans, prev_end, reasoned, wrappers)
            if settle(child):
                after_call = True
                if in_block:
                    reasoned = [*reasoned, (child.start, child.end)]
            else:
                spans.append((lead, child.end))
                after_call = False
            prev_end = child.end
            continue
        if tag == tags.WRAPPER_TOKEN:
            # Markup around calls: in no field, reported with its text at the end.
            wrappers = [*wrappers, (child.start, child.end)]
            prev_end = child.end
            continue
        if tag == tags.TOOL_SECTION_END:
            if not after_call and prev_end and spans_end(content, reasoning) == prev_end:
                # It closes a call that is content: it is content too.
                (reasoning if in_reasoning else content).append((prev_end, child.end))
            prev_end = child.end
            continue
        if tag == tags.REASONING:
            reasoning.append((child.start, child.end))
            in_reasoning = in_block = True
        else:
            in_reasoning = False
            if in_block:
                # A close node that reads nothing: a call ended the block, written inside it.
                in_block = tag == tags.REASONING_CLOSE and child.start == child.end
            if tag == tags.CONTENT:
                content.append((child.start, child.end))
        prev_end = child.end
        after_call = False
    return Walked(reasoning, content, None, prev_end, content, prev_end, reasoned, wrappers)


@functools.lru_cache(maxsize=256)
def _markup_openers(
    openers: tuple[str, ...],
) -> tuple[tuple[str, ...], re.Pattern[str] | None, frozenset[str]]:
    """Call openers long enough to be markup, longest first (one alone at the end is
    dropped), and the pattern of one at the start of a content span after a little
    whitespace (see ``Mapper._note_unread_calls``; None without openers) with the
    characters such a span can start with; worked out once per format, not per stream."""
    markup = tuple(sorted({m.strip() for m in openers if len(m.strip()) > 1}, key=len)[::-1])
    if not markup:
        return markup, None, frozenset()
    unread = re.compile(rf"\s{{0,{_LEAD}}}(?:{'|'.join(map(re.escape, markup))})")
    return markup, unread, frozenset({m[0] for m in markup} | set(" \t\r\n"))


class Mapper:
    """Turns successive parse trees of a growing text into appended pieces per field.

    ``incremental``: announce a call once its name is complete and stream its arguments
    (``tool_call_deltas="incremental"``); otherwise a call is announced, whole, once its
    node is complete and its arguments valid. A call that turns out not to be one (its
    arguments invalid, or the output ended inside it) becomes content; if it was already
    announced, its delta index is listed in ``dropped``.

    The one tree -> message walk: a stream maps each tree of its growing text, a one-shot
    parse (``parse_text``) maps its final tree once, by the same ``advance``.
    ``json_end(pos)``: where a JSON value the parse already read whole at ``pos`` ends (-1:
    none), so that arguments written as such an object are not checked again.
    """

    # Class-level defaults: a parse with nothing to report allocates nothing for them.
    reject = False  # tolerance="reject"
    # Each tool's required argument names, where calls are read argument by argument.
    required: Mapping[str, tuple[str, ...]] = _NO_REQUIRED
    # What was tolerated or refused, by (where, kind, what): a stream may read a call node
    # in several trees; the message lists each once, in output order. Replaced by a dict
    # of this mapper's own at its first finding (``note``).
    findings: Mapping[tuple[int, str, str], Finding] = _NO_FINDINGS

    def __init__(
        self,
        policy: CallIdPolicy,
        converters: ValueConverters,
        *,
        incremental: bool = False,
        openers: Sequence[str] = (),
        json_end: Callable[[int], int] = lambda pos: -1,
        tolerance: str = "keep",
        required: Mapping[str, tuple[str, ...]] = _NO_REQUIRED,
    ) -> None:
        self._reader(policy, converters, openers, json_end, tolerance, required)
        self.incremental = incremental
        self.reasoning = _TextField(tags.TEXT_FIELDS[tags.REASONING])
        self.content = _TextField(tags.TEXT_FIELDS[tags.CONTENT])
        self.announced: list[_Call] = []  # every call announced, by delta index
        self.calls: list[_Call] = []  # the message's calls, in order
        self.verdicts: dict[int, bool] = {}  # complete call nodes by start: valid?
        self.open: _Call | None = None  # the call being written (incremental policy)
        self.dropped: list[int] = []  # delta indexes of announced calls that were not calls
        self.given_up: set[int] = set()  # starts of calls dropped while being written
        self.events: list[tuple[str, int, str]] = []
        # What moving the end of the last tree's unfinished path (its last node at each
        # level, see IncrementalParse.resume) changes: the text field, or the JSON
        # arguments of the call being streamed, that grow (what they hold so far ends
        # at tail_end); or a whole advance (tail_reparse: another part of a call being
        # streamed); or nothing (a call not announced before it is whole, any other
        # node).
        self.tail: _TextField | JsonArguments | TaggedArguments | None = None
        self.tail_end = 0
        self.tail_reparse = False

    @classmethod
    def reader(
        cls,
        policy: CallIdPolicy,
        converters: ValueConverters,
        *,
        openers: Sequence[str] = (),
        json_end: Callable[[int], int] = lambda pos: -1,
        tolerance: str = "keep",
        required: Mapping[str, tuple[str, ...]] = _NO_REQUIRED,
    ) -> Mapper:
        """A mapper that only reads one final tree (``whole_message``): what reading calls,
        the end of output and findings need, none of a stream's state (an output's parse
        paid more for it than for mapping a short message)."""
        mapper = cls.__new__(cls)
        mapper._reader(policy, converters, openers, json_end, tolerance, required)
        return mapper

    def _reader(
        self,
        policy: CallIdPolicy,
        converters: ValueConverters,
        openers: Sequence[str],
        json_end: Callable[[int], int],
        tolerance: str,
        required: Mapping[str, tuple[str, ...]],
    ) -> None:
        """The state of reading calls and the end of output (``reader``)."""
        self.policy = policy
        if required:
            self.required = required
        if tolerance != "keep":  # checked only when not the default (once per parse)
            self.reject = check_tolerance(tolerance) == "reject"
        self.json_end = json_end
        self.converters = converters
        self.openers, self.unread, self.unread_starts = _markup_openers(tuple(openers))
        self.truncated = False
        self.truncated_call: str | None = None  # the raw text of a call cut off

    # ----------------------------------------------------------------- tree walking
    def advance(self, tree: Node, text: str, *, final: bool = False) -> None:
        """Map the tree of the text so far; ``final``: the output ended (a call still open
        in the tree was cut off: its text is content, or dropped if only openers)."""
        walked = walk_tree(tree, lambda node: self._settle(node, text))
        reasoning, content, pending = walked.reasoning, walked.content, walked.pending
        if self.open is not None and (final or pending is None or pending.start != self.open.start):
            self._drop(self.open)  # it vanished from the tree, or was cut off
        if final:
            self.end_of_output(walked, text)
        elif pending is not None and self.incremental:
            self._stream_open(pending, text)
        if reasoning:
            piece = self.reasoning.advance(reasoning, text)
            if piece:
                self.events.append((self.reasoning.key, -1, piece))
        if content:
            self.push_content(self.content.advance(content, text))
        if final:
            self.tail, self.tail_reparse = None, False  # nothing moves after the end
        else:
            self._mark_tail(tree)

    def _mark_tail(self, tree: Node) -> None:
        """Note what a move of the tree's unfinished path would change (see ``move``)."""
        last = tree.children[-1] if tree.children else None
        self.tail = None
        self.tail_reparse = False
        if last is None or last.complete:
            return  # the path ends in untagged text: the fields do not see it
        if last.tag == tags.TOOL:
            # A pending call: only the incremental policy streams it before it is whole.
            if self.incremental:
                self._mark_call_tail(last)
        elif last.tag == tags.REASONING:
            self.tail = self.reasoning
        elif last.tag == tags.CONTENT:
            self.tail = self.content
        if isinstance(self.tail, _TextField):
            self.tail_end = self.tail.at  # the node's span: its last span

    def _mark_call_tail(self, node: Node) -> None:
        """The incremental policy's pending call, once announced: what grows with the
        move when it ends the call's unfinished path, its JSON arguments or the string
        value of its last tagged argument; anything else maps the call again."""
        self.tail_reparse = True
        call = self.open
        last = node.children[-1] if node.children else None
        if (
            call is None
            or not call.announced
            or call.start != node.start
            or last is None
            or last.complete
        ):
            return
        if call.tagged is None and isinstance(call.args, JsonArguments):
            if last.tag == tags.TOOL_ARGS:
                self.tail, self.tail_reparse = call.args, False
                self.tail_end = last.start + call.args.done
            return
        tagged = call.tagged
        value = last.children[-1] if last.children else None
        if (
            call.args is None
            and tagged is not None
            and last.tag == tags.TOOL_ARG
            and value is not None
            and tagged.value is value  # the argument it is streaming, as a string
            and tagged.string
            and not value.complete
            and not tagged.invalid
        ):
            self.tail, self.tail_reparse = tagged, False
            self.tail_end = value.start + tagged.value_done

    def move(self, text: str, end: int) -> list[StreamDelta]:
        """The deltas of the last tree with its unfinished path ending at ``end`` now:
        what ``advance`` and ``take_deltas`` would give for that tree, without it (the
        last node's text field or the streamed call's JSON arguments grow; a pending
        call or untagged text shows nothing)."""
        tail = self.tail
        if tail is None or end <= self.tail_end:
            return []
        piece = text[self.tail_end : end]
        self.tail_end = end
        if isinstance(tail, _TextField):
            piece = tail.push(piece)
            if not piece:
                return []
            return [StreamDelta.of(piece) if tail is self.content else StreamDelta.of(None, piece)]
        tail.extend(piece)
        return self.take_deltas()

    def push_content(self, piece: str) -> None:
        if piece:
            self.events.append((self.content.key, -1, piece))

    def _settle(self, node: Node, text: str) -> bool:
        """A complete call node: a call of the message (True), or content.

        The verdict and the arguments come from the complete node alone, as ``parse``
        sees it. A call the incremental policy announced continues only if what it sent
        is the start of that; otherwise (its arguments shrank as the parse changed its
        mind) it is dropped and the call is announced anew.
        """
        verdict = self.verdicts.get(node.start)
        if verdict is not None:
            return verdict
        sent = self.open if self.open is not None and self.open.start == node.start else None
        if self.open is not None and sent is None:
            self._drop(self.open)
        self.open = None
        found = self.read_call(node, text)
        self.verdicts[node.start] = found is not None
        if found is None:
            if sent is not None:
                self._drop(sent)
            return False
        call = _Call(node.start, self.events)
        call.name, call.id, whole = found
        call.out.emit(whole)  # not announced yet: nothing is sent
        if sent is not None and sent.announced:
            done = sent.out.text()
            if (sent.name, sent.id) == (call.name, call.id) and whole.startswith(done):
                sent.out.emit(whole[len(done) :])
                self.calls.append(sent)
                return True
            self._drop(sent)
        self._announce(call)
        self.calls.append(call)
        return True

    def read_call(self, node: Node, text: str) -> tuple[str, str, str] | None:
        """A complete call node read whole: its name, id and arguments (JSON object text),
        or None when it is not a call (its arguments are not a JSON object). What both a
        stream (``_settle``) and a one-shot parse (``whole_message``) make of it.

        The commonest call, one JSON object as written (``tool-args``), is read without
        its streamer: the object's text is the arguments, checked unless the parse
        already read it whole as JSON (``json_end``).
        """
        args: Node | None = None
        for child in node.children:
            if child.tag in tags.ARGUMENTS:
                if args is not None or child.tag != tags.TOOL_ARGS:
                    args = None
                    break
                args = child
        else:
            if args is not None:
                identity = call_identity(self.policy, node, text)
                name, call_id = identity if identity is not None else ("", "")
                arguments = args.text(text)
                if not arguments:
                    return name, call_id, "{}"
                whole = self.json_end(args.start) == args.end and arguments[0] == "{"
                if not whole and not json_object_text(arguments):
                    self.note("invalid_arguments", "refused", node.start, node.end, name)
                    return None
                return name, call_id, arguments
        # Tagged arguments, all complete: assembled at once (else by their streamer).
        arg_nodes = [c for c in node.children if c.tag in tags.ARGUMENTS]
        if arg_nodes and all(c.tag == tags.TOOL_ARG and c.complete for c in arg_nodes):
            return self._read_tagged(node, arg_nodes, text)
        call = _Call(node.start, None)
        self._identify(call, node, text)
        call.advance(node, text, self.converters)
        closing = call.complete()
        if call.invalid:
            self.note("invalid_arguments", "refused", node.start, node.end, call.name)
            return None
        tagged = call.tagged
        if tagged is not None and not self._tolerated(
            node, call.name, tagged.undeclared, tagged.mistyped, tagged.names
        ):
            return None
        return call.name, call.id, call.out.text() + closing

    def _read_tagged(
        self, node: Node, arg_nodes: list[Node], text: str
    ) -> tuple[str, str, str] | None:
        """``read_call`` of a call whose arguments are complete ``tool-arg`` nodes: the
        object assembled at once (``tagged_object``), as their streamer would write it."""
        identity = call_identity(self.policy, node, text)
        name, call_id = identity if identity is not None else ("", "")
        read = tagged_object(arg_nodes, text, self.converters)
        if not self._tolerated(node, name, read.undeclared, read.mistyped, read.names):
            return None
        return name, call_id, read.arguments

    def _tolerated(
        self,
        node: Node,
        name: str,
        undeclared: Sequence[str] | None,
        mistyped: Sequence[str] | None,
        names: Sequence[str],
    ) -> bool:
        """A call read argument by argument, checked against what the schema-typed reading
        would refuse (an undeclared argument, a value not of its type, a required one left
        out): each noted; False when the tolerance refuses the call."""
        required = self.required.get(name)
        missing = [n for n in required if n not in names] if required else None
        if not (undeclared or mistyped or missing):
            return True
        outcome: FindingOutcome = "refused" if self.reject else "kept"
        found: tuple[tuple[FindingKind, Sequence[str] | None], ...] = (
            ("undeclared_argument", undeclared),
            ("type_mismatch", mistyped),
            ("missing_required", missing),
        )
        for kind, args in found:
            for arg in args or ():
                self.note(kind, outcome, node.start, node.end, arg)
        return not self.reject

    def note(
        self, kind: FindingKind, outcome: FindingOutcome, start: int, end: int, detail: str = ""
    ) -> None:
        """Record a finding (once per place, kind and detail)."""
        key = (start, kind, detail)
        if key not in self.findings:
            self.findings = {**self.findings, key: Finding(kind, outcome, start, end, detail)}

    def finding_list(self, call_starts: Sequence[int]) -> tuple[Finding, ...]:
        """The findings in output order, each kept call's naming its index in the
        message's ``tool_calls`` (``call_starts``: where each of those calls starts)."""
        if not self.findings:
            return ()
        index = {start: i for i, start in enumerate(call_starts)}
        out = []
        for (start, _, _), found in sorted(self.findings.items(), key=lambda kv: kv[0]):
            call = index.get(start) if found.outcome == "kept" else None
            out.append(dataclasses.replace(found, call=call) if call is not None else found)
        return tuple(out)

    def _identify(self, call: _Call, node: Node, text: str) -> bool:
        """Read the call's name and id; False while they are not complete yet."""
        found = call_identity(self.policy, node, text)
        if found is None:
            return False
        call.name, call.id = found
        return True

    def _announce(self, call: _Call) -> None:
        call.index = len(self.announced)
        self.announced.append(call)
        self.events.append(("call", call.index, ""))
        if call.out.pieces:  # arguments gathered before the announcement
            self.events.append(("args", call.index, call.out.text()))

    def _stream_open(self, node: Node, text: str) -> None:
        """Incremental policy: announce the call being written and stream its arguments."""
        if node.start in self.given_up:
            return
        call = self.open
        if call is None:
            call = _Call(node.start, self.events)
            self.open = call
        if not call.announced:
            if not self._identify(call, node, text):
                return
            self._announce(call)
        call.advance(node, text, self.converters)
        if call.invalid:
            self._drop(call)

    def _drop(self, call: _Call) -> None:
        if call.announced and call.index not in self.dropped:
            self.dropped.append(call.index)
        self.given_up.add(call.start)
        if self.open is call:
            self.open = None
        call.index = -2  # nothing more of it is sent

    def end_of_output(self, walked: Walked, text: str) -> None:
        """The output ended after the walked tree: a call it ends inside was cut off
        (``_cut``); call openers alone after the last node make the message truncated."""
        unread = self.unread
        if unread is not None:
            firsts = self.unread_starts
            for start, end in walked.content:
                if text[start : start + 1] in firsts:  # else no opener there: one set lookup
                    self._note_unread_call(unread, start, end, text)
        if walked.reasoned:
            for start, end in walked.reasoned:
                self.note("call_in_reasoning", "kept", start, end)
        if walked.wrappers:
            for start, end in walked.wrappers:
                self.note("wrapper_token", "dropped", start, end, text[start:end])
        if walked.pending is not None:
            self._cut(walked.pending, walked.lead, text, walked.pending_spans)
        else:
            tail = text[walked.end :]
            if tail.strip() and self.only_openers(tail):
                self.truncated = True
                self.note("truncated", "cut", walked.end, len(text), "opener")

    def _note_unread_call(self, unread: re.Pattern[str], start: int, end: int, text: str) -> None:
        """A call opener in content: a call the format could not read (its arguments, its
        tool), kept as written; reported once per place, unless a refused call's finding
        already covers its span. The lenient parser's content stops at every opener, so one that
        started no call begins a content span (after a little whitespace): one anchored
        match per such span, at the end only, whatever the output's length."""
        m = unread.match(text, start, end)
        if m is None:
            return
        at = m.end() - len(m.group().lstrip())
        # A refused call's text is content too: the span that holds it (from the opener of
        # its section, say) is covered by that call's finding.
        refused = [(f.start, f.end) for f in self.findings.values() if f.outcome == "refused"]
        if not any(a < end and at < b for a, b in refused):
            self.note("invalid_arguments", "refused", at, end, text[at : m.end()])

    def _cut(self, node: Node, lead: int, text: str, spans: list[Span]) -> None:
        """The output ended inside this call. A call was under way (its name is there, or
        a markup opener): it is neither a call nor content, its raw text is kept as the
        message's ``truncated_call`` (nothing of it when only call openers were written).
        Otherwise (a bare ``{`` that may open a JSON call, or a tool's name that opens a bare
        Python call only with its parenthesis, is as likely the end of ordinary text) its
        text is content."""
        rest = text[lead:]
        name = _child(node, tags.TOOL_NAME)
        named = name is not None and name.complete
        if named and name is not None and any(name.text(text) + m[-1:] == m for m in self.openers):
            # The name is the opener's own text (bare Python calls open with NAME + "("):
            # written alone, it is as likely a word of ordinary text.
            named = False
        if named or any(m in rest for m in self.openers):
            self.truncated = True
            detail = "opener"
            if not self.only_openers(rest):
                self.truncated_call = rest.strip()
                detail = "call"
            self.note("truncated", "cut", lead, len(text), detail)
            return
        if not self.only_openers(rest):
            spans.append((lead, len(text)))

    def only_openers(self, text: str) -> bool:
        """Is ``text`` nothing but call openers and whitespace?"""
        for marker in self.openers:
            text = text.replace(marker, "")
        return not text.strip()

    # ----------------------------------------------------------------- end of input
    def close(self, tree: Node, text: str | None = None) -> None:
        """The end of generation: a reasoning block left open, or markup cut off, makes the
        message truncated (the markup's text, from ``text``, is then the message's
        ``truncated_call``: its cut-off tail)."""
        found = [c.tag for c in tree.children]
        if tags.REASONING in found and tags.REASONING_CLOSE not in found:
            self.truncated = True
            blocks = [c for c in tree.children if c.tag == tags.REASONING]
            self.note("truncated", "cut", blocks[0].start, blocks[-1].end, "reasoning")
        if tags.CUT in found:
            self.truncated = True
            cut = next(c for c in tree.children if c.tag == tags.CUT)
            self.note("truncated", "cut", cut.start, cut.end, "markup")
            tail = text[cut.start :] if text is not None else ""
            if self.truncated_call is None and not self.only_openers(tail):
                # Nothing the model wrote is lost: a header cut off with more than call
                # openers in it is the cut-off tail (openers alone are dropped, as ever).
                self.truncated_call = tail.strip()

    # ----------------------------------------------------------------- output
    def take_deltas(self) -> list[StreamDelta]:
        """The events since the last call as typed deltas: consecutive pieces of one field
        (text of content or reasoning, or the arguments of one call, with its announcement
        if that came first) are joined into one delta."""
        events = self.events
        if not events:
            return []
        if len(events) == 1:  # most feeds: one piece of one field
            kind, at, piece = events.pop()
            head = self.announced[at] if kind == "call" else None
            return [_delta(kind, at, head, [piece])]
        deltas: list[StreamDelta] = []
        run, index, head = "", -1, None  # the field the pieces below belong to
        pieces: list[str] = []
        for kind, at, piece in events:
            if kind == "call":
                if run:
                    deltas.append(_delta(run, index, head, pieces))
                run, index, head, pieces = "args", at, self.announced[at], []
                continue
            if kind != run or at != index:
                if run:
                    deltas.append(_delta(run, index, head, pieces))
                run, index, head, pieces = kind, at, None, []
            pieces.append(piece)
        deltas.append(_delta(run, index, head, pieces))
        events.clear()
        return deltas

    def message(self) -> ChatMessage:
        calls = [ToolCall.of(c.id, c.name, c.out.text()) for c in self.calls]
        return ChatMessage.of(
            self.content.value(),
            self.reasoning.value(),
            calls,
            self.truncated,
            self.truncated_call,
            self.finding_list([c.start for c in self.calls]) if self.findings else (),
        )
