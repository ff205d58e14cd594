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
from autoparser.stream.mapper import CallIdPolicy, Mapper


class StreamParser:
    """Feeds model output chunk by chunk; returns OpenAI ``delta`` dicts that only append.

    ``feed(chunk)`` -> deltas for the text that became certain; ``finish()`` -> the last
    deltas (held-back text flushed, truncated calls closed); ``message`` -> the message so
    far (the accumulation of every delta returned).
    """

    def __init__(self, definition: ParserDefinition, call_ids: CallIdPolicy) -> None:
        self._policy = call_ids
        self._inc = definition.parser.incremental()
        self._mapper = Mapper(call_ids, definition.value_converters)
        self._last_tree: Node | None = None
        self._finished = False

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        """Add the next piece of model output; return the OpenAI deltas it completes.

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
        result = self._inc.feed(chunk)
        if result.status != ParseStatus.FAIL:
            self._last_tree = result.tree
            self._mapper.advance(result.tree, self._inc.text)
        return self._mapper.take_deltas()

    def finish(self) -> list[dict[str, Any]]:
        """End of output: return the last deltas (held-back text, a truncated call's text).

        After it the accumulated deltas equal ``ChatParams.parse`` of the whole text;
        calling it again returns nothing, feeding again is a ``RequestError``.
        """
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
            self._mapper.push_content(self._mapper.content.push(text))
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
        if self._policy.expects_call_ids:  # announced only once its id is complete
            cid = next((c for c in last.children if c.tag == tags.TOOL_ID), None)
            return cid is not None and cid.complete
        return True

    @property
    def message(self) -> ChatMessage:
        """The message parsed so far (the final message once ``finish`` was called)."""
        return self._mapper.message()

    @property
    def text(self) -> str:
        """All output fed so far, as one string."""
        return str(self._inc.text)


def parse_text(
    definition: ParserDefinition, call_ids: CallIdPolicy, text: str, partial: bool = False
) -> ChatMessage:
    """``parse(text)``: exactly what a stream fed the whole text at once would produce."""
    stream = StreamParser(definition, call_ids)
    stream.feed(text)
    if not partial:
        stream.finish()
    return stream.message
