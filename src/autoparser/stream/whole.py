"""The message of a whole output, straight from its final tree (``ChatParams.parse``).

A stream maps each tree of a growing text to deltas (``Mapper.advance``): it keeps what
it already sent of every field, announces calls and remembers verdicts for the next feed.
A parse of the whole text maps one tree, once, so it needs none of that. It follows the
same rules through the mapper's own pieces (a call's name, id and arguments: ``_Call``
and ``Mapper._identify``; a call the output ended inside: ``Mapper._cut``; call openers
at the end; a reasoning block left open: ``Mapper.close``) and builds the message from
them. tests/test_parse_oneshot.py holds it to the stream's final message on every cut of
the own templates' outputs.
"""

from __future__ import annotations

from autoparser import tags
from autoparser.message import ChatMessage, ToolCall
from autoparser.peg import Node
from autoparser.stream.mapper import Mapper, Span, _Call


def whole_message(mapper: Mapper, tree: Node, text: str) -> ChatMessage:
    """The message ``tree`` (the output's final tree) gives, by a mapper fed nothing yet
    (its policy, converters and openers are the request's)."""
    reasoning: list[Span] = []
    content: list[Span] = []
    calls: list[_Call] = []
    prev_end = 0  # where the untagged text before the next node starts
    after_call = False  # the previous node is a call of the message
    in_reasoning = False  # the last text node was reasoning (a bad call's text joins it)
    cut = False
    for child in tree.children:
        tag = child.tag
        if tag == tags.TOOL:
            # The text of a call that is not one: with the markers before it, unless
            # those close the call before it; where the call was written.
            lead = child.start if after_call else prev_end
            spans = reasoning if in_reasoning else content
            if not child.complete:
                mapper._cut(child, lead, text, spans)
                cut = True
                break
            call = _Call(child.start, mapper.events)
            mapper._identify(call, child, text)
            call.advance(child, text, mapper.converters)
            closing = call.complete()
            after_call = not call.invalid
            if after_call:
                call.out.emit(closing)
                calls.append(call)
            else:
                spans.append((lead, child.end))
            prev_end = child.end
            continue
        if tag == tags.REASONING:
            reasoning.append((child.start, child.end))
            in_reasoning = True
        else:
            in_reasoning = False
            if tag == tags.CONTENT:
                content.append((child.start, child.end))
        prev_end = child.end
        after_call = False
    tail = text[prev_end:]
    if not cut and mapper.only_openers(tail):
        mapper.truncated = mapper.truncated or bool(tail.strip())
    mapper.close(tree)
    return ChatMessage(
        content=_field(content, text),
        reasoning_content=_field(reasoning, text),
        tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.out.text()) for c in calls],
        truncated=mapper.truncated,
    )


def _field(spans: list[Span], text: str) -> str | None:
    """A text field: its spans joined, stripped (as a stream's field ends), or None."""
    if not spans:
        return None
    value = "".join([text[start:end] for start, end in spans]).strip()
    return value or None
