"""The end of a model's output: which parse tree its message is read from, and that read.

A stream holds two trees once the output ended: the last partial-mode parse (the text could
go on) and the full-mode one (it ends here). Which one the message comes from is decided
here alone, for a stream's ``finish`` and a one-shot ``parse`` alike (``output_tree``); then
the mapper reads it as the whole output (``map_output``). See docs/streaming.md.
"""

from __future__ import annotations

from autoparser import tags
from autoparser.errors import RequestError
from autoparser.peg import Node
from autoparser.stream.mapper import Mapper


def finish_reason_hit_limit(finish_reason: object) -> bool:
    """Whether an engine's finish reason says the output was cut by the token limit."""
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise RequestError(
            f"finish_reason must be a str or None, got {type(finish_reason).__name__}"
        )
    return finish_reason == "length"


def output_tree(
    mapper: Mapper, text: str, partial: Node | None, final: Node | None, hit_limit: bool
) -> Node | None:
    """The tree the whole output is mapped by once it ended: the full-mode parse
    (``final``, None if it failed), or the last partial-mode one where generation stopped
    inside a call (cut, or any call when the token limit ended it) or on a call opener."""
    if partial is not None and (
        (
            _ends_inside_call(partial)
            and (
                hit_limit
                or _cut_inside_call(partial, final if final is not None else partial, len(text))
            )
        )
        or _stopped_on_opener(mapper, partial, text)
    ):
        return partial
    return final if final is not None else partial


def map_output(mapper: Mapper, text: str, tree: Node | None) -> None:
    """Map the whole output by its tree (see ``output_tree``)."""
    if tree is not None:
        mapper.advance(tree, text, final=True)
        mapper.close(tree, text)
    elif text:
        # Nothing parsed at all (cannot happen with generated parsers): keep the text.
        mapper.push_content(mapper.content.push(text))


def _ends_inside_call(partial: Node) -> bool:
    """Does the partial-mode parse end inside a call something of which is written?
    (An empty node only says a call may start there.)"""
    last = partial.children[-1] if partial.children else None
    return (
        last is not None and last.tag == tags.TOOL and not last.complete and last.start < last.end
    )


def _cut_inside_call(partial: Node, final: Node | None, size: int) -> bool:
    """Did generation stop inside a call (``_ends_inside_call``) before its arguments
    were whole? Decided from the text alone.

    The full-mode parse may still read it as a call (its end markers are optional: a
    model may leave the last one out), but it is one only if everything the full parse
    gives it was already complete before the end: each argument (a value cut off at
    the end would otherwise pass as whole), with at least one argument written and
    nothing after the call. ``size``: the output's length.
    """
    last = partial.children[-1]
    if final is None or not final.children:
        return True
    node = final.children[-1]
    if node.tag != tags.TOOL or node.start != last.start or not node.complete:
        return True
    if not any(c.tag in tags.ARGUMENTS for c in node.children):
        return True
    before = [c.tag for c in last.children]
    return before != [c.tag for c in node.children] or not all(
        _settled(c, f, size) for c, f in zip(last.children, node.children, strict=True)
    )


def _stopped_on_opener(mapper: Mapper, partial: Node, text: str) -> bool:
    """Does the output end with call openers only, after the partial parse's last node
    (a section marker outside any call node, like ``[TOOL_CALLS]``)?"""
    # An empty node (a call that may start there) does not end what was written.
    written = [c for c in partial.children if c.end > c.start]
    tail = text[written[-1].end if written else 0 :]
    return bool(tail.strip()) and mapper.only_openers(tail)


def _settled(before: Node, after: Node, size: int) -> bool:
    """Is a node of the partial parse's last call whole by the end of output? Complete;
    or unfinished only because a marker follows it whose meaning the text after it would
    decide (a value suffix that may turn out to be text of the value): it stops before the
    end of the output and the full parse reads the same nodes in it. A value cut off at
    the end reaches the end; one cut inside a marker reads on in the full parse."""
    if before.complete:
        return True
    if before.end >= size or (before.tag, before.start) != (after.tag, after.start):
        return False
    inner = [(n.tag, n.start, n.end) for n in before.walk() if n is not before]
    return bool(inner) and inner == [
        (n.tag, n.start, n.end) for n in after.walk() if n is not after
    ]
