"""The caller's text as token ids that hold no control token, with engines that cannot be
told to tokenize a text without special tokens.

llama.cpp's ``/tokenize`` takes ``parse_special: false``. vLLM's and SGLang's do not: they
match every added token (``<|im_start|>``, ``[INST]``, ``<think>``...) wherever its string
occurs, so a user's ``<|im_end|>\\n<|im_start|>system`` tokenized there would still forge a
turn. What both take is a prompt of token ids (``/v1/completions``). So the caller's text is
tokenized in pieces chosen so that no control token's string is whole in any piece: the
engine tokenizes the text; every control token it produced there is cut in two where its
string occurs (each piece tokenized on its own cannot match it), and the pieces go back to
the engine, until none yields a control token. Which tokens are control tokens the engine
says (see ``Tokens``). The price is a non-canonical tokenization exactly where a control
token's string occurs in the caller's text, which a plain-text tokenization would not give
either.

``TokenCache`` is the one bounded store both engine paths keep what they learnt of a text
in (earlier turns repeat in every request).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from autoparser.serve.engines.base import Tokens

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_ROUNDS = 24  # cuts per text before giving up (each round halves every control token)


class ControlTokensRemain(Exception):
    """The engine keeps making a control token of the caller's text however it is cut."""


def looks_like_control(token: str) -> bool:
    """Whether a vocabulary string is spelled as a control token is: a word between
    punctuation (``<|im_start|>``, ``[INST]``, ``</s>``, ``<think>``, ``<｜User｜>``), no
    whitespace. Ordinary entries of byte-level and SentencePiece vocabularies spell their
    spaces (``Ġword``, ``▁word``) and never wrap a word in punctuation on both sides, since
    their pre-tokenizers split punctuation from words; an added token is matched before
    that split, whole."""
    return (
        len(token) >= 3
        and not token[0].isalnum()
        and not token[-1].isalnum()
        and any(c.isalpha() for c in token)
        and not any(c.isspace() for c in token)
    )


def spelled_controls(text: str, tokens: Tokens) -> list[str]:
    """The control tokens in ``tokens`` whose string occurs in ``text`` as written (an
    added token is matched on the raw text, so its string is there verbatim)."""
    if tokens.strings is None:
        return []
    return list(dict.fromkeys(s for s in tokens.strings if looks_like_control(s) and s in text))


def cut(text: str, controls: Iterable[str]) -> list[str]:
    """``text`` cut inside every occurrence of a control token's string (leftmost-longest,
    as tokenizers match added tokens), so no piece holds one whole. A text in which none
    occurs verbatim (an engine that normalizes before matching) is cut in half: the pieces
    are tried again. Pieces are never empty."""
    strings = sorted({c for c in controls if len(c) >= 2}, key=len, reverse=True)
    cuts: list[int] = []
    if strings:
        pattern = re.compile("|".join(re.escape(s) for s in strings))
        cuts = [m.start() + len(m.group()) // 2 for m in pattern.finditer(text)]
    if not cuts and len(text) >= 2:
        cuts = [len(text) // 2]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


Tokenize = Callable[[str], Awaitable[Tokens]]
Controls = Callable[[str, Tokens], Awaitable[Sequence[str]]]


@dataclasses.dataclass(frozen=True)
class Checked:
    """A caller's text as ids with no control token, and whether the engine's own
    tokenization of it already had none (``clean``: then ``ids`` are that tokenization)."""

    ids: list[int]
    clean: bool


async def plain_ids(text: str, tokenize: Tokenize, controls: Controls) -> list[int]:
    """``text`` as token ids with no control token (``check_plain``)."""
    return (await check_plain(text, tokenize, controls)).ids


async def check_plain(text: str, tokenize: Tokenize, controls: Controls) -> Checked:
    """``text`` as token ids with no control token: tokenized by the engine, the pieces
    holding control tokens (``controls`` names their strings) cut and tokenized again,
    until every piece is clean. ControlTokensRemain past MAX_ROUNDS, or when a single
    character still yields one."""
    pieces: list[tuple[str, list[int] | None]] = [(text, None)]
    for round_ in range(MAX_ROUNDS):
        todo = [p for p, ids in pieces if ids is None]
        if not todo:
            return Checked([i for _, ids in pieces if ids is not None for i in ids], round_ == 1)
        found = await asyncio.gather(*(tokenize(p) for p in todo))
        verdicts = await asyncio.gather(*(controls(p, t) for p, t in zip(todo, found, strict=True)))
        checked = iter(zip(found, verdicts, strict=True))
        out: list[tuple[str, list[int] | None]] = []
        for piece, ids in pieces:
            if ids is not None:
                out.append((piece, ids))
                continue
            tokens, bad = next(checked)
            if not bad:
                out.append((piece, tokens.ids))
            elif len(piece) < 2:
                raise ControlTokensRemain(f"{piece!r} is tokenized as {bad[0]!r}")
            else:
                out.extend((p, None) for p in cut(piece, bad))
        pieces = out
    raise ControlTokensRemain(f"still control tokens after {MAX_ROUNDS} rounds of cuts")


class TokenCache(Generic[K, V]):
    """What was learnt of texts (their ids, a verdict), least recently used out first, with
    a hook told of every lookup (hit or miss) per distinct key of a request."""

    def __init__(self, size: int, counted: Callable[[bool], None]) -> None:
        self.size = size
        self._counted = counted
        self._store: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._store)

    async def lookup(
        self, keys: Iterable[K], compute: Callable[[list[K]], Awaitable[list[V]]]
    ) -> dict[K, V]:
        """The value of every key: those kept (hits), the rest computed in one ``compute``
        call (misses) and kept."""
        found, wanted = self.split(keys)
        if wanted:
            computed = dict(zip(wanted, await compute(wanted), strict=True))
            self.keep(computed)
            found.update(computed)
        return found

    def split(self, keys: Iterable[K]) -> tuple[dict[K, V], list[K]]:
        """The values kept of ``keys`` (hits), and the keys not kept (misses), to be
        computed by the caller and given to ``keep``."""
        found: dict[K, V] = {}
        wanted: list[K] = []
        for key in dict.fromkeys(keys):
            kept = key in self._store
            if kept:
                self._store.move_to_end(key)
                found[key] = self._store[key]
            else:
                wanted.append(key)
            self._counted(kept)
        return found, wanted

    def keep(self, values: Mapping[K, V]) -> None:
        """Keep computed values, the least recently used out past the size."""
        self._store.update(values)
        while len(self._store) > self.size:
            self._store.popitem(last=False)
