"""Probe conversations: the needles every probe renders, memoised per template text."""

from __future__ import annotations

from autoparser.template.probe import (
    ASSISTANT_MSG,
    CALL_ID,
    FUN_FIRST,
    NEEDLES,
    THINKING,
    USER_MSG,
    VALUE_FIRST,
    Probe,
    probe_for,
)
from autoparser.template.renderer import Renderer

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_needles_are_distinct_and_none_holds_another() -> None:
    assert len(set(NEEDLES)) == len(NEEDLES)
    for a in NEEDLES:
        assert not any(a != b and a in b for b in NEEDLES if not b.isdigit()), a


def test_renders_are_memoised_and_refusals_are_none() -> None:
    probe = Probe(Renderer(CHATML))
    first = probe.turn(ASSISTANT_MSG)
    assert first is not None and USER_MSG in first and ASSISTANT_MSG in first
    assert probe.turn(ASSISTANT_MSG) is first
    refusing = Probe(Renderer("{{ raise_exception('no') }}"))
    assert refusing.turn(ASSISTANT_MSG) is None


def test_the_reasoning_key_the_template_reads_is_found() -> None:
    probe = Probe(Renderer(CHATML))
    assert probe.reasoning_field() == "reasoning_content"
    shown = probe.turn(ASSISTANT_MSG, THINKING)
    assert shown is not None and f"<think>{THINKING}</think>" in shown
    assert (
        Probe(Renderer("{% for m in messages %}{{ m.content }}{% endfor %}")).reasoning_field()
        == ""
    )


def test_call_turns_carry_the_needles() -> None:
    probe = Probe(Renderer(CHATML))
    rendered = probe.calls(((FUN_FIRST, {"AA_ARG_FST_AA": VALUE_FIRST}, CALL_ID),))
    assert rendered is not None
    assert f"<tool_call>{FUN_FIRST} " in rendered and VALUE_FIRST in rendered
    assert not probe.args_as_string  # objects were accepted


def test_probes_of_one_text_are_shared() -> None:
    a, b = Renderer(CHATML), Renderer(CHATML, name="other")
    assert probe_for(a) is probe_for(b)
    assert probe_for(a) is not probe_for(Renderer(CHATML + " "))
    assert probe_for(a) is not probe_for(Renderer(CHATML, eos_token="</s>"))


def test_variants_share_the_memo() -> None:
    probe = Probe(Renderer(CHATML))
    text = probe.turn(ASSISTANT_MSG)
    assert probe.with_follow_up("").turn(ASSISTANT_MSG) is text
    assert probe.with_follow_up("user").turn(ASSISTANT_MSG) != text
