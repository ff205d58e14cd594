"""Whether a prompt can go to the engine as text, tokenized exactly as the engine tokenizes
it by itself, with no caller text becoming a control token.

Serve knows where the caller's text is (``ChatParams.caller_spans``). Sending those spans as
token ids of their own keeps them plain, but tokenizes the prompt in pieces, not as the
model was trained on: merges across a piece's edge are lost, and a SentencePiece tokenizer
adds a space at the start of every piece. So the ids go only when they must: when the
engine's own tokenization of the text would make a control token of caller characters.
That happens inside a span (the caller spells ``<|im_start|>``) or across its edge (the
template's text and the caller's spell one together, template ``<|im_`` then user ``end|>``;
or the caller's characters next to a control token of the template make a longer one):
engines match control tokens on the whole text, wherever their strings occur. Both are
asked of the engine's tokenizer:

- every caller span on its own (``plan().spans``);
- every place where caller text meets other text, in a window of ``CONTEXT`` characters each
  side (``plan().windows``): no control token the engine makes of the window may take a
  caller character. Template text in a window is whole: a template piece of at most
  ``CONTEXT`` characters between two spans joins them into one stretch (a control token
  spelled across it is seen), a longer piece gives the ``CONTEXT`` characters next to them.
  A window depends on nothing further away, so those of earlier turns are asked once.

How a window is judged depends on what the engine tells. llama.cpp tokenizes with and
without special tokens: a window must tokenize as its template texts' own tokens with plain
text between them (``expected``, from each template text's ``Edge``, found once per text by
tokenizing its prefixes and suffixes, ``scan_texts`` and ``read_edge``). vLLM and SGLang
name the control tokens they made (``plain_text``): each must be spelled inside template
text of the window (``accounted``).

A control token longer than ``CONTEXT`` characters spelled across an edge is not seen: the
longest chat control tokens of common vocabularies have about 30.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

CONTEXT = 64  # characters of text read on each side of an edge of caller text

Part = tuple[str, bool]  # a piece of the prompt, and whether it is the caller's


@dataclasses.dataclass(frozen=True)
class Window:
    """Text around edges of caller text: its parts, in order (caller's or template's)."""

    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.parts)

    @property
    def templates(self) -> tuple[str, ...]:
        return tuple(text for text, caller in self.parts if not caller)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to ask the engine about one prompt: its caller spans (distinct texts) and the
    windows around their edges."""

    spans: tuple[str, ...]
    windows: tuple[Window, ...]

    @property
    def templates(self) -> tuple[str, ...]:
        """The template texts inside windows (distinct)."""
        return tuple(dict.fromkeys(t for w in self.windows for t in w.templates))


def plan(parts: Sequence[Part], context: int = CONTEXT) -> Plan:
    """The spans and windows of a prompt cut into ``parts`` (``caller_pieces``). An empty
    span has no character to lose: the template text either side of it is one text (as
    the engine reads it, a control token it spells across the span is the template's)."""
    joined: list[Part] = []
    for text, caller in parts:
        if caller and not text:
            continue
        if joined and not caller and not joined[-1][1]:
            joined[-1] = (joined[-1][0] + text, False)
        else:
            joined.append((text, caller))
    parts = joined
    spans = tuple(dict.fromkeys(text for text, caller in parts if caller))
    windows: list[Window] = []
    i, n = 0, len(parts)
    while i < n:
        if not parts[i][1]:
            i += 1
            continue
        j = i + 1  # the stretch: caller parts, joined across short template parts
        while j < n:
            if parts[j][1]:
                j += 1
            elif len(parts[j][0]) <= context and j + 1 < n and parts[j + 1][1]:
                j += 2
            else:
                break
        left = [(parts[i - 1][0][-context:], False)] if i else []
        right = [(parts[j][0][:context], False)] if j < n else []
        windows.extend(_windows([*left, *parts[i:j], *right], context))
        i = j
    return Plan(spans, tuple(dict.fromkeys(windows)))


def _windows(parts: Sequence[Part], context: int) -> list[Window]:
    """One window per edge between two parts: ``context`` characters each side of it,
    widened to whole template parts (each is at most ``context`` long: a short piece
    inside the stretch, or the ``context`` characters of a long one at its ends), so that
    every template text in a window is one of a few texts a template writes (its cut is
    known once, ``Edge``), and caller parts cut. A window holds every control token of at
    most ``context`` characters spelled across its edge; it depends on nothing further
    away, so windows of earlier turns stay the same as a conversation grows."""
    ends = list(itertools.accumulate(len(text) for text, _ in parts))
    starts = [end - len(text) for (text, _), end in zip(parts, ends, strict=True)]
    total = ends[-1] if ends else 0
    out = []
    for edge in ends[:-1]:
        lo, hi = max(0, edge - context), min(total, edge + context)
        for (_, caller), start, end in zip(parts, starts, ends, strict=True):
            if not caller and start < lo < end:
                lo = start
            if not caller and start < hi < end:
                hi = end
        cut: list[Part] = []
        for (text, caller), start, end in zip(parts, starts, ends, strict=True):
            a, b = max(lo, start), min(hi, end)
            if a < b or (a == b and lo <= start and end <= hi):
                cut.append((text[a - start : b - start], caller))
        out.append(Window(tuple(cut)))
    return out


