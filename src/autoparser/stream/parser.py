"""``StreamParser``: model output chunk by chunk -> OpenAI deltas that only append.

Feeds the PEG incremental parser of a ``ParserDefinition`` and hands each parse tree to
the mapper (``stream/mapper.py``). See docs/streaming.md.
"""

from __future__ import annotations

from typing import Any

from autoparser import tags
from autoparser.definition import ParserDefinition
from autoparser.errors import RequestError
from autoparser.message import ChatMessage
from autoparser.peg import Node, ParseStatus
from autoparser.peg.oneshot import FAIL, OK, Shared, compiled
from autoparser.stream.delta import StreamDelta
from autoparser.stream.ending import finish_reason_hit_limit, map_output, output_tree
from autoparser.stream.mapper import CallIdPolicy, Mapper, check_tool_call_deltas
from autoparser.stream.whole import whole_message


class StreamParser:
    """Feeds model output chunk by chunk; returns typed deltas that only append.

    ``feed_deltas(chunk)`` -> ``StreamDelta`` values for the text that became certain;
    ``finish_deltas()`` -> the last ones (held-back text flushed; a call the output ended
    inside becomes content); ``message`` -> the message so far. ``feed``/``finish`` give
    the same deltas as OpenAI ``delta`` dicts (``StreamDelta.to_openai()``), for the wire.

    ``tool_call_deltas``: ``"whole"`` (default) announces a call, with all its arguments,
    once it is complete and valid, so the deltas always add up to ``message`` (and to
    ``ChatParams.parse`` of the whole text). ``"incremental"`` announces a call once its
    name is complete and streams its arguments as they are written (OpenAI style); a call
    that then turns out not to be one (invalid arguments, or the output ended inside it)
    cannot be taken back: its delta index is listed in ``dropped_calls``, its text follows
    as content, and ``message`` (which equals ``parse``) does not hold it.

    ``tolerance``: a call read only by the format's markers (an argument the schema does
    not declare) is kept with a finding (``"keep"``, default) or refused (``"reject"``:
    its text is content); either way ``message.findings`` says so.
    """

    def __init__(
        self,
        definition: ParserDefinition,
        call_ids: CallIdPolicy,
        *,
        tool_call_deltas: str = "whole",
        tolerance: str = "keep",
    ) -> None:
        policy = check_tool_call_deltas(tool_call_deltas)
        self.tool_call_deltas = policy
        self._inc = definition.parser.incremental()
        self._mapper = Mapper(
            call_ids,
            definition.value_converters,
            incremental=policy == "incremental",
            openers=definition.call_openers or definition.trigger_markers,
            tolerance=tolerance,
            required=definition.required_arguments,
        )
        self._last_tree: Node | None = None
        self._moved = False  # feeds since _last_tree only moved its unfinished path
        self._finished = False
        self._final_tree: Node | None = None  # the whole output's tree (reasoning_end)

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        """``feed_deltas`` written as OpenAI ``delta`` dicts (the wire form)."""
        deltas = self.feed_deltas(chunk)
        if len(deltas) == 1:  # most feeds: no comprehension to run
            return [deltas[0].to_openai()]
        return [delta.to_openai() for delta in deltas] if deltas else []

    def feed_deltas(self, chunk: str) -> list[StreamDelta]:
        """Add the next piece of model output; return the deltas it completes.

        Chunks may split anywhere (inside markers, JSON, multi-byte text already decoded);
        text that might still become a marker is held back until it is decided.
        """
        if self._finished:
            raise RequestError("StreamParser.feed: the stream is already finished")
        if not isinstance(chunk, str):
            raise RequestError(
                f"model output must be a str, got {type(chunk).__name__}"
                + (" (decode the bytes first)" if isinstance(chunk, (bytes, bytearray)) else "")
            )
        if not chunk:
            return []
        inc = self._inc
        mapper = self._mapper
        end = inc.resume(chunk)
        if end >= 0 and not mapper.tail_reparse:
            # The parse only moved its unfinished path further: what that changes in
            # the message is known from the last tree (see Mapper.move).
            self._moved = True
            return [] if mapper.tail is None else mapper.move(inc.text, end)
        if self._moved:
            # The last partial tree, kept for finish() should the next parse fail.
            self._last_tree = inc.result.tree
            self._moved = False
        result = inc.result if end >= 0 else inc.reparse()
        if result.status != ParseStatus.FAIL:
            self._last_tree = result.tree
            mapper.advance(result.tree, inc.text)
        return mapper.take_deltas()

    def finish(self, *, finish_reason: str | None = None) -> list[dict[str, Any]]:
        """``finish_deltas`` written as OpenAI ``delta`` dicts (the wire form)."""
        return [delta.to_openai() for delta in self.finish_deltas(finish_reason=finish_reason)]

    def finish_deltas(self, *, finish_reason: str | None = None) -> list[StreamDelta]:
        """End of output: return the last deltas (held-back text).

        A call the output ends inside is neither a call nor content: nothing of it is
        sent, its raw text is the message's ``truncated_call`` and the message is
        truncated. ``finish_reason``: why generation stopped, as the engine says it
        (OpenAI's ``"stop"``, ``"length"``...). ``"length"`` (max_tokens hit) means a call
        the output ends inside was cut off, even where its end markers alone are missing.
        Without it, a call missing only its close tag at the very end still counts (a
        model may stop without writing it).

        With ``"whole"`` the accumulated deltas then equal ``ChatParams.parse`` of the
        whole text; calling it again returns nothing, feeding again is a ``RequestError``.
        """
        hit_limit = finish_reason_hit_limit(finish_reason)
        if self._finished:
            return []
        self._finished = True
        text = self._inc.text
        if self._moved:
            self._last_tree = self._inc.result.tree
            self._moved = False
        final = self._inc.finish()
        tree = final.tree if final.status == ParseStatus.SUCCESS else None
        self._final_tree = tree
        map_output(
            self._mapper, text, output_tree(self._mapper, text, self._last_tree, tree, hit_limit)
        )
        return self._mapper.take_deltas()

    def reasoning_end(self) -> int | None:
        """Where the text after the output's reasoning starts, once the parse is sure (None
        while reasoning may go on): after the block's end marker; else, once something
        that is not reasoning is given (content, a call) or the output ended, after the
        last piece of reasoning (at 0 without any), the markup that opens what follows
        included; at the end of an output that is all reasoning. For engines that hand the
        raw text after the reasoning to a parser of their own (``ReasoningSplit``)."""
        tree = self._final_tree or (self._inc.result.tree if self._moved else self._last_tree)
        mapper = self._mapper
        given = self._finished or mapper.content.raw_done > 0 or bool(mapper.announced)
        after = 0
        if tree is not None:
            for node in tree.children:
                if node.tag == tags.REASONING_CLOSE:
                    return node.end if node.complete else None
                if node.tag != tags.REASONING:
                    return after if given else None
                after = node.end
        if not self._finished:
            return None
        return len(self._inc.text) if mapper.reasoning.raw_done else 0

    @property
    def message(self) -> ChatMessage:
        """The message parsed so far (the final message once ``finish`` was called)."""
        return self._mapper.message()

    @property
    def dropped_calls(self) -> tuple[int, ...]:
        """Delta indexes of calls this stream announced that the message does not hold.

        Only the ``"incremental"`` policy announces a call before it is known to be one;
        such a call's arguments broke, or the output ended inside it: its text is in
        ``content`` and the deltas no longer add up to ``message``. Always empty with
        ``"whole"``.
        """
        return tuple(self._mapper.dropped)

    @property
    def text(self) -> str:
        """All output fed so far, as one string."""
        return str(self._inc.text)


