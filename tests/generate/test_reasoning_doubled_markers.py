"""Doubled reasoning markers (issue 34): a second ``</think>`` is markup the lenient parser
drops, no raw marker reaches the content; a doubled opener (``<think><think>``) is a strict
xfail, for what dropping it cost the normal path. Inline templates of our own: a ChatML one
whose model writes ``<think>`` itself, and one whose generation prompt opens it."""

from __future__ import annotations

import pytest
from helpers.formats import USER, check_streaming

from autoparser import ChatParams, ChatTemplate

_TURNS = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}<|im_start|>assistant\n"
    "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    "{%- endif %}{{ message.content or '' }}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
)
MODEL_OPENS = _TURNS + "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
FORCED_OPEN = _TURNS + "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>{% endif %}"


def _params(source: str) -> ChatParams:
    return ChatTemplate(source).apply(USER, call_id_seed=1)


DOUBLED_OPENER = (
    "a doubled opener (<think><think>) is read as reasoning text: the lenient alternative "
    "that drops it cost every parse of a reasoning model 1.5-2 µs (a step after the opener, "
    "or an alternative before it, in the compiled one-shot parse), more than the normal "
    "path may pay (issue 36); needs a cheaper form"
)


@pytest.mark.parametrize("source", [MODEL_OPENS, FORCED_OPEN], ids=["model", "forced"])
@pytest.mark.parametrize(
    "text",
    [
        "<think>Let me see.</think></think>Answer.",
        "<think>Let me see.</think>\n</think>\nAnswer.",
        pytest.param(
            "<think><think>Let me see.</think>Answer.",
            marks=pytest.mark.xfail(reason=DOUBLED_OPENER, strict=True),
        ),
        pytest.param(
            "<think>\n<think>\nLet me see.</think>\n</think>\nAnswer.",
            marks=pytest.mark.xfail(reason=DOUBLED_OPENER, strict=True),
        ),
    ],
)
def test_doubled_markers_are_dropped(source: str, text: str) -> None:
    params = _params(source)
    message = params.parse(text)
    assert (message.reasoning_content, message.content) == ("Let me see.", "Answer.")
    assert not message.truncated and message.findings == ()
    check_streaming(params, text, count=8, seed=4)


def test_a_repeated_word_opener_stays_text() -> None:
    """Only markup repeats are dropped: a closer written after more text stays content."""
    params = _params(MODEL_OPENS)
    message = params.parse("<think>a</think>b</think>c")
    assert message.reasoning_content == "a" and message.content == "b</think>c"
    check_streaming(params, "<think>a</think>b</think>c", count=6, seed=5)
