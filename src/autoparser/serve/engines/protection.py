"""The protection of the caller's text, for every engine: the prompt goes as text, exactly
as the engine tokenizes it by itself, unless some caller text would become a control token;
then the caller's text goes as token ids that hold none. Written once over the engine's
tokenizer as its dialect offers it (``SplitTokenizer``: llama.cpp, which tokenizes with or
without parsing special tokens; ``NamingTokenizer``: vLLM and SGLang, which always parse
them but tell which tokens they made), so a dialect only says how to call its tokenizer.

Whether a prompt can go as text. Serve knows where the caller's text is
(``ChatParams.caller_spans``). Sending those spans as token ids of their own keeps them
plain, but tokenizes the prompt in pieces, not as the model was trained on: merges across a
piece's edge are lost, and a SentencePiece tokenizer adds a space at the start of every
piece. So the ids go only when they must: when the engine's own tokenization of the text
would make a control token of caller characters. That happens inside a span (the caller
spells ``<|im_start|>``) or across its edge (the template's text and the caller's spell one
together, template ``<|im_`` then user ``end|>``; or the caller's characters next to a
control token of the template make a longer one): engines match control tokens on the whole
text, wherever their strings occur. Both are asked of the engine's tokenizer:

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
tokenizing its prefixes and suffixes, ``scan_texts`` and ``read_edge``): ``ExactText``.
vLLM and SGLang name the control tokens they made (``plain_text``): each must be spelled
inside template text of the window (``accounted``): ``PlainIds``.

A control token longer than ``CONTEXT`` characters spelled across an edge is not seen: the
longest chat control tokens of common vocabularies have about 30.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from autoparser.serve.engines.base import BackendError, Generation, Hooks, Outgoing, Tokens
from autoparser.serve.engines.plain_text import (
    Checked,
    ControlTokensRemain,
    TokenCache,
    check_plain,
    spelled_controls,
)

log = logging.getLogger("autoparser.serve")


def _caller_pieces(prompt: str, spans: Sequence[tuple[int, int]]) -> list[Part]:
    """``autoparser.caller_pieces``, imported when a prompt is first protected: the
    registry of engines loads for the CLI's choices without the template layer."""
    from autoparser import caller_pieces

    return caller_pieces(prompt, spans)


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


# ----------------------------------------------------------------------------- protectors


class SplitTokenizer(Protocol):
    """An engine tokenizer that can leave special tokens as text (llama.cpp's
    ``parse_special``): many texts in one call."""

    where: str  # the tokenizer's URL, for error details

    async def tokenize_many(self, texts: list[str], special: bool) -> list[list[int]]:
        """Each text's ids, special tokens parsed (``special``) or read as plain text."""
        ...


class NamingTokenizer(Protocol):
    """An engine tokenizer that always parses special tokens (vLLM, SGLang) but tells which
    tokens it made: by their vocabulary strings (``Tokens.strings``), or through a
    detokenizer that drops special tokens on request."""

    where: str

    async def tokenize(self, text: str, add_special: bool = False) -> Tokens:
        """One text's tokens, with the engine's added tokens (BOS) or without."""
        ...

    async def detokenize(self, ids: Sequence[int], skip_special: bool) -> list[str]:
        """Each id's text, special tokens dropped (``skip_special``) or spelled."""
        ...


