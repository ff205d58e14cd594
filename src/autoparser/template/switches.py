"""Reasoning switches: which template variable turns thinking on and off, found by probing.

Templates name the switch differently (``enable_thinking``, ``thinking``, ``thinking_mode``,
``reasoning_effort``, ``reasoning``, ...) and take different values for it (booleans,
``"enabled"``/``"disabled"``, ``"high"``/``"none"``...). The candidates are the variables the
template reads without defining them and tests in a condition; each is rendered with
typical "on" and "off" values, and the first whose values change what the generation
prompt appends is the switch. Nothing is assumed from a template's name or family.

Templates without such a variable may read a directive from the system message instead
(``/think``, ``/no_think``): each candidate pair is put in a system message and kept when
the two directives give different generation prompts (:func:`find_directive`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence

import jinja2

from autoparser.template.compiled import compile_source
from autoparser.template.conventions import CONVENTIONAL_NAMES

SwitchValue = bool | int | str

# (on, off) pairs, best first, so the switch is reported with its most natural values:
# flags, named modes, effort levels, then token budgets (-1 unlimited, 0 none).
FLAG_PAIRS: tuple[tuple[SwitchValue, SwitchValue], ...] = ((True, False),)
WORD_PAIRS: tuple[tuple[SwitchValue, SwitchValue], ...] = (
    ("enabled", "disabled"),
    ("on", "off"),
    ("high", "none"),
    ("high", "no_think"),
    ("high", "minimal"),
    ("high", "low"),
)
BUDGET_PAIRS: tuple[tuple[SwitchValue, SwitchValue], ...] = ((-1, 0),)
# A flag whose name says it turns thinking off ("skip_thinking") is on when false.
_INVERTED_NAME = re.compile(r"(?:^|_)(?:skip|disable|disabled|no|without|hide)(?:_|$)")
_SWITCH_NAME = re.compile(r"think|reason")
_LEVEL_NAME = re.compile(r"effort|budget|strength|level|mode")
# Variables every caller supplies (or the renderer does): never a reasoning switch.
_CONTEXT_NAMES = CONVENTIONAL_NAMES | frozenset(
    {
        "messages",
        "tools",
        "documents",
        "add_generation_prompt",
        "continue_final_message",
        "bos_token",
        "eos_token",
        "raise_exception",
        "strftime_now",
        "custom_tools",
        "builtin_tools",
        "tools_in_user_message",
        "tool_choice",
        "response_format",
        "now",  # the renderer's own keyword (a fixed clock)
    }
)


# Directives a template may read from the system message, as (on, off) pairs.
DIRECTIVE_PAIRS: tuple[tuple[str, str], ...] = (("/think", "/no_think"),)

VARIABLE = "variable"
SYSTEM_DIRECTIVE = "system_directive"


@dataclasses.dataclass(frozen=True)
class ThinkingSwitch:
    """What switches reasoning, with the values that turn it on and off.

    ``kind`` is :data:`VARIABLE` (a template variable, ``variable`` names it) or
    :data:`SYSTEM_DIRECTIVE` (``on`` / ``off`` are texts the system message carries;
    ``variable`` is empty).
    """

    variable: str
    on: SwitchValue
    off: SwitchValue
    kind: str = VARIABLE

    def value(self, enabled: bool) -> SwitchValue:
        return self.on if enabled else self.off

    def switch(
        self, messages: Sequence[Mapping[str, object]], kwargs: dict[str, object], enabled: bool
    ) -> list[Mapping[str, object]]:
        """Reasoning switched on or off the template's way: the messages to render, and
        ``kwargs`` (template variables) updated in place. What the caller set wins: a
        variable already in ``kwargs``, a directive already in the system message."""
        if self.kind == SYSTEM_DIRECTIVE:
            return with_directive(messages, str(self.on), str(self.off), enabled)
        kwargs.setdefault(self.variable, self.value(enabled))
        return list(messages)


def _rank(name: str) -> int:
    if name == "enable_thinking":
        return 0
    if _SWITCH_NAME.search(name) and not _LEVEL_NAME.search(name):
        return 1
    if _SWITCH_NAME.search(name):
        return 2
    return 3


def switch_candidates(source: str) -> tuple[str, ...]:
    """Variables the template reads without defining them and tests in a condition,
    the likeliest switches first (an unparsable template has none)."""
    try:
        compiled = compile_source(source)  # the renderer's own compile: no second parse
    except jinja2.TemplateSyntaxError:
        return ()
    names = (compiled.reads & compiled.tested) - _CONTEXT_NAMES
    return tuple(sorted(names, key=lambda name: (_rank(name), name)))


def _pairs(name: str) -> tuple[tuple[SwitchValue, SwitchValue], ...]:
    """The value pairs to try for a variable, by what its name says it is."""
    flags = FLAG_PAIRS
    if _INVERTED_NAME.search(name):
        flags = tuple((off, on) for on, off in FLAG_PAIRS)
    rank = _rank(name)
    if rank == 3:
        return flags  # a variable not named for reasoning counts only as a plain flag
    if rank == 2:
        return WORD_PAIRS + BUDGET_PAIRS + flags  # a level: words and numbers first
    return flags + WORD_PAIRS


# What a prompt ends with after the user's turn, with and without the generation prompt.
PromptEnds = tuple[str, str]


def find_switch(
    source: str, prompt_ends: Callable[[str, SwitchValue], PromptEnds | None]
) -> ThinkingSwitch | None:
    """The first candidate whose on and off values give different generation prompts.

    ``prompt_ends(variable, value)`` renders what follows a user turn with the variable
    set, with and without add_generation_prompt (``None`` when the template refuses the
    value). A variable not named for reasoning must change only the generation prompt
    (a flag that prints itself or a response after the turn is no switch).
    """
    for name in switch_candidates(source):
        switch = _switch_of(name, prompt_ends)
        if switch is not None:
            return switch
    return None


def _switch_of(
    name: str, prompt_ends: Callable[[str, SwitchValue], PromptEnds | None]
) -> ThinkingSwitch | None:
    """The first value pair of one variable giving different generation prompts."""
    seen: dict[tuple[str, SwitchValue], PromptEnds | None] = {}

    def ends(value: SwitchValue) -> PromptEnds | None:
        key = (type(value).__name__, value)  # False and 0 are equal keys otherwise
        if key not in seen:
            seen[key] = prompt_ends(name, value)
        return seen[key]

    only_in_prompt = _rank(name) == 3
    for on, off in _pairs(name):
        on_ends = ends(on)
        if on_ends is None:
            continue
        off_ends = ends(off)
        if off_ends is None or off_ends[0] == on_ends[0]:
            continue
        if only_in_prompt and off_ends[1] != on_ends[1]:
            continue
        return ThinkingSwitch(name, on, off)
    return None


def find_directive(prompt_ends: Callable[[str], PromptEnds | None]) -> ThinkingSwitch | None:
    """The first directive pair that, as the system message, switches the generation prompt.

    ``prompt_ends(directive)`` renders what follows a user turn after a system message
    holding ``directive``, with and without add_generation_prompt. As for a variable not
    named for reasoning, only the generation prompt may change (a directive the template
    echoes after the turn is no switch).
    """
    for on, off in DIRECTIVE_PAIRS:
        on_ends = prompt_ends(on)
        off_ends = prompt_ends(off)
        if on_ends is None or off_ends is None:
            continue
        if on_ends[0] != off_ends[0] and on_ends[1] == off_ends[1]:
            return ThinkingSwitch("", on, off, SYSTEM_DIRECTIVE)
    return None


def with_directive(
    messages: Sequence[Mapping[str, object]], on: str, off: str, enabled: bool
) -> list[Mapping[str, object]]:
    """The request's messages with the system message carrying the on or off directive.

    A conversation whose system message already names either directive is the caller's
    choice and stays as it is. Otherwise the directive is appended to a leading
    system message, or becomes the system message when there is none (templates that read
    it strip it from the text they render).
    """
    for message in messages:
        if message.get("role") == "system" and _names(message.get("content"), on, off):
            return list(messages)
    directive = on if enabled else off
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        content = first.get("content")
        if isinstance(content, str):
            first["content"] = f"{content} {directive}" if content.strip() else directive
        elif isinstance(content, list):
            first["content"] = [*content, {"type": "text", "text": f" {directive}"}]
        else:
            first["content"] = directive
        return [first, *messages[1:]]
    return [{"role": "system", "content": directive}, *messages]


def _names(content: object, *directives: str) -> bool:
    """Whether message content (a string or typed text parts) mentions any directive."""
    if isinstance(content, str):
        return any(d in content for d in directives)
    if isinstance(content, list):
        return any(
            isinstance(part, Mapping) and _names(part.get("text"), *directives) for part in content
        )
    return False