def _maps_prefix(partial: Node, tree: Node) -> bool:
    """Does mapping ``partial`` (not final) give a prefix of what mapping ``tree`` gives,
    so that a one-shot parse may map ``tree`` alone? Its nodes are those of ``tree``
    except the last, which may be unfinished: a call (mapped to nothing until it is
    complete) or a text node that ``tree``'s node at that place extends."""
    mine, theirs = partial.children, tree.children
    while mine and mine[-1].start == mine[-1].end and not mine[-1].complete:
        mine = mine[:-1]  # where something may start once more text comes: maps to nothing
    if len(mine) > len(theirs):
        return False
    last = len(mine) - 1
    for i, node in enumerate(mine):
        other = theirs[i]
        if node == other:
            continue
        if i < last or node.complete:
            return False
        if node.tag not in tags.TEXT_FIELDS:
            continue  # an unfinished call, or markup: mapped to nothing yet
        if (other.tag, other.start) != (node.tag, node.start) or other.end < node.end:
            return False
    return True


def parse_text(
    definition: ParserDefinition,
    call_ids: CallIdPolicy,
    text: str,
    partial: bool = False,
    *,
    finish_reason: str | None = None,
    tolerance: str = "keep",
) -> ChatMessage:
    """``parse(text)``: exactly what a stream fed the whole text at once would produce.

    Without the stream: the parser compiled for one-shot parses (``peg/oneshot.py``) gives
    the two trees a stream's feed and finish would (partial mode, then full mode). The
    final one is mapped straight to the message (``stream/whole.py``) when what the
    partial one maps is a prefix of it, as it is unless the two parses disagree; else
    the mapper maps both, as the stream does. Both by the one walk (``walk_tree``).
    """
    hit_limit = finish_reason_hit_limit(finish_reason)
    shot = compiled(definition.parser)
    if shot is None or not isinstance(text, str):
        return _parse_by_stream(definition, call_ids, text, partial, finish_reason, tolerance)
    # The full-mode run first: the partial-mode one then resumes from what the first
    # found independently of the end of the input, and stops at the first thing that
    # did depend on it, where the full-mode run tries every way the text could end.
    shared = Shared()
    try:
        final: Node | None = None
        if not partial:
            status, tree = shot.parse(text, False, shared)
            final = tree if status == OK else None
        status, tree = shot.parse(text, True, shared)
        last = tree if status != FAIL and text else None
    except RecursionError:
        return _parse_by_stream(definition, call_ids, text, partial, finish_reason, tolerance)
    openers = definition.call_openers or definition.trigger_markers
    values = shared.values  # json_value_end's lookup, without its call

    def json_end(pos: int) -> int:
        return values.get(pos, -1)

    converters = definition.value_converters
    if not partial:
        # The common case: the final tree alone, by a mapper that only reads it.
        reader = Mapper.reader(
            call_ids,
            converters,
            openers=openers,
            json_end=json_end,
            tolerance=tolerance,
            required=definition.required_arguments,
        )
        output = output_tree(reader, text, last, final, hit_limit)
        if output is not None and (last is None or _maps_prefix(last, output)):
            return whole_message(reader, output, text)
    mapper = Mapper(
        call_ids,
        converters,
        openers=openers,
        json_end=json_end,
        tolerance=tolerance,
        required=definition.required_arguments,
    )
    if partial:
        if last is not None:
            mapper.advance(last, text)
        return mapper.message()
    if last is not None:
        mapper.advance(last, text)
    map_output(mapper, text, output)
    return mapper.message()


def _parse_by_stream(
    definition: ParserDefinition,
    call_ids: CallIdPolicy,
    text: str,
    partial: bool,
    finish_reason: str | None,
    tolerance: str,
) -> ChatMessage:
    stream = StreamParser(definition, call_ids, tolerance=tolerance)
    stream.feed_deltas(text)
    if not partial:
        stream.finish_deltas(finish_reason=finish_reason)
    return stream.message