class ExactText:
    """Protection over a ``SplitTokenizer``: the prompt as text when no caller text would
    become a control token; else the caller's spans as token ids tokenized without
    special-token parsing (so a user's ``<|im_start|>`` stays text), the template's text as
    strings (which the engine tokenizes with special tokens, as always): a mixed prompt."""

    cache_size = 4096  # caller spans and windows kept checked (earlier turns repeat)
    edge_cache_size = 512  # template texts next to caller text, kept cut (a few per template)

    def __init__(self, tokenizer: SplitTokenizer, hooks: Hooks) -> None:
        self.tokenizer = tokenizer
        self._spans: TokenCache[str, Checked] = TokenCache(
            self.cache_size, lambda hit: hooks.cache("tokenize", hit)
        )
        self._windows: TokenCache[Window, bool] = TokenCache(
            self.cache_size, lambda hit: hooks.cache("boundary", hit)
        )
        self._edges: TokenCache[str, Edge] = TokenCache(
            self.edge_cache_size, lambda hit: hooks.cache("template_edge", hit)
        )

    async def prepare(self, gen: Generation) -> Outgoing:
        if not gen.caller_spans:
            return Outgoing(gen.prompt, "text" if gen.caller_spans == () else "unchecked")
        parts = _caller_pieces(gen.prompt, gen.caller_spans)
        spans, windows = await self._check(plan(parts))
        if all(c.clean for c in spans.values()) and all(windows.values()):
            return Outgoing(gen.prompt, "text")
        out: list[str | int] = [] if not parts or not parts[0][1] else [""]  # "" keeps BOS
        for text, caller in parts:
            if not caller:
                out.append(text)
            elif text:  # an empty span is nothing (and was not asked about)
                out.extend(spans[text].ids)
        return Outgoing(out, "protected")

    async def _check(self, todo: Plan) -> tuple[dict[str, Checked], dict[Window, bool]]:
        """Each span's tokens without special tokens, and whether they are its tokens with
        them too (then it spells no control token); whether each window tokenizes as its
        template texts' own tokens with the text between them plain (``expected``). What
        is not cached is asked in one pair of tokenizer calls, with and without special
        tokens (after one pair reading template texts not seen before, ``Edge``)."""
        spans, new_spans = self._spans.split(todo.spans)
        windows, new_windows = self._windows.split(todo.windows)
        if not new_spans and not new_windows:
            return spans, windows
        templates = dict.fromkeys(t for w in new_windows for t in w.templates)
        edges = await self._edges.lookup(templates, self._read_edges)
        plans = [expected(w, edges) for w in new_windows]
        judged = [w.text for w, e in zip(new_windows, plans, strict=True) if e is not None]
        runs = [p for e in plans if e for p in e if isinstance(p, str)]
        plain_texts = list(dict.fromkeys([*new_spans, *runs]))
        tokenize = self.tokenizer.tokenize_many
        special, plain = await asyncio.gather(
            tokenize([*new_spans, *judged], special=True),
            tokenize(plain_texts, special=False),
        )
        tokens = dict(zip(plain_texts, plain, strict=True))
        checked = {
            t: Checked(tokens[t], s == tokens[t])
            for t, s in zip(new_spans, special[: len(new_spans)], strict=True)
        }
        got = iter(special[len(new_spans) :])
        verdicts = {}
        for window, e in zip(new_windows, plans, strict=True):
            if e is None:  # an opaque template text in it: never sent as text
                verdicts[window] = False
                continue
            want = [i for p in e for i in (tokens[p] if isinstance(p, str) else p)]
            verdicts[window] = next(got) == want
        self._spans.keep(checked)
        self._windows.keep(verdicts)
        return {**spans, **checked}, {**windows, **verdicts}

    async def _read_edges(self, texts: list[str]) -> list[Edge]:
        """Each template text's Edge, from the tokens of all its prefixes and suffixes
        (``read_edge``), with and without special tokens."""
        scans = [scan_texts(t) for t in texts]
        flat = [s for scan in scans for s in scan]
        tokenize = self.tokenizer.tokenize_many
        special, plain = await asyncio.gather(
            tokenize(flat, special=True), tokenize(flat, special=False)
        )
        pairs = iter(zip(special, plain, strict=True))
        out = []
        for text in texts:
            scan = [next(pairs) for _ in range(2 * len(text))]
            out.append(read_edge(text, scan[: len(text)], scan[len(text) :]))
        return out


