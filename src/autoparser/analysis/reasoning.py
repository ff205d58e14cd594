"""Reasoning analysis: how the template marks the model's reasoning, and how thinking toggles.

R1 renders an assistant turn with and without ``reasoning_content``; R2 compares the
generation prompt with ``enable_thinking`` on and off; R3 compares a reasoning turn that
answers in text with one that calls a tool (reasoning rendered only with tool calls).
"""

from __future__ import annotations

import dataclasses
import re

from autoparser.analysis.diff import (
    attribute_start,
    diff_split,
    markers_in,
    safe_common_prefix,
    segmentize,
)
from autoparser.analysis.model import ReasoningAnalysis, ReasoningMode
from autoparser.message import REASONING_KEYS
from autoparser.template.probe import ASSISTANT_MSG, CALL_1, THINKING, Probe
from autoparser.template.switches import VARIABLE


@dataclasses.dataclass(frozen=True)
class GenerationPrompts:
    """What ``add_generation_prompt`` appends by default, with thinking on, and off."""

    default: str
    enabled: str
    disabled: str


def generation_prompt(probe: Probe, thinking: bool | None) -> str:
    without = probe.render(thinking=thinking)
    with_gp = probe.render(gen_prompt=True, thinking=thinking)
    if without is None or with_gp is None:
        return ""
    return diff_split(without, with_gp).right


def generation_prompts(probe: Probe) -> GenerationPrompts:
    return GenerationPrompts(
        generation_prompt(probe, None),
        generation_prompt(probe, True),
        generation_prompt(probe, False),
    )


@dataclasses.dataclass(frozen=True)
class _Block:
    """Markers found around the reasoning needle in a render."""

    start: str
    end: str
    after_end: str  # text between the end marker and the content (a content opener?)


def _block_markers(without: str, with_reasoning: str) -> _Block | None:
    """Find the markers around THINKING, given renders without and with it."""
    pos = with_reasoning.find(THINKING)
    if pos < 0:
        return None
    d = diff_split(without, with_reasoning)
    lo = attribute_start(d.prefix, len(d.prefix))  # "to=" of "to=self<|message|>" opens
    hi = len(with_reasoning) - len(d.suffix)
    if not lo <= pos <= hi:
        return None
    pre = with_reasoning[lo:pos]
    after = pos + len(THINKING)
    content_at = with_reasoning.find(ASSISTANT_MSG, after)
    post_hi = hi if content_at < 0 else content_at
    post = with_reasoning[after:post_hi]
    if not pre.strip() and not post.strip():
        # The template renders the block even without reasoning (e.g. "<think></think>"):
        # the markers are the ones hugging the needle in the common parts.
        head = segmentize(d.prefix.rstrip())
        tail = segmentize(d.suffix.lstrip())
        if head and tail and head[-1].is_marker and tail[0].is_marker:
            return _Block(head[-1].value, tail[0].value, "")
        return None
    segs = segmentize(post.strip())
    end = segs[0].value.strip() if segs else ""
    after_end = post.strip()[len(segs[0].value) :] if segs else ""
    start = pre.strip()
    if not start and end and segs[0].is_marker and without[lo:].lstrip().startswith(end):
        # The block is rendered empty without reasoning ("<think></think>"): its opener is
        # in the common prefix, the marker hugging the needle.
        head = segmentize(d.prefix.rstrip())
        if head and head[-1].is_marker:
            start = head[-1].value
    return _Block(start, end, after_end)


def without_role_header(opener: str, prompt: str) -> str:
    """An opener (of reasoning, of a tool section) without the role header that the
    generation prompt already wrote.

    Diffs keep an element run whole (``<|begin|>assistant<|content|>`` against
    ``<|begin|>assistant<|tool_calls|>``), so the opener found may start with the header;
    the model's output starts after it.
    """
    header = prompt.strip()
    if header and opener.startswith(header) and opener[len(header) :].strip():
        return opener[len(header) :].lstrip()
    return opener


def _with_reopened_turn(end: str, after_end: str, header: str) -> tuple[str, str]:
    """The reasoning end and what follows it, when the template writes the reasoning as a
    message of its own and reopens the turn after it with the role header the generation
    prompt writes (``R<|eom|><|start|>assistant to=user<|message|>``): the header is
    part of the end marker, so that what follows it reads as after a bare prompt."""
    header = header.strip()
    rest = after_end.lstrip()
    if not end or not header or not rest.startswith(header):
        return end, after_end
    cut = len(after_end) - len(rest) + len(header)
    return end + after_end[:cut], after_end[cut:]


# Reasoning openers by convention, and the closer each implies (``<think>`` -> ``</think>``).
_CONVENTIONAL = re.compile(r"<(think|thinking|thought|reasoning)>|\[(THINK|THINKING)\]")


def _conventional_block(prompt: str) -> tuple[str, str]:
    """A reasoning block the generation prompt opens and nothing in the template closes
    (history turns never render reasoning): the prompt ends in a conventional reasoning
    opener, whose closer is then assumed (as llama.cpp does for ``<think>``)."""
    segs = segmentize(prompt.rstrip())
    if not segs or not segs[-1].is_marker:
        return "", ""
    m = _CONVENTIONAL.fullmatch(segs[-1].value.strip())
    if m is None:
        return "", ""
    if m.group(1):
        return m.group(0), f"</{m.group(1)}>"
    return m.group(0), f"[/{m.group(2)}]"


