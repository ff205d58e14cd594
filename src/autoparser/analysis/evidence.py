"""How each marker of an analysis was found: the two probe renders whose difference shows it.

The analysis finds a marker by rendering two probe conversations that differ in one detail
(no reasoning / reasoning, no call / one call, no generation prompt / generation prompt...)
and reading what the second adds. ``marker_evidence`` renders, for every non-empty marker
field of an analysis, the pair of the phase that found it, so that a template author (the
studio's Analysis pane) can see the two texts side by side and where the marker sits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from autoparser.analysis.model import TemplateAnalysis
from autoparser.template.caps import detect_caps, detect_quirks
from autoparser.template.probe import (
    ASSISTANT_MSG,
    CALL_1,
    CALL_2,
    CALL_TYPED,
    THINKING,
    TOOLS_PARAMETER_DEFINITIONS,
    Probe,
)
from autoparser.template.renderer import Renderer


@dataclasses.dataclass(frozen=True)
class MarkerEvidence:
    """One marker and the two renders compared to find it.

    ``field`` is the dotted analysis field (``reasoning.start``, ``tools.format.per_call_start``),
    ``question`` what the two renders differ in, ``without`` / ``with_`` the renders (``None``
    when the template refused that conversation), ``found`` whether the marker occurs in
    ``with_`` (a marker a workaround or a hand-written format set may not).
    """

    field: str
    marker: str
    question: str
    without: str | None
    with_: str | None
    found: bool

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready data (``with_`` under the key ``with``)."""
        return {
            "field": self.field,
            "marker": self.marker,
            "question": self.question,
            "without": self.without,
            "with": self.with_,
            "found": self.found,
        }


_Pair = tuple[str, str | None, str | None]  # (question, without, with)


def _markers(data: dict[str, object], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted field, marker) for every non-empty string (or string list item) that is a
    marker: enum values, switch values and JSON key names are not."""
    skip = {"mode", "position", "json_style", "history_field", "switch_variable", "switch_kind"}
    skip |= {"switch_on", "switch_off", "field_order"}
    for key, value in data.items():
        name = prefix + key
        if isinstance(value, dict):
            yield from _markers(value, name + ".")
        elif key in skip or key.endswith("_field"):
            continue
        elif isinstance(value, str) and value:
            yield name, value
        elif key == "end_of_turn" and isinstance(value, list):
            yield from ((name, v) for v in value if isinstance(v, str) and v)


def _pairs(probe: Probe, history_field: str) -> dict[str, list[_Pair]]:
    """The probe render pairs of each phase, the phase's main comparison first."""
    if history_field == "thinking_block":
        with_reasoning = ("an answer without vs with a thinking block", *_two(probe.block_turn))
    else:
        with_reasoning = (
            "an assistant turn without vs with reasoning",
            probe.turn(ASSISTANT_MSG),
            probe.turn(ASSISTANT_MSG, THINKING, reasoning_key=history_field or "reasoning_content"),
        )
    gen_prompt = (
        "add_generation_prompt=false vs true",
        probe.render(),
        probe.render(gen_prompt=True),
    )
    answer = (
        "the user turn alone vs followed by an answer",
        probe.render(),
        probe.turn(ASSISTANT_MSG),
    )
    call = (
        "an answer vs one tool call",
        probe.turn(ASSISTANT_MSG, tools=True),
        probe.calls((CALL_1,)),
    )
    parallel = ("one tool call vs two", probe.calls((CALL_1,)), probe.calls((CALL_1, CALL_2)))
    typed = (
        "string arguments vs a number argument",
        probe.calls((CALL_1,)),
        probe.calls((CALL_TYPED,)),
    )
    result = (
        "one tool call vs the call followed by its result",
        probe.calls((CALL_1,)),
        probe.render(assistant=("", None, (CALL_1,)), tools=True, follow_up="tool"),
    )
    call_reasoning = (
        "a tool call without vs with reasoning",
        probe.turn("", None, (CALL_1,), tools=True),
        probe.turn("", THINKING, (CALL_1,), tools=True),
    )
    return {
        "generation_prompt": [gen_prompt, answer],
        "reasoning": [with_reasoning, call_reasoning, gen_prompt],
        "content": [answer, call],
        "end_of_turn": [answer, call, result],
        "tools": [call, parallel, typed, result],
    }


def _two(render: Callable[..., str | None]) -> tuple[str | None, str | None]:
    return render(False), render(True)


def _shows(pair: _Pair, marker: str) -> bool:
    """Whether the pair's difference shows ``marker``: in the second render, and more
    often than in the first."""
    _, without, with_ = pair
    return with_ is not None and with_.count(marker) > (without or "").count(marker)


def marker_evidence(template: Renderer, analysis: TemplateAnalysis) -> tuple[MarkerEvidence, ...]:
    """The evidence of every marker of ``analysis`` (found on ``template``), in field order.

    For each marker the first pair of its phase whose difference shows it (else the phase's
    main pair, ``found`` telling whether the marker occurs there at all). The renders go
    through a probe of their own with the template's thinking switch and tool shape, as the
    analysis renders them; a template that refuses a conversation shows ``None`` on that
    side. Raises what rendering raises past the probe (a render limit).
    """
    caps, quirks = detect_caps(template), detect_quirks(template)
    probe = Probe(
        template,
        caps.thinking_switch,
        quirks.tools_as_functions,
        call_turn_text=quirks.call_turn_text,
        tools_shape=TOOLS_PARAMETER_DEFINITIONS if quirks.tools_as_parameter_definitions else "",
        tools_list=quirks.requires_tools_list,
    )
    probe.args_as_string = quirks.arguments_as_json_string
    pairs = _pairs(probe, analysis.reasoning.history_field)
    suffix = {
        "reasoning.disabled_prompt_suffix": False,
        "reasoning.enabled_prompt_suffix": True,
    }
    data = analysis.to_dict()
    for key in ("verification", "preserved_tokens", "workarounds", "handler"):
        data.pop(key, None)
    found: list[MarkerEvidence] = []
    for field, marker in _markers(data):
        if field in suffix:
            on = suffix[field]
            candidates: list[_Pair] = [
                (
                    f"add_generation_prompt=false vs true, thinking {'on' if on else 'off'}",
                    probe.render(thinking=on),
                    probe.render(gen_prompt=True, thinking=on),
                )
            ]
        else:
            candidates = pairs[field.split(".", 1)[0]]
        chosen = next((p for p in candidates if _shows(p, marker)), candidates[0])
        question, without, with_ = chosen
        shown = with_ is not None and marker in with_
        found.append(MarkerEvidence(field, marker, question, without, with_, shown))
    return tuple(found)