@dataclasses.dataclass(frozen=True)
class Offer:
    """What a ``NamingTokenizer`` offers to keep the caller's text plain: ``how`` it tells
    control tokens (``"strings"``: the token strings its tokenizer returns, vLLM;
    ``"detokenize"``: a detokenizer dropping special tokens on request, SGLang), and the
    ids it adds around a text prompt (BOS), which a prompt of ids must carry itself."""

    how: str
    prefix: tuple[int, ...] = ()
    suffix: tuple[int, ...] = ()


class PlainIds:
    """Protection over a ``NamingTokenizer``: the prompt as text when no caller text would
    become a control token (every span and the windows around their edges tokenized);
    else as token ids: the template's pieces tokenized as usual, the caller's text with no
    control token in it (``plain_text``). What the tokenizer offers is found out once (an
    engine without it gets the text, and a log line says so once). Every text not cached is
    tokenized, the calls in parallel."""

    cache_size = 4096  # texts kept tokenized: template pieces and caller spans
    known_ids = 65536  # token ids whose control-ness the detokenizer told
    parallel = 8  # tokenizer calls in flight at once (vLLM's /tokenize takes one text a call)

    def __init__(self, tokenizer: NamingTokenizer, hooks: Hooks) -> None:
        self.tokenizer = tokenizer
        self._in_flight = asyncio.Semaphore(self.parallel)
        self._tokens: TokenCache[tuple[str, bool], Checked] = TokenCache(
            self.cache_size, lambda hit: hooks.cache("tokenize", hit)
        )
        self._windows: TokenCache[Window, bool] = TokenCache(
            self.cache_size, lambda hit: hooks.cache("boundary", hit)
        )
        self._offer: Offer | None = None
        self._known = False
        self._probing = asyncio.Lock()
        self._controls: OrderedDict[int, str] = OrderedDict()  # id -> its string, "" if plain

    async def prepare(self, gen: Generation) -> Outgoing:
        if not gen.caller_spans:
            return Outgoing(gen.prompt, "text" if gen.caller_spans == () else "unchecked")
        offer = await self.offer()
        if offer is None:
            return Outgoing(gen.prompt, "unchecked")
        parts = _caller_pieces(gen.prompt, gen.caller_spans)
        todo = plan(parts)
        spans, windows = await asyncio.gather(
            self._tokens.lookup(((t, True) for t in todo.spans), self._tokenize_parts),
            self._windows.lookup(todo.windows, self._check_windows),
        )
        if all(c.clean for c in spans.values()) and all(windows.values()):
            return Outgoing(gen.prompt, "text")
        found = await self._tokens.lookup(
            ((t, False) for t, caller in parts if not caller), self._tokenize_parts
        )
        found.update(spans)
        out: list[str | int] = [*offer.prefix]
        for part in parts:
            if part[0]:  # an empty span is nothing (and was not asked about)
                out.extend(found[part].ids)
        out.extend(offer.suffix)
        return Outgoing(out, "protected")

    async def offer(self) -> Offer | None:
        """What the engine offers to keep the caller's text plain, found out once (None:
        nothing, the prompt goes as text). An engine that does not answer raises
        BackendError and is asked again next time."""
        if not self._known:
            async with self._probing:
                if not self._known:
                    self._offer, why = await self._probe()
                    self._known = True
                    if self._offer is None:
                        log.warning(
                            "plain user text: unavailable with this engine (%s): the prompt "
                            "is sent as text, and control-token strings in user text become "
                            "control tokens",
                            why,
                        )
                    else:
                        log.info(
                            "plain user text: prompts go as token ids, user text cut where "
                            "it spells a control token (told by %s)",
                            "/tokenize token strings"
                            if self._offer.how == "strings"
                            else "/detokenize skip_special_tokens",
                        )
        return self._offer

    async def _probe(self) -> tuple[Offer | None, str]:
        """Tokenize one character with and without the tokenizer's added tokens: the
        answer's shape says whether and how the engine can serve, the difference is the
        ids a prompt of ids must carry itself."""
        try:
            framed = await self._tokenize("a", add_special=True)
            bare = await self._tokenize("a")
        except BackendError as exc:
            if exc.refused:
                return None, f"no /tokenize answering token ids: {exc.public}"
            raise
        n = len(bare.ids)
        at = next(
            (i for i in range(len(framed.ids) - n + 1) if framed.ids[i : i + n] == bare.ids),
            None,
        )
        if not n or at is None:
            return None, "its /tokenize answers inconsistent token ids"
        prefix, suffix = tuple(framed.ids[:at]), tuple(framed.ids[at + n :])
        if bare.strings is not None:
            return Offer("strings", prefix, suffix), ""
        try:
            await self._detokenize(bare.ids, skip_special=True)
        except BackendError as exc:
            if exc.refused:
                return None, "its /tokenize returns no token strings and it has no batch "
                "/detokenize"
            raise
        return Offer("detokenize", prefix, suffix), ""

    async def _tokenize(self, text: str, add_special: bool = False) -> Tokens:
        async with self._in_flight:
            return await self.tokenizer.tokenize(text, add_special)

    async def _detokenize(self, ids: Sequence[int], skip_special: bool) -> list[str]:
        async with self._in_flight:
            return await self.tokenizer.detokenize(ids, skip_special)

    async def _tokenize_parts(self, parts: list[tuple[str, bool]]) -> list[Checked]:
        """Template text tokenized as usual; the caller's text with no control token, and
        whether the engine's own tokenization of it had none."""
        tokenize = self._tokenize

        async def one(text: str, caller: bool) -> Checked:
            if not caller:
                return Checked((await tokenize(text)).ids, True)
            try:
                return await check_plain(text, tokenize, self._control_strings)
            except ControlTokensRemain as exc:
                raise BackendError(
                    "the engine's tokenizer makes control tokens of the user's text",
                    f"{self.tokenizer.where}: {exc}",
                ) from exc

        return list(await asyncio.gather(*(one(text, caller) for text, caller in parts)))

    async def _check_windows(self, windows: list[Window]) -> list[bool]:
        """Whether every control token the engine makes of each window is spelled inside
        the window's template text (``accounted``)."""

        async def one(window: Window) -> bool:
            text = window.text
            counts = await self._control_counts(text, await self._tokenize(text))
            return accounted(window, counts)

        return list(await asyncio.gather(*(one(w) for w in windows)))

    async def _control_strings(self, text: str, tokens: Tokens) -> list[str]:
        """The strings of the control tokens in ``tokens`` (``_control_counts``)."""
        return list(await self._control_counts(text, tokens))

    async def _control_counts(self, text: str, tokens: Tokens) -> Counter[str]:
        """The strings of the control tokens in ``tokens``, each with how many there are: by
        their spelling (token strings), or asked of the detokenizer (a special token's text
        is empty with ``skip_special``, its own string without), remembered per id."""
        if self._offer is None or self._offer.how == "strings":
            written = set(spelled_controls(text, tokens))
            return Counter(s for s in tokens.strings or () if s in written)
        known = {i: self._controls[i] for i in tokens.ids if i in self._controls}
        unknown = [i for i in dict.fromkeys(tokens.ids) if i not in known]
        if unknown:
            detokenize = self._detokenize
            skipped = await detokenize(unknown, skip_special=True)
            dropped = [i for i, t in zip(unknown, skipped, strict=True) if not t]
            kept = await detokenize(dropped, skip_special=False) if dropped else []
            spelled = dict(zip(dropped, kept, strict=True))
            for i in unknown:
                known[i] = self._controls[i] = spelled.get(i, "")
            while len(self._controls) > self.known_ids:
                self._controls.popitem(last=False)
        return Counter(known[i] for i in tokens.ids if known[i])
