"""Reasoning switches: the template variable that turns thinking on and off is found by
probing, recorded in caps and analysis, and the request's enable_thinking is mapped onto it."""

from __future__ import annotations

import pytest
from helpers.paths import OWN_TEMPLATES, own_path

from autoparser import ChatTemplate
from autoparser.analysis import ReasoningMode
from autoparser.template.switches import (
    SYSTEM_DIRECTIVE,
    ThinkingSwitch,
    switch_candidates,
    with_directive,
)

USER = [{"role": "user", "content": "What is 2+2?"}]


def _own(name: str) -> ChatTemplate:
    return ChatTemplate.from_file(own_path(name))


# (template, switch, reasoning mode, prompt end with thinking on, prompt end with it off)
OWN_SWITCHES = [
    (
        "switch_thinking",
        ThinkingSwitch("thinking", True, False),
        ReasoningMode.FORCED_CLOSED,
        "<|Assistant|><think>",
        "<|Assistant|></think>",
    ),
    (
        "switch_thinking_mode",
        ThinkingSwitch("thinking_mode", "enabled", "disabled"),
        ReasoningMode.FORCED_CLOSED,
        "<|im_start|>assistant\n<mm:think>",
        "<|im_start|>assistant\n<mm:think></mm:think>\n",
    ),
    (
        "switch_reasoning_effort",
        ThinkingSwitch("reasoning_effort", "high", "none"),
        ReasoningMode.TAG_BASED,
        "[BOT]",
        "[BOT]<thought></thought>",
    ),
]


@pytest.mark.parametrize(
    ("name", "switch", "mode", "on_end", "off_end"), OWN_SWITCHES, ids=[c[0] for c in OWN_SWITCHES]
)
def test_own_switch_is_found_and_mapped(
    name: str, switch: ThinkingSwitch, mode: ReasoningMode, on_end: str, off_end: str
) -> None:
    template = _own(name)
    assert template.caps.thinking_switch == switch
    assert template.caps.supports_thinking_toggle
    reasoning = template.analyze().reasoning
    assert (reasoning.switch_variable, reasoning.switch_on, reasoning.switch_off) == (
        switch.variable,
        switch.on,
        switch.off,
    )
    assert reasoning.mode is mode
    on = template.apply(USER, enable_thinking=True)
    off = template.apply(USER, enable_thinking=False)
    assert on.prompt.endswith(on_end) and not on.prompt.endswith(off_end)
    assert off.prompt.endswith(off_end)
    # Reasoning opened by the prompt is parsed as reasoning; closed, the output is content.
    if mode is ReasoningMode.FORCED_CLOSED:
        assert on.thinking_forced_open and not off.thinking_forced_open
        message = on.parse(f"Adding.{reasoning.end}4")
        assert (message.reasoning_content, message.content) == ("Adding.", "4")
    assert off.parse("4").content == "4"


def test_explicit_template_kwargs_win_over_the_mapped_switch() -> None:
    template = _own("switch_thinking")
    params = template.apply(USER, enable_thinking=True, thinking=False)
    assert params.prompt.endswith("<|Assistant|></think>")
    params = template.apply(USER, enable_thinking=False, thinking=True)
    assert params.prompt.endswith("<|Assistant|><think>")


def test_without_enable_thinking_the_template_default_applies() -> None:
    assert _own("switch_thinking").apply(USER).prompt.endswith("<|Assistant|></think>")
    assert _own("switch_reasoning_effort").apply(USER).prompt.endswith("[BOT]")


def test_a_flag_changing_only_the_system_text_is_no_switch() -> None:
    # switch_thinking's `verbose_tools` is a candidate, but never the switch.
    source = (OWN_TEMPLATES / "reasoning/switch_thinking.jinja").read_text(encoding="utf-8")
    assert set(switch_candidates(source)) == {"thinking", "verbose_tools"}
    effort_in_system_only = (
        "{{ 'Reasoning: ' + (reasoning_effort if reasoning_effort is defined else 'medium') }}"
        "{% for m in messages %}<u>{{ m.content }}</u>{% endfor %}"
        "{% if add_generation_prompt %}<a>{% endif %}"
    )
    template = ChatTemplate(effort_in_system_only)
    assert template.caps.thinking_switch is None
    assert template.analyze().reasoning.switch_variable == ""


def test_switch_candidates_rank_reasoning_names_first_and_skip_context() -> None:
    source = (
        "{% set local = 1 %}{% if messages and tools and add_generation_prompt %}{% endif %}"
        "{% if color %}{% endif %}{% if reasoning_effort %}{% endif %}"
        "{% if thinking %}{% endif %}{% if enable_thinking %}{% endif %}{% if local %}{% endif %}"
        "{{ not_in_a_condition }}"
    )
    assert switch_candidates(source) == ("enable_thinking", "thinking", "reasoning_effort", "color")
    assert switch_candidates("{% if %}") == ()  # unparsable: no candidates, no crash