# ----------------------------------------------------------------------------- llama.cpp


@dataclasses.dataclass(frozen=True)
class Edge:
    """A template text (at most ``CONTEXT`` characters) as llama.cpp tokenizes it, cut where
    caller text may join it: the plain text before its first control token (``head``) and
    after its last (``tail``), which tokenize together with the caller's text next to them,
    and the tokens between (``middle``), which the caller's text must leave as they are.
    ``free``: no control token (all of it plain). ``opaque``: its tokens could not be cut
    so (a control token that strips the whitespace next to it, overlapping control tokens);
    caller text next to it is never sent as text."""

    head: str = ""
    middle: tuple[int, ...] = ()
    tail: str = ""
    free: bool = False
    opaque: bool = False


OPAQUE = Edge(opaque=True)
Pair = tuple[Sequence[int], Sequence[int]]  # a text's tokens with and without special tokens


def scan_texts(text: str) -> list[str]:
    """The texts whose tokens ``read_edge`` reads: every prefix, then every suffix."""
    n = len(text)
    return [text[:i] for i in range(1, n + 1)] + [text[n - j :] for j in range(1, n + 1)]


def read_edge(text: str, prefixes: Sequence[Pair], suffixes: Sequence[Pair]) -> Edge:
    """``text``'s Edge from the tokens (with and without special tokens) of its prefixes
    and suffixes, shortest first. A text holds a control token where the two differ; the
    shortest prefix that does ends with the first control token, and what precedes that
    token is the prefix tokenized alone as the text's first tokens (likewise for the last
    token and the suffixes)."""
    n = len(text)
    if len(prefixes) != n or len(suffixes) != n or not n:
        return OPAQUE
    whole = list(prefixes[-1][0])
    first = next((i for i, (t, f) in enumerate(prefixes, 1) if list(t) != list(f)), 0)
    last = next((j for j, (t, f) in enumerate(suffixes, 1) if list(t) != list(f)), 0)
    if not first or not last:
        return Edge(text, (), text, free=True) if not first and not last else OPAQUE
    upto, since = list(prefixes[first - 1][0]), list(suffixes[last - 1][0])
    before, after = upto[:-1], since[1:]
    head = next((i for i in range(first) if _tokens(prefixes, i) == before), None)
    tail = next((j for j in range(last) if _tokens(suffixes, j) == after), None)
    if (
        head is None
        or tail is None
        or len(before) + len(after) >= len(whole)
        or whole[: len(upto)] != upto
        or whole[len(whole) - len(since) :] != since
    ):
        return OPAQUE
    middle = tuple(whole[len(before) : len(whole) - len(after)])
    return Edge(text[:head], middle, text[n - tail :] if tail else "")


def _tokens(scan: Sequence[Pair], length: int) -> list[int]:
    return list(scan[length - 1][0]) if length else []


Expected = list[str | tuple[int, ...]]  # plain runs to tokenize, template tokens between


def expected(window: Window, edges: Mapping[str, Edge]) -> Expected | None:
    """The window as llama.cpp tokenizes it when no control token takes a caller character:
    runs of plain text (caller text with the template's plain text next to it), each to be
    tokenized without special tokens, between the template's own tokens. None when a
    template text in it is opaque."""
    out: Expected = []
    run = ""
    for text, caller in window.parts:
        if caller:
            run += text
            continue
        edge = edges[text]
        if edge.opaque:
            return None
        if edge.free:
            run += text
            continue
        if run + edge.head:
            out.append(run + edge.head)
        out.append(edge.middle)
        run = edge.tail
    if run:
        out.append(run)
    return out


# ------------------------------------------------------------------------ vLLM and SGLang


def accounted(window: Window, controls: Mapping[str, int]) -> bool:
    """Whether every control token the engine made of the window (``controls``: each
    string and how many times) is one the template's text spells on its own: none takes a
    caller character."""
    templates = window.templates
    return all(n <= sum(t.count(s) for t in templates) for s, n in controls.items())
