"""The message of a whole output, straight from its final tree (``ChatParams.parse``).

A stream maps each tree of a growing text to deltas (``Mapper.advance``): it keeps what
it already sent of every field, announces calls and remembers verdicts for the next feed.
A parse of the whole text maps one tree, once, so it needs none of that bookkeeping, but
the rules are the stream's own: the same walk (``walk_tree``), the same reading of a call
(``Mapper.read_call``) and the same end of output (``Mapper.end_of_output``, ``close``).
tests/peg/test_oneshot.py holds it to the stream's final message on every cut of the
own templates' outputs.
"""

from __future__ import annotations

from autoparser import tags
from autoparser.message import ChatMessage, ToolCall
from autoparser.peg import Node
from autoparser.stream.mapper import Mapper, Span, walk_tree


def whole_message(mapper: Mapper, tree: Node, text: str) -> ChatMessage:
    """The message ``tree`` (the output's final tree) gives, by a mapper fed nothing yet
    (its policy, converters, openers and ``json_end`` are the request's)."""
    calls: list[ToolCall] = []

    def settle(node: Node) -> bool:
        found = mapper.read_call(node, text)
        if found is None:
            return False
        calls.append(ToolCall.of(found[1], found[0], found[2]))
        return True

    walked = walk_tree(tree, settle)
    mapper.end_of_output(walked, text)
    mapper.close(tree, text)
    return ChatMessage.of(
        _field(walked.content, text),
        _field(walked.reasoning, text),
        calls,
        mapper.truncated,
        mapper.truncated_call,
        mapper.finding_list(_call_starts(tree, mapper)) if mapper.findings else (),
    )


def _field(spans: list[Span], text: str) -> str | None:
    """A text field all at once: its spans joined, stripped (the value a stream's
    ``_TextField`` ends with, however the text was split), or None."""
    if not spans:
        return None
    if len(spans) == 1:  # the common case: one slice, no list to join
        start, end = spans[0]
        value = text[start:end].strip()
    else:
        value = "".join([text[start:end] for start, end in spans]).strip()
    return value or None


def _call_starts(tree: Node, mapper: Mapper) -> list[int]:
    """Where each call of the message starts, worked out only when there are findings to
    index: the complete call nodes the walk read, less those refused (a call node it did
    not take as a call always has a refused finding at its start)."""
    refused = {f.start for f in mapper.findings.values() if f.outcome == "refused"}
    return [
        c.start
        for c in tree.children
        if c.tag == tags.TOOL and c.complete and c.start not in refused
    ]