def test_an_inverted_flag_is_on_when_false() -> None:
    source = (
        "{% for m in messages %}<u>{{ m.content }}</u>{% endfor %}"
        "{% if add_generation_prompt %}<a>{% if not skip_thinking %}<think>{% endif %}{% endif %}"
    )
    assert ChatTemplate(source).caps.thinking_switch == ThinkingSwitch("skip_thinking", False, True)


def test_a_token_budget_switches_with_numbers() -> None:
    source = (
        "{% for m in messages %}<u>{{ m.content }}</u>{% endfor %}"
        "{% if add_generation_prompt %}<a>"
        "{% if thinking_budget is defined and thinking_budget == 0 %}<think></think>{% endif %}"
        "{% endif %}"
    )
    assert ChatTemplate(source).caps.thinking_switch == ThinkingSwitch("thinking_budget", -1, 0)


def test_enable_thinking_is_the_switch_where_the_template_reads_it() -> None:
    switch = _own("forced_closed").caps.thinking_switch
    assert switch == ThinkingSwitch("enable_thinking", True, False)


def test_a_flag_not_named_for_reasoning_must_act_only_in_the_generation_prompt() -> None:
    printed_after_the_turn = (
        "{% for m in messages %}<u>{{ m.content }}</u>{% endfor %}<a>"
        "{{ response }}{% if response %}<u>{% endif %}"
    )
    assert ChatTemplate(printed_after_the_turn).caps.thinking_switch is None
    prompt_only = (
        "{% for m in messages %}<u>{{ m.content }}</u>{% endfor %}"
        "{% if add_generation_prompt %}<a>{% if deliberate %}<think>{% endif %}{% endif %}"
    )
    assert ChatTemplate(prompt_only).caps.thinking_switch == ThinkingSwitch(
        "deliberate", True, False
    )


# A template with no switch variable: "/no_think" in the system message closes the block.
DIRECTIVE_SOURCE = (
    "{% set ns = namespace(think=true) %}"
    "{% for m in messages %}{% if m.role == 'system' %}"
    "{% if '/no_think' in m.content %}{% set ns.think = false %}"
    "{% elif '/think' in m.content %}{% set ns.think = true %}{% endif %}"
    "<s>{{ m.content.replace('/no_think', '').replace('/think', '').strip() }}</s>"
    "{% else %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>"
    "{% if ns.think %}<think>\n{% else %}<think></think>{% endif %}{% endif %}"
)
DIRECTIVE = ThinkingSwitch("", "/think", "/no_think", SYSTEM_DIRECTIVE)


def test_a_directive_in_the_system_message_is_found_as_the_switch() -> None:
    template = ChatTemplate(DIRECTIVE_SOURCE)
    assert template.caps.thinking_switch == DIRECTIVE
    assert template.caps.supports_thinking_toggle
    r = template.analyze().reasoning
    assert (r.mode, r.start, r.end) == (ReasoningMode.FORCED_CLOSED, "<think>", "</think>")
    assert (r.switch_kind, r.switch_on, r.switch_off) == (SYSTEM_DIRECTIVE, "/think", "/no_think")
    assert "switch_kind" in template.analyze().to_dict()["reasoning"]


def test_a_directive_the_template_ignores_is_no_switch() -> None:
    echoed = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant><think>\n{% endif %}"
    )
    template = ChatTemplate(echoed)
    assert template.caps.thinking_switch is None
    assert "switch_kind" not in template.analyze().to_dict()["reasoning"]


def test_enable_thinking_adds_the_directive_to_the_system_message() -> None:
    template = ChatTemplate(DIRECTIVE_SOURCE)
    off = template.apply(USER, enable_thinking=False).prompt
    assert off == "<s></s><user>What is 2+2?</user><assistant><think></think>"
    on = template.apply(USER, enable_thinking=True).prompt
    assert on.endswith("<assistant><think>\n")
    with_system = [{"role": "system", "content": "Be brief."}, *USER]
    off = template.apply(with_system, enable_thinking=False).prompt
    assert off == "<s>Be brief.</s><user>What is 2+2?</user><assistant><think></think>"
    # Not asked: the conversation renders as given (the template's default, thinking on).
    assert template.apply(USER).prompt.endswith("<assistant><think>\n")


def test_the_callers_own_directive_wins() -> None:
    template = ChatTemplate(DIRECTIVE_SOURCE)
    mine = [{"role": "system", "content": "Be brief. /think"}, *USER]
    assert template.apply(mine, enable_thinking=False).prompt.endswith("<think>\n")
    assert with_directive(mine, "/think", "/no_think", False) == mine


def test_with_directive_appends_to_typed_system_content() -> None:
    typed = [{"role": "system", "content": [{"type": "text", "text": "Hi."}]}, *USER]
    switched = with_directive(typed, "/think", "/no_think", False)
    assert switched[0]["content"][-1] == {"type": "text", "text": " /no_think"}
    assert switched[1:] == USER
