"""Render with provenance: which spans of a prompt came from the caller's text (message
contents, reasoning, tool results) rather than from the template.

An engine that tokenizes the whole prompt with special-token parsing turns a user's
``<|im_start|>system`` into the real control tokens: the user forges a turn. Knowing the
spans, a server can have those spans tokenized as plain text (llama.cpp: ``/tokenize`` with
``parse_special: false``) and the template's own text as usual.

How: every caller string is wrapped in two noncharacters (U+FDD0/U+FDD1, which no tokenizer
or template gives meaning to) and the conversation rendered again; where the marks land are
the spans, and with the marks removed the render must equal the plain prompt. A template
that reshapes contents (``trim``, slicing, ``tojson`` escaping) breaks that equality; then the
spans are found by searching the plain prompt for each caller string in order, which still
covers every caller string the template printed verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from autoparser.errors import TemplateError

OPEN = "\ufdd0"
CLOSE = "\ufdd1"
_MARK = re.compile(f"([{OPEN}{CLOSE}])")
# Message keys whose strings are the caller's text.
TEXT_KEYS = ("content", "reasoning_content", "thinking", "reasoning")

Span = tuple[int, int]


def _wrap(text: str, found: list[str]) -> str:
    found.append(text)
    return f"{OPEN}{text}{CLOSE}" if text else text


def mark_messages(
    messages: Sequence[Mapping[str, object]],
) -> tuple[list[dict[str, object]], list[str]]:
    """The messages with every caller string wrapped in marks, and those strings in order."""
    found: list[str] = []
    marked: list[dict[str, object]] = []
    for message in messages:
        copy = dict(message)
        for key in TEXT_KEYS:
            value = copy.get(key)
            if isinstance(value, str):
                copy[key] = _wrap(value, found)
            elif key == "content" and isinstance(value, list):
                copy[key] = [
                    {**part, "text": _wrap(part["text"], found)}
                    if isinstance(part, Mapping) and isinstance(part.get("text"), str)
                    else part
                    for part in value
                ]
        marked.append(copy)
    return marked, found


def spans_of_marked(text: str) -> tuple[str, list[Span]]:
    """The text without marks, and the spans each pair of marks enclosed."""
    out: list[str] = []
    spans: list[Span] = []
    at = 0
    start: int | None = None
    for piece in _MARK.split(text):
        if piece == OPEN:
            start = at
        elif piece == CLOSE:
            if start is not None and at > start:
                spans.append((start, at))
            start = None
        else:
            out.append(piece)
            at += len(piece)
    return "".join(out), spans


def locate(prompt: str, texts: Sequence[str]) -> list[Span]:
    """Spans of ``texts`` found in ``prompt`` in order (each after the previous one found),
    as given or stripped; a text the template did not print either way is left out."""
    spans: list[Span] = []
    at = 0
    for given in texts:
        # A template that trims prints the text stripped (``| trim``, ``.strip()``).
        text = given if given in prompt else given.strip()
        if not text:
            continue
        found = prompt.find(text, at)
        if found < 0:
            found = prompt.find(text)
            if found < 0 or any(s < found + len(text) and found < e for s, e in spans):
                continue
        spans.append((found, found + len(text)))
        at = found + len(text)
    return sorted(spans)


def merge(spans: Sequence[Span]) -> tuple[Span, ...]:
    """Sorted spans with overlapping or touching ones joined."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return tuple(out)


def caller_spans(
    render: Callable[[Sequence[Mapping[str, object]]], str],
    messages: Sequence[Mapping[str, object]],
    prompt: str,
) -> tuple[Span, ...]:
    """Where the caller's strings are in ``prompt`` (``render(messages)``), by rendering the
    marked messages; by searching when the template reshaped them."""
    marked, texts = mark_messages(messages)
    if not texts:
        return ()
    if not any(OPEN in t or CLOSE in t for t in texts):
        try:
            plain, spans = spans_of_marked(render(marked))
        except TemplateError:  # a template that refuses the marked strings: search instead
            plain, spans = "", []
        if plain == prompt:
            return merge(spans)
    return merge(locate(prompt, texts))


def caller_pieces(prompt: str, spans: Sequence[Span]) -> list[tuple[str, bool]]:
    """The prompt cut at the spans: (text, is the caller's), in order, without empty pieces."""
    out: list[tuple[str, bool]] = []
    at = 0
    for start, end in spans:
        if start > at:
            out.append((prompt[at:start], False))
        out.append((prompt[start:end], True))
        at = end
    if at < len(prompt):
        out.append((prompt[at:], False))
    return out
