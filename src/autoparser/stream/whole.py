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

from collections.abc import Callable
from typing import Literal

from autoparser import tags
from autoparser.message import ChatMessage, ToolCall
from autoparser.peg import Node
from autoparser.stream.mapper import Mapper, Span, _Call, call_identity, spans_end
from autoparser.stream.repair import json_object_text

# Tags of a call's children that carry its arguments, in any encoding.
_ARGUMENT_TAGS = frozenset({tags.TOOL_ARGS, tags.TOOL_ARGS_STR, tags.TOOL_ARGS_PY, tags.TOOL_ARG})


def whole_message(
    mapper: Mapper, tree: Node, text: str, json_end: Callable[[int], int] = lambda pos: -1
) -> ChatMessage:
    """The message ``tree`` (the output's final tree) gives, by a mapper fed nothing yet
    (its policy, converters and openers are the request's).

    ``json_end(pos)``: where a JSON value the parse already read whole at ``pos`` ends
    (-1: none), so that arguments written as such a JSON object are not read again.
    """
    reasoning: list[Span] = []
    content: list[Span] = []
    calls: list[ToolCall] = []
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
            found = _json_call(mapper, child, text, json_end)
            if found is None:
                found = _call(mapper, child, text)
            after_call = found is not False
            if found is False:
                spans.append((lead, child.end))
            else:
                calls.append(found)
            prev_end = child.end
            continue
        if tag == tags.TOOL_SECTION_END:
            if not after_call and prev_end and spans_end(content, reasoning) == prev_end:
                # It closes a call that is content: it is content too (as the mapper does).
                (reasoning if in_reasoning else content).append((prev_end, child.end))
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
    if tail and not cut and mapper.only_openers(tail):
        mapper.truncated = mapper.truncated or bool(tail.strip())
    mapper.close(tree)
    return ChatMessage(
        content=_field(content, text),
        reasoning_content=_field(reasoning, text),
        tool_calls=calls,
        truncated=mapper.truncated,
        truncated_call=mapper.truncated_call,
    )


def _call(mapper: Mapper, node: Node, text: str) -> ToolCall | Literal[False]:
    """A complete call node as the stream settles it: the call, or False (not a call:
    its arguments are not a JSON object)."""
    call = _Call(node.start, mapper.events)
    mapper._identify(call, node, text)
    call.advance(node, text, mapper.converters)
    closing = call.complete()
    if call.invalid:
        return False
    call.out.emit(closing)
    return ToolCall(id=call.id, name=call.name, arguments=call.out.text())


def _json_call(
    mapper: Mapper, node: Node, text: str, json_end: Callable[[int], int]
) -> ToolCall | Literal[False] | None:
    """``_call`` of the commonest call, one JSON object as written (``tool-args``, what
    ``JsonArguments`` streams), without the streamers; None for any other call."""
    args: Node | None = None
    for child in node.children:
        if child.tag in _ARGUMENT_TAGS:
            if args is not None or child.tag != tags.TOOL_ARGS:
                return None
            args = child
    if args is None:
        return None
    identity = call_identity(mapper.policy, node, text)
    name, call_id = identity if identity is not None else ("", "")
    arguments = args.text(text)
    if not arguments:
        return ToolCall(id=call_id, name=name, arguments="{}")
    whole = json_end(args.start) == args.end and arguments[0] == "{"
    if not whole and not json_object_text(arguments):
        return False
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _field(spans: list[Span], text: str) -> str | None:
    """A text field: its spans joined, stripped (as a stream's field ends), or None."""
    if not spans:
        return None
    value = "".join([text[start:end] for start, end in spans]).strip()
    return value or None
