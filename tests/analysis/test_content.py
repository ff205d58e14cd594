"""Content analysis: whether the answer is wrapped, and what ends an assistant turn."""

from __future__ import annotations

import pytest
from helpers.paths import own_path

from autoparser.analysis.content import analyze_content, assistant_turn, split_post
from autoparser.analysis.model import ContentMode, ReasoningAnalysis
from autoparser.template.probe import ASSISTANT_MSG, Probe
from autoparser.template.renderer import Renderer

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WRAPPED = (
    "{% for m in messages %}<|turn|>{{ m.role }}:"
    "{% if m.role == 'assistant' %}<answer>{{ m.content }}</answer>{% else %}{{ m.content }}"
    "{% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|turn|>assistant:{% endif %}"
)
NO_CLOSER = (
    "{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}### assistant:\n{% endif %}"
)


def _probe(source: str) -> Probe:
    return Probe(Renderer(source))


def test_a_plain_answer_ends_with_the_turn_marker() -> None:
    content, end_of_turn = analyze_content(_probe(CHATML), ReasoningAnalysis(), "")
    assert content.mode is ContentMode.PLAIN and (content.start, content.end) == ("", "")
    assert end_of_turn == "<|im_end|>"


def test_a_wrapped_answer_names_its_opener_and_closer() -> None:
    content, end_of_turn = analyze_content(_probe(WRAPPED), ReasoningAnalysis(), "")
    assert content.mode is ContentMode.ALWAYS_WRAPPED
    assert (content.start, content.end, end_of_turn) == ("<answer>", "</answer>", "<|end|>")


def test_the_assistant_turn_starts_after_the_role_header() -> None:
    probe = _probe(CHATML)
    turn = assistant_turn(probe, probe.turn(ASSISTANT_MSG))
    assert turn is not None and turn.startswith(ASSISTANT_MSG)
    assert assistant_turn(probe, None) is None


def test_a_turn_without_a_closing_marker_ends_where_the_next_turn_starts() -> None:
    content, end_of_turn = analyze_content(_probe(NO_CLOSER), ReasoningAnalysis(), "")
    assert content.mode is ContentMode.PLAIN
    assert end_of_turn == "### user:"


@pytest.mark.parametrize(
    ("post", "user_end", "expected"),
    [
        ("</answer><|end|>", ["<|end|>"], ("</answer>", "<|end|>")),
        ("<|im_end|>\n", ["<|im_end|>"], ("", "<|im_end|>")),
        ("<|eot|>", [], ("", "<|eot|>")),
        ("\n\n", [], ("", "")),
    ],
)
def test_split_post(post: str, user_end: list[str], expected: tuple[str, str]) -> None:
    assert split_post(post, user_end) == expected


def test_the_own_wrapped_template_is_read_as_wrapped() -> None:
    probe = _probe(own_path("wrapped_content").read_text())
    content, end_of_turn = analyze_content(probe, ReasoningAnalysis(), "")
    assert content.mode is ContentMode.ALWAYS_WRAPPED
    assert (content.start, content.end) == ("<|START_RESPONSE|>", "<|END_RESPONSE|>")
    assert end_of_turn == "<|END_OF_TURN_TOKEN|>"
