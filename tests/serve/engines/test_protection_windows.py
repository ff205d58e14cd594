"""Which parts of a prompt are asked of the engine before it may go as text (the caller's
spans, windows around their edges), and how a window's tokens are judged: llama.cpp's by
the template texts' own tokens (``read_edge``, ``expected``), vLLM's and SGLang's by the
control tokens they name (``accounted``). The tokenizer is the stand-in engine's (one id
per character, ``<|...|>`` one control token, optionally SentencePiece-like)."""

from __future__ import annotations

import pytest
from helpers.serve_standin import SPACE, SPECIAL, standin_tokens

from autoparser.serve.engines.protection import (
    CONTEXT,
    OPAQUE,
    Edge,
    Window,
    accounted,
    expected,
    plan,
    read_edge,
    scan_texts,
)

OPEN = "<|im_end|>\n<|im_start|>user\n"
CLOSE = "<|im_end|>\n<|im_start|>assistant\n"
LONG = "<|im_start|>system\n" + "You are a helpful assistant. " * 8 + OPEN


def edge_of(text: str, spm: bool = False) -> Edge:
    scan = scan_texts(text)
    pairs = [(standin_tokens(s, True, spm), standin_tokens(s, False, spm)) for s in scan]
    return read_edge(text, pairs[: len(text)], pairs[len(text) :])


def window_tokens(window: Window, spm: bool = False) -> tuple[list[int], list[int] | None]:
    """The window's tokens as the engine makes them, and as ``expected`` says they are when
    no control token takes a caller character (None: not judged)."""
    edges = {t: edge_of(t, spm) for t in window.templates}
    plan_ = expected(window, edges)
    if plan_ is None:
        return standin_tokens(window.text, True, spm), None
    want = [
        i
        for piece in plan_
        for i in (standin_tokens(piece, False, spm) if isinstance(piece, str) else piece)
    ]
    return standin_tokens(window.text, True, spm), want


def test_a_plan_asks_about_each_span_and_each_edge() -> None:
    parts = [(LONG, False), ("Hi there", True), (CLOSE, False)]
    todo = plan(parts)
    assert todo.spans == ("Hi there",)
    # A short span: one window, the whole span with the template text either side of it,
    # CONTEXT characters of the long piece, all of the short one.
    assert todo.windows == (Window(((LONG[-CONTEXT:], False), ("Hi there", True), (CLOSE, False))),)
    assert todo.templates == (LONG[-CONTEXT:], CLOSE)


def test_a_long_span_gets_a_window_at_each_edge() -> None:
    text = "x" * (3 * CONTEXT)
    todo = plan([(LONG, False), (text, True), (LONG, False)])
    assert [w.parts for w in todo.windows] == [
        ((LONG[-CONTEXT:], False), ("x" * CONTEXT, True)),
        (("x" * CONTEXT, True), (LONG[:CONTEXT], False)),
    ]


def test_spans_across_a_short_template_piece_are_one_stretch() -> None:
    """Two spans with a short template piece between (``\\n</think>\\n\\n``): a control token
    spelled from one span across the piece into the other is in one window."""
    parts = [("<|im_start|>assistant\n", False), ("hmm <|im", True), ("_", False)]
    parts += [("end|> ok", True), (CLOSE, False)]
    (window,) = plan(parts).windows
    assert window.parts == tuple(parts)
    assert window.templates == ("<|im_start|>assistant\n", "_", CLOSE)


def test_adjacent_spans_meet_in_a_window_and_caller_only_text_has_none() -> None:
    assert plan([("<|im_", True), ("end|>", True)]).windows == (
        Window((("<|im_", True), ("end|>", True))),
    )
    assert plan([("just the caller's text", True)]).windows == ()
    # An empty span: the template text either side of it is one (its own "<|te|>").
    assert plan([("<|", False), ("", True), ("te|>", False)]) == plan([])
    assert plan([("only template", False)]) == plan([])


@pytest.mark.parametrize("spm", [False, True], ids=["bpe", "spm"])
def test_edges_cut_template_text_at_its_control_tokens(spm: bool) -> None:
    edge = edge_of(OPEN, spm)
    assert (edge.head, edge.tail, edge.free, edge.opaque) == ("", "user\n", False, False)
    whole = standin_tokens(OPEN, True, spm)
    assert list(edge.middle) == whole[: len(whole) - len(standin_tokens("user\n", True, spm))]
    text = "Be brief.<|im_end|>\n<|im_start|>user\n"
    edge = edge_of(text, spm)
    assert (edge.head, edge.tail) == ("Be brief.", "user\n")
    plain = "no control token"
    assert edge_of(plain, spm) == Edge(plain, (), plain, free=True)


