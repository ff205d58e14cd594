"""Reasoning switches: which template variable turns thinking on and off, found by probing.

Templates name the switch differently (``enable_thinking``, ``thinking``, ``thinking_mode``,
``reasoning_effort``, ``reasoning``, ...) and take different values for it (booleans,
``"enabled"``/``"disabled"``, ``"high"``/``"none"``...). The candidates are the variables the
template reads without defining them and tests in a condition; each is rendered with
typical "on" and "off" values, and the first whose values change what the generation
prompt appends is the switch. Nothing is assumed from a template's name or family.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import jinja2
from jinja2 import meta, nodes

from autoparser.template.environment import make_environment

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
_CONTEXT_NAMES = frozenset(
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
        "date_string",
        "custom_tools",
        "builtin_tools",
        "tools_in_user_message",
        "tool_choice",
        "response_format",
        "now",  # the renderer's own keyword (a fixed clock)
    }
)


@dataclasses.dataclass(frozen=True)
class ThinkingSwitch:
    """The variable that switches reasoning, with the values that turn it on and off."""

    variable: str
    on: SwitchValue
    off: SwitchValue

    def value(self, enabled: bool) -> SwitchValue:
        return self.on if enabled else self.off


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
        tree = make_environment().parse(source)
    except jinja2.TemplateSyntaxError:
        return ()
    undeclared = meta.find_undeclared_variables(tree) - _CONTEXT_NAMES
    tested: set[str] = set()
    for node in tree.find_all((nodes.If, nodes.CondExpr)):
        test = getattr(node, "test", None)
        if isinstance(test, nodes.Name):
            tested.add(test.name)  # find_all() yields only the descendants of a node
        elif isinstance(test, nodes.Node):
            tested.update(name.name for name in test.find_all(nodes.Name))
    return tuple(sorted(undeclared & tested, key=lambda name: (_rank(name), name)))


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
