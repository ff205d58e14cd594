"""How each marker of an analysis was found: the two probe renders whose difference shows it.

The analysis finds a marker by rendering two probe conversations that differ in one detail
(no reasoning / reasoning, no call / one call, no generation prompt / generation prompt...)
and reading what the second adds. ``marker_evidence`` renders, for every non-empty marker
field of an analysis, the pair of the phase that found it, so that a template author (the
studio's Analysis pane) can see the two texts side by side and where the marker sits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from autoparser.analysis.model import TemplateAnalysis
from autoparser.template.caps import detect_caps, detect_quirks
from autoparser.template.probe import ASSISTANT_MSG, CALL_1, THINKING, Probe
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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (``with_`` under the key ``with``)."""
        return {
            "field": self.field,
            "marker": self.marker,
            "question": self.question,
            "without": self.without,
            "with": self.with_,
            "found": self.found,
        }


# Which phase each top-level group of fields comes from: (question, renders).
_GEN_PROMPT = "add_generation_prompt=false vs true"
_REASONING = "an assistant turn without vs with reasoning"
_CONTENT = "the user turn alone vs followed by an assistant answer"
_TOOLS = "an assistant answer vs one tool call"


def _markers(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted field, marker) for every non-empty string (or string list item) that is a
    marker: enum values and JSON key names are not."""
    skip = {"mode", "position", "json_style", "history_field", "switch_variable", "switch_kind"}
    for key, value in data.items():
        name = prefix + key
        if isinstance(value, dict):
            yield from _markers(value, name + ".")
        elif key in skip or key.endswith("_field") or key == "field_order":
            continue
        elif isinstance(value, str) and value:
            yield name, value
        elif key == "end_of_turn" and isinstance(value, list):
            yield from ((name, v) for v in value if isinstance(v, str) and v)


def marker_evidence(template: Renderer, analysis: TemplateAnalysis) -> tuple[MarkerEvidence, ...]:
    """The evidence of every marker of ``analysis`` (found on ``template``), in field order.

    The renders go through a probe of their own with the template's thinking switch and
    tool shape, as the analysis renders them; a template that refuses a conversation shows
    ``None`` on that side. Raises what rendering raises past the probe (a render limit).
    """
    caps, quirks = detect_caps(template), detect_quirks(template)
    probe = Probe(template, caps.thinking_switch, quirks.tools_as_functions)
    key = analysis.reasoning.history_field or "reasoning_content"
    if key == "thinking_block":
        reasoning_pair = (probe.block_turn(False), probe.block_turn(True))
    else:
        reasoning_pair = (
            probe.turn(ASSISTANT_MSG),
            probe.turn(ASSISTANT_MSG, THINKING, reasoning_key=key),
        )
    pairs: dict[str, tuple[str, tuple[str | None, str | None]]] = {
        "generation_prompt": (_GEN_PROMPT, (probe.render(), probe.render(gen_prompt=True))),
        "reasoning": (_REASONING, reasoning_pair),
        "content": (_CONTENT, (probe.render(), probe.turn(ASSISTANT_MSG))),
        "end_of_turn": (_CONTENT, (probe.render(), probe.turn(ASSISTANT_MSG))),
        "tools": (_TOOLS, (probe.turn(ASSISTANT_MSG, tools=True), probe.calls((CALL_1,)))),
    }
    suffix_pair = (
        "add_generation_prompt=false vs true, thinking off / on",
        (probe.render(thinking=False), probe.render(gen_prompt=True, thinking=False)),
        (probe.render(thinking=True), probe.render(gen_prompt=True, thinking=True)),
    )
    found: list[MarkerEvidence] = []
    data = analysis.to_dict()
    data.pop("verification", None)
    data.pop("preserved_tokens", None)
    data.pop("workarounds", None)
    data.pop("handler", None)
    for field, marker in _markers(data):
        group = field.split(".", 1)[0]
        question, (without, with_) = pairs[group]
        if field == "reasoning.disabled_prompt_suffix":
            question, (without, with_) = suffix_pair[0], suffix_pair[1]
        elif field == "reasoning.enabled_prompt_suffix":
            question, (without, with_) = suffix_pair[0], suffix_pair[2]
        shown = with_ is not None and marker in with_
        found.append(MarkerEvidence(field, marker, question, without, with_, shown))
    return tuple(found)