def test_a_scan_that_does_not_add_up_is_opaque() -> None:
    text = "a<|x|>"
    pairs = [(standin_tokens(s, True), standin_tokens(s, False)) for s in scan_texts(text)]
    assert not read_edge(text, pairs[:6], pairs[6:]).opaque
    assert read_edge(text, pairs[:5], pairs[6:]) is OPAQUE  # a prefix missing
    broken = [*pairs[:6], *[(t[::-1], f) for t, f in pairs[6:]]]  # suffixes not the text's
    assert read_edge(text, broken[:6], broken[6:]) is OPAQUE
    assert expected(Window((("hi", True), (text, False))), {text: OPAQUE}) is None


@pytest.mark.parametrize("spm", [False, True], ids=["bpe", "spm"])
@pytest.mark.parametrize(
    ("before", "caller", "after", "crossing"),
    [
        (OPEN, "Hello, world", CLOSE, False),
        (OPEN, "a | b > c <| d", CLOSE, False),
        (OPEN + "<|", "im_end|> hi", CLOSE, True),  # the template's "<|" and the user's rest
        (OPEN, "hi <|im_", "end|>" + CLOSE, True),  # the user's start, the template's rest
        ("<|im_start|>user\n<|", "note", "|>" + CLOSE, True),  # the span inside one
    ],
)
def test_a_window_tokenizes_as_expected_unless_a_control_token_crosses_an_edge(
    spm: bool, before: str, caller: str, after: str, crossing: bool
) -> None:
    window = Window(((before, False), (caller, True), (after, False)))
    got, want = window_tokens(window, spm)
    assert want is not None
    assert (got != want) is crossing
    if not crossing:  # what the check compares against is the engine's own tokenization
        assert got == standin_tokens(before + caller + after, True, spm)


def test_a_control_token_that_strips_whitespace_is_judged_conservatively() -> None:
    """A control token that eats the whitespace after it (llama.cpp's RSTRIP, Phi-3's):
    caller text starting with whitespace tokenizes otherwise next to it than on its own,
    so it is not sent as text; caller text without leading whitespace is."""

    def tokens(text: str, special: bool) -> list[int]:
        ids = standin_tokens(text, special)
        out: list[int] = []
        skipping = False
        for i in ids:
            if skipping and chr(i).isspace():
                continue
            skipping = i == -2
            out.append(i)
        return out

    template = "<|user|>\n"
    scan = [(tokens(s, True), tokens(s, False)) for s in scan_texts(template)]
    edge = read_edge(template, scan[: len(template)], scan[len(template) :])
    assert (edge.head, edge.middle, edge.tail) == ("", (-2,), "")
    for caller, same in (("hi", True), (" hi", False)):
        window = Window(((template, False), (caller, True)))
        plan_ = expected(window, {template: edge})
        assert plan_ is not None
        want = [i for p in plan_ for i in (tokens(p, False) if isinstance(p, str) else p)]
        assert (tokens(window.text, True) == want) is same


def test_spm_spaces_come_where_the_engine_puts_them() -> None:
    """SentencePiece-like: a space token starts each plain stretch after a control token.
    Tokenized whole, the caller's text follows the template's ``user\\n`` with none; on its
    own it would get one."""
    whole = standin_tokens(OPEN + "Hi" + CLOSE, True, spm=True)
    pieces = standin_tokens([OPEN, *standin_tokens("Hi", False, spm=True), CLOSE], True, True)
    assert whole[whole.index(ord("H")) - 1] == ord("\n")
    assert pieces[pieces.index(ord("H")) - 1] == SPACE
    assert len(pieces) == len(whole) + 1 and SPACE in whole


def test_accounted_control_tokens_are_spelled_in_template_text() -> None:
    window = Window(((OPEN + "<|", False), ("im_end|> hi", True), (CLOSE, False)))
    made = [m.group() for m in SPECIAL.finditer(window.text)]
    counts = {s: made.count(s) for s in made}
    assert not accounted(window, counts)  # one <|im_end|> more than the template spells
    clean = Window(((OPEN, False), ("hi", True), (CLOSE, False)))
    made = [m.group() for m in SPECIAL.finditer(clean.text)]
    assert accounted(clean, {s: made.count(s) for s in made})
    assert not accounted(clean, {"<|note|>": 1})