def _toggle_markers(enabled: str, disabled: str, common: str) -> tuple[str, str]:
    """Reasoning markers implied by what thinking on/off append to the generation prompt."""
    on, off = markers_in(enabled), markers_in(disabled)
    if not on and len(off) >= 2:
        # Thinking off writes an empty block: "<think>\n\n</think>".
        end = off[-1]
        return disabled[: disabled.rfind(end)].strip(), end
    if len(on) == 1 and len(off) == 1 and on[0] != off[0]:
        return on[0], off[0]  # on opens "<think>", off closes "</think>"
    if len(on) == 1 and len(off) == 2 and off[0] == on[0]:
        return off[0], off[1]
    if len(on) == 1 and not off:
        return on[0], ""
    if not on and len(off) == 1:
        # Thinking off only closes: the prompt already ended with the opener.
        head = segmentize(common.rstrip())
        if head and head[-1].is_marker and head[-1].value != off[0]:
            return head[-1].value, off[0]
    return "", ""


def _toggle_markers_at_the_end(probe: Probe) -> tuple[str, str]:
    """Reasoning markers a template writes only at the very end of its thinking-off render,
    outside the generation prompt (Hunyuan-A13B appends ``<think>\n\n</think>\n`` to
    every render when ``enable_thinking`` is false, generation prompt or not): the block the
    model writes itself when thinking is on."""
    on = probe.render(gen_prompt=True, thinking=True)
    off = probe.render(gen_prompt=True, thinking=False)
    if on is None or off is None or on == off:
        return "", ""
    d = diff_split(on, off)
    if d.suffix.strip():
        return "", ""  # a change inside the conversation, not what thinking off appends
    return _toggle_markers(d.left, d.right, d.prefix)


def analyze_reasoning(
    probe: Probe, prompts: GenerationPrompts, supports_tools: bool, field: str
) -> tuple[ReasoningAnalysis, str]:
    """The reasoning analysis, plus any content opener seen right after the reasoning end.

    ``field`` is where the template reads a turn's reasoning (the caps' probe answer:
    ``TemplateQuirks.reasoning_field``).
    """
    start = end = after_end = ""
    tools_only = False

    # R1: reasoning present vs absent in the last assistant turn, under the key (or as the
    # typed content part) the template reads it from.
    block = None
    renders_last = bool(field)
    if field == "thinking_block":
        plain_blocks, thinking_blocks = probe.block_turn(False), probe.block_turn(True)
        if plain_blocks is not None and thinking_blocks is not None:
            block = _block_markers(plain_blocks, thinking_blocks)
    elif field:
        without = probe.turn(ASSISTANT_MSG)
        with_r = probe.turn(ASSISTANT_MSG, THINKING, reasoning_key=field)
        if without is not None and with_r is not None:
            block = _block_markers(without, with_r)
    # R3: reasoning rendered only in turns that call tools.
    if block is None and not renders_last and supports_tools:
        plain = probe.turn(ASSISTANT_MSG, THINKING, tools=True)
        calls_only = probe.turn("", None, (CALL_1,), tools=True)
        # Under whichever message key the template reads (``reasoning`` only, some do).
        for key in REASONING_KEYS:
            calls_r = probe.turn("", THINKING, (CALL_1,), tools=True, reasoning_key=key)
            if calls_r and THINKING in calls_r:
                break
        if plain is not None and THINKING not in plain and calls_r and THINKING in calls_r:
            renders_last = tools_only = True
            field = key
            if calls_only is not None:
                block = _block_markers(calls_only, calls_r)
    if block is not None:
        start, end, after_end = block.start, block.end, block.after_end
        end, after_end = _with_reopened_turn(end, after_end, prompts.default)
        start = without_role_header(start, prompts.default)

    # R2: the generation prompt with thinking on vs off.
    common = safe_common_prefix(prompts.enabled, prompts.disabled)
    t_start, t_end = _toggle_markers(
        prompts.enabled[len(common) :], prompts.disabled[len(common) :], common
    )
    if not t_start and not t_end:
        t_start, t_end = _toggle_markers_at_the_end(probe)
    if not start and not end:
        start, end = t_start, t_end
    elif start and not end and t_start == start:
        end = t_end  # the close only shows when thinking is switched off
    elif not start and t_start and t_start != end and (not t_end or t_end == end):
        start = t_start  # a delimiter whose opener only the generation prompt shows
    if not start and not end:
        start, end = _conventional_block(prompts.enabled or prompts.default)
    if start and not end:
        start = ""  # an opener with no known close cannot be parsed

    # Express the toggle suffixes from where the reasoning part of the prompt begins.
    base = common
    if start:
        at = base.rfind(start)
        if at >= 0 and end not in base[at:]:
            base = base[:at]
    enabled_suffix = prompts.enabled[len(base) :]
    disabled_suffix = prompts.disabled[len(base) :]

    if start and enabled_suffix.strip() == start:
        mode = ReasoningMode.FORCED_OPEN
        if end and end in disabled_suffix:
            mode = ReasoningMode.FORCED_CLOSED
    elif end and not start:
        mode = ReasoningMode.DELIMITER
    elif start and end:
        mode = ReasoningMode.TOOLS_ONLY if tools_only else ReasoningMode.TAG_BASED
    else:
        mode = ReasoningMode.NONE
    if mode is ReasoningMode.NONE:
        analysis = ReasoningAnalysis(renders_last_reasoning=renders_last)
        after_end = ""
    else:
        analysis = ReasoningAnalysis(
            mode=mode,
            start=start,
            end=end,
            disabled_prompt_suffix=disabled_suffix,
            enabled_prompt_suffix=enabled_suffix,
            renders_last_reasoning=renders_last,
            history_field=field,
        )
    switch = probe.switch
    if switch is not None:
        analysis = dataclasses.replace(
            analysis,
            switch_variable=switch.variable,
            switch_on=switch.on,
            switch_off=switch.off,
            switch_kind="" if switch.kind == VARIABLE else switch.kind,
        )
    return analysis, after_end
