"""What each stretch of a model's output was parsed as, for showing the output coloured.

A parse tree tags reasoning, content and tool calls (and inside a call its name and
arguments); the text between tagged nodes is markup (markers, whitespace), and the text
after the parse stopped is unparsed. ``labelled_spans`` flattens a tree into consecutive,
non-overlapping spans covering the whole text, so a viewer needs no knowledge of tags.
"""

from __future__ import annotations

import dataclasses

from autoparser import tags
from autoparser.peg.core import Node, Parser

MARKUP = "markup"  # text no tagged node covers: markers, separators
UNPARSED = "unparsed"  # text after the position the parser reached


@dataclasses.dataclass(frozen=True)
class LabelledSpan:
    """``text[start:end]`` was parsed as ``kind``: reasoning, content, tool (a call's own
    markup), tool-name, tool-id, tool-args, markup or unparsed."""

    kind: str
    start: int
    end: int


def _emit(out: list[LabelledSpan], kind: str, start: int, end: int) -> None:
    if end <= start:
        return
    if out and out[-1].kind == kind and out[-1].end == start:
        out[-1] = LabelledSpan(kind, out[-1].start, end)
    else:
        out.append(LabelledSpan(kind, start, end))


def _call_spans(out: list[LabelledSpan], call: Node) -> None:
    pos = call.start
    for part in call.children:
        kind = tags.SPAN_LABELS.get(part.tag or "")
        if kind is None:
            continue
        _emit(out, "tool", pos, part.start)
        _emit(out, kind, part.start, part.end)
        pos = part.end
    _emit(out, "tool", pos, call.end)


def labelled_spans(parser: Parser, text: str) -> tuple[LabelledSpan, ...]:
    """Spans covering ``text`` from start to end, each labelled by what parsed it (one parse
    of the whole text, as ``ChatParams.parse`` runs it)."""
    result = parser.parse(text)
    out: list[LabelledSpan] = []
    pos = 0
    for node in result.tree.children:
        kind = tags.SPAN_LABELS.get(node.tag or "")
        if kind is None:
            continue
        _emit(out, MARKUP, pos, node.start)
        if node.tag == tags.TOOL:
            _call_spans(out, node)
        else:
            _emit(out, kind, node.start, node.end)
        pos = node.end
    reached = max(pos, result.tree.end)
    _emit(out, MARKUP, pos, reached)
    _emit(out, UNPARSED, reached, len(text))
    return tuple(out)
